//! Injection for CPython 3.14+: PEP 768, what `sys.remote_exec(pid, path)` does, done from Rust
//! (the host may have no matching Python): write the script path and the pending flag into the
//! main thread's state and set its eval-breaker bit; the interpreter runs the file at its next
//! safe point, on the main thread. No ptrace stop at all, only memory writes.
use anyhow::{Context, Result, bail};

use crate::{
    bail_user,
    memory::{read_bytes, read_u64, write_bytes},
    target::{AttachPlan, cpython::GcStateLocation},
};

/// `_PY_EVAL_PLEASE_STOP_BIT` of Include/internal/pycore_ceval.h.
const EVAL_PLEASE_STOP_BIT: u64 = 1 << 5;

pub fn inject(plan: &AttachPlan, script_path_in_target: &str) -> Result<()> {
    let pid = plan.pid;
    let offsets = plan.interpreter.remote_debug.context("this build has no PEP 768 remote-debug offsets")?;
    let Some(GcStateLocation::MainInterpreter { main_ptr, .. }) = plan.gc.map(|g| g.location) else {
        bail!("main interpreter of process {pid} not located");
    };
    let interp = read_u64(pid, main_ptr)?;
    anyhow::ensure!(interp != 0, "process {pid} has no interpreter yet");
    let enabled = read_bytes(pid, interp + offsets.remote_debugging_enabled, 4)?;
    if i32::from_le_bytes(enabled.try_into().unwrap()) != 1 {
        bail_user!(
            "process {pid} has remote debugging disabled (PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug \
             or a --without-remote-debug build): the hook cannot be injected; --actuator memory writes the \
             thresholds directly instead"
        );
    }
    let tstate = read_u64(pid, interp + offsets.threads_main)?;
    anyhow::ensure!(tstate != 0, "process {pid} has no main thread state");
    let support = tstate + offsets.remote_debugger_support;
    let mut path = script_path_in_target.as_bytes().to_vec();
    path.push(0);
    anyhow::ensure!(path.len() as u64 <= offsets.script_path_size, "script path too long for PEP 768");
    write_bytes(pid, support + offsets.script_path, &path).context("writing the script path")?;
    write_bytes(pid, support + offsets.pending_call, &1i32.to_le_bytes())?;
    let breaker = tstate + offsets.eval_breaker;
    let value = read_u64(pid, breaker)?;
    write_bytes(pid, breaker, &(value | EVAL_PLEASE_STOP_BIT).to_le_bytes())?;
    Ok(())
}
