//! Which threads a free-threaded collection halted: the kernel copies the native ids of the
//! threads attached to the interpreter as a collection begins; each distinct set becomes one
//! `threads` record, written before the first collection that refers to it, as stacks are. A
//! thread pool halts the same few sets over and over, so a stream holds few of them.
use std::collections::HashMap;

use neurogc_common::GcEvent;
use neurogc_trace::{Record, ThreadsDef};

/// Distinct sets kept per stream; past it, collections carry the count without the set.
const MAX_SETS: usize = 65_536;

#[derive(Default)]
pub struct Interner {
    ids: HashMap<Vec<u32>, u32>,
}

impl Interner {
    /// The set id for `ev`'s halted threads, writing its `threads` record through `emit` the
    /// first time. None: nothing halted, not counted (GIL builds), or the table is full.
    pub fn resolve(&mut self, ev: &GcEvent, emit: &mut impl FnMut(Record)) -> Option<u32> {
        if ev.running == neurogc_common::RUNNING_UNKNOWN || ev.running == 0 {
            return None;
        }
        // Slots of threads that were not attached hold 0.
        let mut tids: Vec<u32> = ev.running_tids.iter().copied().filter(|&t| t != 0).collect();
        tids.sort_unstable();
        tids.dedup();
        if tids.is_empty() {
            return None;
        }
        if let Some(&id) = self.ids.get(&tids) {
            return Some(id);
        }
        if self.ids.len() >= MAX_SETS {
            return None;
        }
        let id = self.ids.len() as u32;
        emit(Record::Threads(ThreadsDef { id, tids: tids.clone() }));
        self.ids.insert(tids, id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halted(running: u32, tids: &[u32]) -> GcEvent {
        let mut ev = GcEvent { running, ..GcEvent::EMPTY };
        ev.running_tids[..tids.len()].copy_from_slice(tids);
        ev
    }

    #[test]
    fn each_set_is_written_once_and_in_any_order_is_the_same_set() {
        let mut i = Interner::default();
        let mut out = Vec::new();
        let mut emit = |r: Record| out.push(r);
        assert_eq!(i.resolve(&halted(2, &[12, 0, 11]), &mut emit), Some(0));
        assert_eq!(i.resolve(&halted(2, &[11, 12]), &mut emit), Some(0));
        assert_eq!(i.resolve(&halted(1, &[0, 13]), &mut emit), Some(1));
        // Nothing halted, or a GIL build: no set.
        assert_eq!(i.resolve(&halted(0, &[]), &mut emit), None);
        assert_eq!(i.resolve(&GcEvent::EMPTY, &mut emit), None);
        assert_eq!(
            out,
            [
                Record::Threads(ThreadsDef { id: 0, tids: vec![11, 12] }),
                Record::Threads(ThreadsDef { id: 1, tids: vec![13] })
            ]
        );
    }
}
