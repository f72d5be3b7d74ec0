//! Reads of the target's memory (`process_vm_readv`): no ptrace stop, no signal, nothing the
//! target can notice.
use std::io::IoSliceMut;

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

/// Writes into the target (`process_vm_writev`): only ever to fields whose layout was validated.
pub fn write_bytes(pid: i32, addr: u64, data: &[u8]) -> Result<()> {
    use std::io::IoSlice;

    use nix::sys::uio::process_vm_writev;
    let remote = [RemoteIoVec { base: addr as usize, len: data.len() }];
    let n = process_vm_writev(Pid::from_raw(pid), &[IoSlice::new(data)], &remote)
        .with_context(|| format!("writing {} bytes at {addr:#x} in process {pid}", data.len()))?;
    anyhow::ensure!(n == data.len(), "short write at {addr:#x} in process {pid}");
    Ok(())
}
