//! Where the collecting thread's Python frames are: what the kernel follows to copy the stack at
//! a collection's start (`StackLocator`), and what user space reads to name a frame
//! (`CodeLayout`); each version's offsets are its row in `versions`. Offsets were measured on every test build (the thread state and GIL ones
//! by locating the running thread's state in `_PyRuntime` and the interpreter state; the code
//! object ones from `PyCode_Type`'s member table), and the stack tests check them against each
//! build's own lines. From 3.13 the frame and code offsets `_Py_DebugOffsets` publishes are used
//! (they agree with the table on every tested build), and on the free-threaded 3.13t only those.
use neurogc_common::{StackLocator, tstate_via};

use super::cpython::{Interpreter, TSTATE_INTERP};
pub use super::versions::{CodeLayout, LineTable};

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
