//! Changing the target's GC thresholds, and giving the application its own back.
//!
//! Thresholds are written into the validated GC state by the custodian (compare-and-write, so a
//! value the application set itself is never overwritten), which also puts them back if the
//! agent dies. The two actuators differ in what else they do:
//! - `hook` (default): first injects python-hook (queued as a pending call by memory writes, see
//!   `inject`), which installs a fork guard: a child forked while neurogc steers gets the
//!   application's thresholds back at once. The guard's record is updated with every change.
//! - `memory`: no injection, for targets that opted out of remote code execution.
//!
//! Everything here runs on a thread of its own: injection can wait minutes for a blocked main
//! thread, while the loop that drains the ring buffer must never wait. The loop sends
//! [`Command`]s and receives [`Event`]s.
pub mod channel;
pub mod custodian;
mod enqueue;
mod freeze;
mod inject;
mod record;

use std::{
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use self::{
    channel::Listener,
    custodian::{Custodian, Step},
    freeze::{Freezer, REARM, undo_detail},
    inject::{Deferred, Injection, Queueing},
    record::Record,
};
use crate::{
    error::bail_user,
    interp::{AttachPlan, cpython::GcStateLocation, layout::GcState, pending::PendingLayout, process},
    memory::{ProcMem, read_bytes, read_u64},
    sinks::view::thresholds,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActuatorKind {
    /// Thresholds in memory, and the fork guard injected.
    Hook,
    /// Thresholds in memory only.
    Memory,
}

pub enum Command {
    Apply([i64; 3]),
    /// `gc.freeze()` (hook actuator only); `collect`: after a full collection, the one that was
    /// due anyway, so that the garbage waiting for it is not frozen.
    Freeze {
        collect: bool,
        /// And a full collection right after it: the old generation's counters start again from
        /// the unfrozen heap, so no one-off full collection of all that is promoted meanwhile.
        reset: bool,
        /// The tracked heap as last read (the old generation's counters and gen0's count):
        /// about what the freeze moves. None: the guard counts it, a walk of the whole frozen
        /// heap with the GIL held (a stall of 80-95 ms per million objects).
        objects: Option<i64>,
    },
    /// Undo neurogc's freeze; `collect`: and run the thawed heap's first full collection then
    /// (an undo for memory: what the freeze kept is freed before more of the heap dies).
    Unfreeze {
        collect: bool,
    },
    /// Give the application its settings back and end.
    Stop,
}

/// The longest the actuator takes to answer a command: a freeze (or its undo) waits up to
/// `ACTION_WAIT` to be queued and as long again to run, and thresholds sent behind it are
/// written as it ends. A move the target has not shown by then will not show soon (an undo
/// queued behind a blocked main thread): the controller stops waiting for it (`Landing`).
pub const ANSWERS_WITHIN: Duration = freeze::ACTION_WAIT.saturating_mul(2);

#[derive(Debug, Clone)]
pub enum Event {
    /// Not ready yet, and why (said when the reason changes).
    Waiting(String),
    Ready {
        original: [i64; 3],
        injected_in: Option<Duration>,
        freeze_count: Option<i64>,
    },
    Applied {
        requested: [i64; 3],
        now: [i64; 3],
        latency: Duration,
    },
    /// What a freeze (or its undo) did: "frozen", "not-frozen", "unfrozen" or "unfreeze-pending";
    /// `count` objects frozen (0 after an undo).
    Freeze {
        outcome: &'static str,
        count: Option<i64>,
        latency: Duration,
        detail: String,
    },
    /// The application set thresholds of its own: neurogc stops steering and leaves them.
    AppChanged {
        now: [i64; 3],
    },
    /// The actuator cannot go on (target gone, hook gone, another agent steering…); `user`: a
    /// condition of the target the user can act on (exit code 2), not a fault of the agent.
    Failed {
        why: String,
        user: bool,
    },
    Finished(Finish),
}

#[derive(Debug, Clone)]
pub struct Finish {
    /// Nothing neurogc set is left in the target.
    pub restored: bool,
    pub detail: String,
}

pub struct ActuatorHandle {
    commands: mpsc::Sender<Command>,
}

impl ActuatorHandle {
    pub fn send(&self, cmd: Command) {
        let _ = self.commands.send(cmd);
    }
}

/// Refusals that need no running interpreter: checked before anything touches the target.
pub fn precheck(plan: &AttachPlan, kind: ActuatorKind) -> Result<()> {
    if kind == ActuatorKind::Memory {
        return Ok(());
    }
    if PendingLayout::for_interpreter(&plan.interpreter).is_none() {
        bail_user!(
            "the hook cannot be injected into CPython {}{}: neurogc knows no pending-call layout for it; \
             --actuator memory writes the thresholds directly instead",
            plan.interpreter.version,
            if plan.interpreter.free_threaded { " (free-threaded)" } else { "" }
        );
    }
    if remote_debugging_disabled(plan)? {
        bail_user!(
            "process {} has remote debugging disabled (PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug \
             or a --without-remote-debug build): neurogc does not inject code where the application opted \
             out; --actuator memory writes the thresholds directly instead",
            plan.pid
        );
    }
    Ok(())
}

/// 3.14+: the application's PEP 768 opt-out (`remote_debugging_enabled` in the interpreter's
/// config, located through `_Py_DebugOffsets`). neurogc honours it for its own injection too.
fn remote_debugging_disabled(plan: &AttachPlan) -> Result<bool> {
    let Some(offsets) = plan.interpreter.remote_debug else { return Ok(false) };
    let Some(GcStateLocation::MainInterpreter { main_ptr, .. }) = plan.gc.map(|g| g.location) else {
        return Ok(false);
    };
    let interp = read_u64(plan.pid, main_ptr)?;
    if interp == 0 {
        return Ok(false); // not initialised yet (launch mode): checked again before injecting
    }
    let enabled = read_bytes(plan.pid, interp + offsets.remote_debugging_enabled, 4)?;
    Ok(i32::from_le_bytes(enabled.try_into().expect("4 bytes")) != 1)
}

/// Starts the actuator thread. Errors here (the memory cannot be opened, no custodian) change
/// nothing in the target.
pub fn start(
    plan: &AttachPlan,
    kind: ActuatorKind,
    state: Option<GcState>,
) -> Result<(ActuatorHandle, UnboundedReceiver<Event>)> {
    precheck(plan, kind)?;
    let mem = ProcMem::open(plan.pid)?;
    let custodian = Custodian::spawn(&mem)?;
    let (commands, rx) = mpsc::channel();
    let (tx, events) = unbounded_channel();
    let plan = plan.clone();
    let worker = Worker {
        plan,
        mem,
        custodian: Some(custodian),
        injected_in: None,
        freeze_count: None,
        events: tx,
        commands: rx,
    };
    let state = state.context(
        "act mode needs the target's GC state, and its layout could not be validated in this process",
    )?;
    let fields = Fields::read(state, &worker.mem)?;
    Ok(match kind {
        ActuatorKind::Hook => spawn(worker, move |w| w.hook(fields), commands, events),
        ActuatorKind::Memory => spawn(worker, move |w| w.steer(fields, None), commands, events),
    })
}

/// How long a failed actuator gives the target to show it has exited.
const EXIT_GRACE: Duration = Duration::from_millis(200);

fn spawn(
    mut worker: Worker,
    body: impl FnOnce(&mut Worker) -> Result<Finish> + Send + 'static,
    commands: mpsc::Sender<Command>,
    events: UnboundedReceiver<Event>,
) -> (ActuatorHandle, UnboundedReceiver<Event>) {
    std::thread::Builder::new()
        .name("neurogc-actuator".into())
        .spawn(move || {
            let finish = body(&mut worker).unwrap_or_else(|err| {
                let why = format!("{err:#}");
                let user = crate::error::exit_code(&err) == crate::error::EXIT_USER;
                // Off the observation loop, the target is given the moment an exit takes to
                // show, so the loop tells its exit from a failure (`process::exists`).
                crate::interp::process::wait_gone(worker.mem.pid, EXIT_GRACE);
                let _ = worker.events.send(Event::Failed { why: why.clone(), user });
                Finish { restored: false, detail: why }
            });
            let _ = worker.events.send(Event::Finished(finish));
            if let Some(c) = worker.custodian.take() {
                c.bye();
            }
        })
        .expect("spawning the actuator thread");
    (ActuatorHandle { commands }, events)
}

struct Worker {
    plan: AttachPlan,
    mem: ProcMem,
    custodian: Option<Custodian>,
    /// Hook: from queueing to the guard installed; reported with "ready".
    injected_in: Option<Duration>,
    freeze_count: Option<i64>,
    events: UnboundedSender<Event>,
    commands: mpsc::Receiver<Command>,
}

/// How long the worker waits at a time (for a connection or a command) before it looks for a
/// stop or a dead target.
const POLL: Duration = Duration::from_millis(50);

/// The three threshold fields in the validated GC state, and the values the application had.
#[derive(Debug, Clone, Copy)]
struct Fields {
    state: GcState,
    original: [i64; 3],
}

impl Fields {
    fn read(state: GcState, mem: &ProcMem) -> Result<Fields> {
        let original = state.read_settings_in(mem)?.thresholds.map(i64::from);
        anyhow::ensure!(original.iter().all(|&t| t >= 0), "implausible thresholds {original:?}");
        Ok(Fields { state, original })
    }

    fn now(&self, mem: &ProcMem) -> Result<[i64; 3]> {
        Ok(self.state.read_settings_in(mem)?.thresholds.map(i64::from))
    }

    fn bytes(v: i64) -> [u8; 4] {
        i32::try_from(v).unwrap_or(i32::MAX).to_le_bytes()
    }

    /// Puts back each field that still holds one of `values`, never one the application changed.
    fn restore_steps(&self, values: &[[i64; 3]]) -> Vec<Step> {
        values
            .iter()
            .flat_map(|v| v.iter().zip(self.original).enumerate())
            .filter(|(_, (ours, original))| *ours != original)
            .map(|(g, (&ours, original))| {
                Step::replace(self.state.threshold_address(g), &Self::bytes(ours), &Self::bytes(original))
            })
            .collect()
    }

    /// `want` in place of `ours`, all three or none.
    fn set_steps(&self, ours: [i64; 3], want: [i64; 3]) -> Vec<Step> {
        (0..3)
            .map(|g| {
                Step::replace(self.state.threshold_address(g), &Self::bytes(ours[g]), &Self::bytes(want[g]))
            })
            .collect()
    }

    /// What a restore left, given the values neurogc may have set.
    fn outcome(&self, now: [i64; 3], ours: &[[i64; 3]]) -> Finish {
        let ours_left = ours.iter().any(|o| (0..3).any(|g| now[g] == o[g] && o[g] != self.original[g]));
        let kept = (0..3).any(|g| now[g] != self.original[g]);
        Finish {
            restored: !ours_left,
            detail: if kept {
                format!("the application's own values kept where it changed them; now {}", thresholds(now))
            } else {
                format!("original thresholds {} back", thresholds(now))
            },
        }
    }
}
/// Retry period while the queue is busy or the main thread idle.
const RETRY: Duration = Duration::from_millis(200);

impl Worker {
    fn custodian(&mut self) -> &mut Custodian {
        self.custodian.as_mut().expect("custodian alive until the worker ends")
    }

    fn emit(&self, ev: Event) {
        let _ = self.events.send(ev);
    }

    /// A stop (or the agent dropping its handle) while not yet steering.
    fn stop_requested(&self) -> bool {
        loop {
            match self.commands.try_recv() {
                Ok(Command::Stop) | Err(mpsc::TryRecvError::Disconnected) => return true,
                Ok(Command::Apply(_) | Command::Freeze { .. } | Command::Unfreeze { .. }) => continue, // nothing to apply to yet
                Err(mpsc::TryRecvError::Empty) => return false,
            }
        }
    }

    fn target_gone(&self) -> Option<Result<Finish>> {
        (!process::exists(self.plan.pid)).then(|| anyhow::bail!("the target exited"))
    }

    fn hook(&mut self, fields: Fields) -> Result<Finish> {
        let pid = self.plan.pid;
        let started = Instant::now();
        let layout =
            PendingLayout::for_interpreter(&self.plan.interpreter).context("no pending-call layout")?;
        // Launch mode reaches here once the interpreter runs: the opt-out is readable now.
        if remote_debugging_disabled(&self.plan)? {
            bail_user!(
                "process {pid} has remote debugging disabled: neurogc does not inject code where the application \
                 opted out; --actuator memory writes the thresholds directly instead"
            );
        }
        let listener = Listener::bind(pid)?;
        let code = inject::stub(&listener.name, inject::agent_uid_in(pid));
        let mut said = String::new();
        let mut say = |w: &Worker, why: String| {
            if why != said && started.elapsed() > Duration::from_secs(1) {
                w.emit(Event::Waiting(why.clone()));
                said = why;
            }
        };
        let injection = loop {
            if self.stop_requested() {
                return Ok(Finish {
                    restored: true,
                    detail: "the hook was never queued: nothing changed".into(),
                });
            }
            if let Some(gone) = self.target_gone() {
                return gone;
            }
            let (plan, mem) = (&self.plan, &self.mem);
            let custodian = self.custodian.as_mut().expect("custodian");
            let with = Queueing { exit: Vec::new(), then: None, main_running: false, gc: fields.state };
            match Injection::try_queue(plan, mem, custodian, layout, &code, with)? {
                Ok(injection) => break injection,
                Err(Deferred::Queue(not_idle)) => {
                    say(self, format!("waiting to queue the hook: the target has {not_idle}"))
                }
                Err(Deferred::MainThreadIdle(why)) => say(self, format!("waiting to queue the hook: {why}")),
            }
            std::thread::sleep(RETRY);
        };
        tracing::debug!("hook queued at {:#x} after {:?}", injection.region, started.elapsed());
        let mut last_note = Instant::now();
        let stream = loop {
            if let Some(stream) = listener.accept_within(POLL)? {
                break stream;
            }
            if self.stop_requested() {
                let steps = injection.disarm_steps();
                self.custodian().run(steps)?;
                return Ok(Finish {
                    restored: true,
                    detail: "the hook never ran; its queued call was disarmed".into(),
                });
            }
            if let Some(gone) = self.target_gone() {
                return gone;
            }
            if last_note.elapsed() > Duration::from_secs(2) {
                last_note = Instant::now();
                say(
                    self,
                    format!(
                        "the hook is queued and runs when the target next executes Python: {}",
                        inject::main_thread_state(pid)
                    ),
                );
            }
        };
        let installed = match channel::install(stream) {
            Ok(installed) => installed,
            Err(err) => {
                let steps = injection.disarm_steps();
                let _ = self.custodian().run(steps);
                return Err(err.context("the hook did not start"));
            }
        };
        drop(listener); // the name goes with it: nothing more connects
        let steps = injection.retire_steps();
        self.custodian().run(steps)?;
        self.custodian().on_exit(Vec::new())?;
        let record = Record::locate(&self.mem, &self.plan, installed.record_id)?;
        let mut fields = fields;
        // What the interpreter says and what memory says must agree: a last check of the layout
        // before neurogc writes it.
        let in_memory = fields.now(&self.mem)?;
        if !installed.active && installed.thresholds != in_memory {
            anyhow::bail!(
                "gc.get_threshold() in the target says {} but the GC state read from memory says {}: \
                 not writing a layout that disagrees with the interpreter",
                thresholds(installed.thresholds),
                thresholds(in_memory)
            );
        }
        if installed.active {
            if installed.agent > 0 && is_agent(installed.agent) {
                bail_user!(
                    "another neurogc agent (pid {}) is already steering process {pid}: one agent per process",
                    installed.agent
                );
            }
            // An agent that died with its custodian: its values may still be in force.
            fields.original = record.original(&self.mem)?;
            tracing::warn!(
                "taking over from a neurogc agent that ended without cleaning up; the application's thresholds were {}",
                thresholds(fields.original)
            );
        }
        self.injected_in = Some(started.elapsed());
        self.freeze_count = Some(installed.freeze_count);
        self.steer(fields, Some(record))
    }

    /// Steers until stopped: every change is a compare-and-write of the three fields (nothing is
    /// written over a value the application set), with the exit program covering the agent's
    /// death before, during and after it. `record`: the hook's fork guard, kept in step.
    fn steer(&mut self, f: Fields, record: Option<Record>) -> Result<Finish> {
        let mut ours = f.now(&self.mem)?;
        let mut fz = Freezer::default();
        if let Some(r) = record {
            self.arm(&f, &[ours], record, &mut fz)?;
            anyhow::ensure!(
                self.custodian().run_atomic(r.activate_steps(std::process::id(), f.original, ours))?,
                "the hook's record changed before neurogc could mark it"
            );
        }
        self.emit(Event::Ready {
            original: f.original,
            injected_in: self.injected_in,
            freeze_count: self.freeze_count,
        });
        let mut halted = false;
        let mut armed_at = Instant::now();
        loop {
            // The undo's queue program must match the queue as it is: re-read it now and then.
            if fz.undo.is_some() && armed_at.elapsed() > REARM {
                self.arm(&f, &[ours], record, &mut fz)?;
                armed_at = Instant::now();
            }
            let want = match (self.next_command(), record) {
                (None, _) => continue,
                (Some(Command::Freeze { collect, reset, objects }), Some(r))
                    if !halted && fz.undo.is_none() && !fz.spent =>
                {
                    self.freeze(&f, ours, r, &mut fz, [collect, reset], objects)?;
                    continue;
                }
                (Some(Command::Unfreeze { collect }), Some(r)) => {
                    if collect {
                        self.undo_with_collection(&f, ours, record, &mut fz)?;
                    }
                    if let Some(undo) = fz.undo.take() {
                        let t = Instant::now();
                        let (queued, ran) = self.unfreeze(&undo, r)?;
                        fz.spent = true;
                        if !queued {
                            fz.undo = Some(undo); // still owed: at the stop, or by the custodian
                        }
                        self.arm(&f, &[ours], record, &mut fz)?;
                        self.emit(Event::Freeze {
                            outcome: if ran { "unfrozen" } else { "unfreeze-pending" },
                            count: ran.then_some(0),
                            latency: t.elapsed(),
                            detail: undo_detail(queued, ran, collect),
                        });
                    }
                    continue;
                }
                (Some(Command::Freeze { .. } | Command::Unfreeze { .. }), _) => continue,
                (Some(Command::Apply(_)), _) if halted => continue,
                (Some(Command::Apply(want)), _) => want,
                (Some(Command::Stop), _) => {
                    self.custodian().run([f.restore_steps(&[ours]), release(record)].concat())?;
                    let mut finish = f.outcome(f.now(&self.mem)?, &[ours]);
                    if let (Some(undo), Some(r)) = (fz.undo.take(), record) {
                        let (queued, ran) = self.unfreeze(&undo, r)?;
                        finish.restored &= ran;
                        finish.detail = format!("{}; {}", finish.detail, undo_detail(queued, ran, false));
                        if !queued {
                            // Leave it to the custodian's exit program, exactly as if killed.
                            drop(self.custodian.take());
                            return Ok(finish);
                        }
                    }
                    self.custodian().on_exit(Vec::new())?;
                    return Ok(finish);
                }
            };
            let t = Instant::now();
            // Covered for the agent's death before and after the write; a fork in between finds
            // both values in the guard's record.
            self.arm(&f, &[ours, want], record, &mut fz)?;
            if let Some(r) = &record {
                self.custodian().run(r.values_steps(ours, want))?;
            }
            if self.custodian().run_atomic(f.set_steps(ours, want))? {
                ours = want;
                let now = f.now(&self.mem)?;
                self.emit(Event::Applied { requested: want, now, latency: t.elapsed() });
            } else {
                halted = true;
                self.emit(Event::AppChanged { now: f.now(&self.mem)? });
            }
            if let Some(r) = &record {
                self.custodian().run(r.values_steps(ours, ours))?;
            }
            self.arm(&f, &[ours], record, &mut fz)?;
        }
    }

    /// Sets the exit program: the thresholds in `values` back, the guard released, and the
    /// freeze undone if neurogc owes that (queued on the queue as last seen idle).
    fn arm(
        &mut self,
        f: &Fields,
        values: &[[i64; 3]],
        record: Option<Record>,
        fz: &mut Freezer,
    ) -> Result<()> {
        let steps = [f.restore_steps(values), release(record)].concat();
        if let Some(undo) = &fz.undo
            && let Some(layout) = PendingLayout::for_interpreter(&self.plan.interpreter)
            && let Ok(queue) = inject::read_queue(&self.plan, &self.mem, layout)?
        {
            fz.queue = undo.enqueue_steps(&self.plan, &queue)?;
        }
        let queue = if fz.undo.is_some() { fz.queue.clone() } else { Vec::new() };
        self.custodian().on_exit_then_queue(steps, queue)
    }

    /// The next command, waiting at most [`POLL`]; a dropped handle means stop.
    fn next_command(&self) -> Option<Command> {
        match self.commands.recv_timeout(POLL) {
            Ok(cmd) => Some(cmd),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(Command::Stop),
        }
    }
}

fn release(record: Option<Record>) -> Vec<Step> {
    record.as_ref().map(Record::release_steps).unwrap_or_default()
}

/// Whether `pid` is a running neurogc-agent (the owner of an "active" guard record).
fn is_agent(pid: i32) -> bool {
    process::exists(pid)
        && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "neurogc-agent")
}
