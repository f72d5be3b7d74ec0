//! What of the young generations lasts. An object that outlives every gen1 round (a cache's
//! new entry, a heap that still grows) is walked by each gen1 round until one promotes it, and
//! is promoted once: a larger young generation holds, and walks, more of them a round, and
//! rarer rounds promote no fewer a second. Garbage, and objects in flight at a round, do
//! neither. Held as constant per round, the survivors of evaluation draw 1044 (a 1.78M-list
//! cache, 32 entries replaced a request) priced its gen1 round at 2,000/20/10 at 2x the
//! 9.5 ms one of 700/10/10; it walked 5.8x the objects there and paused 94 ms.
use super::{Avg, Reading};

/// Shares of what a gen1 round walks and promotes that last, read from windows that ran gen1
/// rounds and no full collection at one setting (`Lasting::observe`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Lasting {
    /// Of generation 1 at a gen1 round: the gen0 rounds' survivors since the last one.
    gen1: Avg,
    /// Of what a gen1 round promotes.
    promoted: Avg,
}

impl Lasting {
    /// One window's gen1 rounds, each of which promoted `promoted` objects. A collection finds
    /// every object it walks dead or promotes it, so a gen1 round walked what it promoted and
    /// what it found; the young rounds' median pause against its own says how much of that was
    /// the young generation, and what a young round found dead, how much of that survives a
    /// round. Survivors in flight at a round are promoted once, at the gen1 round they are in
    /// flight at; those that last are promoted from every young round since the last gen1
    /// round: what a gen1 round promotes beyond one young round's survivors, over threshold1,
    /// is what lasts of each. (Draw 1044 at 700/10/10: 22,000 promoted a round, 1,023 found
    /// dead, 1,900 walked in the young generation of which 670 dead: 2,100 that last a round,
    /// 98% of generation 1; a service whose requests leave cyclic garbage: 0-10%.)
    pub(super) fn observe(&mut self, r: &Reading, promoted: f64) {
        let Some(t) = r.thresholds else { return };
        let [p0, p1] = [r.pause_p50_ns[0], r.pause_p50_ns[1]];
        let walked = promoted + r.collected_per[1].max(0.0);
        if !(promoted >= 0.0 && walked > 0.0 && p0 > 0.0 && p0 < p1) {
            return;
        }
        let young = walked * p0 / p1;
        let survivors = young - r.collected_per[0].max(0.0);
        if survivors <= 0.0 {
            return;
        }
        let t1 = t[1].max(1) as f64;
        let lasting = ((promoted - survivors) / t1).max(0.0);
        self.gen1.add((t1 * lasting / (walked - young)).min(1.0), 0.3);
        if promoted > 0.0 {
            self.promoted.add(((t1 + 1.0) * lasting / promoted).min(1.0), 0.3);
        }
    }

    /// The share of generation 1 that lasts: 0 until a window told.
    pub(super) fn gen1(&self) -> f64 {
        self.gen1.or(0.0)
    }

    /// The share of a gen1 round's promotions that last: 0 until a window told.
    pub(super) fn promoted(&self) -> f64 {
        self.promoted.or(0.0)
    }
}

/// `measured` as it comes under another setting: the share that lasts grows by `ratio` (the
/// net allocations it comes from, against where it was measured), the rest stays as it is.
pub(super) fn scaled(measured: f64, share: f64, ratio: f64) -> f64 {
    measured * (1.0 - share) + measured * share * ratio
}
