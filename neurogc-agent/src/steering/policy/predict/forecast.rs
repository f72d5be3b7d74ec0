//! The model's form: what an action brings (`Prediction`), from the collector's parameters as
//! estimated so far, before the learned model's correction.
use super::*;

/// The share of requests whose wait the objective prices: p99.
const TAIL: f64 = 0.01;
/// The widest band of tail shares a wait is priced over (`wait_p99_within_ns`): a factor of 4
/// either way, 0.25% to 4%.
const MAX_RATE_SPREAD_LN: f64 = std::f64::consts::LN_2 * 2.0;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Prediction {
    /// Each generation's pause (ns) when it runs.
    pub pause_ns: [f64; 3],
    /// Collections per second that stop at each generation (a gen1 round is not also a gen0
    /// one); for full collections, the long-run rate.
    pub rate: [f64; 3],
    /// Share of wall time in collections.
    pub share: f64,
    /// Bytes the action holds over the application's own settings (deferred and frozen garbage).
    pub memory_bytes: f64,
    /// The same, were the garbage reaching the old generation not to thin out with rarer gen1
    /// rounds (`Collector::raw`): the bound a setting not yet measured is entered on.
    pub memory_upper_bytes: f64,
    /// When the next full collection is due (s), where the counters tell.
    pub next_full_s: Option<f64>,
    /// The first full collection after a freeze, where it has not run yet: a one-off pause
    /// (ns) larger than the ones after it (`Full`); 0 where none is due.
    pub first_full_ns: f64,
}

/// Full collections under an action.
#[derive(Debug, Clone, Copy)]
struct Full {
    /// The pause of each one (ns), and how many a second in the long run.
    pause_ns: f64,
    rate: f64,
    /// When the next is due (s), where the counters tell.
    due_s: Option<f64>,
    /// The first after a freeze, where it has not run: its pause (ns), or 0.
    first_ns: f64,
}

impl Prediction {
    /// The prediction with a learned correction applied.
    pub fn corrected(mut self, k: &Correction) -> Prediction {
        let f = |x: f32| f64::from(x.clamp(-MAX_CORRECTION, MAX_CORRECTION)).exp();
        self.share = (self.share * f(k[0])).min(1.0);
        for g in 0..3 {
            self.pause_ns[g] *= f(k[g + 1]);
        }
        self.first_full_ns *= f(k[3]);
        self
    }

    /// The longest pause among the generations that run (the first full collection after a
    /// freeze included).
    pub fn pause_max_ns(&self) -> f64 {
        (0..3).filter(|&g| self.rate[g] > 0.0).map(|g| self.pause_ns[g]).fold(self.first_full_ns, f64::max)
    }

    /// How long the wait behind collections is that one request in a hundred waits longer than
    /// (ns), 0 where fewer wait at all. A request waits out the rest of any pause it arrives in
    /// (its share of wall time), and the whole of one its own work starts: collections start at
    /// an allocation, so they land in the work in hand. Of `requests_per_s` (0: unknown, and
    /// only the first is counted), one in `requests_per_s / rate` starts a collection of that
    /// generation. Counted in wall time alone, a 2 ms young round at 20,000 every 19 requests
    /// weighed no more than 0.07 ms ones at 700 (0.5% of the wall clock each), and an
    /// evaluation draw at 50 requests a second ran 1.9x the defaults' p99 there. Computed from
    /// each generation's pause and rate, so in collections, not seconds: a slower machine
    /// scales it, and the order of settings stays.
    pub fn wait_p99_ns(&self, requests_per_s: f64) -> f64 {
        self.wait_at_ns(requests_per_s, TAIL)
    }

    /// The wait at p99 (`wait_p99_ns`) where the rates it is read from are known within a
    /// factor `e^spread_ln` either way (`Collector::rate_spread_ln`): the mean of the waits
    /// that the shares of requests from 1% e^-spread to 1% e^spread wait longer than. A share
    /// of requests starting a collection is a step at 1%: where it is under, p99 does not see
    /// the pause; over, p99 is the whole pause. Rates that swing across it window by window
    /// price the same setting at both: draw 1041's service (50 requests a second, a
    /// second of cyclic garbage and a second of none, in turn) read its 1,000/50/10 frozen at
    /// a 0.14 ms wait in one window and 8.8 ms in the next, as the allocation rate's average
    /// swung 1.6x, and moved between it and 700/10/10 frozen every window for 20 s.
    pub fn wait_p99_within_ns(&self, requests_per_s: f64, spread_ln: f64) -> f64 {
        const STEPS: usize = 8;
        let spread = spread_ln.clamp(0.0, MAX_RATE_SPREAD_LN);
        if spread == 0.0 {
            return self.wait_p99_ns(requests_per_s);
        }
        let at = |i: usize| {
            let u = 2.0 * i as f64 / STEPS as f64 - 1.0;
            self.wait_at_ns(requests_per_s, TAIL * (spread * u).exp())
        };
        (0..=STEPS).map(at).sum::<f64>() / (STEPS + 1) as f64
    }

