//! The observation loop: drain the ring buffer (on wake-up, and on a short timer since the kernel
//! batches wake-ups), fold collections into the aggregate, refresh the view, and stop on
//! Ctrl-C/SIGTERM, `--duration`, or the target's exit — always with a summary.
use std::{
    io::{self, Write},
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use neurogc_common::GcEvent;
use serde::Serialize;
use tokio::{
    io::{Interest, unix::AsyncFd},
    signal::unix::{SignalKind, signal},
};

use crate::{
    aggregate::{Aggregate, GenSummary, Mark},
    events::{self, Clock},
    launch::Launched,
    probes::Probes,
    target::{
        AttachPlan,
        layout::{GcLocator, GcSettings, GcState},
        process,
    },
    view,
};

/// How often the ring buffer is drained when the kernel does not wake us (it wakes us only when
/// a quarter of the ring is full).
const DRAIN_PERIOD: Duration = Duration::from_millis(100);

pub struct Options {
    pub json: bool,
    pub duration: Option<Duration>,
    pub interval: Duration,
    /// Milliseconds from agent start to probes armed.
    pub attach_ms: f64,
}

enum GcStatus {
    /// Layout unknown for this build: probe arguments only.
    Unknown,
    /// Not proven yet: the interpreter is not initialised (launch mode), or it was collecting
    /// when we looked (its lists are rewired during a collection).
    Pending {
        locator: GcLocator,
        failures: u32,
    },
    Located(GcState),
    Invalid(String),
}

/// Failed validations (one per drain, ≈ 100 ms apart) before the layout is declared wrong.
const MAX_VALIDATION_FAILURES: u32 = 10;

impl GcStatus {
    fn refresh(&mut self, pid: i32) {
        let GcStatus::Pending { locator, failures } = self else { return };
        *self = match locator.locate(pid) {
            Ok(Some(state)) => GcStatus::Located(state),
            Ok(None) => return,
            // Gone before we could look (a very short-lived target): stay unproven.
            Err(_) if !process::exists(pid) => return,
            Err(_) if *failures + 1 < MAX_VALIDATION_FAILURES => {
                *failures += 1;
                return;
            }
            Err(err) => {
                tracing::warn!(
                    "GC state of process {pid} failed validation, reporting probe arguments only: {err:#}"
                );
                GcStatus::Invalid(format!("{err:#}"))
            }
        };
    }

    fn pending(&self) -> bool {
        matches!(self, GcStatus::Pending { .. })
    }

    fn trusted(&self) -> bool {
        matches!(self, GcStatus::Located(_))
    }

    fn note(&self) -> Option<String> {
        const FALLBACK: &str = "generation and collected counts are the probe's arguments";
        match self {
            GcStatus::Unknown => Some(format!("GC state layout unknown for this build: {FALLBACK}")),
            GcStatus::Invalid(why) => Some(format!("GC state failed validation ({why}): {FALLBACK}")),
            _ => None,
        }
    }
}

/// `ring`'s fd, for tokio to wait on.
struct Ring(Probes);

impl AsRawFd for Ring {
    fn as_raw_fd(&self) -> RawFd {
        self.0.ring.as_raw_fd()
    }
}

#[derive(Serialize)]
struct Summary<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    pid: i32,
    python: String,
    probe: &'static str,
    stopped: &'a str,
    elapsed_s: f64,
    attach_ms: f64,
    collections: u64,
    gc_time_share: f64,
    lost_events: u64,
    unpaired_events: u64,
    generations: Vec<GenSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_exit_status: Option<i32>,
}

struct Observer<'a> {
    plan: &'a AttachPlan,
    opts: &'a Options,
    gc: GcStatus,
    clock: Clock,
    agg: Aggregate,
    out: io::BufWriter<io::Stdout>,
    tty: bool,
    name: String,
    started: Instant,
    last_mark: Mark,
    last_refresh: Instant,
    last_count0: Option<i32>,
    /// Events read but not decoded yet (while the GC state is being proven).
    held: Vec<GcEvent>,
}

/// At most this many events wait for the GC state to be proven (≈ 12 MB).
const MAX_HELD: usize = 100_000;

