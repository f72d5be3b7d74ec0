//! Changing the target's GC thresholds, and giving the application its own back.
//!
//! - `hook` (default): python-hook runs inside the target (queued as a pending call by memory
//!   writes, see `inject`) and applies `gc.set_threshold`; when the agent's socket closes,
//!   however the agent ended, it puts back every field that still holds neurogc's value.
//! - `memory`: writes the threshold fields directly, for targets where injection is refused; the
//!   custodian puts them back if the agent dies.
//!
//! Everything here runs on a thread of its own: injection can wait minutes for a blocked main
//! thread, and the hook answers at the GIL's pace, while the loop that drains the ring buffer
//! must never wait. The loop sends [`Command`]s and receives [`Event`]s.
pub mod channel;
pub mod custodian;
mod inject;

use std::{
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use self::{
    channel::{Answer, Hook, Listener, Start},
    custodian::{Custodian, Step},
    inject::{Deferred, Injection},
};
use crate::{
    bail_user,
    memory::{ProcMem, read_bytes, read_u64},
    target::{AttachPlan, cpython::GcStateLocation, layout::GcState, pending::PendingLayout, process},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActuatorKind {
    /// Inject python-hook (restores the application's settings itself if the agent dies)
    Hook,
    /// Write the threshold fields in memory (no injection; the custodian restores them)
    Memory,
}

pub enum Command {
    Apply([i64; 3]),
    /// Give the application its settings back and end.
    Stop,
}

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
    let worker = Worker { plan, mem, custodian: Some(custodian), events: tx, commands: rx };
    let body = match kind {
        ActuatorKind::Hook => Worker::hook as fn(&mut Worker) -> Result<Finish>,
        ActuatorKind::Memory => {
            let state = state.context(
                "--actuator memory needs the GC state, and its layout could not be validated in this process",
            )?;
            worker.memory_check(&state)?;
            return Ok(spawn(worker, move |w| w.memory(state), commands, events));
        }
    };
    Ok(spawn(worker, body, commands, events))
}

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
    events: UnboundedSender<Event>,
    commands: mpsc::Receiver<Command>,
}

