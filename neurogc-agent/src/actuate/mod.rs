//! Changing the target's GC thresholds, and putting the originals back.
//!
//! - `hook` (default): inject python-hook/neurogc_hook.py (PEP 768 on 3.14+, a pending call on
//!   3.8–3.13); it applies `gc.set_threshold` and restores the originals itself when the agent's
//!   socket closes, however the agent ended.
//! - `memory`: write the threshold fields directly after the GC state layout was validated, for
//!   targets where injection is disabled; restored by the agent when it exits (not after SIGKILL).
pub mod channel;
mod pending_call;
mod remote_exec;

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use self::channel::{Hook, Listener};
use crate::{
    memory::write_bytes,
    target::{AttachPlan, layout::GcState},
};

const HOOK_SOURCE: &str = include_str!("../../../python-hook/neurogc_hook.py");

/// How long the hook may take to reach a safe point and connect.
const HOOK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ActuatorKind {
    /// Inject python-hook (restores the originals itself if the agent dies)
    Hook,
    /// Write the threshold fields in memory (no injection; restored only on a clean exit)
    Memory,
}

pub struct Applied {
    pub new: [i64; 3],
    pub freeze_count: Option<i64>,
}

pub enum Actuator {
    Hook { hook: Box<Hook>, _listener: Listener, injected_in: Duration },
    Memory { pid: i32, state: GcState, original: [i64; 3] },
}

impl Actuator {
    pub fn connect(plan: &AttachPlan, kind: ActuatorKind, state: Option<GcState>) -> Result<Actuator> {
        match kind {
            ActuatorKind::Hook => {
                let started = Instant::now();
                let listener = Listener::bind(plan.pid)?;
                let stub = listener.write_script(HOOK_SOURCE)?;
                if plan.interpreter.version.minor >= 14 {
                    remote_exec::inject(plan, &listener.paths.stub_in_target)?;
                } else {
                    pending_call::inject(plan, &stub)?;
                }
                let hook = listener.accept(HOOK_TIMEOUT)?;
                Ok(Actuator::Hook {
                    hook: Box::new(hook),
                    _listener: listener,
                    injected_in: started.elapsed(),
                })
            }
            ActuatorKind::Memory => {
                let state = state.context(
                    "--actuator memory needs the GC state, and its layout could not be validated in this process",
                )?;
                let now = state.read_settings(plan.pid)?;
                Ok(Actuator::Memory { pid: plan.pid, state, original: now.thresholds.map(i64::from) })
            }
        }
    }

    /// `gc.get_freeze_count()` when the hook said it.
    pub fn freeze_count(&self) -> Option<i64> {
        match self {
            Actuator::Hook { hook, .. } => Some(hook.hello.freeze_count),
            Actuator::Memory { .. } => None,
        }
    }

    pub fn original(&self) -> [i64; 3] {
        match self {
            Actuator::Hook { hook, .. } => hook.hello.original,
            Actuator::Memory { original, .. } => *original,
        }
    }

    /// Injection to connected hook, for the benchmark and the log.
    pub fn injected_in(&self) -> Option<Duration> {
        match self {
            Actuator::Hook { injected_in, .. } => Some(*injected_in),
            Actuator::Memory { .. } => None,
        }
    }

    pub fn apply(&mut self, thresholds: [i64; 3]) -> Result<Applied> {
        match self {
            Actuator::Hook { hook, .. } => {
                let ack = hook.set(thresholds)?;
                Ok(Applied { new: ack.new.unwrap_or(thresholds), freeze_count: ack.freeze_count })
            }
            Actuator::Memory { pid, state, .. } => {
                for (g, t) in thresholds.iter().enumerate() {
                    let value = i32::try_from(*t).context("threshold out of range")?;
                    write_bytes(*pid, state.threshold_address(g), &value.to_le_bytes())?;
                }
                let new = state.read_settings(*pid)?.thresholds.map(i64::from);
                Ok(Applied { new, freeze_count: None })
            }
        }
    }

    /// Puts the thresholds the target had before the agent came back.
    pub fn restore(&mut self) -> Result<()> {
        match self {
            Actuator::Hook { hook, .. } => hook.restore().map(|_| ()),
            Actuator::Memory { .. } => {
                let original = self.original();
                self.apply(original).map(|_| ())
            }
        }
    }
}
