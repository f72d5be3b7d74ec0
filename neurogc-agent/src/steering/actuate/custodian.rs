//! The custodian: the one process that writes into the target, and the one that cleans up after
//! the agent when the agent can no longer do it.
//!
//! Some changes take several writes (queueing a pending call on 3.13+ updates a slot, a count
//! and an index). A SIGKILL of the agent between two of them would leave the target's queue
//! corrupt. So the agent never writes the target itself: it hands each sequence, whole, to this
//! small process, which ignores every signal it can, sits in a session of its own (a Ctrl-C or a
//! process-group kill of the agent does not reach it) and runs a sequence to its end once it has
//! read it. The agent also leaves it an exit program (undo a pending injection, put back the
//! thresholds the memory actuator set): if the agent's end of the socket closes without a "bye",
//! the custodian runs it and exits.
//!
//! It is the agent's own executable, started as `neurogc-agent __custodian PID` with the target's
//! memory descriptor on fd 3 (bound to the address space the agent validated) and its socket on
//! fd 0. It writes nothing else, anywhere.
use std::{
    fs::File,
    io::{BufRead, BufReader, Write},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::{net::UnixStream, process::CommandExt},
    },
    process::{Child, Command, Stdio},
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::memory::ProcMem;

/// The hidden first argument that makes `neurogc-agent` a custodian.
pub const ARG: &str = "__custodian";

/// One write into the target, optionally conditional on what is there now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Step {
    pub addr: u64,
    /// The bytes that must be at `addr` for the step to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Vec<u8>>,
    pub write: Vec<u8>,
    /// OR `write` into the bytes there (read, or, write back) instead of replacing them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub or: bool,
}

impl Step {
    pub fn write(addr: u64, bytes: &[u8]) -> Step {
        Step { addr, expect: None, write: bytes.to_vec(), or: false }
    }

    pub fn expect(addr: u64, bytes: &[u8]) -> Step {
        Step { addr, expect: Some(bytes.to_vec()), write: Vec::new(), or: false }
    }

    pub fn replace(addr: u64, expect: &[u8], write: &[u8]) -> Step {
        Step { addr, expect: Some(expect.to_vec()), write: write.to_vec(), or: false }
    }

    pub fn or(addr: u64, bits: &[u8]) -> Step {
        Step { addr, expect: None, write: bits.to_vec(), or: true }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    /// `atomic`: every expectation is checked before the first write, and any mismatch runs
    /// nothing. Otherwise each step runs only if its own expectation holds.
    Run {
        steps: Vec<Step>,
        atomic: bool,
    },
    /// What to run if the agent goes away without a "bye": `steps` independently, then `queue`
    /// all or nothing (a pending call to queue: its expectations prove the queue is as the agent
    /// last saw it idle, so a queue that moved is left alone).
    OnExit {
        steps: Vec<Step>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        queue: Vec<Step>,
    },
    Bye,
}

#[derive(Debug, Serialize, Deserialize)]
struct Reply {
    ok: bool,
    /// Steps whose writes were made.
    #[serde(default)]
    written: usize,
    /// An atomic program found the target changed since the agent read it: nothing written.
    #[serde(default)]
    moved: bool,
    #[serde(default)]
    error: Option<String>,
}

/// Why an atomic program wrote nothing, as opposed to failing: the bytes at this address moved.
#[derive(Debug)]
struct Moved(u64);

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the target changed at {:#x} since it was read: nothing written", self.0)
    }
}

impl std::error::Error for Moved {}

