//! Fleet mode: every CPython process on the host, observed by one agent. The kernel half is
//! loaded once; each process is a session (its own perf events, its `TARGETS` entry, its
//! decoder and numbers), found at start by a /proc scan, at its exec by a raw tracepoint, and by
//! a periodic scan as a backstop. Events are routed to sessions by PID. A process that cannot be
//! observed is that process's error: reported once, then left alone until it execs again.
//!
//! Resolving a process (reading its maps, parsing ELF files) runs on tokio's blocking pool, never
//! on the loop that drains the ring buffer; arming (a few perf_event_open calls) runs on it.
pub mod discover;
pub mod stats;

use std::{
    collections::{HashMap, HashSet},
    os::fd::OwnedFd,
    time::Duration,
};

use anyhow::Result;
use aya::maps::{MapData, RingBuf};
use neurogc_common::ExecEvent;
use neurogc_trace::Collection;
use tokio::{io::unix::AsyncFd, sync::mpsc, time::Interval};

use self::{
    discover::{BuildCache, Filter, Identity, Resolution},
    stats::Stats,
};
use crate::{
    interp::AttachPlan,
    kernel::census::CensusProbe,
    kernel::probes::{Armed, Kernel, ring_fd},
    session::census::{self, Census},
    session::cycle::{Cycle, Detail},
    session::drive::{Driven, Stopped, drive},
    session::events::Clock,
    wait::{pidfd_open, readable},
};

pub struct Options {
    pub filter: Filter,
    pub max_targets: usize,
    pub duration: Option<Duration>,
    pub interval: Duration,
    /// Each process's garbage census period (`--census`), one process at a time.
    pub census: Option<Duration>,
}

/// How often /proc is scanned for processes the exec tracepoint could not have seen (those
/// that exec'd before the agent started are found by the first scan).
const SCAN_PERIOD: Duration = Duration::from_secs(2);

/// One observed process, as sinks see it.
pub struct Target {
    pub who: Identity,
    /// `3.11.7`, or `3.9` where the build does not say its micro version.
    pub python: String,
    pub stats: Stats,
}

/// Where fleet sessions' numbers go: the Prometheus exporter, the live view, the log.
pub trait Sink {
    fn attached(&mut self, _t: &Target) {}
    fn collection(&mut self, _t: &Target, _c: &Collection) {}
    /// A window closed for every target.
    fn window(&mut self, _targets: &[&Target], _lost: u64) -> Result<()> {
        Ok(())
    }
    fn gone(&mut self, _t: &Target) {}
    /// A garbage census of the target (`--census`).
    fn census(&mut self, _t: &Target, _c: &neurogc_trace::Census) {}
}

struct Session {
    /// Tells this session's exit notification from an earlier one's for the same PID.
    id: u64,
    target: Target,
    armed: Option<Armed>,
    /// Its events on their way to collections; only the innermost frame of each stack is kept,
    /// for the window's top trigger.
    cycle: Cycle,
    /// Its first window has not closed yet: a process caught at exec may still be starting.
    starting: bool,
    /// Its garbage census (`--census`; None where its build has none).
    census: Option<Box<Census>>,
    exit_watch: tokio::task::JoinHandle<()>,
}

struct Resolved {
    who: Identity,
    at_exec: bool,
    result: Resolution,
    /// Its census, prepared with the plan (it parses the interpreter's ELF file).
    census: Option<Box<Census>>,
}

/// What fleet mode waits on besides the ring buffer and the window.
enum Found {
    Execs(Vec<u32>),
    Scan,
    Resolved(Resolved),
    Exited(i32, u64),
    /// A census is done.
    Census,
    /// A sink asked the agent to stop (the live view's `q`).
    Quit,
}

