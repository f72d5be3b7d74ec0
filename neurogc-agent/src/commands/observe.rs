//! One target's session in the shared loop (`session::drive`): its collections folded into the
//! aggregate and feature windows, each window passed to steering (advise, act) and then to the
//! sinks, its actuator's events and SIGUSR1 handled, and a stop on Ctrl-C/SIGTERM, `--duration`
//! or the target's exit — always with a summary.
use std::{
    io,
    os::fd::OwnedFd,
    time::{Duration, Instant},
};

use anyhow::Result;
use neurogc_trace::{Attach, PolicySummary, Record, Summary};
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{Signal, SignalKind, signal},
};

use crate::{
    commands::launch::Launched,
    interp::{AttachPlan, process},
    kernel::census::CensusProbe,
    kernel::probes::{Probes, ring_fd},
    session::GcStatus,
    session::aggregate::Aggregate,
    session::census::{self, Census},
    session::cycle::{Cycle, Detail},
    session::drive::{Driven, Stopped, drive},
    session::events::Clock,
    session::features::{self, Sample, Window, Windower},
    sinks::{Shown, TargetSink, view},
    steering::steer::{Events, Mode, Steering, latency},
    wait::{pidfd_open, readable, recommend_signal, unblock},
};

/// How long act mode waits for the GC state in silence (a collection in progress resolves in
/// milliseconds; a stop or a debugger does not).
const WAIT_GRACE: Duration = Duration::from_secs(2);

pub struct Options {
    /// What consumes the run: the record stream, the live view.
    pub sinks: Vec<Box<dyn TargetSink>>,
    pub duration: Option<Duration>,
    pub interval: Duration,
    /// The garbage census's period (`--census`).
    pub census: Option<Duration>,
    /// Milliseconds from agent start to probes armed.
    pub attach_ms: f64,
}

struct Observer<'a> {
    plan: &'a AttachPlan,
    /// Taken (and so disarmed) once the loop is over, before the summary.
    probes: Option<Probes>,
    /// Its events on their way to collections, whole stacks named.
    cycle: Cycle,
    clock: Clock,
    agg: Aggregate,
    sinks: Vec<Box<dyn TargetSink>>,
    started: Instant,
    attach_ms: f64,
    windower: Windower,
    steer: Option<Steering>,
    /// The actuator's events (act mode, once the GC state is known and the actuator started).
    events: Option<Events>,
    launched: Option<Launched>,
    exit_watch: AsyncFd<OwnedFd>,
    sigusr1: Signal,
    /// The garbage census (`--census`): the kernel side, its ring's fd to wait on, the target's.
    census: Option<(CensusProbe, AsyncFd<OwnedFd>, Census)>,
}

/// What one target's loop waits on besides the ring buffer and the window.
enum Own {
    Actuation(crate::steering::actuate::Event),
    /// A census is done.
    Census,
    /// SIGUSR1: advise mode's recommendation, now.
    Recommend,
    Exited,
}

enum Stop {
    /// Act mode could not start: (why, the user's to fix).
    ActFailed(String, bool),
    /// The agent itself failed (writing its records, reading the ring): stops in order too.
    Failed(anyhow::Error),
    Duration,
    Signal(&'static str),
    /// How a launched command ended (None: attached, or not reaped).
    TargetExited(Option<crate::commands::launch::Ended>),
    OutputClosed,
}

impl Stop {
    fn text(&self) -> &'static str {
        match self {
            Stop::ActFailed(..) => "act-failed",
            Stop::Failed(_) => "failed",
            Stop::Duration => "duration",
            Stop::Signal(s) => s,
            Stop::TargetExited(_) => "target-exited",
            Stop::OutputClosed => "output-closed",
        }
    }
}

impl From<Stopped<Stop>> for Stop {
    fn from(stopped: Stopped<Stop>) -> Stop {
        match stopped {
            Stopped::Duration => Stop::Duration,
            Stopped::Signal(s) => Stop::Signal(s),
            Stopped::Mode(stop) => stop,
            // `| head` closed our output: stop quietly, like any filter.
            Stopped::Failed(err) if crate::error::output_closed(&err) => Stop::OutputClosed,
            // Anything else still ends in order: the application gets its settings back first.
            Stopped::Failed(err) => Stop::Failed(err),
        }
    }
}

