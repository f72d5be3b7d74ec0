//! Hardware breakpoints opened by hand, one per (thread, address), each running an eBPF
//! program when the thread executes the address. The census uses them where it can: closing
//! one takes the kernel microseconds, where closing a uprobe waits about 0.1 s for the kernel's
//! grace periods, one probe at a time, and the target traps at the uprobe meanwhile. A thread
//! has four debug registers; a breakpoint is the thread's own (a thread started later has
//! none). Closing the fd removes it, also when the agent is SIGKILLed.
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use perf_event_open_sys as sys;

/// An execute breakpoint at `addr` in thread `tid`, running `program` at each hit.
pub fn attach(program: BorrowedFd<'_>, addr: u64, tid: i32) -> std::io::Result<OwnedFd> {
    let mut attr = sys::bindings::perf_event_attr {
        type_: sys::bindings::PERF_TYPE_BREAKPOINT,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        bp_type: sys::bindings::HW_BREAKPOINT_X,
        ..Default::default()
    };
    attr.__bindgen_anon_3.bp_addr = addr;
    // An execute breakpoint's length is a long's (the kernel refuses any other).
    attr.__bindgen_anon_4.bp_len = std::mem::size_of::<std::ffi::c_long>() as u64;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.__bindgen_anon_2.wakeup_events = 1;
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr.set_disabled(1);
    // SAFETY: attr is fully initialised.
    let fd =
        unsafe { sys::perf_event_open(&mut attr, tid, -1, -1, sys::bindings::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain ioctls on the event fd with a valid program fd; enabled only once the
    // program is on it.
    unsafe {
        if sys::ioctls::SET_BPF(fd.as_raw_fd(), program.as_raw_fd() as u32) < 0
            || sys::ioctls::ENABLE(fd.as_raw_fd(), 0) < 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(fd)
}
