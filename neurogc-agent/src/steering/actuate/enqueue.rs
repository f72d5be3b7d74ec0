//! The writes that put a call on the target's pending-call queue, proven idle just before
//! (`interp::pending`): each version's queue shape, written as its own producers would.
use super::custodian::Step;
use crate::interp::pending::{Breaker, COUNTED_SLOT, COUNTED_SLOTS, IdleQueue, Queue, RING_SLOTS};

/// The writes that queue `func(arg)` on an idle queue: the expectations that prove it is still
/// idle, the slot, then the single write that makes the call visible (`last` on a ring,
/// `npending` after `next` on 3.13+), then the eval breaker.
pub fn enqueue_steps(q: &IdleQueue, func: u64, arg: u64) -> Vec<Step> {
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
    use crate::interp::{
        pending::{Base, PendingLayout},
        versions::{COUNTED, RING_39},
    };

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