    /// The wait that a share `tail` of requests waits longer than (ns; see `wait_p99_ns`).
    fn wait_at_ns(&self, requests_per_s: f64, tail: f64) -> f64 {
        let started = |g: usize| {
            if requests_per_s > 0.0 { (self.rate[g] / requests_per_s).min(1.0) } else { 0.0 }
        };
        // The share of requests waiting longer than l is piecewise linear in l, with a step at
        // each generation's pause (the requests that start one): walked down from the longest
        // pause, it is a - b l below each, the first segment or step to pass `tail` holds the
        // wait. Solved so, not bisected: the band of tail shares asks for it nine times a
        // candidate, and bisected, the decision's p99 went from 0.5 to 1.3 ms.
        let mut gens = [0, 1, 2];
        gens.sort_by(|&x, &y| self.pause_ns[y].total_cmp(&self.pause_ns[x]));
        let (mut a, mut b) = (0.0, 0.0);
        for (i, &g) in gens.iter().enumerate() {
            let pause = self.pause_ns[g].max(0.0);
            a += self.rate[g] * pause / 1e9 + started(g);
            b += self.rate[g] / 1e9;
            if a - b * pause > tail {
                return pause;
            }
            let lower = gens.get(i + 1).map_or(0.0, |&h| self.pause_ns[h].max(0.0));
            if a - b * lower > tail {
                return (a - tail) / b;
            }
        }
        0.0
    }

    /// The share of `window_s` windows that hold a pause over `budget_ns`, the pause such a
    /// window holds on average, and the longest: a pause budget holds in 99% of windows when
    /// the share is at most 1%. Each generation weighs in its pause by its share of those
    /// windows, and so does the first full collection after a freeze, one window in the horizon
    /// as neurogc's own collection before one is. Taken as the longest of all, the full
    /// collection a deferred freeze waits for (the application's own, 750 ms on a loaded
    /// machine) priced every window of the frozen heap's 100 ms full collections as one of
    /// 750 ms: the freeze missed the pause budget six times worse than the setting it would cut
    /// those pauses of, and the test profile's heap went unfrozen for 25 s. So too the recurring
    /// ones: a young round a hair over the budget in every window, beside a full collection
    /// due in 95 minutes, priced each window as that 4.8 s collection, and evaluation draw 1609
    /// (a growing 1.16M-tuple heap) left 100,000/50/100 for its own 700/10/10, "misses less",
    /// predicted at 80x the cost with a 668 ms full collection at once (356 ms measured).
    pub fn windows_over(&self, budget_ns: f64, window_s: f64) -> PauseWindows {
        // (share of windows, pause) for each pause over the budget.
        let over = || {
            (0..3)
                .filter(|&g| self.pause_ns[g] > budget_ns && self.rate[g] > 0.0)
                .map(|g| ((self.rate[g] * window_s).min(1.0), self.pause_ns[g]))
                .chain((self.first_full_ns > budget_ns).then_some((window_s / HORIZON_S, self.first_full_ns)))
        };
        let share: f64 = over().map(|(s, _)| s).sum();
        if share <= 0.0 {
            return PauseWindows::default();
        }
        PauseWindows {
            share: share.min(1.0),
            pause_ns: over().map(|(s, p)| s * p).sum::<f64>() / share,
            longest_ns: over().map(|(_, p)| p).fold(0.0, f64::max),
        }
    }
}

/// The windows over a pause budget (`Prediction::windows_over`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PauseWindows {
    /// Their share of all windows.
    pub share: f64,
    /// The pause such a window holds, on average over them (ns).
    pub pause_ns: f64,
    /// The longest of those pauses (ns).
    pub longest_ns: f64,
}

