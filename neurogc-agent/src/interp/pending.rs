//! The queue `Py_AddPendingCall` fills for the main thread, and how its producer tells the eval
//! loop to look at it: the shapes here, each version's offsets in its row in `versions`. neurogc queues its hook the way the interpreter's
//! own producers do, by writing memory (see `actuate::inject`), so it needs these layouts.
//!
//! Offsets were read with `offsetof` compiled against each version's own internal headers
//! (pyenv 3.8.18–3.13.0, Debian bookworm 3.11.2, trixie 3.13.5, sid 3.14.10 and 3.15.2, whose
//! `libpython3.X-dev` packages ship them) and cross-checked in the pyenv builds' DWARF; see
//! docs/act-mode.md, "How act mode finds the pending-call queue". Every layout is checked against the live process
//! before a byte is written: a queue that does not look exactly like an idle queue is refused.
use anyhow::{Result, bail};

pub use super::versions::{Base, Queue};
use super::{
    cpython::{Interpreter, TSTATE_INTERP},
    versions,
};
use crate::memory::{ProcMem, i32_at, u64_at};

/// How the producer wakes the eval loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breaker {
    /// An `int` computed from flags; producers store 1 (3.8–3.12).
    Int(Base),
    /// A bit in the main thread state's `eval_breaker` (3.13+): `_PY_CALLS_TO_DO_BIT`.
    MainThreadBit { tstate_ptr: u64, eval_breaker: u64, bit: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingLayout {
    pub queue_at: Base,
    pub queue: Queue,
    pub size: u64,
    pub breaker: Breaker,
}

pub const RING_SLOTS: u64 = 32;
pub const COUNTED_SLOTS: u64 = 300;
pub const COUNTED_SLOT: u64 = 24;
/// `MAXPENDINGCALLS_MAIN`: the main thread's queue (the one `Py_AddPendingCall` uses) holds 32.
const MAIN_QUEUE_MAX: i32 = 32;

impl PendingLayout {
    /// The build's queue (`versions`); None where act mode's hook must refuse it. 3.14+ publish
    /// the eval breaker's offset in `_Py_DebugOffsets`, which wins over the table's.
    pub fn for_interpreter(interp: &Interpreter) -> Option<PendingLayout> {
        let p = interp.row()?.pending?;
        let breaker = match p.breaker {
            versions::Breaker::Int(at) => Breaker::Int(at),
            versions::Breaker::MainThreadBit { tstate_ptr, eval_breaker, published } => {
                let eval_breaker = match interp.remote_debug {
                    Some(r) if published => r.eval_breaker,
                    _ => eval_breaker,
                };
                Breaker::MainThreadBit { tstate_ptr, eval_breaker, bit: 1 << 2 }
            }
        };
        Some(PendingLayout { queue_at: p.queue_at, queue: p.queue, size: p.size, breaker })
    }
}

/// The queue as read from the live process, proven idle.
#[derive(Debug, Clone)]
pub struct IdleQueue {
    pub layout: PendingLayout,
    /// Absolute address of the queue.
    pub address: u64,
    /// The slot the next call goes into (`last` / `next`), and the values that prove idleness.
    pub slot: u64,
    pub breaker_address: u64,
}

/// Why a queue cannot be used right now (as opposed to a layout that is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotIdle {
    /// Calls are queued that the main thread has not run yet (maybe an earlier injection).
    Busy(u32),
    /// The interpreter is shutting down or not up yet.
    NotReady(&'static str),
}

impl std::fmt::Display for NotIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotIdle::Busy(n) => write!(f, "{n} pending call(s) queued that its main thread has not run yet"),
            NotIdle::NotReady(why) => f.write_str(why),
        }
    }
}

