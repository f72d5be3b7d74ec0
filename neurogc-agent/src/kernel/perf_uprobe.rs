//! Uprobe perf events opened by hand. aya's `UProbe::attach` cannot pass a USDT semaphore
//! (`ref_ctr_offset`), so both USDT sites and function probes go through here: one mechanism.
//! Closing the returned fd detaches the program, removes the breakpoint and decrements the
//! semaphore: the kernel does it even when the agent is SIGKILLed.
use std::{
    ffi::CString,
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
    path::Path,
};

use anyhow::{Context, Result, bail};
use perf_event_open_sys as sys;

const PMU: &str = "/sys/bus/event_source/devices/uprobe";

/// `config:0` → (0, 0); `config:32-63` → (32, 63).
fn format_bits(name: &str) -> Result<u32> {
    let path = format!("{PMU}/format/{name}");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let bits = text.trim().strip_prefix("config:").with_context(|| format!("unexpected {path}: {text}"))?;
    let first = bits.split('-').next().unwrap_or(bits);
    first.parse().with_context(|| format!("unexpected {path}: {text}"))
}

fn pmu_type() -> Result<u32> {
    let path = format!("{PMU}/type");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {path}: is this kernel built with CONFIG_UPROBE_EVENTS?"))?;
    text.trim().parse().with_context(|| format!("unexpected {path}: {text}"))
}

pub struct UprobeLink {
    _fd: OwnedFd,
}

/// Attaches `program` at `offset` in `file`, for process `pid` only.
pub fn attach(
    program: BorrowedFd<'_>,
    file: &Path,
    offset: u64,
    semaphore_offset: u64,
    pid: i32,
    retprobe: bool,
) -> Result<UprobeLink> {
    let path = CString::new(file.as_os_str().as_encoded_bytes())?;
    let mut attr = sys::bindings::perf_event_attr {
        type_: pmu_type()?,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        ..Default::default()
    };
    attr.config = semaphore_offset << format_bits("ref_ctr_offset")?;
    if retprobe {
        attr.config |= 1 << format_bits("retprobe")?;
    }
    attr.__bindgen_anon_3.config1 = path.as_ptr() as u64;
    attr.__bindgen_anon_4.config2 = offset;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.__bindgen_anon_2.wakeup_events = 1;
    // SAFETY: attr is fully initialised and `path` outlives the call.
    let fd =
        unsafe { sys::perf_event_open(&mut attr, pid, -1, -1, sys::bindings::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        bail!(
            "perf_event_open(uprobe {}:{offset:#x}{}) failed: {err}",
            file.display(),
            if retprobe { " return" } else { "" }
        );
    }
    // SAFETY: a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain ioctls on the event fd with a valid program fd.
    unsafe {
        if sys::ioctls::SET_BPF(fd.as_raw_fd(), program.as_raw_fd() as u32) < 0 {
            bail!("attaching the eBPF program to the uprobe: {}", std::io::Error::last_os_error());
        }
        if sys::ioctls::ENABLE(fd.as_raw_fd(), 0) < 0 {
            bail!("enabling the uprobe: {}", std::io::Error::last_os_error());
        }
    }
    Ok(UprobeLink { _fd: fd })
}