impl Collector {
    /// The model's form alone.
    pub(super) fn raw(&self, c: &Candidate, frozen_now: bool) -> Prediction {
        let Some(r) = self.last else { return Prediction::default() };
        let [t0, t1, t2] = c.thresholds.map(|t| t.max(1) as f64);
        let alloc = self.alloc.or(0.0);
        let young = self.young_cost(t0);
        // Young rounds: every t0 net allocations; gen1 every t1 + 1 of them.
        let r0 = alloc / t0;
        let r1 = self.gen1_rate(&c.thresholds);
        let p0 = young * t0;
        let p1 = young * (t0 + self.gen1_survivors(&c.thresholds));
        let bytes = self.object_bytes.or(PRIOR_OBJECT_BYTES);
        let full = self.full(c, frozen_now, r1, t2, &r);
        let (p2, r2) = (full.pause_ns, full.rate.min(r1));
        let rate = [(r0 - r1).max(0.0), (r1 - r2).max(0.0), r2];
        let share = (rate[0] * p0 + rate[1] * p1 + rate[2] * p2) / 1e9;
        // Memory: garbage waiting in a larger young generation, garbage that full collections
        // find later, and garbage among frozen objects (never found).
        let original = self.original.unwrap_or(c.thresholds);
        // A larger young generation holds more only as fast as net allocations fill it.
        let deferred_young = (t0 - original[0] as f64).max(0.0).min(alloc * HORIZON_S);
        let young_cost = deferred_young * self.young_bytes.or(bytes * self.young_garbage.or(0.5));
        // Each gen0 round passes on what is in flight at it, and what of that dies waits in
        // generation 1 until a gen1 round: up to threshold1 rounds' worth. Uncounted, draw 1890
        // moved from 20,000/10/10 to 5,000/50/10 frozen predicted at +12 MiB, and RSS rose 21 MiB
        // in a window, past the bound (about 2,000 objects a round held 40 rounds longer).
        let deferred_gen1 = self.gen1_garbage.or(0.0) * (t1 - original[1].max(1) as f64).max(0.0) * bytes;
        let per_round = self.old_garbage.or(0.0) / self.gen1_rate.or(0.0).max(1e-3);
        // An old heap seen turning over (`Collector::learn_turnover`) dies whatever the cadence
        // of gen1 rounds: a replaced catalog waits for the next full collection whole.
        let turnover = self.turnover_bytes / bytes;
        let garbage = (per_round * r1).max(turnover);
        let own = Candidate { thresholds: original, frozen: false };
        let own_r1 = self.gen1_rate(&original);
        // From the state the process is in: frozen now, its own thresholds unfrozen would thaw.
        let r2_own = self.full(&own, frozen_now, own_r1, original[2].max(1) as f64, &r).rate;
        let period = |rate: f64| if rate > 0.0 { (1.0 / rate).min(HORIZON_S) } else { HORIZON_S };
        // Garbage waits for the next full collection: after a freeze, the first one comes only
        // once a quarter of the frozen objects' count is promoted (`Full::due_s`), however often
        // the ones after it come.
        let wait = if full.first_ns > 0.0 {
            period(r2).max(full.due_s.unwrap_or(HORIZON_S).min(HORIZON_S))
        } else {
            period(r2)
        };
        let held_longer = (wait - period(r2_own)).max(0.0) * bytes;
        let deferred = garbage * held_longer;
        // Rarer gen1 rounds thin out what they promote only where it is in flight at a round;
        // garbage that outlives several rounds is promoted whatever their cadence (micrograd's
        // graph of a step: 2,000/10/10 frozen, predicted +8 MiB so, promoted as much garbage a
        // second as 700/10/10 and held 15 MiB more, for the rest of the run). Its upper bound
        // keeps the flow full collections find now, until two young generations measured tell
        // how much of it the cadence brings (`Collector::lasting_flow`): kept whatever they
        // told, draw 1890's request garbage, one request's a round, barred every larger young
        // generation at 80-300 MiB, and the fixed freeze + 50,000/20/20 holds +10.
        let flow = self.lasting_flow(r1).unwrap_or(self.old_garbage.or(0.0));
        let deferred_upper = garbage.max(flow) * held_longer;
        // A frozen heap keeps the old objects that die later; freezing now also keeps the garbage
        // among the objects promoted since the last full collection, unless one runs first
        // (the controller adds it to the freeze), and a freeze made so keeps it while it holds
        // (the training loop's 12 MiB, which the budget had counted once spent).
        let frozen_cost = if c.frozen {
            self.old_deaths.or(0.0) * HORIZON_S * bytes + if frozen_now { self.frozen_garbage } else { 0.0 }
        } else {
            0.0
        };
        Prediction {
            pause_ns: [p0, p1, p2],
            rate,
            share,
            memory_bytes: young_cost + deferred_gen1 + deferred + frozen_cost,
            memory_upper_bytes: young_cost + deferred_gen1 + deferred_upper + frozen_cost,
            next_full_s: full.due_s,
            first_full_ns: full.first_ns,
        }
    }