enum Stop {
    Duration,
    Signal(&'static str),
    TargetExited(Option<i32>),
    OutputClosed,
}

impl Stop {
    fn text(&self) -> &'static str {
        match self {
            Stop::Duration => "duration",
            Stop::Signal(s) => s,
            Stop::TargetExited(_) => "target-exited",
            Stop::OutputClosed => "output-closed",
        }
    }
}

fn pidfd_open(pid: i32) -> Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned from here on.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    anyhow::ensure!(fd >= 0, "pidfd_open({pid}): {}", io::Error::last_os_error());
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Registers an fd we own for read readiness.
fn readable<T: AsRawFd>(inner: T) -> Result<AsyncFd<T>> {
    // SAFETY: both wrappers own their fd for as long as the AsyncFd lives and always return it.
    unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE) }.map_err(|e| anyhow::anyhow!("{e}"))
}

struct PidFd(OwnedFd);
impl AsRawFd for PidFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

pub async fn run(
    plan: &AttachPlan,
    probes: Probes,
    launched: Option<Launched>,
    opts: &Options,
) -> Result<()> {
    let pid = plan.pid;
    let exit_watch = readable(PidFd(pidfd_open(pid)?))?;
    let mut ring = readable(Ring(probes))?;
    let gc = match plan.gc {
        Some(locator) => GcStatus::Pending { locator, failures: 0 },
        None => GcStatus::Unknown,
    };
    let mut obs = Observer {
        plan,
        opts,
        gc,
        clock: Clock::new(),
        agg: Aggregate::default(),
        out: io::BufWriter::new(io::stdout()),
        tty: io::IsTerminal::is_terminal(&io::stdout()),
        name: process::describe(pid).split_once(' ').map(|(_, n)| n.to_owned()).unwrap_or_default(),
        started: Instant::now(),
        last_mark: Mark::default(),
        last_refresh: Instant::now(),
        last_count0: None,
        held: Vec::new(),
    };
    match &launched {
        // Until the dynamic loader and the interpreter's start-up are done, the GC state's memory
        // holds anything: the first collection event is the proof that it exists (see drain).
        Some(launched) => launched.release()?,
        None => obs.gc.refresh(pid),
    }
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut drain_timer = tokio::time::interval(DRAIN_PERIOD);
    let mut refresh = tokio::time::interval(opts.interval);
    refresh.tick().await;
    let deadline = tokio::time::sleep(opts.duration.unwrap_or(Duration::from_secs(u64::MAX / 4)));
    tokio::pin!(deadline);

    let stop = loop {
        let drained = tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                let r = obs.drain(&mut guard.get_mut().get_mut().0);
                guard.clear_ready();
                r
            }
            _ = drain_timer.tick() => obs.drain(&mut ring.get_mut().0),
            _ = refresh.tick() => {
                obs.drain(&mut ring.get_mut().0).and_then(|_| obs.render(ring.get_ref().0.lost()))
            }
            _ = sigint.recv() => break Stop::Signal("SIGINT"),
            _ = sigterm.recv() => break Stop::Signal("SIGTERM"),
            _ = exit_watch.readable() => {
                break Stop::TargetExited(launched.as_ref().and_then(|l| l.reap()));
            }
            _ = &mut deadline, if opts.duration.is_some() => break Stop::Duration,
        };
        if let Err(err) = drained {
            if err.kind() == io::ErrorKind::BrokenPipe {
                break Stop::OutputClosed;
            }
            return Err(err).context("writing output");
        }
    };
    // Whatever the kernel already produced belongs to the run; then disarm before summarising.
    let mut probes = ring.into_inner().0;
    let _ = obs.drain(&mut probes);
    let _ = obs.release_held();
    let (lost, unpaired) = (probes.lost(), probes.unpaired());
    drop(probes);
    obs.summarise(&stop, lost, unpaired)
}