/// How often the hook thread looks for a connection, a stop, or a dead target.
const POLL: Duration = Duration::from_millis(10);
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
                Ok(Command::Apply(_)) => continue, // nothing to apply to yet
                Err(mpsc::TryRecvError::Empty) => return false,
            }
        }
    }

    fn target_gone(&self) -> Option<Result<Finish>> {
        (!process::exists(self.plan.pid)).then(|| anyhow::bail!("the target exited"))
    }

    fn hook(&mut self) -> Result<Finish> {
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
            match Injection::try_queue(plan, mem, custodian, layout, &code)? {
                Ok(injection) => break injection,
                Err(Deferred::Queue(not_idle)) => {
                    say(self, format!("the target's pending-call queue is not idle ({not_idle:?})"))
                }
                Err(Deferred::MainThreadIdle(why)) => say(self, format!("waiting to queue the hook: {why}")),
            }
            std::thread::sleep(RETRY);
        };
        tracing::debug!("hook queued at {:#x} after {:?}", injection.region, started.elapsed());
        let mut last_note = Instant::now();
        let stream = loop {
            if let Some(stream) = listener.poll()? {
                break stream;
            }
            if self.stop_requested() {
                let steps = injection.disarm_steps();
                self.custodian().run(steps, false)?;
                return Ok(Finish {
                    restored: true,
                    detail: "the hook never ran; its queued call was disarmed".into(),
                });
            }
            if let Some(gone) = self.target_gone() {
                return gone;
            }
            if last_note.elapsed() > Duration::from_secs(5) {
                last_note = Instant::now();
                say(
                    self,
                    format!(
                        "the hook is queued and runs when the target next executes Python: {}",
                        inject::main_thread_state(pid)
                    ),
                );
            }
            std::thread::sleep(POLL);
        };
        let mut hook = match Hook::start(stream) {
            Ok(Start::Up(hook)) => hook,
            Ok(Start::Busy(other)) => {
                let steps = injection.retire_steps();
                self.custodian().run(steps, false)?;
                let who = if other > 0 {
                    format!(" (pid {other} in the target's namespace)")
                } else {
                    String::new()
                };
                bail_user!(
                    "another neurogc agent{who} is already steering process {pid}: one agent per process"
                );
            }
            Err(err) => {
                let steps = injection.disarm_steps();
                let _ = self.custodian().run(steps, false);
                return Err(err.context("the hook did not start"));
            }
        };
        let steps = injection.retire_steps();
        self.custodian().run(steps, false)?;
        self.custodian().on_exit(Vec::new())?;
        let original = hook.hello.original;
        self.emit(Event::Ready {
            original,
            injected_in: Some(started.elapsed()),
            freeze_count: Some(hook.hello.freeze_count),
        });
        let mut halted = false;
        loop {
            let cmd = match self.commands.recv_timeout(Duration::from_millis(500)) {
                Ok(cmd) => cmd,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => Command::Stop,
            };
            match cmd {
                Command::Apply(_) if halted => {}
                Command::Apply(want) => {
                    let t = Instant::now();
                    match hook.set(want)? {
                        Answer::Ok(now) => {
                            self.emit(Event::Applied { requested: want, now, latency: t.elapsed() })
                        }
                        Answer::Changed(now) => {
                            halted = true;
                            self.emit(Event::AppChanged { now });
                        }
                        other => anyhow::bail!("unexpected answer from the hook: {other:?}"),
                    }
                }
                Command::Stop => {
                    return Ok(match hook.restore()? {
                        Answer::Restored(now) => Finish {
                            restored: true,
                            detail: format!("original thresholds {} back", fmt(now)),
                        },
                        Answer::Kept(now) => Finish {
                            restored: true,
                            detail: format!(
                                "the application's own values kept where it changed them; now {}",
                                fmt(now)
                            ),
                        },
                        other => anyhow::bail!("unexpected answer from the hook: {other:?}"),
                    });
                }
            }
        }
    }

    /// Before the memory actuator takes a GC state found by `process_vm_readv`, it reads it
    /// again through its own descriptor (the image it will write).
    fn memory_check(&self, state: &GcState) -> Result<()> {
        let now = state.read_settings_in(&self.mem)?;
        anyhow::ensure!(
            now.thresholds.iter().all(|&t| t >= 0),
            "implausible thresholds {:?}",
            now.thresholds
        );
        Ok(())
    }

    fn memory(&mut self, state: GcState) -> Result<Finish> {
        let read = |w: &Worker| -> Result<[i64; 3]> {
            Ok(state.read_settings_in(&w.mem)?.thresholds.map(i64::from))
        };
        let original = read(self)?;
        let field = |g: usize| state.threshold_address(g);
        // Put back each field that still holds one of `values` (never one the application changed).
        let restore_steps = |values: &[[i64; 3]]| -> Vec<Step> {
            let mut steps = Vec::new();
            for v in values {
                for g in 0..3 {
                    if v[g] != original[g] {
                        steps.push(Step::replace(
                            field(g),
                            &(v[g] as i32).to_le_bytes(),
                            &(original[g] as i32).to_le_bytes(),
                        ));
                    }
                }
            }
            steps
        };
        let mut ours = original;
        self.emit(Event::Ready { original, injected_in: None, freeze_count: None });
        let mut halted = false;
        loop {
            let cmd = match self.commands.recv_timeout(Duration::from_millis(500)) {
                Ok(cmd) => cmd,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => Command::Stop,
            };
            match cmd {
                Command::Apply(_) if halted => {}
                Command::Apply(want) => {
                    let t = Instant::now();
                    let want32 = want.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
                    // Covered for the agent's death before and after the write.
                    self.custodian().on_exit(restore_steps(&[ours, want]))?;
                    let mut steps = Vec::new();
                    for g in 0..3 {
                        steps.push(Step::replace(
                            field(g),
                            &(ours[g] as i32).to_le_bytes(),
                            &want32[g].to_le_bytes(),
                        ));
                    }
                    match self.custodian().run(steps, true) {
                        Ok(_) => {
                            ours = want;
                            self.custodian().on_exit(restore_steps(&[ours]))?;
                            let now = read(self)?;
                            self.emit(Event::Applied { requested: want, now, latency: t.elapsed() });
                        }
                        Err(err) if format!("{err:#}").contains("changed under us") => {
                            halted = true;
                            self.custodian().on_exit(restore_steps(&[ours]))?;
                            self.emit(Event::AppChanged { now: read(self)? });
                        }
                        Err(err) => return Err(err),
                    }
                }
                Command::Stop => {
                    self.custodian().run(restore_steps(&[ours]), false)?;
                    self.custodian().on_exit(Vec::new())?;
                    let now = read(self)?;
                    let kept = (0..3).any(|g| now[g] != original[g]);
                    let ours_left = (0..3).any(|g| now[g] == ours[g] && ours[g] != original[g]);
                    return Ok(Finish {
                        restored: !ours_left,
                        detail: if kept {
                            format!(
                                "the application's own values kept where it changed them; now {}",
                                fmt(now)
                            )
                        } else {
                            format!("original thresholds {} back", fmt(now))
                        },
                    });
                }
            }
        }
    }
}

fn fmt(t: [i64; 3]) -> String {
    format!("{}/{}/{}", t[0], t[1], t[2])
}