pub async fn run(
    plan: &AttachPlan,
    probes: Probes,
    launched: Option<Launched>,
    mut steer: Option<Steering>,
    mut opts: Options,
) -> Result<Option<crate::commands::launch::Ended>> {
    let pid = plan.pid;
    let exit_watch = readable(pidfd_open(pid)?)?;
    let ring = readable(ring_fd(&probes.kernel.ring)?)?;
    let clock = Clock::new();
    // Until the dynamic loader and the interpreter's start-up are done, the GC state's memory
    // holds anything: in launch mode the first collection event is the proof that it exists.
    let cycle = Cycle::new(plan, launched.is_none(), Detail::Records);
    if let Some(launched) = &launched {
        launched.release()?;
    }
    let first = sample(pid, &cycle.dec.gc, &clock, None);
    let age_s = process::age_s(pid);
    if let Some(s) = steer.as_mut() {
        s.target(pid, age_s, first.ts_ns, plan.interpreter.free_threaded);
    }
    // SIGUSR1's handler first, then unblocked: its default would kill the agent.
    let sigusr1 = signal(SignalKind::user_defined1())?;
    unblock(&recommend_signal())?;
    let mut obs = Observer {
        plan,
        probes: Some(probes),
        cycle,
        clock,
        agg: Aggregate::default(),
        sinks: std::mem::take(&mut opts.sinks),
        started: Instant::now(),
        attach_ms: opts.attach_ms,
        windower: Windower::new(first),
        steer,
        events: None,
        launched,
        exit_watch,
        sigusr1,
        census: None,
    };
    if let Some(every) = opts.census {
        obs.start_census(every);
    }
    obs.start_actuator()?;
    let attach = obs.attach_record(first, age_s, &opts);
    // A failed first write ends the run as a failed later one would (`| head -0` closes the
    // output before it): in order, the command left to run on.
    let stop = match obs.emit(&Record::Attach(Box::new(attach))) {
        Ok(()) => Stop::from(drive(&mut obs, &ring, opts.interval, opts.duration).await),
        Err(err) => Stop::from(Stopped::Failed(err.into())),
    };
    // Whatever the kernel already produced belongs to the run; then disarm before summarising.
    if let Some((probe, _, census)) = obs.census.as_mut() {
        probe.disarm(census.pid());
    }
    let _ = obs.drain_ring();
    let _ = obs.release_held();
    let probes = obs.probes.take().expect("disarmed only here");
    let (lost, unpaired) = (probes.lost(), probes.unpaired());
    drop(probes);
    let finished = obs.finish_actuator().await;
    let launched = obs.launched.take();
    // A reader that went away before the summary (a command that ended before the first
    // window, `| true`) ends nothing either: the run's status stands, as for a window's write.
    let summarised = match obs.summarise(&stop, lost, unpaired) {
        Err(err) if crate::error::output_closed(&err) => Ok(()),
        r => r,
    };
    match stop {
        Stop::ActFailed(why, true) => Err(anyhow::Error::new(crate::error::UserError(why))),
        Stop::ActFailed(why, false) => Err(anyhow::anyhow!(why)),
        Stop::Failed(err) => Err(err),
        Stop::TargetExited(ended) => finished.and(summarised).map(|()| ended),
        // Like `time`, launch mode ends with its command however early its own output was
        // closed (`| head -1`): the command runs on, no longer observed and its settings its
        // own again, and its status is the agent's.
        Stop::OutputClosed => finished.and(summarised).map(|()| launched.and_then(|l| l.reap())),
        _ => finished.and(summarised).map(|()| None),
    }
}