    /// A full collection's cost per object walked; in a frozen heap, as measured there, else the
    /// unfrozen heap's. (A gen1 round's cost per object it walked, tried as the frozen prior, put
    /// the test profile's frozen full collections at 94 ms where they measured 2 ms, and its
    /// freeze lost to thresholds that only put the 300 ms full collection off.)
    pub(super) fn full_cost(&self, frozen: bool) -> f64 {
        let unfrozen = self.full_ns.or(PRIOR_FULL_NS);
        if frozen { self.frozen_full_ns.or(unfrozen) } else { unfrozen }
    }

    /// The first full collection after a freeze: its cost per object walked, as measured after
    /// an earlier freeze, else as the frozen heap's later ones.
    pub(super) fn first_full_cost(&self) -> f64 {
        self.frozen_first_ns.or(self.full_cost(true))
    }

    /// Gen1 rounds a second at thresholds `t`: every `threshold1 + 1`-th young round, one every
    /// `threshold0` net allocations.
    pub(super) fn gen1_rate(&self, t: &[i64; 3]) -> f64 {
        self.alloc.or(0.0) / between_gen1(t)
    }

    /// A freeze under `c` made right after the application's next full collection (a deferred
    /// one): the first full collection after it, a one-off, as (pause ns, seconds from the
    /// freeze). That collection leaves the counters at what it kept, so the one-off waits for a
    /// quarter of that to be promoted and walks all of it; the prediction for the freeze counts
    /// only what the counters read now (`Full::first_ns`), the one-off of a freeze made at once.
    /// None where the counters or the promotions do not tell.
    pub fn first_full_after_own(&self, c: &Candidate) -> Option<(f64, f64)> {
        let r = self.last?;
        let [total, _] = r.long_lived?;
        let kept = self.last_kept.unwrap_or(total as f64).max(0.0);
        let t2 = c.thresholds[2].max(1) as f64;
        let r1 = self.gen1_rate(&c.thresholds);
        let retention = self.promoted_at(&c.thresholds) * r1;
        if retention <= 0.0 {
            return None;
        }
        let due = (kept / 4.0 / retention).max((t2 + 1.0) / r1);
        let pause = self.first_full_cost() * retention * due * self.pause_ratio_for(c, 2, Some(1.0));
        Some((pause, due))
    }