/// Runs `steps` against `mem`; returns how many wrote.
fn run(mem: &ProcMem, steps: &[Step], atomic: bool) -> Result<usize> {
    let holds = |s: &Step| -> Result<bool> {
        Ok(match &s.expect {
            Some(want) => mem.read(s.addr, want.len())? == *want,
            None => true,
        })
    };
    if atomic {
        for s in steps {
            if !holds(s)? {
                return Err(anyhow::Error::new(Moved(s.addr)));
            }
        }
    }
    let mut written = 0;
    for s in steps {
        if s.write.is_empty() || (!atomic && !holds(s)?) {
            continue;
        }
        let bytes = if s.or {
            let now = mem.read(s.addr, s.write.len())?;
            now.iter().zip(&s.write).map(|(a, b)| a | b).collect()
        } else {
            s.write.clone()
        };
        mem.write(s.addr, &bytes)?;
        written += 1;
    }
    Ok(written)
}

/// The custodian's main: never returns.
pub fn serve(pid: &str) -> ! {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
    ] {
        // SAFETY: SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let Ok(pid) = pid.parse::<i32>() else { std::process::exit(2) };
    // SAFETY: the agent starts us with the target's memory on fd 3 and our socket on fd 0.
    let mem = ProcMem::from_file(unsafe { File::from_raw_fd(3) }, pid);
    let socket = unsafe { UnixStream::from_raw_fd(0) };
    let mut out = match socket.try_clone() {
        Ok(s) => s,
        Err(_) => std::process::exit(1),
    };
    let (mut on_exit, mut then_queue): (Vec<Step>, Vec<Step>) = Default::default();
    for line in BufReader::new(socket).lines() {
        let Ok(line) = line else { break };
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Run { steps, atomic }) => match run(&mem, &steps, atomic) {
                Ok(written) => Reply { ok: true, written, moved: false, error: None },
                Err(err) if err.is::<Moved>() => Reply { ok: false, written: 0, moved: true, error: None },
                Err(err) => Reply { ok: false, written: 0, moved: false, error: Some(format!("{err:#}")) },
            },
            Ok(Request::OnExit { steps, queue }) => {
                (on_exit, then_queue) = (steps, queue);
                Reply { ok: true, written: 0, moved: false, error: None }
            }
            Ok(Request::Bye) => std::process::exit(0),
            Err(err) => {
                Reply { ok: false, written: 0, moved: false, error: Some(format!("bad request: {err}")) }
            }
        };
        let mut text = serde_json::to_string(&reply).unwrap_or_default();
        text.push('\n');
        if out.write_all(text.as_bytes()).is_err() {
            break;
        }
    }
    // The agent is gone without saying goodbye: undo what it left armed.
    let _ = run(&mem, &on_exit, false);
    if !then_queue.is_empty() {
        let _ = run(&mem, &then_queue, true);
    }
    std::process::exit(0)
}

/// The agent's handle on its custodian. Dropping it without [`Custodian::bye`] (an error path)
/// makes the custodian run the exit program, exactly as if the agent had been killed.
pub struct Custodian {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    child: Child,
}

impl Custodian {
    pub fn spawn(mem: &ProcMem) -> Result<Custodian> {
        let (ours, theirs) = UnixStream::pair()?;
        let mem_fd: OwnedFd = mem.fd().try_clone_to_owned()?;
        let raw = mem_fd.as_raw_fd();
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("neurogc-custodian")
            .arg(ARG)
            .arg(mem.pid.to_string())
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if libc::dup2(raw, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The signals the agent blocks until its loop runs: the custodian ignores them.
                let all = nix::sys::signal::SigSet::all();
                nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_UNBLOCK, Some(&all), None)
                    .map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let child = cmd.spawn().context("starting the custodian process")?;
        drop(mem_fd);
        tracing::debug!("custodian started (pid {})", child.id());
        let reader = BufReader::new(ours.try_clone()?);
        Ok(Custodian { writer: ours, reader, child })
    }

