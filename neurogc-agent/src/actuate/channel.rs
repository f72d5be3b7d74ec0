//! The agent's end of the hook's channel: an abstract Unix socket with a random 128-bit name,
//! bound inside the target's network namespace (a thread of the agent enters it for the bind).
//! No file is created anywhere, nothing can be planted in advance under a name nobody knows, and
//! the kernel removes the name when the agent's descriptor closes, however the agent ends.
//! Only the target's PID may connect (SO_PEERCRED); the boot code only talks to the agent's uid.
use std::{
    io::{BufRead, BufReader, Read, Write},
    os::{
        linux::net::SocketAddrExt,
        unix::net::{SocketAddr, UnixListener, UnixStream},
    },
    time::Duration,
};

use anyhow::{Context, Result, bail};

const HOOK_SOURCE: &str = include_str!("../../../python-hook/neurogc_hook.py");
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

    /// A connection from the target, if one is waiting; connections from any other process are
    /// refused and logged.
    pub fn poll(&self) -> Result<Option<UnixStream>> {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let cred =
                        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)?;
                    if cred.pid() != self.pid {
                        tracing::warn!(
                            "refused a connection to the hook socket from {} (uid {})",
                            crate::target::process::describe(cred.pid()),
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub pid: i32,
    pub version: String,
    pub original: [i64; 3],
    pub freeze_count: i64,
}

/// What the hook said to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The thresholds now in force.
    Ok([i64; 3]),
    /// The application changed its thresholds since neurogc's last set: nothing applied.
    Changed([i64; 3]),
    /// Every field neurogc set is back to the original.
    Restored([i64; 3]),
    /// Fields the application changed were kept: the thresholds now.
    Kept([i64; 3]),
}

pub enum Start {
    Up(Hook),
    /// Another agent's hook already runs in the target (its pid as the target sees it, 0 if hidden).
    Busy(i32),
}

/// A connected hook. Dropping it closes the socket: the hook then restores on its own.
pub struct Hook {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    pub hello: Hello,
}

fn triple(words: &[&str]) -> Option<[i64; 3]> {
    let v: Vec<i64> = words.iter().map(|w| w.parse().ok()).collect::<Option<_>>()?;
    v.try_into().ok()
}

fn read_line(reader: &mut BufReader<UnixStream>) -> Result<String> {
    let mut line = String::new();
    let n = reader.by_ref().take(MAX_LINE).read_line(&mut line).context("reading from the hook")?;
    anyhow::ensure!(n > 0, "the hook closed its socket (the target exited, or forked and exec'd?)");
    anyhow::ensure!(line.ends_with('\n'), "the hook sent a line longer than {MAX_LINE} bytes");
    Ok(line)
}

impl Hook {
    /// Sends the hook's source to the boot code and reads its greeting.
    pub fn start(stream: UnixStream) -> Result<Start> {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        let mut writer = stream.try_clone()?;
        writer.write_all(format!("{:08}", HOOK_SOURCE.len()).as_bytes())?;
        writer.write_all(HOOK_SOURCE.as_bytes()).context("sending the hook")?;
        let mut reader = BufReader::new(stream);
        let line = read_line(&mut reader)?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["busy", pid] => Ok(Start::Busy(pid.parse().unwrap_or(0))),
            ["hello", "2", pid, version, t0, t1, t2, freeze] => {
                let bad = || anyhow::anyhow!("bad greeting from the hook: {line:?}");
                let hello = Hello {
                    pid: pid.parse().map_err(|_| bad())?,
                    version: version.to_owned(),
                    original: triple(&[t0, t1, t2]).ok_or_else(bad)?,
                    freeze_count: freeze.parse().map_err(|_| bad())?,
                };
                tracing::debug!("hook up in CPython {} (pid {} in its namespace)", hello.version, hello.pid);
                Ok(Start::Up(Hook { reader, writer, hello }))
            }
            _ => bail!("unexpected greeting from the hook: {line:?}"),
        }
    }

    fn request(&mut self, line: &str) -> Result<Answer> {
        writeln!(self.writer, "{line}").context("the hook's socket is closed (target exited?)")?;
        let reply = read_line(&mut self.reader)?;
        let words: Vec<&str> = reply.split_whitespace().collect();
        let (kind, rest) = words.split_first().unwrap_or((&"", &[]));
        let t = || triple(rest).with_context(|| format!("bad answer from the hook: {reply:?}"));
        match *kind {
            "ok" => Ok(Answer::Ok(t()?)),
            "changed" => Ok(Answer::Changed(t()?)),
            "restored" => Ok(Answer::Restored(t()?)),
            "kept" => Ok(Answer::Kept(t()?)),
            "err" => bail!("the hook refused: {}", rest.join(" ")),
            _ => bail!("unexpected answer from the hook: {reply:?}"),
        }
    }

    pub fn set(&mut self, t: [i64; 3]) -> Result<Answer> {
        self.request(&format!("set {} {} {}", t[0], t[1], t[2]))
    }

    /// Puts back what neurogc set (where the application did not change it since) and ends the hook.
    pub fn restore(&mut self) -> Result<Answer> {
        self.request("restore")
    }
}
