//! Where the collecting thread's Python frames are, per CPython version: what the kernel follows
//! to copy the stack at a collection's start (`StackLocator`), and what user space reads to name a
//! frame (`CodeLayout`). Offsets were measured on every test build (the thread state and GIL ones
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

/// Offsets in the thread state, the interpreter state and frames, per minor version.
struct Walk {
    via: u32,
    /// 3.8–3.11: `gilstate.tstate_current` in `_PyRuntime`; 3.12+: ignored (the main
    /// interpreter's pointer is the GC state's).
    tstate_in_runtime: u64,
    gil_at: u64,
    frame_at: u32,
    cframe_at: u32,
    previous_at: u32,
    code_at: u32,
    instr_at: u32,
    owner_at: u32,
}

fn walk(minor: u32) -> Option<Walk> {
    const NONE: u32 = u32::MAX;
    let frame_object = |tstate_in_runtime, lasti| Walk {
        via: tstate_via::RUNTIME,
        tstate_in_runtime,
        gil_at: 0,
        frame_at: 24,
        cframe_at: NONE,
        previous_at: 24,
        code_at: 32,
        instr_at: lasti,
        owner_at: NONE,
    };
    let interpreter_frame = |gil_at, owner_at| Walk {
        via: tstate_via::GIL_HOLDER,
        tstate_in_runtime: 0,
        gil_at,
        frame_at: 72,
        cframe_at: NONE,
        previous_at: 8,
        code_at: 0,
        instr_at: 56,
        owner_at,
    };
    Some(match minor {
        8 => frame_object(1368, 104),
        9 => frame_object(568, 104),
        10 => frame_object(568, 96),
        // `_PyInterpreterFrame`s behind `tstate->cframe->current_frame`; no owner byte yet.
        11 => Walk {
            via: tstate_via::RUNTIME,
            tstate_in_runtime: 576,
            gil_at: 0,
            frame_at: 56,
            cframe_at: 8,
            previous_at: 48,
            code_at: 32,
            instr_at: 56,
            owner_at: NONE,
        },
        12 => Walk { frame_at: 56, cframe_at: 0, ..interpreter_frame(384, 70) },
        13 => interpreter_frame(16, 70),
        14 | 15 => interpreter_frame(16, 74),
        _ => return None,
    })
}

/// What the kernel follows on this build, at run-time addresses (`bias` added). None where the
/// stack cannot be read: versions never measured, and free-threaded builds other than 3.13t or
/// whose collector is not seen taking its thread state (`tstate_arg`: USDT probes).
pub fn stack_locator(interp: &Interpreter, bias: u64, tstate_arg: bool) -> Option<StackLocator> {
    let mut w = walk(interp.version.minor)?;
    if interp.free_threaded {
        // No GIL holder to ask: the collector's own argument names the collecting thread. Only
        // 3.13t was measured, and only its published offsets are used.
        if !tstate_arg || interp.version.minor != 13 {
            return None;
        }
        w.via = tstate_via::COLLECTOR_ARG;
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
    if interp.free_threaded && !published {
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
        frame_bytes: if minor_reads_frame_objects(interp.version.minor) {
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

fn minor_reads_frame_objects(minor: u32) -> bool {
    minor <= 10
}

pub fn code_layout(interp: &Interpreter) -> Option<CodeLayout> {
    let minor = interp.version.minor;
    // Free-threaded objects' headers are 16 bytes longer (`ob_tid`, `ob_ref_local`…): only
    // 3.13t's strings were measured (`sizeof` against its own headers), and its code objects are
    // read at the offsets it publishes.
    if interp.free_threaded && (minor != 13 || interp.frame_debug.is_none()) {
        return None;
    }
    let (ascii_data, compact_data) = match minor {
        ..=11 => (48, 72),
        _ if interp.free_threaded => (56, 72),
        _ => (40, 56),
    };
    let base = CodeLayout {
        filename: 112,
        name: 128,
        firstlineno: 68,
        linetable: 136,
        table: LineTable::Locations,
        bytecode: None,
        lasti_in_units: false,
        ascii_data,
        compact_data,
        tag_mask: 0,
        owner_not_python: (minor >= 12).then_some(3),
        header_extra: interp.header_extra(),
    };
    Some(match minor {
        8 | 9 => CodeLayout {
            filename: 104,
            name: 112,
            firstlineno: 40,
            linetable: 120,
            table: LineTable::Lnotab,
            ..base
        },
        10 => CodeLayout {
            filename: 104,
            name: 112,
            firstlineno: 40,
            linetable: 120,
            table: LineTable::Ranges310,
            lasti_in_units: true,
            ..base
        },
        11 => CodeLayout { firstlineno: 72, bytecode: Some(184), ..base },
        12 => CodeLayout { bytecode: Some(192), ..base },
        13 => CodeLayout { bytecode: Some(200), ..base },
        14 | 15 => CodeLayout { bytecode: Some(208), tag_mask: 7, ..base },
        _ => return None,
    })
    .map(|layout| match interp.frame_debug {
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
    })
}
