//! The agent's end of the hook's channel: an abstract Unix socket with a random 128-bit name,
//! bound inside the target's network namespace (a thread of the agent enters it for the bind).
//! No file is created anywhere, nothing can be planted in advance under a name nobody knows, and
//! the kernel removes the name when the agent's descriptor closes, however the agent ends.
//! Only the target's PID may connect (SO_PEERCRED); the boot code only talks to the agent's uid.
//! The connection lives for one exchange: the hook's source one way, one line back.
use std::{
    io::{BufRead, BufReader, Read, Write},
    os::{
        linux::net::SocketAddrExt,
        unix::net::{SocketAddr, UnixListener, UnixStream},
    },
    time::Duration,
};

use anyhow::{Context, Result};

const HOOK_SOURCE: &str = include_str!("../../../../python-hook/neurogc_hook.py");
/// The hook's `PROTOCOL`, as its answer says it: a hook of another protocol is not this agent's
/// (`the_actions_call_the_guard_of_the_hooks_own_protocol` holds every copy of it together).
pub(super) const PROTOCOL: &str = "11";
/// What the hook answers per line at most: anything longer is not the hook talking.
const MAX_LINE: u64 = 4096;

fn random_hex() -> Result<String> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: writes at most the remaining length into our buffer.
        let n = unsafe { libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0) };
        anyhow::ensure!(n > 0, "getrandom: {}", std::io::Error::last_os_error());
        filled += n as usize;
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn same_netns(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ns = |p: String| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    ns("/proc/self/ns/net".into()) == ns(format!("/proc/{pid}/ns/net"))
}

pub struct Listener {
    listener: UnixListener,
    pid: i32,
    /// The abstract name, without its leading NUL.
    pub name: String,
}

impl Listener {
    pub fn bind(pid: i32) -> Result<Listener> {
        let name = format!("neurogc-{}", random_hex()?);
        let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
        let listener = if same_netns(pid) {
            UnixListener::bind_addr(&addr)?
        } else {
            // setns changes only the calling thread: a short-lived one does the bind.
            let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))
                .with_context(|| format!("opening the network namespace of process {pid}"))?;
            std::thread::spawn(move || -> Result<UnixListener> {
                nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                    .context("entering the target's network namespace")?;
                Ok(UnixListener::bind_addr(&addr)?)
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the namespace thread panicked"))??
        };
        listener.set_nonblocking(true)?;
        Ok(Listener { listener, pid, name })
    }

    /// A connection from the target within `wait`; connections from any other process are
    /// refused and logged. The boot code waits on the target's main thread for this accept, so
    /// it happens as soon as the connection arrives.
    pub fn accept_within(&self, wait: Duration) -> Result<Option<UnixStream>> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(e).context("waiting for the hook's connection"),
        }
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let cred =
                        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)?;
                    if cred.pid() != self.pid {
                        tracing::warn!(
                            "refused a connection to the hook socket from {} (uid {})",
                            crate::interp::process::describe(cred.pid()),
                            cred.uid()
                        );
                        continue;
                    }
                    stream.set_nonblocking(false)?;
                    return Ok(Some(stream));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e).context("accepting the hook's connection"),
            }
        }
    }
}

/// What the hook answered once it installed (or found) the fork guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The target's pid in its own namespace.
    pub pid: i32,
    pub version: String,
    /// `gc.get_threshold()` when the hook ran.
    pub thresholds: [i64; 3],
    pub freeze_count: i64,
    /// `id()` of the guard's record: a bytearray object (see python-hook/neurogc_hook.py).
    pub record_id: u64,
    /// An agent marked itself as steering in the record (maybe one that died with its custodian).
    pub active: bool,
    /// That agent's host pid.
    pub agent: i32,
}

/// Sends the hook's source to the boot code and reads its one answer; the hook then closes the
/// connection and nothing of it runs until the target forks.
pub fn install(stream: UnixStream) -> Result<Installed> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut writer = stream.try_clone()?;
    writer.write_all(format!("{:08}", HOOK_SOURCE.len()).as_bytes())?;
    writer.write_all(HOOK_SOURCE.as_bytes()).context("sending the hook")?;
    let mut line = String::new();
    let n =
        BufReader::new(stream).take(MAX_LINE).read_line(&mut line).context("reading the hook's answer")?;
    anyhow::ensure!(n > 0 && line.ends_with('\n'), "the hook closed its connection without answering");
    let words: Vec<&str> = line.split_whitespace().collect();
    let bad = || anyhow::anyhow!("unexpected answer from the hook: {line:?}");
    let ["hello", PROTOCOL, pid, version, t0, t1, t2, freeze, record, active, agent] = words[..] else {
        return Err(bad());
    };
    let num = |w: &str| w.parse::<i64>().map_err(|_| bad());
    let installed = Installed {
        pid: num(pid)? as i32,
        version: version.to_owned(),
        thresholds: [num(t0)?, num(t1)?, num(t2)?],
        freeze_count: num(freeze)?,
        record_id: record.parse().map_err(|_| bad())?,
        active: num(active)? != 0,
        agent: num(agent)? as i32,
    };
    tracing::debug!(
        "hook installed in CPython {} (pid {} in its namespace)",
        installed.version,
        installed.pid
    );
    Ok(installed)
}