    fn request(&mut self, req: &Request) -> Result<Reply> {
        let mut text = serde_json::to_string(req)?;
        text.push('\n');
        self.writer.write_all(text.as_bytes()).context("the custodian process is gone")?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).context("waiting for the custodian")?;
        anyhow::ensure!(n > 0, "the custodian process is gone");
        Ok(serde_json::from_str(&line)?)
    }

    /// Runs each step whose own expectation holds; returns how many wrote.
    pub fn run(&mut self, steps: Vec<Step>) -> Result<usize> {
        let reply = self.request(&Request::Run { steps, atomic: false })?;
        match reply.error {
            Some(err) if !reply.ok => bail!("{err}"),
            _ => Ok(reply.written),
        }
    }

    /// Runs `steps` only if every expectation holds. Ok(false): the target changed since the
    /// agent read it, and nothing was written.
    pub fn run_atomic(&mut self, steps: Vec<Step>) -> Result<bool> {
        let reply = self.request(&Request::Run { steps, atomic: true })?;
        match reply.error {
            Some(err) if !reply.ok => bail!("{err}"),
            _ => Ok(!reply.moved),
        }
    }

    /// Replaces the program run if the agent disappears.
    pub fn on_exit(&mut self, steps: Vec<Step>) -> Result<()> {
        self.on_exit_then_queue(steps, Vec::new())
    }

    /// Replaces the program run if the agent disappears: `steps`, then the atomic `queue`.
    pub fn on_exit_then_queue(&mut self, steps: Vec<Step>, queue: Vec<Step>) -> Result<()> {
        self.request(&Request::OnExit { steps, queue }).map(|_| ())
    }

    /// The agent cleaned up itself: the custodian exits without running its exit program.
    pub fn bye(mut self) {
        let mut text = serde_json::to_string(&Request::Bye).unwrap_or_default();
        text.push('\n');
        let _ = self.writer.write_all(text.as_bytes());
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The programs run against this test's own memory, through /proc/self/mem.
    #[test]
    fn atomic_programs_write_all_or_nothing_and_guarded_steps_skip_alone() {
        let mem = ProcMem::open(std::process::id() as i32).unwrap();
        let buf = Box::new(std::cell::UnsafeCell::new([1u8, 2, 3, 4, 0, 0, 0, 0]));
        let at = buf.get() as u64;
        let read = |mem: &ProcMem| mem.read(at, 8).unwrap();
        // One expectation fails: nothing at all is written.
        let steps = vec![Step::replace(at, &[1], &[9]), Step::replace(at + 1, &[7], &[9])];
        assert!(run(&mem, &steps, true).is_err());
        assert_eq!(read(&mem), [1, 2, 3, 4, 0, 0, 0, 0]);
        // Independently, the step that holds runs and the other is skipped.
        assert_eq!(run(&mem, &steps, false).unwrap(), 1);
        assert_eq!(read(&mem), [9, 2, 3, 4, 0, 0, 0, 0]);
        // OR keeps the bits already there.
        assert_eq!(run(&mem, &[Step::or(at + 2, &[0x10, 0x01])], true).unwrap(), 1);
        assert_eq!(read(&mem), [9, 2, 0x13, 0x05, 0, 0, 0, 0]);
        // SAFETY: the custodian's writes are done; volatile: the compiler did not see them.
        let direct = unsafe { std::ptr::read_volatile(buf.get()) };
        assert_eq!(direct[2], 0x13, "the write reached the memory itself");
    }

    #[test]
    fn requests_round_trip_as_one_line() {
        let req = Request::Run {
            steps: vec![Step::replace(0x1000, &[1, 2], &[3, 4]), Step::or(0x2000, &[4, 0, 0, 0])],
            atomic: true,
        };
        let text = serde_json::to_string(&req).unwrap();
        assert!(!text.contains('\n'));
        match serde_json::from_str::<Request>(&text).unwrap() {
            Request::Run { steps, atomic } => {
                assert!(atomic);
                assert_eq!(steps[0], Step::replace(0x1000, &[1, 2], &[3, 4]));
                assert!(steps[1].or && steps[1].expect.is_none());
            }
            other => panic!("{other:?}"),
        }
    }
}
