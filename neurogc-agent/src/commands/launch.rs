//! Launch mode (`neurogc-agent -- python3 app.py`): start the command under ptrace and hold it
//! at the point where its interpreter is mapped but no Python code has run, so the probes see
//! the very first collection. The agent detaches as soon as the probes are armed.
use std::{ffi::OsString, os::fd::AsFd, os::unix::process::CommandExt, process::Command};

use anyhow::{Context, Result};
use nix::{
    sys::{
        ptrace::{self, Options},
        signal::Signal,
        wait::{WaitStatus, waitpid},
    },
    unistd::Pid,
};

use crate::{error::bail_user, interp};

/// A launched command, stopped under ptrace with its interpreter mapped.
pub struct Launched {
    pub pid: i32,
}

fn interpreter_mapped(pid: i32) -> bool {
    // Cheap test first (the maps), the ELF parse only once a candidate is there.
    let mapped = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    mapped.contains("libpython3") && matches!(interp::find_interpreter(pid), Ok(Some(_)))
}

enum Exe {
    /// The executable itself is the interpreter (static build).
    Interpreter,
    /// It links a libpython that the dynamic loader has yet to map.
    LinksLibpython,
    /// Something else (a shell wrapper, pyenv's shim): wait for its next exec.
    Other,
}

fn classify_exe(pid: i32) -> Exe {
    let Ok(elf) = interp::elf::Elf::open(format!("/proc/{pid}/exe").as_ref()) else { return Exe::Other };
    if elf.symbol_address("_PyRuntime").is_some() && interp::find_interpreter(pid).is_ok_and(|f| f.is_some())
    {
        Exe::Interpreter
    } else if elf.needed().iter().any(|n| n.starts_with("libpython3")) {
        Exe::LinksLibpython
    } else {
        Exe::Other
    }
}

/// `json_stdout`: the agent's standard output carries its JSON stream, so the command's own
/// output goes to standard error instead (whole, and never splitting one of the agent's lines).
pub fn spawn(command: &[OsString], json_stdout: bool) -> Result<Launched> {
    let program = &command[0];
    let mut cmd = Command::new(program);
    cmd.args(&command[1..]);
    crate::own_env::for_child(&mut cmd);
    if json_stdout {
        cmd.stdout(std::io::stderr().as_fd().try_clone_to_owned()?);
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // The agent holds its stop signals until its loop runs; the command must not inherit that.
            let all = nix::sys::signal::SigSet::all();
            nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_UNBLOCK, Some(&all), None)
                .map_err(std::io::Error::from)?;
            ptrace::traceme().map_err(std::io::Error::from)
        });
    }
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => bail_user!("cannot run {}: {err}", program.to_string_lossy()),
    };
    let pid = Pid::from_raw(child.id() as i32);
    // The agent reaps the child itself (waitpid), so std's handle is not needed.
    drop(child);
    let result = hold_at_interpreter(pid, &program.to_string_lossy());
    if result.is_err() {
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
    }
    result.map(|()| Launched { pid: pid.as_raw() })
}

fn hold_at_interpreter(pid: Pid, program: &str) -> Result<()> {
    let mut stepping = false;
    let mut pending_signal = None;
    let mut first = true;
    loop {
        match waitpid(pid, None).context("waiting for the launched command")? {
            WaitStatus::Stopped(_, Signal::SIGTRAP) if first => {
                first = false;
                ptrace::setoptions(
                    pid,
                    Options::PTRACE_O_TRACEEXEC | Options::PTRACE_O_EXITKILL | Options::PTRACE_O_TRACESYSGOOD,
                )?;
                stepping = match classify_exe(pid.as_raw()) {
                    Exe::Interpreter => return Ok(()),
                    Exe::LinksLibpython => true,
                    Exe::Other => false,
                };
            }
            WaitStatus::PtraceEvent(_, _, event) if event == libc::PTRACE_EVENT_EXEC => {
                stepping = match classify_exe(pid.as_raw()) {
                    Exe::Interpreter => return Ok(()),
                    Exe::LinksLibpython => true,
                    Exe::Other => false,
                };
            }
            WaitStatus::PtraceSyscall(_) if interpreter_mapped(pid.as_raw()) => return Ok(()),
            WaitStatus::Stopped(_, sig) => pending_signal = Some(sig),
            WaitStatus::Exited(_, code) => {
                bail_user!("{program} exited (status {code}) before a CPython interpreter started in it")
            }
            WaitStatus::Signaled(_, sig, _) => {
                bail_user!("{program} was killed by {sig} before a CPython interpreter started in it")
            }
            _ => {}
        }
        let sig = pending_signal.take();
        if stepping { ptrace::syscall(pid, sig)? } else { ptrace::cont(pid, sig)? }
    }
}

impl Launched {
    /// Let the command run on, untraced.
    pub fn release(&self) -> Result<()> {
        ptrace::detach(Pid::from_raw(self.pid), None).context("detaching from the launched command")
    }
}

/// How the launched command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Killed(Signal),
}

impl Ended {
    /// The status a shell reports for it (128 + the signal when killed): the agent exits with
    /// it, as `time` and `strace` do.
    pub fn status(self) -> i32 {
        match self {
            Ended::Exited(code) => code,
            Ended::Killed(sig) => 128 + sig as i32,
        }
    }

    /// In words, for the summary.
    pub fn describe(self) -> String {
        match self {
            Ended::Exited(code) => format!("the command exited with status {code}"),
            Ended::Killed(sig) => format!("the command was killed by {sig} (status {})", self.status()),
        }
    }
}

impl Launched {
    /// How the command ended, once it has (the agent is its parent and must reap it).
    pub fn reap(&self) -> Option<Ended> {
        match waitpid(Pid::from_raw(self.pid), None) {
            Ok(WaitStatus::Exited(_, code)) => Some(Ended::Exited(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => Some(Ended::Killed(sig)),
            _ => None,
        }
    }
}
