//! Files the user hands the agent (a model, a trace): regular files of bounded size only. A FIFO
//! is opened without blocking and refused before a byte is read, so it can never hang the agent;
//! a device such as /dev/zero or a file past its bound is refused before it can fill memory.
use std::{
    fs::File,
    io::Read,
    os::unix::fs::{FileTypeExt, OpenOptionsExt},
    path::Path,
};

use anyhow::Result;

use crate::error::bail_user;

/// Opens `path` for reading if it is a regular file of at most `max_bytes`; `what` names it in
/// messages ("model", "trace").
pub fn open_regular(path: &Path, what: &str, max_bytes: u64) -> Result<(File, u64)> {
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) => bail_user!("cannot open {what} {}: {e}", path.display()),
    };
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let not = match () {
        _ if kind.is_dir() => Some("a directory"),
        _ if kind.is_fifo() => Some("a FIFO"),
        _ if kind.is_socket() => Some("a socket"),
        _ if kind.is_char_device() || kind.is_block_device() => Some("a device"),
        _ if !kind.is_file() => Some("not a regular file"),
        _ => None,
    };
    if let Some(not) = not {
        bail_user!("{what} {} is {not}: give a regular file", path.display());
    }
    if meta.len() > max_bytes {
        bail_user!(
            "{what} {} has {} bytes, more than the {} this agent reads",
            path.display(),
            meta.len(),
            max_bytes
        );
    }
    // Regular files never block; clearing O_NONBLOCK keeps later reads ordinary.
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) & !libc::O_NONBLOCK);
    }
    Ok((file, meta.len()))
}

/// The whole of a bounded regular file (it may not grow past the bound while being read either).
pub fn read_regular(path: &Path, what: &str, max_bytes: u64) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path, what, max_bytes)?;
    let mut bytes = Vec::with_capacity(len as usize);
    if let Err(e) = file.take(max_bytes + 1).read_to_end(&mut bytes) {
        bail_user!("cannot read {what} {}: {e}", path.display());
    }
    if bytes.len() as u64 > max_bytes {
        bail_user!("{what} {} grew past {max_bytes} bytes while being read", path.display());
    }
    Ok(bytes)
}

/// Largest trace read: a 10-million-collection `--json` stream is ≈ 1.2 GB.
const MAX_TRACE_BYTES: u64 = 64 << 30;

/// A recording or `--json` stream, for `report` and `replay`.
pub fn open_trace(path: &Path) -> Result<neurogc_trace::TraceReader<File>> {
    let (file, _) = open_regular(path, "trace", MAX_TRACE_BYTES)?;
    neurogc_trace::TraceReader::new(file).map_err(|e| trace_error(path, e))
}

/// A damaged, foreign or too new trace is the user's to fix (exit 2); an I/O error is not.
pub fn trace_error(path: &Path, err: neurogc_trace::TraceError) -> anyhow::Error {
    let text = format!("{}: {err}", path.display());
    match err {
        neurogc_trace::TraceError::Io(_) => anyhow::anyhow!("reading trace {text}"),
        _ => anyhow::Error::new(crate::error::UserError(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<impl Sized>) -> String {
        match r {
            Ok(_) => String::new(),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn only_bounded_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("neurogc-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(message(read_regular(&fifo, "model", 10)).contains("is a FIFO"));
        assert!(message(read_regular(Path::new("/dev/zero"), "model", 10)).contains("is a device"));
        assert!(message(read_regular(&dir, "trace", 10)).contains("is a directory"));
        let big = dir.join("big");
        std::fs::write(&big, [0u8; 11]).unwrap();
        assert!(message(read_regular(&big, "model", 10)).contains("more than the 10"));
        assert_eq!(read_regular(&big, "model", 11).unwrap().len(), 11);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