impl Driven for Observer<'_> {
    type Event = Own;
    type Stop = Stop;

    async fn next(&mut self) -> Own {
        tokio::select! {
            Some(ev) = next_event(&mut self.events) => Own::Actuation(ev),
            () = crate::wait::ready_or_never(self.census.as_ref().map(|c| &c.1)) => Own::Census,
            _ = self.sigusr1.recv() => Own::Recommend,
            _ = self.exit_watch.readable() => Own::Exited,
        }
    }

    fn on_event(&mut self, own: Own) -> Result<Option<Stop>> {
        match own {
            Own::Actuation(ev) => {
                let r = self.actuation(ev);
                if let Some((why, user)) = self.steer.as_mut().and_then(|s| s.failed_to_start.take()) {
                    return Ok(Some(Stop::ActFailed(why, user)));
                }
                r.map(|()| None)
            }
            Own::Recommend => Ok(self.recommend_now().map(|()| None)?),
            Own::Census => Ok(self.census_read().map(|()| None)?),
            Own::Exited => Ok(Some(Stop::TargetExited(self.launched.as_ref().and_then(|l| l.reap())))),
        }
    }

    fn drain(&mut self) -> Result<()> {
        Ok(self.drain_ring()?)
    }

    fn window(&mut self) -> Result<()> {
        self.tick()
    }
}

/// The actuator's next event, or never when there is no actuator.
async fn next_event(events: &mut Option<Events>) -> Option<crate::steering::actuate::Event> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The target now: thresholds and gen0 count from memory (when located), RSS and CPU from /proc.
fn sample(pid: i32, gc: &GcStatus, clock: &Clock, freeze_count: Option<i64>) -> Sample {
    let settings = gc.state().and_then(|s| s.read_settings(pid).ok());
    let proc = features::read_proc(pid);
    Sample {
        ts_ns: clock.now_unix_ns(),
        thresholds: settings.map(|s| s.thresholds.map(i64::from)),
        count0: settings.map(|s| i64::from(s.counts[0])),
        rss_bytes: proc.as_ref().map_or(0, |p| p.rss_bytes),
        cpu_ns: proc.as_ref().map_or(0, |p| p.cpu_ns),
        freeze_count,
        older_counts: settings.map(|s| [1, 2].map(|g| i64::from(s.counts[g]))),
        long_lived: settings.and_then(|s| s.long_lived),
        frozen: settings.and_then(|s| s.frozen),
        runq_ns: proc.as_ref().map(|p| p.runq_ns),
        runs: proc.map(|p| p.runs),
    }
}

/// The live view's line for advise/act mode's last decision (and the effect of the last change).
fn decision_line(steer: &Steering, window: &Window) -> Option<String> {
    let d = steer.last.as_ref()?;
    let verb = match (steer.mode, d.requested) {
        (_, true) => "applying",
        (Mode::Advise, false) => "advice",
        _ => "decision",
    };
    // Thresholds not read yet (GC state unproven) are not shown as 0/0/0.
    let what = d.what.clone().or_else(|| window.sample.thresholds.map(|_| view::thresholds(d.thresholds)));
    let what = what.map_or(String::new(), |w| format!(" {w}"));
    let budget = d.budget.as_ref().map_or(String::new(), |b| format!(" [{b} budget]"));
    let mut line = format!("{verb}{what}{budget}: {}", d.reason);
    // Advice names the cycle to fix before any setting.
    if let Some(cycle) = steer.advice.cycle_first().filter(|_| steer.mode == Mode::Advise) {
        line = format!("{cycle}\n{line}");
    }
    if let Some(given_up) = &d.given_up {
        line.push_str(&format!(" (given up: {given_up})"));
    }
    if let Some(e) = steer.last_effect.as_ref() {
        line.push_str(&format!(
            "\neffect of {}: longest pause {:.1} -> {:.1} ms · GC {:.1}% -> {:.1}% · RSS {:.0} -> {:.0} MiB",
            e.change,
            e.pause_max_ms[0],
            e.pause_max_ms[1],
            e.gc_share[0] * 100.0,
            e.gc_share[1] * 100.0,
            e.rss_mib[0],
            e.rss_mib[1]
        ));
    }
    Some(line)
}