impl Observer<'_> {
    fn drain(&mut self, probes: &mut Probes) -> io::Result<()> {
        let before = self.held.len();
        while let Some(item) = probes.ring.next() {
            if item.len() >= std::mem::size_of::<GcEvent>() {
                // SAFETY: the kernel wrote a whole GcEvent (length checked); read_unaligned copes
                // with the ring's 8-byte alignment.
                self.held.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) });
            }
        }
        if self.gc.pending() && self.held.len() > before {
            // The GC state can only be found once the interpreter exists: an event proves it does.
            self.gc.refresh(self.plan.pid);
        }
        // Events wait (in order) until the layout is proven or refuted, so that each is decoded
        // the same way whatever the timing.
        if self.gc.pending() && self.held.len() < MAX_HELD {
            return Ok(());
        }
        self.release_held()
    }

    fn release_held(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let trusted = self.gc.trusted();
        for raw in std::mem::take(&mut self.held) {
            let Some(collection) = events::decode(&raw, trusted, &self.clock) else { continue };
            self.agg.record(&collection);
            if self.opts.json {
                serde_json::to_writer(&mut self.out, &collection)?;
                self.out.write_all(b"\n")?;
            }
        }
        if self.opts.json {
            self.out.flush()?;
        }
        Ok(())
    }

    fn settings(&self) -> Option<GcSettings> {
        match &self.gc {
            GcStatus::Located(state) => state.read_settings(self.plan.pid).ok(),
            _ => None,
        }
    }

    fn render(&mut self, lost: u64) -> io::Result<()> {
        let now = Instant::now();
        let interval_s = now.duration_since(self.last_refresh).as_secs_f64();
        let mark = self.agg.mark();
        let interval_collections = [0, 1, 2].map(|g| mark.collections[g] - self.last_mark.collections[g]);
        let gc_share = (mark.pause_ns - self.last_mark.pause_ns) as f64 / 1e9 / interval_s.max(1e-9);
        let settings = self.settings();
        // Every automatic collection happens once gen0's count passes threshold0 and resets it:
        // net allocations ≈ collections × threshold0 + change of the count.
        let alloc_rate = settings.zip(self.last_count0).map(|(s, count0_before)| {
            let n: u64 = interval_collections.iter().sum();
            (n as f64 * s.thresholds[0] as f64 + (s.count0 - count0_before) as f64) / interval_s.max(1e-9)
        });
        self.last_count0 = settings.map(|s| s.count0);
        self.last_mark = mark;
        self.last_refresh = now;
        if self.opts.json {
            return Ok(());
        }
        let python = self.plan.interpreter.version.to_string();
        let probe = self.plan.source.to_string();
        let note = self.gc.note();
        let frame = view::Frame {
            pid: self.plan.pid,
            name: &self.name,
            python: &python,
            probe: &probe,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            agg: &self.agg,
            interval_collections,
            interval_s,
            gc_share,
            settings,
            alloc_rate,
            lost,
            note: note.as_deref(),
        };
        if self.tty {
            self.out.write_all(view::screen(&frame).as_bytes())?;
        } else {
            writeln!(self.out, "{}", view::line(&frame))?;
        }
        self.out.flush()
    }

    fn summarise(mut self, stop: &Stop, lost: u64, unpaired: u64) -> Result<()> {
        if self.gc.pending() && (self.agg.collections() > 0 || !self.held.is_empty()) {
            tracing::warn!(
                "the target exited before its GC state could be validated: generations and counts are the probe's arguments"
            );
        }
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let summary = Summary {
            kind: "summary",
            pid: self.plan.pid,
            python: self.plan.interpreter.version.to_string(),
            probe: self.plan.source.kind(),
            stopped: stop.text(),
            elapsed_s,
            attach_ms: self.opts.attach_ms,
            collections: self.agg.collections(),
            gc_time_share: self.agg.pause_ns() as f64 / 1e9 / elapsed_s.max(1e-9),
            lost_events: lost,
            unpaired_events: unpaired,
            generations: self.agg.summaries(),
            target_exit_status: match stop {
                Stop::TargetExited(status) => *status,
                _ => None,
            },
        };
        if matches!(stop, Stop::OutputClosed) {
            return Ok(());
        }
        if self.opts.json {
            serde_json::to_writer(&mut self.out, &summary)?;
            writeln!(self.out)?;
        } else {
            writeln!(
                self.out,
                "{}",
                view::summary(&summary.generations, summary.stopped, elapsed_s, summary.gc_time_share, lost)
            )?;
        }
        self.out.flush()?;
        Ok(())
    }
}