/// Fleet mode's own sources.
struct Sources {
    execs: RingBuf<MapData>,
    exec_ready: AsyncFd<OwnedFd>,
    scan: Interval,
    resolved: mpsc::UnboundedReceiver<Resolved>,
    exited: mpsc::UnboundedReceiver<(i32, u64)>,
    quit: mpsc::UnboundedReceiver<()>,
    /// The census's kernel side and its ring's fd (`--census`).
    census: Option<(CensusProbe, AsyncFd<OwnedFd>)>,
}

struct Fleet {
    kernel: Kernel,
    sources: Sources,
    opts: Options,
    clock: Clock,
    sessions: HashMap<i32, Session>,
    next_id: u64,
    /// PIDs being resolved on the blocking pool.
    resolving: HashSet<i32>,
    /// Of those, the ones that exec'd meanwhile: their resolution describes the old program.
    execd_while_resolving: HashSet<i32>,
    /// Processes looked at and left alone (not Python, filtered out, refused), by PID and start
    /// time: never looked at again until they exec.
    settled: HashMap<i32, u64>,
    cache: BuildCache,
    full_reported: bool,
    resolved_tx: mpsc::UnboundedSender<Resolved>,
    exit_tx: mpsc::UnboundedSender<(i32, u64)>,
    sinks: Vec<Box<dyn Sink>>,
    /// When the window opened (Unix ns: the collections' clock).
    window_opened_ns: u64,
    own_pid: i32,
}

/// `quit`: resolves when a sink asks the agent to stop (the live view's `q`).
pub async fn run(opts: Options, sinks: Vec<Box<dyn Sink>>, quit: mpsc::UnboundedReceiver<()>) -> Result<()> {
    let mut kernel = Kernel::load()?;
    let execs = kernel.watch_execs()?;
    let census = match opts.census {
        Some(_) => {
            let probe = kernel.census()?;
            let ready = readable(ring_fd(&probe.ring)?)?;
            Some((probe, ready))
        }
        None => None,
    };
    let ring = readable(ring_fd(&kernel.ring)?)?;
    let exec_ready = readable(ring_fd(&execs)?)?;
    let (resolved_tx, resolved) = mpsc::unbounded_channel();
    let (exit_tx, exited) = mpsc::unbounded_channel();
    let (interval, duration) = (opts.interval, opts.duration);
    let clock = Clock::new();
    let mut scan = tokio::time::interval(SCAN_PERIOD);
    // The first scan is now, before the loop.
    scan.tick().await;
    let mut fleet = Fleet {
        kernel,
        sources: Sources { execs, exec_ready, scan, resolved, exited, quit, census },
        opts,
        clock,
        sessions: HashMap::new(),
        next_id: 0,
        resolving: HashSet::new(),
        execd_while_resolving: HashSet::new(),
        settled: HashMap::new(),
        cache: BuildCache::default(),
        full_reported: false,
        resolved_tx,
        exit_tx,
        sinks,
        window_opened_ns: clock.now_unix_ns(),
        own_pid: std::process::id() as i32,
    };
    fleet.scan();
    let stopped = drive(&mut fleet, &ring, interval, duration).await;
    fleet.drain();
    let n = fleet.sessions.len();
    fleet.detach_all();
    let why = match stopped {
        Stopped::Failed(err) => return Err(err),
        Stopped::Duration => "at the end of --duration".to_owned(),
        Stopped::Signal(s) => format!("by {s}"),
        Stopped::Mode(()) => "on q".to_owned(),
    };
    tracing::info!(
        "fleet stopped {why}: detached from {}, {} lost",
        crate::text::plural(n as u64, "process"),
        crate::text::plural(fleet.kernel.lost(), "event")
    );
    Ok(())
}

impl Driven for Fleet {
    type Event = Result<Found>;
    /// Only a sink's request stops fleet mode on its own.
    type Stop = ();

