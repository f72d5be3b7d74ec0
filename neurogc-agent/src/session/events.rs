//! Turns the kernel's raw `GcEvent` into a `Collection`: which generation really ran and what it
//! freed, read off the difference of `generation_stats[]` across the collection. That is exact on
//! every version (3.13+ passes −1 "auto" as the generation argument) and filters calls that did
//! not collect (re-entries, 3.14's no-op increments).
use neurogc_common::{EVENT_HAS_STATS, GcEvent, GenStats, NUM_GENERATIONS, RUNNING_UNKNOWN};
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
        self.to_unix_ns(Clock::now_monotonic_ns())
    }

    /// CLOCK_MONOTONIC, the eBPF programs' `bpf_ktime_get_ns`.
    pub fn now_monotonic_ns() -> u64 {
        clock_ns(nix::time::ClockId::CLOCK_MONOTONIC) as u64
    }

    pub fn to_unix_ns(self, monotonic_ns: u64) -> u64 {
        (monotonic_ns as i128 + self.realtime_minus_monotonic).max(0) as u64
    }
}

/// `stats_trusted`: the GC state layout was validated in the live process. `concurrent`: on a
/// free-threaded build, the running totals this process's collections were counted up to (see
/// `Counted`); None on a GIL build, where one thread at a time is in the collector.
pub fn decode(
    ev: &GcEvent,
    stats_trusted: bool,
    concurrent: Option<&mut Counted>,
    clock: &Clock,
) -> Option<Collection> {
    let (generation, collected, uncollectable) = if stats_trusted && ev.flags & EVENT_HAS_STATS != 0 {
        let delta = match concurrent {
            Some(counted) => counted.claim(ev)?,
            None => ev.delta,
        };
        // The oldest generation whose counter moved is the one collected (younger ones are
        // merged into it, but only its own entry is bumped).
        let generation = (0..NUM_GENERATIONS).rev().find(|&g| delta[g].collections > 0)?;
        let collected: i64 = delta.iter().map(|d| d.collected).sum();
        let uncollectable: i64 = delta.iter().map(|d| d.uncollectable).sum();
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

type Stats = [GenStats; NUM_GENERATIONS];

fn minus(a: &Stats, b: &Stats) -> Stats {
    std::array::from_fn(|g| GenStats {
        collections: a[g].collections - b[g].collections,
        collected: a[g].collected - b[g].collected,
        uncollectable: a[g].uncollectable - b[g].uncollectable,
    })
}

/// A free-threaded build's collections, counted by the interpreter's running totals.
///
/// There, threads enter the collector while one collects and return 0 at once, and an event's
/// window (entry to return) may hold another thread's collection ending: a waiting entry's,
/// and even a collecting thread's own, when it read the totals just before the previous
/// collection ended. But collections run one at a time, and the next one cannot end before the
/// last one's thread has returned (its stop-the-world waits for that thread): each one's own
/// event reads, at its return, the totals just after it, and comes after the previous one's.
/// So a collection is the event that takes the totals past what was counted, by exactly one
/// collection, and returns what that one freed (n + m; an entry that did not collect returns
/// 0). One that freed nothing reads like an entry that returned at once in its window: then
/// whichever comes first is counted, once.
#[derive(Debug, Default)]
pub struct Counted(Option<Stats>);

impl Counted {
    /// What `ev`'s collection added to the totals, if it is the collection that moved them.
    fn claim(&mut self, ev: &GcEvent) -> Option<Stats> {
        let counted = self.0.unwrap_or_else(|| minus(&ev.after, &ev.delta));
        let new = minus(&ev.after, &counted);
        let freed = |s: &Stats| s.iter().map(|d| d.collected + d.uncollectable).sum::<i64>();
        if new.iter().any(|d| d.collections < 0) {
            // Read before the last counted collection ended: nothing new.
            return None;
        }
        match new.iter().map(|d| d.collections).sum::<i64>() {
            0 => None,
            1 if freed(&new) == ev.result => {
                self.0 = Some(ev.after);
                Some(new)
            }
            // Another thread's collection, whose own event follows.
            1 => None,
            // Collections never seen (lost events): count on from here, this event's own if
            // its window holds just one.
            _ => {
                self.0 = Some(ev.after);
                let own =
                    ev.delta.iter().map(|d| d.collections).sum::<i64>() == 1 && freed(&ev.delta) == ev.result;
                own.then_some(ev.delta)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(s: [(i64, i64, i64); 3]) -> Stats {
        s.map(|(c, k, u)| GenStats { collections: c, collected: k, uncollectable: u })
    }

    fn event(delta: [(i64, i64, i64); 3], arg_gen: i64) -> GcEvent {
        GcEvent {
            start_ns: 1_000,
            end_ns: 51_000,
            pid: 7,
            tid: 8,
            arg_gen,
            result: 99,
            delta: stats(delta),
            flags: EVENT_HAS_STATS,
            ..GcEvent::EMPTY
        }
    }

    /// A free-threaded build's event: the totals at its return and what they moved by in its
    /// window, and its return value.
    fn window(after: [(i64, i64, i64); 3], delta: [(i64, i64, i64); 3], result: i64) -> GcEvent {
        GcEvent { after: stats(after), result, ..event(delta, 0) }
    }

    const CLOCK: Clock = Clock { realtime_minus_monotonic: 0 };

    /// (generation, collected) of each event counted, in order.
    fn counted(events: &[GcEvent]) -> Vec<(i8, i64)> {
        let mut totals = Counted::default();
        events
            .iter()
            .filter_map(|e| decode(e, true, Some(&mut totals), &CLOCK))
            .map(|c| (c.r#gen, c.collected))
            .collect()
    }

    #[test]
    fn true_generation_comes_from_the_stats_not_the_auto_argument() {
        let c = decode(&event([(0, 0, 0), (1, 12, 3), (0, 0, 0)], -1), true, None, &CLOCK).unwrap();
        assert_eq!((c.r#gen, c.collected, c.uncollectable, c.duration_ns), (1, 12, 3, 50_000));
    }

    #[test]
    fn on_a_free_threaded_build_an_entry_that_returned_at_once_claims_no_collection() {
        // Another thread's collection ended inside a waiting entry's window: the totals moved by
        // one collection of 11,596 objects, but the entry returned 0. Then the collection's own
        // event, which returned what it freed.
        let waiting =
            window([(5, 11_596, 0), (0, 0, 0), (0, 0, 0)], [(1, 11_596, 0), (0, 0, 0), (0, 0, 0)], 0);
        let own =
            window([(5, 11_596, 0), (0, 0, 0), (0, 0, 0)], [(1, 11_596, 0), (0, 0, 0), (0, 0, 0)], 11_596);
        assert_eq!(counted(&[waiting, own]), [(0, 11_596)]);
        // On a GIL build nothing enters concurrently: the return value is not consulted.
        assert!(decode(&waiting, true, None, &CLOCK).is_some());
    }

    #[test]
    fn a_collection_whose_window_holds_the_previous_one_counts_only_its_own() {
        // Thread A read the totals just before thread B's gen0 collection ended, then collected
        // gen1 itself: A's window holds both, its return value only its own 58,616.
        let b = window([(4, 900, 0), (1, 40_000, 0), (0, 0, 0)], [(1, 900, 0), (0, 0, 0), (0, 0, 0)], 900);
        let a = window(
            [(4, 900, 0), (2, 98_616, 0), (0, 0, 0)],
            [(1, 900, 0), (1, 58_616, 0), (0, 0, 0)],
            58_616,
        );
        assert_eq!(counted(&[b, a]), [(0, 900), (1, 58_616)]);
    }

    #[test]
    fn a_collection_that_freed_nothing_is_counted_once() {
        // An entry that returned at once around a collection that freed nothing reads just like
        // it (both 0): whichever comes first is counted, the other not again.
        let waiting = window([(3, 0, 0), (0, 0, 0), (0, 0, 0)], [(1, 0, 0), (0, 0, 0), (0, 0, 0)], 0);
        let own = window([(3, 0, 0), (0, 0, 0), (0, 0, 0)], [(1, 0, 0), (0, 0, 0), (0, 0, 0)], 0);
        assert_eq!(counted(&[waiting, own]), [(0, 0)]);
        // A late reader of older totals counts nothing either.
        let stale = window([(2, 0, 0), (0, 0, 0), (0, 0, 0)], [(0, 0, 0); 3], 0);
        assert_eq!(counted(&[own, stale]), [(0, 0)]);
    }

    #[test]
    fn after_lost_events_counting_goes_on_from_the_next_collection() {
        let first = window([(1, 10, 0), (0, 0, 0), (0, 0, 0)], [(1, 10, 0), (0, 0, 0), (0, 0, 0)], 10);
        // Two collections' events were lost: the next one counts its own window only.
        let next = window([(3, 35, 0), (1, 7, 0), (0, 0, 0)], [(0, 0, 0), (1, 7, 0), (0, 0, 0)], 7);
        let then = window([(4, 38, 0), (1, 7, 0), (0, 0, 0)], [(1, 3, 0), (0, 0, 0), (0, 0, 0)], 3);
        assert_eq!(counted(&[first, next, then]), [(0, 10), (1, 7), (0, 3)]);
    }

    #[test]
    fn a_call_that_collected_nothing_is_not_a_collection() {
        assert!(decode(&event([(0, 0, 0); 3], 2), true, None, &CLOCK).is_none());
    }

    #[test]
    fn without_trusted_stats_the_probe_arguments_are_reported() {
        let c = decode(&event([(0, 0, 0), (1, 12, 3), (0, 0, 0)], 2), false, None, &CLOCK).unwrap();
        assert_eq!((c.r#gen, c.collected, c.uncollectable), (2, 99, -1));
        let auto = decode(&event([(0, 0, 0); 3], -1), false, None, &CLOCK).unwrap();
        assert_eq!(auto.r#gen, -1);
    }
}
