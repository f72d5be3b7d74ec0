//! The agent's end of the hook's channel: a Unix socket the agent creates inside the target's
//! own filesystem (through /proc/PID/root), so a target in another mount namespace reaches it at
//! a plain path. Only the target may connect (SO_PEERCRED); the socket is owned by its user.
use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::{UnixListener, UnixStream},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::json;

use crate::bail_user;

/// Paths of one agent's files in the target: as the target sees them and as the agent reaches them.
pub struct TargetPaths {
    pub socket_in_target: String,
    pub socket_on_host: PathBuf,
    /// The hook's source with its `start(...)` call.
    pub script_in_target: String,
    pub script_on_host: PathBuf,
    /// One line that runs the script in a namespace of its own: the target's `__main__` is
    /// never touched.
    pub stub_in_target: String,
    pub stub_on_host: PathBuf,
}

impl TargetPaths {
    pub fn new(pid: i32) -> TargetPaths {
        let me = std::process::id();
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        let socket_in_target = format!("/tmp/neurogc-{me}.sock");
        let script_in_target = format!("/tmp/neurogc-hook-{me}.py");
        let stub_in_target = format!("/tmp/neurogc-inject-{me}.py");
        let on_host = |p: &str| root.join(p.trim_start_matches('/'));
        TargetPaths {
            socket_on_host: on_host(&socket_in_target),
            script_on_host: on_host(&script_in_target),
            stub_on_host: on_host(&stub_in_target),
            socket_in_target,
            script_in_target,
            stub_in_target,
        }
    }
}

/// The target's user: the socket and the script are handed to it.
fn owner(pid: i32) -> Result<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(format!("/proc/{pid}")).with_context(|| format!("process {pid} is gone"))?;
    Ok((meta.uid(), meta.gid()))
}

pub struct Listener {
    listener: UnixListener,
    pid: i32,
    pub paths: TargetPaths,
}

impl Listener {
    pub fn bind(pid: i32) -> Result<Listener> {
        let paths = TargetPaths::new(pid);
        let _ = std::fs::remove_file(&paths.socket_on_host);
        let listener = match UnixListener::bind(&paths.socket_on_host) {
            Ok(l) => l,
            Err(err) => bail_user!(
                "cannot create the hook's socket {} in the target's filesystem: {err} (does /tmp exist and is it writable there?)",
                paths.socket_on_host.display()
            ),
        };
        let (uid, gid) = owner(pid)?;
        nix::unistd::chown(&paths.socket_on_host, Some(uid.into()), Some(gid.into()))?;
        Ok(Listener { listener, pid, paths })
    }

    /// Writes the hook's source (with the call that starts it) and the stub that runs it where
    /// the target can read them; returns the stub's one line, the code to inject.
    pub fn write_script(&self, hook_source: &str) -> Result<String> {
        let script = format!("{hook_source}\nstart({:?})\n", self.paths.socket_in_target);
        let p = &self.paths.script_in_target;
        let stub =
            format!("exec(compile(open({p:?}).read(), {p:?}, 'exec'), {{'__name__': 'neurogc_hook'}})\n");
        let (uid, gid) = owner(self.pid)?;
        for (path, text) in [(&self.paths.script_on_host, &script), (&self.paths.stub_on_host, &stub)] {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
            nix::unistd::chown(path, Some(uid.into()), Some(gid.into()))?;
        }
        Ok(stub)
    }

    /// Waits for the hook; a connection from any other process is refused.
    pub fn accept(&self, timeout: Duration) -> Result<Hook> {
        self.listener.set_nonblocking(true)?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let cred =
                        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)?;
                    if cred.pid() != self.pid {
                        tracing::warn!("refused a connection to the hook socket from pid {}", cred.pid());
                        continue;
                    }
                    stream.set_nonblocking(false)?;
                    // Read and connected: nothing of ours needs to stay in the target's /tmp.
                    self.remove_files();
                    return Hook::handshake(stream);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        bail!(
                            "the hook did not connect within {:.1}s: the target's main thread has not reached a safe point \
                             (blocked in a long C call?), or another neurogc agent is already steering it",
                            timeout.as_secs_f64()
                        );
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e).context("accepting the hook's connection"),
            }
        }
    }
}

impl Listener {
    fn remove_files(&self) {
        for path in [&self.paths.socket_on_host, &self.paths.script_on_host, &self.paths.stub_on_host] {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.remove_files();
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Hello {
    pub pid: i32,
    pub original: [i64; 3],
    pub version: String,
    pub freeze_count: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Ack {
    pub ok: bool,
    #[serde(default)]
    pub new: Option<[i64; 3]>,
    #[serde(default)]
    pub freeze_count: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
}

/// A connected hook. Dropping it closes the socket: the hook then restores the originals.
pub struct Hook {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    pub hello: Hello,
}

impl Hook {
    fn handshake(stream: UnixStream) -> Result<Hook> {
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).context("reading the hook's hello")?;
        let hello: Hello =
            serde_json::from_str(&line).with_context(|| format!("bad hello from the hook: {line:?}"))?;
        tracing::debug!("hook up in CPython {} (pid {} in its namespace)", hello.version, hello.pid);
        Ok(Hook { reader, writer, hello })
    }

    fn request(&mut self, msg: serde_json::Value) -> Result<Ack> {
        writeln!(self.writer, "{msg}").context("the hook's socket is closed (target exited?)")?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).context("waiting for the hook's answer")?;
        anyhow::ensure!(n > 0, "the hook closed its socket (target exited?)");
        let ack: Ack =
            serde_json::from_str(&line).with_context(|| format!("bad answer from the hook: {line:?}"))?;
        if !ack.ok {
            bail!("the hook refused: {}", ack.error.unwrap_or_default());
        }
        Ok(ack)
    }

    pub fn set(&mut self, thresholds: [i64; 3]) -> Result<Ack> {
        self.request(json!({"op": "set", "thresholds": thresholds}))
    }

    pub fn restore(&mut self) -> Result<Ack> {
        self.request(json!({"op": "restore"}))
    }
}
