//! What the agent's loops wait on: a process's exit (pidfd), a ring buffer's fd, stop signals.
use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
};

use anyhow::Result;
use tokio::io::{Interest, unix::AsyncFd};

/// Blocks SIGINT, SIGTERM and SIGHUP until the loop installs its handlers (`session::drive`
/// unblocks them): a signal that arrives while the agent prepares is acted on, in order, not
/// fatal. SIGUSR1 (advise mode's recommendation on demand) is held too: its default would kill
/// the agent. Only a single target's session handles and unblocks it; fleet mode leaves it
/// blocked.
pub fn hold_stop_signals() -> Result<()> {
    nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&held_signals()), None)?;
    Ok(())
}

/// Lets `signals` through again, once their handlers are in place.
pub fn unblock(signals: &nix::sys::signal::SigSet) -> Result<()> {
    nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_UNBLOCK, Some(signals), None)?;
    Ok(())
}

/// What [`hold_stop_signals`] holds: the stop signals and SIGUSR1.
fn held_signals() -> nix::sys::signal::SigSet {
    let mut held = stop_signals();
    held.add(nix::sys::signal::Signal::SIGUSR1);
    held
}

/// SIGUSR1 alone: a single target's session unblocks it once its handler is in place.
pub fn recommend_signal() -> nix::sys::signal::SigSet {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGUSR1);
    set
}

pub fn stop_signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(sig);
    }
    set
}

pub fn pidfd_open(pid: i32) -> Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned from here on.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    anyhow::ensure!(fd >= 0, "pidfd_open({pid}): {}", io::Error::last_os_error());
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Registers an fd we own for read readiness.
pub fn readable<T: AsRawFd>(inner: T) -> Result<AsyncFd<T>> {
    // SAFETY: both wrappers own their fd for as long as the AsyncFd lives and always return it.
    unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE) }.map_err(|e| anyhow::anyhow!("{e}"))
}

/// `ready` has something to read (its readiness cleared), or never without one: a source
/// the loop waits on only where it is (the census's ring).
pub async fn ready_or_never(ready: Option<&AsyncFd<OwnedFd>>) {
    match ready {
        Some(fd) => match fd.readable().await {
            Ok(mut ready) => ready.clear_ready(),
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