impl Observer<'_> {
    /// The garbage census, where this build can have one; said and left out where it cannot.
    fn start_census(&mut self, every: Duration) {
        if let Some(why) = census::unsupported(self.plan) {
            tracing::warn!("--census: {why}");
            return;
        }
        let Some(probes) = self.probes.as_mut() else { return };
        let started = Census::new(self.plan, every).and_then(|c| {
            let probe = probes.kernel.census()?;
            Ok((readable(ring_fd(&probe.ring)?)?, probe, c))
        });
        match started {
            Ok((fd, probe, c)) => self.census = Some((probe, fd, c)),
            Err(err) => tracing::warn!("--census: no census: {err:#}"),
        }
    }

    /// Each window: a census armed when one is due. One that cannot be is said, and stops.
    fn census_tick(&mut self) {
        let (Some((probe, _, census)), Some(probes)) = (self.census.as_mut(), self.probes.as_ref()) else {
            return;
        };
        if let Err(err) = census.tick(probe, &probes.kernel, self.cycle.dec.gc.state()) {
            tracing::warn!("--census: stopped: {err:#}");
            self.census = None;
        }
    }

    /// A census done: its record, named.
    fn census_read(&mut self) -> io::Result<()> {
        let Some((probe, _, census)) = self.census.as_mut() else { return Ok(()) };
        let clock = self.clock;
        let pid = census.pid();
        let records: Vec<Record> = probe
            .done()
            .iter()
            .filter(|d| d.pid as i32 == pid)
            .map(|d| Record::Census(census.read(probe, d, |ns| clock.to_unix_ns(ns))))
            .collect();
        for rec in &records {
            if let (Some(steer), Record::Census(c)) = (self.steer.as_mut(), rec) {
                steer.advice.census(c);
            }
            self.emit(rec)?;
        }
        self.flush_records()
    }

    /// Act mode: the actuator starts once the GC state is settled (proven, or known to be
    /// unusable): the interpreter is up by then, and the memory actuator has its layout.
    fn start_actuator(&mut self) -> Result<()> {
        let Some(steer) = self.steer.as_mut() else { return Ok(()) };
        if !steer.wants_actuator() || self.cycle.dec.gc.pending() {
            return Ok(());
        }
        self.events = Some(steer.start_actuator(self.plan, self.cycle.dec.gc.state())?);
        Ok(())
    }

    /// Act mode still waiting for the GC state after a grace period: the user hears why.
    fn explain_wait(&mut self) -> Result<()> {
        let Some(steer) = self.steer.as_mut() else { return Ok(()) };
        if !steer.wants_actuator() || !self.cycle.dec.gc.pending() || self.started.elapsed() < WAIT_GRACE {
            return Ok(());
        }
        let held = process::held_by_other(self.plan.pid);
        let why = format!(
            "waiting to read the target's GC state before changing anything: {}",
            held.as_deref().unwrap_or("it was collecting each time it was read, or is still starting")
        );
        match steer.waiting_for_state(why, self.clock.now_unix_ns()) {
            Some(rec) => Ok(self.emit(&Record::Actuation(rec))?),
            None => Ok(()),
        }
    }

    fn actuation(&mut self, ev: crate::steering::actuate::Event) -> Result<()> {
        let Some(steer) = self.steer.as_mut() else { return Ok(()) };
        let rec = steer.on_event(ev, self.clock.now_unix_ns());
        if rec.event == "finished" {
            self.events = None;
        }
        self.emit(&Record::Actuation(rec))?;
        Ok(self.flush_records()?)
    }

    /// SIGUSR1 in advise mode: the recommendation as it stands (the text printed at exit), now.
    fn recommend_now(&mut self) -> io::Result<()> {
        let Some(steer) = self.steer.as_ref().filter(|s| s.mode == Mode::Advise) else { return Ok(()) };
        let text = steer
            .advice
            .recommendation()
            .unwrap_or_else(|| "recommendation: none yet, no window has been decided".to_owned());
        if !each_sink(&mut self.sinks, |s| s.note(&text))? {
            crate::stderr::line(crate::text::wrap_lines(&text, 2));
        }
        Ok(())
    }

    /// Gives the application its settings back (bounded wait) and reports how it went.
    async fn finish_actuator(&mut self) -> Result<()> {
        let (Some(steer), Some(events)) = (self.steer.as_mut(), self.events.as_mut()) else { return Ok(()) };
        let clock = self.clock;
        let records = steer.finish(events, || clock.now_unix_ns()).await;
        self.events = None;
        for rec in records {
            self.emit(&Record::Actuation(rec))?;
        }
        Ok(self.flush_records()?)
    }

    fn drain_ring(&mut self) -> io::Result<()> {
        let Some(probes) = self.probes.as_mut() else { return Ok(()) };
        let mut received = false;
        while let Some(item) = probes.ring().next() {
            if let Some(ev) = crate::kernel::probes::record::<neurogc_common::GcEvent>(&item) {
                self.cycle.dec.push(ev);
                received = true;
            }
        }
        if self.cycle.dec.settle(received) { self.release_held() } else { Ok(()) }
    }

    fn release_held(&mut self) -> io::Result<()> {
        let Observer { cycle, clock, agg, windower, sinks, steer, census, .. } = self;
        cycle.release(clock, |rec| {
            if let Record::Gc(collection) = &rec {
                agg.record(collection);
                if let Some((_, _, c)) = census.as_mut() {
                    c.collection(collection);
                }
                windower.record(collection);
                if let Some(s) = steer.as_mut() {
                    s.collection_ended(collection);
                }
            }
            each_sink(sinks, |s| s.record(&rec).map(|()| true)).map(drop)
        })?;
        self.flush_records()
    }

    /// The first record: what is observed, by what, how; `first` opens the first window, at
    /// which the target was `age_s` old.
    fn attach_record(&self, first: Sample, age_s: Option<f64>, opts: &Options) -> Attach {
        let plan = self.plan;
        let (model, guard) = self.steer.as_ref().map(Steering::describe).unzip();
        Attach {
            format: neurogc_trace::FORMAT,
            pid: plan.pid,
            python: plan.interpreter.version.to_string(),
            probe: plan.source.kind().to_owned(),
            mode: self.steer.as_ref().map_or("observe", |s| s.mode.name()).to_owned(),
            schema: features::SCHEMA,
            features: features::NAMES.iter().map(|n| (*n).to_owned()).collect(),
            sample: first,
            build: Some(neurogc_trace::Build {
                file: plan.file.display().to_string(),
                free_threaded: plan.interpreter.free_threaded,
            }),
            host: nix::unistd::gethostname().ok().map(|h| h.to_string_lossy().into_owned()),
            agent: Some(concat!("neurogc-agent ", env!("CARGO_PKG_VERSION")).to_owned()),
            interval_s: Some(opts.interval.as_secs_f64()),
            model,
            guard,
            age_s,
        }
    }

    /// A window closes: sample, features, decision, view.
    fn tick(&mut self) -> Result<()> {
        self.drain_ring()?;
        let lost = self.probes.as_ref().map_or(0, Probes::lost);
        let pid = self.plan.pid;
        if self.cycle.dec.retry() {
            self.release_held()?;
        }
        let trigger = self.cycle.close_window();
        self.census_tick();
        self.start_actuator()?;
        self.explain_wait()?;
        // The decision's latency runs from the window's sample: not the actuator's one-off start
        // just above (1.3 ms on the benchmark VM, the p99 of a 30-window run on its own).
        let opened = Instant::now();
        let freeze = self.steer.as_ref().and_then(|s| s.freeze_count);
        let window = self.windower.close(sample(pid, &self.cycle.dec.gc, &self.clock, freeze));
        let decision = match self.steer.as_mut() {
            Some(steer) => Some(steer.decide(&window, opened)?),
            None => None,
        };
        self.render(&window, lost, trigger)?;
        self.emit(&Record::Window(window))?;
        if let Some(d) = decision {
            self.emit(&Record::Decision(d))?;
        }
        self.flush_records()?;
        Ok(())
    }

    fn render(&mut self, window: &Window, lost: u64, top: Option<(String, f64)>) -> io::Result<()> {
        let note = self.cycle.dec.gc.note();
        let trigger =
            top.map(|(site, share)| format!("top trigger: {site}, {:.0}% of collections", share * 100.0));
        let decision = self.steer.as_ref().and_then(|s| decision_line(s, window));
        let shown = Shown {
            window,
            agg: &self.agg,
            lost,
            note: note.as_deref(),
            trigger: trigger.as_deref(),
            decision: decision.as_deref(),
        };
        each_sink(&mut self.sinks, |s| s.window(&shown).map(|()| true)).map(drop)
    }

    fn summarise(mut self, stop: &Stop, lost: u64, unpaired: u64) -> Result<()> {
        let restored = self.steer.as_ref().and_then(Steering::restored);
        if self.cycle.dec.gc.pending() && (self.agg.collections() > 0 || self.cycle.dec.holding()) {
            tracing::warn!(
                "the target exited before its GC state could be validated: each collection's generation and freed count are the probe's alone, unchecked"
            );
        }
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let summary = Summary {
            pid: self.plan.pid,
            python: self.plan.interpreter.version.to_string(),
            probe: self.plan.source.kind().to_owned(),
            stopped: stop.text().to_owned(),
            elapsed_s,
            attach_ms: self.attach_ms,
            collections: self.agg.collections(),
            gc_time_share: self.agg.pause_ns() as f64 / 1e9 / elapsed_s.max(1e-9),
            lost_events: lost,
            unpaired_events: unpaired,
            generations: self.agg.summaries(),
            target_exit_status: match stop {
                Stop::TargetExited(ended) => ended.map(|e| e.status()),
                _ => None,
            },
            stacks: self.cycle.stack_counts(),
            policy: self.steer.as_ref().map(|s| PolicySummary {
                mode: s.mode.name().to_owned(),
                provider: s.provider().to_owned(),
                decisions: s.decisions,
                changes_applied: s.changes,
                inference_ns: latency(&s.inference_ns),
                window_to_decision_ns: latency(&s.decision_ns),
                apply_ns: latency(&s.apply_ns),
                injection_ms: s.injected_in.map(|d| d.as_secs_f64() * 1e3),
                restored: restored.as_ref().map(|r| r.0),
                restore: restored.as_ref().map(|r| r.1.clone()),
                recommendation: s.advice.recommendation(),
            }),
        };
        if matches!(stop, Stop::OutputClosed) {
            return Ok(());
        }
        let ended = match stop {
            Stop::TargetExited(Some(ended)) => Some(ended),
            _ => None,
        };
        let described = ended.map(|e| e.describe());
        let shown = each_sink(&mut self.sinks, |s| s.summary(&summary, lost, described.as_deref()))?;
        if !shown
            && let Some(ended) = ended
            && ended.status() != 0
        {
            // The agent's own failures end with "neurogc-agent: error: …" on standard error; a
            // command's status passed through says so there too, or a 2 reads as the agent's.
            crate::stderr::line(format_args!("neurogc-agent: {}", ended.describe()));
        }
        if !matches!(stop, Stop::Failed(_)) {
            self.emit(&Record::Summary(summary))?;
        }
        Ok(each_sink(&mut self.sinks, |s| s.close().map(|()| true)).map(drop)?)
    }

    fn emit(&mut self, record: &Record) -> io::Result<()> {
        each_sink(&mut self.sinks, |s| s.record(record).map(|()| true)).map(drop)
    }

    fn flush_records(&mut self) -> io::Result<()> {
        each_sink(&mut self.sinks, |s| s.flush().map(|()| true)).map(drop)
    }
}

/// Calls `f` on every sink, and says whether any answered true. A sink whose reader went away
/// (`| head -1`) is dropped and the run goes on for the others: `record`'s file outlives its live
/// view (it stopped recording when the view's pipe closed, and held no summary). Only where no
/// sink is left does the closed output end the run, as a filter's does.
fn each_sink(
    sinks: &mut Vec<Box<dyn TargetSink>>,
    mut f: impl FnMut(&mut dyn TargetSink) -> io::Result<bool>,
) -> io::Result<bool> {
    let mut any = false;
    let mut i = 0;
    while i < sinks.len() {
        match f(sinks[i].as_mut()) {
            Ok(said) => {
                any |= said;
                i += 1;
            }
            Err(err) if err.kind() == io::ErrorKind::BrokenPipe && sinks.len() > 1 => {
                sinks.remove(i);
            }
            Err(err) => return Err(err),
        }
    }
    Ok(any)
}