impl IdleQueue {
    /// Reads and checks the queue. Err: the layout does not match this process (never write);
    /// Ok(Err(..)): it matches but is not idle now.
    pub fn read(
        mem: &ProcMem,
        layout: PendingLayout,
        runtime: u64,
        main_interp_ptr: Option<u64>,
    ) -> Result<std::result::Result<IdleQueue, NotIdle>> {
        let interp = match main_interp_ptr {
            Some(p) => mem.read_u64(p)?,
            None => 0,
        };
        let resolve = |base: Base| -> Result<Option<u64>> {
            Ok(match base {
                Base::Runtime(off) => Some(runtime + off),
                Base::MainInterp(_) if interp == 0 => None,
                Base::MainInterp(off) => Some(interp + off),
            })
        };
        let (Some(address), breaker_base) = (resolve(layout.queue_at)?, layout.breaker) else {
            return Ok(Err(NotIdle::NotReady("the main interpreter does not exist yet")));
        };
        let q = mem.read(address, layout.size as usize)?;
        let int = |off: u64| i32_at(&q, off as usize);
        let slot = match layout.queue {
            Queue::Ring { finishing, busy, lock, calls_to_do, async_exc, first, last, .. } => {
                let lock = u64_at(&q, lock as usize);
                if lock == 0 || lock >= 1 << 47 {
                    bail!("pending-call queue at {address:#x}: lock pointer {lock:#x} is not a heap pointer");
                }
                let (first, last) = (int(first), int(last));
                let slots = 0..RING_SLOTS as i32;
                if !slots.contains(&first) || !slots.contains(&last) {
                    bail!("pending-call queue at {address:#x}: indices {first}/{last} out of range");
                }
                let flags = [
                    ("calls_to_do", Some(calls_to_do)),
                    ("async_exc", Some(async_exc)),
                    ("finishing", finishing),
                    ("busy", busy),
                ];
                for (what, off) in flags {
                    if let Some(off) = off
                        && !(0..=1).contains(&int(off))
                    {
                        bail!("pending-call queue at {address:#x}: {what} = {}", int(off));
                    }
                }
                if finishing.is_some_and(|off| int(off) != 0) {
                    return Ok(Err(NotIdle::NotReady("the interpreter is shutting down")));
                }
                if first != last || busy.is_some_and(|off| int(off) != 0) {
                    return Ok(Err(NotIdle::Busy(((last - first).rem_euclid(RING_SLOTS as i32)) as u32)));
                }
                last as u64
            }
            Queue::Counted { mutex, npending, max, maxloop, calls, first, next } => {
                let (n, mx, ml, first, next) = (int(npending), int(max), int(maxloop), int(first), int(next));
                if mx != MAIN_QUEUE_MAX || ml != 0 {
                    bail!(
                        "pending-call queue at {address:#x}: max/maxloop {mx}/{ml}, expected {MAIN_QUEUE_MAX}/0"
                    );
                }
                let slots = 0..COUNTED_SLOTS as i32;
                if !slots.contains(&first) || !slots.contains(&next) || !(0..=mx).contains(&n) {
                    bail!(
                        "pending-call queue at {address:#x}: first/next/npending {first}/{next}/{n} out of range"
                    );
                }
                if n > 0 || q[mutex as usize] != 0 {
                    return Ok(Err(NotIdle::Busy(n.max(1) as u32)));
                }
                let table = &q[calls as usize..(calls + COUNTED_SLOTS * COUNTED_SLOT) as usize];
                if first != next || table.iter().any(|&b| b != 0) {
                    bail!(
                        "pending-call queue at {address:#x}: idle but first {first} != next {next} or slots not clear"
                    );
                }
                next as u64
            }
        };
        let breaker_address = match breaker_base {
            Breaker::Int(base) => match resolve(base)? {
                Some(a) => a,
                None => return Ok(Err(NotIdle::NotReady("the main interpreter does not exist yet"))),
            },
            Breaker::MainThreadBit { tstate_ptr, eval_breaker, .. } => {
                let tstate = mem.read_u64(runtime + tstate_ptr)?;
                if tstate == 0 {
                    return Ok(Err(NotIdle::NotReady("the main thread state does not exist")));
                }
                let owner = mem.read_u64(tstate + TSTATE_INTERP)?;
                if interp != 0 && owner != interp {
                    bail!("main thread state {tstate:#x} belongs to interpreter {owner:#x}, not {interp:#x}");
                }
                tstate + eval_breaker
            }
        };
        if let Breaker::Int(_) = breaker_base {
            let value = i32_at(&mem.read(breaker_address, 4)?, 0);
            if !(0..=1).contains(&value) {
                bail!("eval breaker at {breaker_address:#x} holds {value}, expected 0 or 1");
            }
        }
        Ok(Ok(IdleQueue { layout, address, slot, breaker_address }))
    }
}

impl IdleQueue {
    /// The queue as it will be, idle again, once the call queued on this one has been run: the
    /// main thread advances `first` past it (and, 3.13+, clears its slot).
    pub fn after_one(&self) -> IdleQueue {
        let slots = match self.layout.queue {
            Queue::Ring { .. } => RING_SLOTS,
            Queue::Counted { .. } => COUNTED_SLOTS,
        };
        IdleQueue { slot: (self.slot + 1) % slots, ..self.clone() }
    }
}
