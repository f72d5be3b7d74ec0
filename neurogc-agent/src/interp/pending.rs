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

const RING_SLOTS: u64 = 32;
const COUNTED_SLOTS: u64 = 300;
const COUNTED_SLOT: u64 = 24;
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

/// The writes that queue `func(arg)` on an idle queue: the expectations that prove it is still
/// idle, the slot, then the single write that makes the call visible (`last` on a ring,
/// `npending` after `next` on 3.13+), then the eval breaker.
pub fn enqueue_steps(q: &IdleQueue, func: u64, arg: u64) -> Vec<crate::steering::actuate::custodian::Step> {
    use crate::steering::actuate::custodian::Step;
    let mut steps = Vec::new();
    let at = |off: u64| q.address + off;
    let i32b = |v: u64| (v as i32).to_le_bytes();
    match q.layout.queue {
        Queue::Ring { calls_to_do, calls, first, last, .. } => {
            steps.push(Step::expect(at(first), &i32b(q.slot)));
            steps.push(Step::expect(at(last), &i32b(q.slot)));
            let mut entry = func.to_le_bytes().to_vec();
            entry.extend(arg.to_le_bytes());
            steps.push(Step::write(at(calls + 16 * q.slot), &entry));
            steps.push(Step::write(at(last), &i32b((q.slot + 1) % RING_SLOTS)));
            steps.push(Step::write(at(calls_to_do), &1i32.to_le_bytes()));
            steps.push(Step::write(q.breaker_address, &1i32.to_le_bytes()));
        }
        Queue::Counted { mutex, npending, calls, first, next, .. } => {
            let slot = at(calls + COUNTED_SLOT * q.slot);
            steps.push(Step::expect(at(mutex), &[0]));
            steps.push(Step::expect(at(npending), &0i32.to_le_bytes()));
            steps.push(Step::expect(at(first), &i32b(q.slot)));
            steps.push(Step::expect(at(next), &i32b(q.slot)));
            steps.push(Step::expect(slot, &[0; COUNTED_SLOT as usize]));
            let mut entry = func.to_le_bytes().to_vec();
            entry.extend(arg.to_le_bytes());
            entry.extend([0u8; 8]); // flags = 0: the agent owns `arg`, CPython must not free it
            steps.push(Step::write(slot, &entry));
            steps.push(Step::write(at(next), &i32b((q.slot + 1) % COUNTED_SLOTS)));
            steps.push(Step::write(at(npending), &1i32.to_le_bytes()));
            if let Breaker::MainThreadBit { bit, .. } = q.layout.breaker {
                // Only the byte that holds the bit: other threads set their bits in the same
                // word with atomic ORs (on a free-threaded build, stop-the-world requests every
                // collection), and the wider the read-modify-write, the more it could undo. The
                // event bits are all in the low byte; the rest of the word is a version.
                debug_assert!(bit < 0x100);
                steps.push(Step::or(q.breaker_address, &[bit as u8]));
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::versions::{COUNTED, RING_39};

    #[test]
    fn a_ring_push_commits_with_the_index_after_the_slot() {
        let layout = PendingLayout {
            queue_at: Base::MainInterp(112),
            queue: RING_39,
            size: 536,
            breaker: Breaker::Int(Base::MainInterp(100)),
        };
        let q = IdleQueue { layout, address: 0x1000, slot: 31, breaker_address: 0x2000 };
        let steps = enqueue_steps(&q, 0xaaaa, 0xbbbb);
        let writes: Vec<u64> = steps.iter().filter(|s| !s.write.is_empty()).map(|s| s.addr).collect();
        // slot 31, then last (wrapping to 0), calls_to_do, eval breaker
        assert_eq!(writes, [0x1000 + 16 + 16 * 31, 0x1000 + 532, 0x1000 + 8, 0x2000]);
        assert_eq!(steps[3].write, 0i32.to_le_bytes());
    }

    #[test]
    fn a_counted_push_writes_next_before_the_count_that_publishes_it() {
        let layout = PendingLayout {
            queue_at: Base::Runtime(2640),
            queue: COUNTED,
            size: 7232,
            breaker: Breaker::MainThreadBit { tstate_ptr: 664, eval_breaker: 24, bit: 4 },
        };
        let q = IdleQueue { layout, address: 0x10000, slot: 299, breaker_address: 0x9018 };
        let steps = enqueue_steps(&q, 1, 2);
        let writes: Vec<(u64, bool)> =
            steps.iter().filter(|s| !s.write.is_empty()).map(|s| (s.addr, s.or)).collect();
        assert_eq!(
            writes,
            [
                (0x10000 + 24 + 24 * 299, false),
                (0x10000 + 7228, false),
                (0x10000 + 12, false),
                (0x9018, true)
            ]
        );
        assert_eq!(steps[6].write, 0i32.to_le_bytes(), "next wraps to 0");
    }
}