    async fn next(&mut self) -> Result<Found> {
        let s = &mut self.sources;
        tokio::select! {
            guard = s.exec_ready.readable() => {
                let mut guard = guard?;
                let pids = std::iter::from_fn(|| {
                    s.execs.next().map(|item| crate::kernel::probes::record::<ExecEvent>(&item).map(|e| e.pid))
                });
                let pids = pids.flatten().collect();
                guard.clear_ready();
                Ok(Found::Execs(pids))
            }
            _ = s.scan.tick() => Ok(Found::Scan),
            Some(resolved) = s.resolved.recv() => Ok(Found::Resolved(resolved)),
            Some((pid, id)) = s.exited.recv() => Ok(Found::Exited(pid, id)),
            Some(()) = s.quit.recv() => Ok(Found::Quit),
            () = crate::wait::ready_or_never(s.census.as_ref().map(|c| &c.1)) => Ok(Found::Census),
        }
    }

    fn on_event(&mut self, found: Result<Found>) -> Result<Option<()>> {
        match found? {
            Found::Execs(pids) => pids.into_iter().for_each(|pid| self.exec(pid as i32)),
            Found::Scan => self.scan(),
            Found::Resolved(resolved) => self.arm(resolved),
            Found::Exited(pid, id) => self.exited(pid, id),
            Found::Census => self.census_read(),
            Found::Quit => return Ok(Some(())),
        }
        Ok(None)
    }

    fn drain(&mut self) -> Result<()> {
        Fleet::drain(self);
        Ok(())
    }

    fn window(&mut self) -> Result<()> {
        Fleet::window(self)
    }
}

impl Fleet {
    fn scan(&mut self) {
        let pids = discover::all_pids();
        // Forget processes that are gone: the map stays as large as the host's process table.
        let alive: HashSet<i32> = pids.iter().copied().collect();
        self.settled.retain(|pid, _| alive.contains(pid));
        for pid in pids {
            self.consider(pid, false);
        }
    }

    /// A process called execve: whatever it was, it is a new program now.
    fn exec(&mut self, pid: i32) {
        if self.sessions.contains_key(&pid) {
            // The kernel already dropped its TARGETS entry at the exec.
            self.drain();
            self.detach(pid, "exec'd a new program");
        }
        self.settled.remove(&pid);
        if self.resolving.contains(&pid) {
            self.execd_while_resolving.insert(pid);
            return;
        }
        self.consider(pid, true);
    }

    fn consider(&mut self, pid: i32, at_exec: bool) {
        if pid == self.own_pid || self.sessions.contains_key(&pid) || self.resolving.contains(&pid) {
            return;
        }
        let Some(who) = Identity::read(pid) else { return };
        if self.settled.get(&pid) == Some(&who.start) {
            return;
        }
        if !self.opts.filter.admits(&who) {
            self.settled.insert(pid, who.start);
            return;
        }
        if self.sessions.len() + self.resolving.len() >= self.opts.max_targets {
            if !self.full_reported {
                tracing::warn!(
                    "--max-targets {} reached: further Python processes are not observed until some exit",
                    self.opts.max_targets
                );
                self.full_reported = true;
            }
            return;
        }
        self.resolving.insert(pid);
        let (cache, tx, every) = (self.cache.clone(), self.resolved_tx.clone(), self.opts.census);
        tokio::task::spawn_blocking(move || {
            let result = cache.resolve(pid, at_exec);
            let census = match (&result, every) {
                (Resolution::Plan(plan), Some(every)) => census_of(plan, every).map(Box::new),
                _ => None,
            };
            let _ = tx.send(Resolved { who, at_exec, result, census });
        });
    }

