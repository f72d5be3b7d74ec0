//! The target's memory. Reads for observation use `process_vm_readv`: no ptrace stop, no signal,
//! nothing the target can notice. Everything that writes goes through [`ProcMem`], a
//! `/proc/PID/mem` descriptor: it is bound to the address space the process had when it was
//! opened, so after an `exec` its writes reach nothing instead of the new program image.
use std::{
    fs::File,
    io::IoSliceMut,
    os::{fd::AsFd, unix::fs::FileExt},
};

use anyhow::{Context, Result};
use nix::{
    sys::uio::{RemoteIoVec, process_vm_readv},
    unistd::Pid,
};

pub fn read_bytes(pid: i32, addr: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let remote = [RemoteIoVec { base: addr as usize, len }];
    let n = process_vm_readv(Pid::from_raw(pid), &mut [IoSliceMut::new(&mut buf)], &remote)
        .with_context(|| format!("reading {len} bytes at {addr:#x} in process {pid}"))?;
    anyhow::ensure!(n == len, "short read at {addr:#x} in process {pid}: {n} of {len} bytes");
    Ok(buf)
}

/// A NUL-terminated UTF-8 string of at most `max` bytes (its NUL included), read 32 bytes at a
/// time: it may end just before its memory does. None where it is longer, unreadable or not
/// UTF-8.
pub fn read_c_str(pid: i32, at: u64, max: usize) -> Option<String> {
    let mut bytes = Vec::new();
    while bytes.len() < max {
        bytes.extend(read_bytes(pid, at.wrapping_add(bytes.len() as u64), 32).ok()?);
        if let Some(end) = bytes.iter().take(max).position(|&b| b == 0) {
            return String::from_utf8(bytes[..end].to_vec()).ok();
        }
    }
    None
}

pub fn read_u64(pid: i32, addr: u64) -> Result<u64> {
    Ok(u64_at(&read_bytes(pid, addr, 8)?, 0))
}

/// Little-endian integers out of a byte buffer already read (x86_64 and aarch64 only).
pub fn u64_at(buf: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(buf[off..off + 8].try_into().expect("8 bytes"))
}

pub fn i64_at(buf: &[u8], off: usize) -> i64 {
    u64_at(buf, off) as i64
}

pub fn i32_at(buf: &[u8], off: usize) -> i32 {
    i32::from_le_bytes(buf[off..off + 4].try_into().expect("4 bytes"))
}

/// One process image's memory, for reads and writes that must never reach another image.
#[derive(Debug)]
pub struct ProcMem {
    file: File,
    pub pid: i32,
}

/// Why a `/proc/PID/mem` access moved no byte: the address space it was opened on is gone.
const IMAGE_GONE: &str = "its process image is gone (the target exited or exec'd another program)";

impl ProcMem {
    pub fn open(pid: i32) -> Result<ProcMem> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .with_context(|| format!("opening the memory of process {pid}"))?;
        Ok(ProcMem { file, pid })
    }

    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    pub fn from_file(file: File, pid: i32) -> ProcMem {
        ProcMem { file, pid }
    }

    pub fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        let n = self
            .file
            .read_at(&mut buf, addr)
            .with_context(|| format!("reading {len} bytes at {addr:#x} in process {}", self.pid))?;
        anyhow::ensure!(n > 0 || len == 0, "reading process {}: {IMAGE_GONE}", self.pid);
        anyhow::ensure!(n == len, "short read at {addr:#x} in process {}: {n} of {len} bytes", self.pid);
        Ok(buf)
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64> {
        Ok(u64_at(&self.read(addr, 8)?, 0))
    }

    pub fn write(&self, addr: u64, data: &[u8]) -> Result<()> {
        let n = self
            .file
            .write_at(data, addr)
            .with_context(|| format!("writing {} bytes at {addr:#x} in process {}", data.len(), self.pid))?;
        anyhow::ensure!(n > 0 || data.is_empty(), "writing process {}: {IMAGE_GONE}", self.pid);
        anyhow::ensure!(n == data.len(), "short write at {addr:#x} in process {}", self.pid);
        Ok(())
    }
}
