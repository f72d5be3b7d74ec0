//! Turns the kernel's raw `GcEvent` into a `Collection`: which generation really ran and what it
//! freed, read off the difference of `generation_stats[]` across the collection. That is exact on
//! every version (3.13+ passes −1 "auto" as the generation argument) and filters calls that did
//! not collect (re-entries, 3.14's no-op increments).
use neurogc_common::{EVENT_HAS_STATS, GcEvent, NUM_GENERATIONS, RUNNING_UNKNOWN};
use neurogc_trace::Collection;

/// Maps `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) to wall-clock time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    realtime_minus_monotonic: i128,
}

fn clock_ns(id: nix::time::ClockId) -> i128 {
    let ts = nix::time::clock_gettime(id).expect("clock_gettime");
    ts.tv_sec() as i128 * 1_000_000_000 + ts.tv_nsec() as i128
}

impl Clock {
    pub fn new() -> Clock {
        let mono = clock_ns(nix::time::ClockId::CLOCK_MONOTONIC);
        let real = clock_ns(nix::time::ClockId::CLOCK_REALTIME);
        Clock { realtime_minus_monotonic: real - mono }
    }

    pub fn now_unix_ns(self) -> u64 {
        self.to_unix_ns(clock_ns(nix::time::ClockId::CLOCK_MONOTONIC) as u64)
    }

    pub fn to_unix_ns(self, monotonic_ns: u64) -> u64 {
        (monotonic_ns as i128 + self.realtime_minus_monotonic).max(0) as u64
    }
}

/// One ring buffer record as the kernel wrote it, a `GcEvent` or an `ExecEvent` (None when it is
/// too short to be one).
pub fn read<T: aya::Pod>(item: &[u8]) -> Option<T> {
    // SAFETY: the length is checked; read_unaligned copes with the ring's 8-byte alignment, and
    // every bit pattern is a valid `Pod`.
    (item.len() >= std::mem::size_of::<T>())
        .then(|| unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) })
}

/// `stats_trusted`: the GC state layout was validated in the live process. `concurrent`: a
/// free-threaded build, where other threads enter the collector while one collects and return
/// at once: such an entry's window can contain the increment another thread's collection makes
/// as it ends. The collector returns exactly what it added to the counters (n + m), and an
/// entry that returned at once returns 0: an event whose return value is not what its counters
/// moved by did not collect. (Where the other's collection found nothing, both read 0: that
/// rare pair is counted twice.)
pub fn decode(ev: &GcEvent, stats_trusted: bool, concurrent: bool, clock: &Clock) -> Option<Collection> {
    let (generation, collected, uncollectable) = if stats_trusted && ev.flags & EVENT_HAS_STATS != 0 {
        // The oldest generation whose counter moved is the one collected (younger ones are
        // merged into it, but only its own entry is bumped).
        let generation = (0..NUM_GENERATIONS).rev().find(|&g| ev.delta[g].collections > 0)?;
        let collected: i64 = ev.delta.iter().map(|d| d.collected).sum();
        let uncollectable: i64 = ev.delta.iter().map(|d| d.uncollectable).sum();
        if concurrent && ev.result != collected + uncollectable {
            return None;
        }
        (generation as i8, collected, uncollectable)
    } else {
        let generation =
            if (0..NUM_GENERATIONS as i64).contains(&ev.arg_gen) { ev.arg_gen as i8 } else { -1 };
        (generation, ev.result, -1)
    };
    Some(Collection {
        ts_ns: clock.to_unix_ns(ev.start_ns),
        pid: ev.pid,
        tid: ev.tid,
        r#gen: generation,
        duration_ns: ev.end_ns.saturating_sub(ev.start_ns),
        collected,
        uncollectable,
        stack: None,
        running: (ev.running != RUNNING_UNKNOWN).then_some(ev.running),
        // Set by the stream's `halted::Interner`, as `stack` is by the stack resolver.
        halted: None,
    })
}

#[cfg(test)]
mod tests {
    use neurogc_common::GenStats;

    use super::*;

    fn event(delta: [(i64, i64, i64); 3], arg_gen: i64) -> GcEvent {
        GcEvent {
            start_ns: 1_000,
            end_ns: 51_000,
            pid: 7,
            tid: 8,
            arg_gen,
            result: 99,
            delta: delta.map(|(c, k, u)| GenStats { collections: c, collected: k, uncollectable: u }),
            flags: EVENT_HAS_STATS,
            ..GcEvent::EMPTY
        }
    }

    #[test]
    fn true_generation_comes_from_the_stats_not_the_auto_argument() {
        let clock = Clock { realtime_minus_monotonic: 0 };
        let c = decode(&event([(0, 0, 0), (1, 12, 3), (0, 0, 0)], -1), true, false, &clock).unwrap();
        assert_eq!((c.r#gen, c.collected, c.uncollectable, c.duration_ns), (1, 12, 3, 50_000));
    }

    #[test]
    fn on_a_free_threaded_build_an_entry_that_returned_at_once_claims_no_collection() {
        let clock = Clock { realtime_minus_monotonic: 0 };
        // Another thread's collection ended inside this entry's window: the counters moved by
        // one collection of 11,596 objects, but this entry returned 0.
        let mut overlapped = event([(1, 11_596, 0), (0, 0, 0), (0, 0, 0)], 0);
        overlapped.result = 0;
        assert!(decode(&overlapped, true, true, &clock).is_none());
        // The collecting thread's own event: its return value is what the counters moved by.
        let mut own = overlapped;
        own.result = 11_596;
        assert_eq!(decode(&own, true, true, &clock).map(|c| c.collected), Some(11_596));
        // On a GIL build nothing enters concurrently: the return value is not consulted.
        assert!(decode(&overlapped, true, false, &clock).is_some());
    }

    #[test]
    fn a_call_that_collected_nothing_is_not_a_collection() {
        let clock = Clock { realtime_minus_monotonic: 0 };
        assert!(decode(&event([(0, 0, 0); 3], 2), true, false, &clock).is_none());
    }

    #[test]
    fn without_trusted_stats_the_probe_arguments_are_reported() {
        let clock = Clock { realtime_minus_monotonic: 0 };
        let c = decode(&event([(0, 0, 0), (1, 12, 3), (0, 0, 0)], 2), false, false, &clock).unwrap();
        assert_eq!((c.r#gen, c.collected, c.uncollectable), (2, 99, -1));
        let auto = decode(&event([(0, 0, 0); 3], -1), false, false, &clock).unwrap();
        assert_eq!(auto.r#gen, -1);
    }
}