    fn arm(&mut self, r: Resolved) {
        let pid = r.who.pid;
        self.resolving.remove(&pid);
        if self.execd_while_resolving.remove(&pid) {
            // The start time does not change at an exec: only this tells the plan is stale.
            return self.consider(pid, true);
        }
        // Gone, or replaced by another process with the same PID, while it was being resolved.
        if Identity::read(pid).is_none_or(|now| now.start != r.who.start) {
            return;
        }
        let plan = match r.result {
            Resolution::Plan(plan) => plan,
            Resolution::NotPython => {
                self.settled.insert(pid, r.who.start);
                return;
            }
            Resolution::Unreadable(why) => {
                // Missing privileges are the user's to fix; a process that exited is not news.
                if why.contains("ermission denied") || why.contains("not permitted") {
                    tracing::warn!("cannot look at {pid} ({}): {why}", r.who.comm);
                } else {
                    tracing::debug!("not looking at {pid} ({}): {why}", r.who.comm);
                }
                self.settled.insert(pid, r.who.start);
                return;
            }
            Resolution::Refused(why) => return self.refuse(&r.who, &why),
        };
        if let Err(err) = self.start(&r.who, *plan, r.at_exec, r.census) {
            // A process that exited meanwhile is not an error.
            if crate::interp::process::exists(pid) {
                self.refuse(&r.who, &format!("{err:#}"));
            }
        }
    }

    fn refuse(&mut self, who: &Identity, why: &str) {
        tracing::warn!("not observing {} ({}): {why}", who.pid, who.comm);
        self.settled.insert(who.pid, who.start);
    }

    fn start(
        &mut self,
        who: &Identity,
        plan: AttachPlan,
        at_exec: bool,
        census: Option<Box<Census>>,
    ) -> Result<()> {
        let pid = plan.pid;
        // The pidfd first: from here on the PID cannot name another process unnoticed.
        let pidfd = readable(pidfd_open(pid)?)?;
        let armed = self.kernel.arm(&plan)?;
        self.next_id += 1;
        let id = self.next_id;
        let exit_tx = self.exit_tx.clone();
        let exit_watch = tokio::spawn(async move {
            let _ = pidfd.readable().await;
            let _ = exit_tx.send((pid, id));
        });
        tracing::info!(
            "observing {pid} ({}) · CPython {} · {} in {}{}",
            who.comm,
            plan.interpreter.version,
            plan.source,
            plan.file.display(),
            if who.container_id.is_empty() {
                String::new()
            } else {
                format!(" · container {:.12}", who.container_id)
            }
        );
        let session = Session {
            id,
            target: Target {
                who: who.clone(),
                python: plan.interpreter.version.to_string(),
                stats: Stats::default(),
            },
            armed: Some(armed),
            cycle: Cycle::new(&plan, !at_exec, Detail::Leaves),
            starting: at_exec,
            census,
            exit_watch,
        };
        for sink in &mut self.sinks {
            sink.attached(&session.target);
        }
        self.sessions.insert(pid, session);
        Ok(())
    }

    /// Routes every waiting event to its process's session.
    fn drain(&mut self) {
        let mut received: HashSet<i32> = HashSet::new();
        while let Some(item) = self.kernel.ring.next() {
            let Some(ev) = crate::kernel::probes::record::<neurogc_common::GcEvent>(&item) else { continue };
            if let Some(s) = self.sessions.get_mut(&(ev.pid as i32)) {
                s.cycle.dec.push(ev);
                received.insert(ev.pid as i32);
            }
        }
        for pid in received {
            let Some(s) = self.sessions.get_mut(&pid) else { continue };
            if s.cycle.dec.settle(true) {
                release(s, &self.clock, &mut self.sinks);
            }
        }
    }

    fn window(&mut self) -> Result<()> {
        self.drain();
        let (opened_ns, now_ns) = (self.window_opened_ns, self.clock.now_unix_ns());
        self.window_opened_ns = now_ns;
        for (pid, s) in &mut self.sessions {
            if s.starting {
                s.cycle.dec.assume_started();
                s.starting = false;
            }
            if s.cycle.dec.retry() {
                release(s, &self.clock, &mut self.sinks);
            }
            let gc = s.cycle.dec.gc.state();
            let thresholds = gc.and_then(|g| g.read_settings(*pid).ok()).map(|g| g.thresholds);
            s.target.stats.close_window(opened_ns, now_ns, thresholds);
            s.target.stats.top_trigger = s.cycle.close_window();
        }
        self.census_tick();
        let targets: Vec<&Target> = self.sessions.values().map(|s| &s.target).collect();
        let lost = self.kernel.lost();
        for sink in &mut self.sinks {
            sink.window(&targets, lost)?;
        }
        if self.sessions.len() < self.opts.max_targets {
            self.full_reported = false;
        }
        Ok(())
    }

