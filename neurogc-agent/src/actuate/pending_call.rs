//! Injection for CPython 3.8–3.13: ptrace the main thread for a moment and make it call
//! `Py_AddPendingCall(PyRun_SimpleString, code)`. The interpreter then runs `code` on the main
//! thread at its next safe point — unlike calling into Python from an arbitrary stop, which can
//! deadlock on locks the stopped thread holds (malloc's, the GIL).
//!
//! The code string must outlive our stop, so it goes into a fresh anonymous page obtained with a
//! raw mmap syscall (executed on an existing `syscall` instruction of the target's own libc; no
//! code is ever written into the target). Registers are restored exactly, so an interrupted
//! system call restarts as if nothing happened. The page (4 KiB) is left to the target.
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::{
    sys::{
        ptrace,
        signal::Signal,
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};

use crate::{
    bail_user,
    memory::{read_bytes, write_bytes},
    target::AttachPlan,
};

/// Address of a `syscall` instruction (0f 05) in an executable mapping of the target.
fn find_syscall_instruction(pid: i32) -> Result<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    for line in maps.lines().filter(|l| l.contains(" r-xp ") && l.contains("libc")) {
        let range = line.split_whitespace().next().unwrap_or_default();
        let (start, end) = range.split_once('-').context("bad maps line")?;
        let (start, end) = (u64::from_str_radix(start, 16)?, u64::from_str_radix(end, 16)?);
        let len = (end - start).min(4 << 20) as usize;
        let code = read_bytes(pid, start, len)?;
        if let Some(i) = code.windows(2).position(|w| w == [0x0f, 0x05]) {
            return Ok(start + i as u64);
        }
    }
    bail!("no libc code mapped in process {pid} to borrow a syscall instruction from")
}

/// Waits for the next ptrace stop of `pid`, giving up after `timeout`.
fn wait_stop(pid: Pid, timeout: Duration) -> Result<WaitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL))? {
            WaitStatus::StillAlive => {
                if Instant::now() > deadline {
                    bail!("process {pid} did not stop within {timeout:?}");
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            status => return Ok(status),
        }
    }
}

struct Stopped {
    pid: Pid,
    saved: libc::user_regs_struct,
}

impl Stopped {
    fn seize(pid: i32) -> Result<Stopped> {
        let pid = Pid::from_raw(pid);
        if let Err(err) = ptrace::seize(pid, ptrace::Options::empty()) {
            bail_user!(
                "cannot ptrace process {pid} to inject the hook ({err}): check kernel.yama.ptrace_scope, \
                 seccomp or another tracer; --actuator memory writes thresholds without injection"
            );
        }
        ptrace::interrupt(pid)?;
        match wait_stop(pid, Duration::from_secs(2))? {
            WaitStatus::PtraceEvent(..) | WaitStatus::Stopped(..) => {}
            other => bail!("unexpected state of process {pid} after PTRACE_INTERRUPT: {other:?}"),
        }
        Ok(Stopped { pid, saved: ptrace::getregs(pid)? })
    }

    /// Runs one instruction at `rip` with `regs` and returns the registers after it.
    fn step_syscall(&self, mut regs: libc::user_regs_struct, rip: u64) -> Result<libc::user_regs_struct> {
        regs.rip = rip;
        regs.orig_rax = u64::MAX; // not inside a syscall: no restart logic on our registers
        ptrace::setregs(self.pid, regs)?;
        ptrace::step(self.pid, None)?;
        match wait_stop(self.pid, Duration::from_secs(2))? {
            WaitStatus::Stopped(_, Signal::SIGTRAP) => Ok(ptrace::getregs(self.pid)?),
            other => bail!("single-stepping the syscall: {other:?}"),
        }
    }

    /// Calls `func(a, b)` in the target; it returns to address 0, which faults and stops it.
    fn call(&self, func: u64, a: u64, b: u64) -> Result<u64> {
        let mut regs = self.saved;
        // Well below the red zone, 16-byte aligned before the pushed return address.
        let rsp = (self.saved.rsp - 1024) & !0xf;
        write_bytes(self.pid.as_raw(), rsp - 8, &0u64.to_le_bytes())?;
        regs.rsp = rsp - 8;
        regs.rip = func;
        regs.rdi = a;
        regs.rsi = b;
        regs.rax = 0;
        regs.orig_rax = u64::MAX;
        ptrace::setregs(self.pid, regs)?;
        ptrace::cont(self.pid, None)?;
        loop {
            match wait_stop(self.pid, Duration::from_secs(2))? {
                WaitStatus::Stopped(_, Signal::SIGSEGV) => {
                    let after = ptrace::getregs(self.pid)?;
                    anyhow::ensure!(after.rip == 0, "the injected call faulted at {:#x}", after.rip);
                    return Ok(after.rax);
                }
                // A signal for the target meanwhile: deliver it, its handler runs and returns.
                WaitStatus::Stopped(_, sig) => ptrace::cont(self.pid, Some(sig))?,
                WaitStatus::PtraceEvent(..) => ptrace::cont(self.pid, None)?,
                other => bail!("the injected call ended in {other:?}"),
            }
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // Back exactly where it was; from a stuck call, interrupt it first.
        if ptrace::setregs(self.pid, self.saved).is_err() {
            let _ = ptrace::interrupt(self.pid);
            let _ = wait_stop(self.pid, Duration::from_secs(1));
            let _ = ptrace::setregs(self.pid, self.saved);
        }
        let _ = ptrace::detach(self.pid, None);
    }
}

/// Queues `code` to run on the target's main thread at its next safe point.
pub fn inject(plan: &AttachPlan, code: &str) -> Result<()> {
    let elf = plan.reopen()?;
    let symbol = |name: &str| {
        elf.symbol_address(name)
            .map(|a| a + plan.bias)
            .with_context(|| format!("{} does not export {name}", plan.file.display()))
    };
    let add_pending_call = symbol("Py_AddPendingCall")?;
    let run_simple_string = symbol("PyRun_SimpleString")?;
    let syscall = find_syscall_instruction(plan.pid)?;
    let mut text = code.as_bytes().to_vec();
    text.push(0);
    anyhow::ensure!(text.len() <= 4096, "injected code too long");

    let stopped = Stopped::seize(plan.pid)?;
    let mut regs = stopped.saved;
    regs.rax = libc::SYS_mmap as u64;
    regs.rdi = 0;
    regs.rsi = 4096;
    regs.rdx = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    regs.r10 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    regs.r8 = u64::MAX;
    regs.r9 = 0;
    let page = stopped.step_syscall(regs, syscall)?.rax;
    if page > u64::MAX - 4096 {
        bail!("mmap in the target failed: errno {}", (page as i64).unsigned_abs());
    }
    write_bytes(plan.pid, page, &text)?;
    let ret = stopped.call(add_pending_call, run_simple_string, page)? as i32;
    drop(stopped);
    if ret != 0 {
        bail!("Py_AddPendingCall refused the call ({ret}): its queue is full, try again");
    }
    Ok(())
}