    /// Full collections under `c` (see `Full`).
    fn full(&self, c: &Candidate, frozen_now: bool, r1: f64, t2: f64, r: &Reading) -> Full {
        // Objects reaching the old generation per second under `c`.
        let retention = self.promoted_at(&c.thresholds) * r1;
        let cost = self.full_cost(c.frozen);
        let rounds_left = r.older_counts.map_or(t2 + 1.0, |[_, c2]| (t2 + 1.0 - c2 as f64).max(0.0));
        let by_rounds = if r1 > 0.0 { rounds_left / r1 } else { f64::INFINITY };
        match r.long_lived {
            Some([total, pending]) => {
                let (total, pending) = (total as f64, pending as f64);
                let by_pending = if pending > total / 4.0 {
                    0.0
                } else if retention > 0.0 {
                    (total / 4.0 - pending) / retention
                } else {
                    f64::INFINITY
                };
                let due = by_rounds.max(by_pending);
                let pending_then = pending + retention * due.min(HORIZON_S);
                // Frozen objects are not walked: after a freeze the old generation holds only
                // what was promoted since.
                // Unfreezing puts every frozen object back in the old generation: the next full
                // collection walks them all.
                let thawed = if !c.frozen && frozen_now && !self.frozen_uncollected {
                    r.freeze_count.unwrap_or(0).max(0) as f64
                } else {
                    0.0
                };
                // A freeze leaves the counters as they are (`froze`): the first full collection
                // after it comes when the application's own would have, and walks only what was
                // promoted since.
                let freezes = c.frozen && !frozen_now;
                let first_after_freeze = freezes || (c.frozen && self.frozen_uncollected);
                // Of what the counters count then, what is still alive (`Collector::alive`):
                // promoted since the last full collection, or in the time to come.
                let alloc = self.alloc.or(0.0);
                let ahead = alloc * due.min(HORIZON_S);
                let since =
                    self.since_full_s.unwrap_or(if retention > 0.0 { pending / retention } else { 0.0 });
                let span_then = alloc * since + ahead;
                let walked = thawed
                    + if freezes {
                        self.alive(0.0, pending_then - pending, ahead)
                    } else if first_after_freeze {
                        let promoted = (total + pending_then - r.freeze_count.unwrap_or(0) as f64)
                            .max(pending_then - pending);
                        self.alive(0.0, promoted, span_then)
                    } else {
                        self.alive(total, pending_then, span_then)
                    };
                // Then one every `t2 + 1` gen1 rounds once a quarter of the old generation is
                // new (the counters go on counting frozen objects until a full collection).
                let rounds = (t2 + 1.0) / r1.max(1e-9);
                let due_s = due.is_finite().then_some(due);
                if retention <= 0.0 {
                    return Full { pause_ns: cost * walked, rate: 0.0, due_s, first_ns: 0.0 };
                }
                if first_after_freeze {
                    // The first full collection after a freeze is a one-off: the counters still
                    // count the frozen objects, so it waits for a quarter of them to be promoted
                    // and walks all that. It leaves in the old generation only what is in flight
                    // (a gen1 round's promotions: a heap that still grows shows it once this one
                    // has run, and the setting is judged by that), and the next ones come every
                    // `t2 + 1` gen1 rounds over little. Taken as the first's size and cadence,
                    // the ETL batch's 700/10/10 frozen looked like a 14 ms pause every few
                    // seconds, where it measured 2.4 ms eleven times a second.
                    let kept = self.promoted_at(&c.thresholds).min(walked);
                    let cycle = rounds.max(kept / 4.0 / retention);
                    let steady = self.alive(kept, retention * cycle, alloc * cycle);
                    return Full {
                        pause_ns: cost * steady,
                        rate: 1.0 / cycle,
                        due_s,
                        first_ns: self.first_full_cost() * walked,
                    };
                }
                // The first full collection after an unfreeze is a one-off as well: it walks the
                // thawed heap whole, when the counters say (they count what the last one kept,
                // not the thawed objects), and leaves them at the whole heap, so the next ones
                // come as the application's own did before the freeze. Taken at the frozen
                // heap's cadence, every full collection of the unfrozen setting walked the thawed
                // heap as often as the frozen heap's small ones came: seed-155 draw 1936 (a
                // 1.25M-object heap whose entries are replaced), frozen, ran one every second,
                // and its own thresholds unfrozen read as the whole heap walked every second.
                if thawed > 0.0 {
                    let kept = thawed + total;
                    let cycle = rounds.max(kept / 4.0 / retention);
                    return Full {
                        pause_ns: cost * (thawed + self.alive(total, retention * cycle, alloc * cycle)),
                        rate: 1.0 / cycle,
                        due_s,
                        first_ns: cost * walked,
                    };
                }
                // Each full collection walks what the last one left and what a cycle promotes.
                // The pending count sampled now says when the next one comes, not its size: where
                // several come a window, it only says where in its cycle the window ended
                // (micrograd frozen read 0 to 215,000 pending from one window to the next, its
                // full collections 180 to 260 ms in every one). Taken as the size of each, it
                // swung every candidate's pause by 4x a window, and the controller moved to
                // whichever setting the last sample flattered.
                let cycle = rounds.max(total / 4.0 / retention);
                let walked = thawed + self.alive(total, retention * cycle, alloc * cycle);
                Full { pause_ns: cost * walked, rate: 1.0 / rounds.max(due).max(cycle), due_s, first_ns: 0.0 }
            }
            None => {
                // No counters: what full collections have cost, at the rate the thresholds allow.
                let own = r.thresholds.map_or(t2, |t| t[2].max(1) as f64);
                let rate = self.full_rate.or(0.0) * (own + 1.0) / (t2 + 1.0);
                let t0 = c.thresholds[0].max(1) as f64;
                let young = self.young_cost(t0) * t0;
                let pause = match (c.frozen, self.full_pause_ns.0) {
                    // A frozen heap is not walked: what is left is young.
                    (true, _) if !frozen_now => young,
                    (_, Some(p)) => p,
                    (_, None) => 0.0,
                };
                Full { pause_ns: pause, rate, due_s: None, first_ns: 0.0 }
            }
        }
    }
}