    fn exited(&mut self, pid: i32, id: u64) {
        if self.sessions.get(&pid).is_some_and(|s| s.id == id) {
            // Its last collections are in the ring already: count them before it goes.
            self.drain();
            self.detach(pid, "exited");
        }
    }

    fn detach(&mut self, pid: i32, why: &str) {
        let Some(mut s) = self.sessions.remove(&pid) else { return };
        if s.cycle.dec.holding() {
            release(&mut s, &self.clock, &mut self.sinks);
        }
        s.exit_watch.abort();
        if let Some((probe, _)) = self.sources.census.as_mut() {
            probe.disarm(pid);
        }
        if let Some(armed) = s.armed.take() {
            self.kernel.disarm(armed);
        }
        tracing::info!(
            "{pid} ({}) {why}: {} observed",
            s.target.who.comm,
            crate::text::plural(s.target.stats.collections, "collection")
        );
        for sink in &mut self.sinks {
            sink.gone(&s.target);
        }
    }

    /// Each window: the census armed now is ticked (let go once it has waited too long), or,
    /// with none armed, the one of the process whose census is most overdue.
    fn census_tick(&mut self) {
        let Some((probe, _)) = self.sources.census.as_mut() else { return };
        let pid = match probe.armed() {
            Some((pid, _)) => Some(pid),
            None => self
                .sessions
                .iter()
                .filter_map(|(&pid, s)| Some((s.census.as_ref()?.next_at(), pid)))
                .min()
                .map(|(_, pid)| pid),
        };
        let Some((pid, s)) = pid.and_then(|pid| Some((pid, self.sessions.get_mut(&pid)?))) else { return };
        let gc = s.cycle.dec.gc.state();
        let Some(census) = s.census.as_mut() else { return };
        if let Err(err) = census.tick(probe, &self.kernel, gc) {
            tracing::warn!("--census of {pid} ({}): stopped: {err:#}", s.target.who.comm);
            probe.disarm(pid);
            s.census = None;
        }
    }

    /// A census done: its process's record, to the sinks.
    fn census_read(&mut self) {
        let Some((probe, _)) = self.sources.census.as_mut() else { return };
        for d in probe.done() {
            let Some(s) = self.sessions.get_mut(&(d.pid as i32)) else { continue };
            let Some(census) = s.census.as_mut() else { continue };
            let clock = self.clock;
            let rec = census.read(probe, &d, |ns| clock.to_unix_ns(ns));
            for sink in &mut self.sinks {
                sink.census(&s.target, &rec);
            }
        }
    }

    fn detach_all(&mut self) {
        let pids: Vec<i32> = self.sessions.keys().copied().collect();
        for pid in pids {
            self.detach(pid, "detached");
        }
    }
}

/// A process's census, where its build has one (said once where it has not).
fn census_of(plan: &AttachPlan, every: Duration) -> Option<Census> {
    if let Some(why) = census::unsupported(plan) {
        tracing::info!("--census: {} {why}", plan.pid);
        return None;
    }
    Census::new(plan, every).map_err(|err| tracing::warn!("--census: {}: no census: {err:#}", plan.pid)).ok()
}

fn release(s: &mut Session, clock: &Clock, sinks: &mut [Box<dyn Sink>]) {
    let (target, census) = (&mut s.target, &mut s.census);
    let _ = s.cycle.release(clock, |rec| -> Result<(), std::convert::Infallible> {
        // `Detail::Leaves` yields collections only.
        if let neurogc_trace::Record::Gc(c) = rec {
            target.stats.record(&c);
            if let Some(census) = census.as_mut() {
                census.collection(&c);
            }
            for sink in sinks.iter_mut() {
                sink.collection(target, &c);
            }
        }
        Ok(())
    });
}
