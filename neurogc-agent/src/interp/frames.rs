//! Where the collecting thread's Python frames are: what the kernel follows to copy the stack at
//! a collection's start (`StackLocator`), and what user space reads to name a frame
//! (`CodeLayout`); each version's offsets are its row in `versions`. Offsets were measured on every test build (the thread state and GIL ones
//! by locating the running thread's state in `_PyRuntime` and the interpreter state; the code
//! object ones from `PyCode_Type`'s member table), and the stack tests check them against each
//! build's own lines. From 3.13 the frame and code offsets `_Py_DebugOffsets` publishes are used
//! (they agree with the table on every tested build), and on the free-threaded 3.13t only those.
use neurogc_common::{StackLocator, tstate_via};

use super::cpython::{Interpreter, TSTATE_INTERP};

/// How to name a code object and place an instruction in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeLayout {
    pub filename: u64,
    /// `co_qualname` (3.11+), else `co_name`.
    pub name: u64,
    pub firstlineno: u64,
    /// `co_lnotab` (3.8–3.9) or `co_linetable` (3.10+).
    pub linetable: u64,
    pub table: LineTable,
    /// Offset of the bytecode in the code object (3.11+: `co_code_adaptive`, where the frame's
    /// instruction pointer points); None: the frame holds `f_lasti` itself.
    pub bytecode: Option<u64>,
    /// `f_lasti` counts code units (3.10), not bytes (3.8–3.9).
    pub lasti_in_units: bool,
    /// Where an ASCII string's characters start (`sizeof(PyASCIIObject)`), and a compact
    /// non-ASCII one's (`sizeof(PyCompactUnicodeObject)`).
    pub ascii_data: u64,
    pub compact_data: u64,
    /// 3.14+: the frame's code is a `_PyStackRef`, its low bits a tag.
    pub tag_mask: u64,
    /// 3.12+: frames whose owner is at least this are shims of the C stack (3; 3.14 numbers the
    /// interpreter's own 3 and the C stack's 4), not Python code.
    pub owner_not_python: Option<u8>,
    /// Bytes every object header adds to the default build's (16 on free-threaded builds:
    /// `ob_type` at 24, not 8): shifts the `str` and `bytes` fields read here.
    pub header_extra: u64,
}

/// The line table formats of CPython 3.8–3.15.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineTable {
    /// 3.8–3.9 `co_lnotab`: (byte offset delta, line delta) pairs.
    Lnotab,
    /// 3.10 `co_linetable`: (byte range, line delta) pairs, −128 for "no line".
    Ranges310,
    /// 3.11+ location table (PEP 657).
    Locations,
}

/// Offsets in the thread state, the interpreter state and frames (the rows: `versions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    pub via: u32,
    /// 3.8–3.11: `gilstate.tstate_current` in `_PyRuntime`; 3.12+: ignored (the main
    /// interpreter's pointer is the GC state's).
    pub tstate_in_runtime: u64,
    pub gil_at: u64,
    pub frame_at: u32,
    pub cframe_at: u32,
    pub previous_at: u32,
    pub code_at: u32,
    pub instr_at: u32,
    pub owner_at: u32,
}

/// What the kernel follows on this build, at run-time addresses (`bias` added). None where the
/// stack cannot be read: versions never measured, and free-threaded builds other than 3.13t or
/// whose collector is not seen taking its thread state (`tstate_arg`: USDT probes).
pub fn stack_locator(interp: &Interpreter, bias: u64, tstate_arg: bool) -> Option<StackLocator> {
    let row = interp.row()?;
    let mut w = row.walk?;
    // Where no GIL holder can be asked, the collector's own argument names the collecting
    // thread: a USDT probe does not see it.
    if w.via == tstate_via::COLLECTOR_ARG && !tstate_arg {
        return None;
    }
    // What the interpreter publishes wins over the table (they agree on every tested build; a
    // patch release that moved a field is then still read right).
    let mut published = false;
    if let Some(d) = interp.frame_debug.filter(|_| w.via != tstate_via::RUNTIME) {
        let fits = |v: u64| (v as usize) < neurogc_common::FRAME_READ_BYTES_SHORT;
        if [d.previous, d.executable, d.instr_ptr + 7, d.owner].into_iter().all(fits)
            && d.current_frame < 4096
        {
            (w.frame_at, w.cframe_at) = (d.current_frame as u32, u32::MAX);
            (w.previous_at, w.code_at, w.instr_at, w.owner_at) =
                (d.previous as u32, d.executable as u32, d.instr_ptr as u32, d.owner as u32);
            published = true;
        }
    }
    if row.walk_published_only && !published {
        return None;
    }
    let tstate_ptr = match w.via {
        tstate_via::COLLECTOR_ARG => 0,
        tstate_via::RUNTIME => interp.runtime + w.tstate_in_runtime,
        _ => match interp.gc_state_location()? {
            super::cpython::GcStateLocation::MainInterpreter { main_ptr, .. } => main_ptr,
            super::cpython::GcStateLocation::Static { .. } => return None,
        },
    };
    Some(StackLocator {
        tstate_via: w.via,
        frame_at: w.frame_at,
        tstate_ptr: tstate_ptr.wrapping_add(bias),
        gil_at: w.gil_at,
        holder_at: 8,
        cframe_at: w.cframe_at,
        previous_at: w.previous_at,
        code_at: w.code_at,
        instr_at: w.instr_at,
        owner_at: w.owner_at,
        // 3.8–3.10's frame objects are large; 3.11+'s frames can end soon after their header.
        frame_bytes: if row.frame_objects {
            neurogc_common::FRAME_READ_BYTES as u32
        } else {
            neurogc_common::FRAME_READ_BYTES_SHORT as u32
        },
        // Free-threaded: the threads a collection stops. `next`, `interp` and
        // `native_thread_id` are published (`thread_state`); `state` is not, and sits at 40 in
        // 3.13t (offsetof against its headers and DWARF, `_Py_THREAD_ATTACHED` = 1).
        threads_at: match (w.via, interp.threads_head) {
            (tstate_via::COLLECTOR_ARG, Some(head)) => head as u32,
            _ => 0,
        },
        interp_at: TSTATE_INTERP as u32,
        next_at: 8,
        state_at: 40,
        tid_at: 160,
        _pad: 0,
    })
}

pub fn code_layout(interp: &Interpreter) -> Option<CodeLayout> {
    let row = interp.row()?;
    // Where only published offsets are trusted (3.13t), nothing is read without them.
    if row.walk_published_only && interp.frame_debug.is_none() {
        return None;
    }
    row.code.map(|layout| CodeLayout { header_extra: interp.header_extra(), ..layout }).map(|layout| {
        match interp.frame_debug {
            // Published (3.13+): as for the frames, it wins over the table.
            Some(d) if d.linetable < 4096 && d.code_adaptive < 4096 => CodeLayout {
                filename: d.filename,
                name: d.qualname,
                firstlineno: d.firstlineno,
                linetable: d.linetable,
                bytecode: Some(d.code_adaptive),
                ..layout
            },
            _ => layout,
        }
    })
}
