//! Standard output that never splits a line. In launch mode the target inherits the agent's
//! stdout, so both write to one pipe or file: a write of at most PIPE_BUF bytes is never
//! interleaved with another's, so lines go out in whole-line chunks of at most that size, and a
//! recorded `--json` stream stays parseable whatever the target prints.
use std::{
    fs::File,
    io::{self, Write},
    path::Path,
};

use anyhow::{Context, Result};
use nix::{
    errno::Errno,
    fcntl::{OFlag, open, openat},
    sys::stat::{Mode, fstat},
};

use crate::error::bail_user;

/// POSIX guarantees atomic pipe writes up to PIPE_BUF (4096 on Linux).
const CHUNK: usize = 4096;

pub struct LineWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> LineWriter<W> {
    pub fn new(inner: W) -> Self {
        LineWriter { inner, buf: Vec::with_capacity(2 * CHUNK) }
    }

    /// Writes out the complete lines, in chunks that end at a newline and fit in CHUNK bytes
    /// (a single line longer than CHUNK goes out alone). `all`: the last line too, even unfinished.
    fn drain(&mut self, all: bool) -> io::Result<()> {
        while !self.buf.is_empty() {
            let window = &self.buf[..self.buf.len().min(CHUNK)];
            let end = match window.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => match self.buf.iter().position(|&b| b == b'\n') {
                    Some(i) => i + 1,
                    None if all => self.buf.len(),
                    None => return Ok(()),
                },
            };
            if !all && end == self.buf.len() && self.buf.len() < CHUNK {
                return Ok(()); // keep collecting until a chunk is worth a write
            }
            self.inner.write_all(&self.buf[..end])?;
            self.buf.drain(..end);
        }
        Ok(())
    }
}

impl<W: Write> Write for LineWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.drain(false)?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain(true)?;
        self.inner.flush()
    }
}

/// Creates (or truncates) an output file the user named. The agent often runs as root, so a
/// file is never followed through a link, and only a regular file is ever truncated. In a
/// directory other users can write (`/tmp`), a link or file planted there could redirect or
/// capture the write: there the file is created new (`O_EXCL`), or an existing one is reused
/// only when it is this user's own regular file with no other name; anyone else's is refused.
pub fn create(path: &Path, what: &str) -> Result<File> {
    let Some(name) = path.file_name() else { bail_user!("{what} {}: not a file name", path.display()) };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // The directory is opened once and everything after is relative to that descriptor: the
    // directory checked is the directory written, whatever happens to its path meanwhile.
    let dir_fd = match open(dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOTDIR) => bail_user!("{what} {}: {} is not a directory", path.display(), dir.display()),
        Err(e) => bail_user!("{what} {}: {}: {}", path.display(), dir.display(), io::Error::from(e)),
    };
    let shared = fstat(&dir_fd)?.st_mode & 0o022 != 0;
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(0o644);
    let opened = if shared {
        match openat(&dir_fd, name, flags | OFlag::O_EXCL, mode) {
            Ok(fd) => Ok((fd, true)),
            Err(Errno::EEXIST) => openat(&dir_fd, name, flags & !OFlag::O_CREAT, mode).map(|fd| (fd, false)),
            Err(e) => Err(e),
        }
    } else {
        openat(&dir_fd, name, flags, mode).map(|fd| (fd, false))
    };
    let (file, created) = match opened {
        Ok((fd, created)) => (File::from(fd), created),
        Err(Errno::ELOOP) => {
            bail_user!("{what} {}: is a symbolic link, which neurogc-agent does not follow", path.display())
        }
        Err(e) => bail_user!("cannot create {what} {}: {}", path.display(), io::Error::from(e)),
    };
    let meta = fstat(&file).with_context(|| format!("{}", path.display()))?;
    if meta.st_mode & libc::S_IFMT != libc::S_IFREG {
        bail_user!("{what} {}: not a regular file (a FIFO, device or directory?)", path.display());
    }
    if shared && !created && (meta.st_uid != nix::unistd::geteuid().as_raw() || meta.st_nlink != 1) {
        bail_user!(
            "{what} {}: the file exists in {}, a directory other users can write, and is not this \
             user's own: neurogc-agent does not write to it; choose a new name",
            path.display(),
            real_dir(&dir_fd, dir)
        );
    }
    file.set_len(0).with_context(|| format!("truncating {}", path.display()))?;
    // Blocking writes from here on: O_NONBLOCK only kept the open from waiting on a FIFO.
    let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(flags))?;
    Ok(file)
}

/// The directory as the kernel names it (`.` or `..` become the real path), for messages.
fn real_dir(dir_fd: &std::os::fd::OwnedFd, given: &Path) -> String {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", dir_fd.as_raw_fd()))
        .map_or_else(|_| given.display().to_string(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the size and content of every write the inner writer receives.
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            self.0.push(data.to_vec());
            Ok(data.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_is_whole_lines_within_pipe_buf() {
        let mut w = LineWriter::new(Writes(Vec::new()));
        let line = format!("{{\"type\":\"gc\",\"pad\":\"{}\"}}\n", "x".repeat(97));
        for _ in 0..500 {
            // serde_json writes a line in several pieces
            let (a, b) = line.as_bytes().split_at(40);
            w.write_all(a).unwrap();
            w.write_all(b).unwrap();
        }
        w.flush().unwrap();
        let writes = &w.inner.0;
        assert!(writes.len() > 10);
        for chunk in writes {
            assert!(chunk.len() <= CHUNK && chunk.ends_with(b"\n"), "chunk of {} bytes", chunk.len());
        }
        assert_eq!(writes.concat(), line.repeat(500).into_bytes());
    }
}
