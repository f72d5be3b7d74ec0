//! The model of the collector: for the process as observed so far and a candidate action
//! (thresholds, with or without `gc.freeze()`), what the next minute brings — each generation's
//! pause where it runs, the share of wall time in collections, and the memory the action costs
//! over the application's own settings.
//!
//! The form is CPython's own accounting (3.8–3.13, 3.14.5+): a young collection runs every
//! `threshold0` net container allocations and walks them; every `threshold1 + 1`-th is a gen1
//! collection, which also walks the survivors of the gen0 rounds since the last; a full
//! collection needs `threshold2 + 1` gen1 rounds *and* `long_lived_pending > long_lived_total/4`,
//! and walks the whole old generation — except what `gc.freeze()` moved to the permanent
//! generation. Pause is work times a cost per object.
//!
//! The parameters are estimated online from this process's own collections and GC state, as
//! G1's pause predictor does (decaying averages): cost per object of young and full collections,
//! the young survivors per round, the objects each gen1 round promotes into the old generation
//! (what of both lasts, apart from what is in flight: `lasting`), the garbage found there, the
//! bytes an object holds. Priors (measured on CPython 3.11, x86-64) stand in until the process
//! shows its own.
mod forecast;
mod inputs;
mod lasting;
mod reading;

pub use forecast::Prediction;
pub use inputs::{FEATURE_COUNT, FEATURES};
use lasting::Lasting;
pub use reading::{Candidate, Reading};

/// A young collection's cost per object walked, before the process shows its own (ns).
const PRIOR_YOUNG_NS: f64 = 40.0;
/// How that cost grows with threshold0 before two thresholds have been seen, and at the least
/// beyond the largest: cost per object ∝ threshold0^0.05 (47 → 57 ns from 700 to 50,000 for
/// garbage cycles, 14 → 17 ns for survivors, a microbenchmark's, CPython 3.11 here). A process
/// whose young objects reference much more grows faster: learned.
const PRIOR_YOUNG_SLOPE: f64 = 0.05;
/// How it may grow beyond the largest threshold0 seen (`young_cost_bound`). Real heaps' young
/// objects reference the rest of the heap, and a young generation that outgrows the CPU's caches
/// pays a miss for much of what it walks: cost per object ∝ threshold0^0.3 to ^0.6 where they were
/// measured (the demo service 43 → 165 → 216 ns at 700, 20,000 and 100,000; evaluation draw
/// 1077 76 → 220 ns from 5,000 to 50,000, after 94 ns at 700; a training loop 20 → 300 ns from
/// 700 to 50,000), where the microbenchmark's slope put 1077's 50,000/50/10 under the pause
/// budget, and its gen0 rounds took 9-16 ms (its own p99 0.08 ms). A bound on young pauses at
/// a setting not measured, not the estimate: the same slope as the estimate made larger young
/// generations look dearer in CPU than micrograd's and the controller's tests measured them.
const YOUNG_SLOPE_BEYOND: f64 = 0.35;
/// A full collection's cost per object (ns): old objects are spread over the heap, so it is
/// several times a young one's (141–229 ns measured on heaps of 0.2–2M objects).
const PRIOR_FULL_NS: f64 = 200.0;
/// A full collection that kept at most this many times what the one before it kept says the
/// heap has stopped growing (the micrograd training loop's kept 470k, 484k, 503k, 482k and 460k
/// objects in turn; a cache filling up keeps more each time). Counted in collections, not
/// seconds: a slower machine takes longer to show it, not a different answer.
const WARM_GROWTH: f64 = 1.05;
/// A window ran under one setting where the actuator's last change came within this share of
/// its start: the decision and the write take a few milliseconds after the window before ends.
const SETTLED_SHARE: f64 = 0.05;
/// Bytes per tracked object, before the heap shows its own.
const PRIOR_OBJECT_BYTES: f64 = 256.0;
/// How far ahead predictions look (s): how long the old generation's growth is followed, and
/// how long frozen and deferred garbage are counted to accumulate.
pub const HORIZON_S: f64 = 600.0;

/// What the learned model says the analytic prediction misses, per candidate: ln(measured /
/// predicted) of the GC share and of generations 0, 1 and 2's pauses.
pub type Correction = [f32; 4];

/// A learned correction moves a prediction by at most this factor either way: a model trained on
/// other processes does not outvote this one's own measurements by more.
pub(super) const MAX_CORRECTION: f32 = std::f32::consts::LN_10;

/// A decaying average that starts from its first sample.
#[derive(Debug, Clone, Copy, Default)]
struct Avg(Option<f64>);

impl Avg {
    fn add(&mut self, x: f64, weight: f64) {
        if x.is_finite() {
            self.0 = Some(self.0.map_or(x, |v| v + weight * (x - v)));
        }
    }
    fn or(self, prior: f64) -> f64 {
        self.0.unwrap_or(prior)
    }
}

/// Measured over predicted for one generation's longest pause in a window, with how the
/// window's collections of it spread (ln of the longest over the median) and how many it held.
/// The longest of n pauses grows with n: measured at 700/10/10 (66 young rounds a window, the
/// longest 2-4x their median), the ratio priced a setting that runs one a window at the
/// longest of 66 (tuning draw 32: 20,000/10/10's young rounds predicted 36 ms, 50,000's
/// 106 ms, where freeze + 50,000/20/20 measured 31 ms at the longest).
#[derive(Debug, Clone, Copy, Default)]
struct PauseRatio {
    ratio: Avg,
    spread_ln: Avg,
    per_window: Avg,
}

impl PauseRatio {
    fn add(&mut self, ratio: f64, r: &Reading, g: usize) {
        self.ratio.add(ratio, 0.3);
        if r.pause_p50_ns[g] > 0.0 {
            self.spread_ln.add((r.pause_max_ns[g] / r.pause_p50_ns[g]).max(1.0).ln(), 0.3);
            self.per_window.add(r.collections[g] as f64, 0.3);
        }
    }

    /// The ratio for a setting that runs `per_window` collections of the generation a window
    /// (None: as measured). The longest of n samples is about sqrt(2 ln n) deviations above
    /// their median (the extreme of a normal, in ln of the pause): the measured spread is
    /// scaled by that against the count it was measured over, and one a window has none.
    fn at(&self, per_window: Option<f64>) -> Option<f64> {
        let ratio = self.ratio.0?;
        let (Some(n), Some(spread), Some(m)) = (per_window, self.spread_ln.0, self.per_window.0) else {
            return Some(ratio);
        };
        if m < 2.0 {
            return Some(ratio);
        }
        let scale = (n.max(1.0).ln() / m.ln()).sqrt().min(1.5);
        Some(ratio * (spread * (scale - 1.0)).exp())
    }
}

/// Garbage found by full collections under one size of the young generations (threshold0 and
/// threshold1): with two sizes measured, how much of it reaches the old generation whatever the
/// cadence of gen1 rounds (`Collector::lasting_flow`).
#[derive(Debug, Clone, Copy, Default)]
struct YoungFlow {
    /// Gen1 rounds per second, and garbage objects per second found by full collections.
    rounds: Avg,
    found: Avg,
    /// Full collections of the application's own seen under it.
    fulls: i64,
}

/// Net allocations from one gen1 round to the next under thresholds `t`.
fn between_gen1(t: &[i64; 3]) -> f64 {
    t[0].max(1) as f64 * (t[1].max(1) as f64 + 1.0)
}

/// Of objects arriving evenly over `x` lifetimes (each dying at a constant rate), the share
/// still alive at the end: (1 - e^-x) / x, 1 where nothing dies.
fn still_alive(x: f64) -> f64 {
    if x < 1e-6 { 1.0 } else { -(-x).exp_m1() / x }
}

/// Full collections a young generation's flow of old garbage is read from before it counts: a
/// window's few full collections find what the gen1 rounds before them promoted, so a flow read
/// from one or two is mostly the last setting's.
const MIN_FLOW_FULLS: i64 = 4;
/// Gen1 rounds a second under two young generations differ by at least this factor before their
/// flows of old garbage are compared: closer, their difference is mostly noise.
const MIN_FLOW_SPREAD: f64 = 1.5;

/// The weight of a window's allocation rate in the average the model predicts from.
const ALLOC_WEIGHT: f64 = 0.5;

/// Sizes of the young generations whose measurements are kept apart (`slot`): a process tries a
/// handful; past this many, a new size is not kept.
const SIZES_KEPT: usize = 16;

/// The entry kept for `key`, made where there is room.
fn slot<K: PartialEq, V: Default>(kept: &mut Vec<(K, V)>, key: K) -> Option<&mut V> {
    let i = match kept.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None if kept.len() < SIZES_KEPT => {
            kept.push((key, V::default()));
            kept.len() - 1
        }
        None => return None,
    };
    Some(&mut kept[i].1)
}

/// The collector as estimated from this process.
#[derive(Debug, Clone, Default)]
pub struct Collector {
    /// Application's own thresholds: memory costs are counted from them.
    original: Option<[i64; 3]>,
    alloc: Avg,
    /// How far one window's allocation rate strays from the average before it (mean square,
    /// ln): what the rates predicted from that average are known within (`rate_spread_ln`).
    alloc_ln_var: Avg,
    /// The share of wall time the process wanted a CPU (`Reading::demand`), while it runs.
    demand: Avg,
    /// Times a second its threads were put on a CPU, while it runs: about its requests.
    runs: Avg,
    young_ns: Avg,
    /// Young cost per object by threshold0, as observed (threshold0, decaying average): a larger
    /// young generation holds more live objects, each walked with what it references, so the
    /// cost per object grows with it (20 ns at 700 and 300 ns at 50,000 on a training loop).
    young_by_t0: Vec<(f64, Avg)>,
    full_ns: Avg,
    /// A full collection's cost per object walked while the heap is frozen: what it walks then
    /// is what was promoted since the last one, mostly garbage, and freeing an object costs more
    /// than walking a live one (the demo service: 6 ms for 15,000 objects found dead, 170 ms for
    /// 136,000, where the unfrozen heap's full collections took 0.5 µs a live object).
    frozen_full_ns: Avg,
    /// The same for the first full collection after a freeze, a one-off (`Full::first_ns`): it
    /// waits for a quarter of the frozen count to be promoted and frees most of what it walks.
    /// Learnt into `frozen_full_ns`, the demo service's (91 ms for 115,000 objects, 0.8 µs each,
    /// with another process busy on a CPU) priced the frozen setting's next ones (2-5 ms for
    /// 15,000-16,000, 0.14-0.29 µs each) from it, and the agent left a setting those measured
    /// well within the pause budget.
    frozen_first_ns: Avg,
    /// Survivors of a gen0 round, and threshold0 and threshold1 where they were measured: the
    /// working set in flight, and what lasts of the round's allocations (`gen1_survivors`).
    working_set: Avg,
    working_set_t0: Avg,
    working_set_t1: Avg,
    /// Objects a gen1 round promotes into the old generation (`long_lived_pending`'s growth per
    /// gen1 collection), and the net allocations between gen1 rounds where they were measured:
    /// what is in flight at a gen1 round, and what lasts of them (`promoted_at`).
    promoted: Avg,
    promoted_between: Avg,
    /// What lasts of generation 1 and of a gen1 round's promotions.
    lasting: Lasting,
    /// Garbage objects per second found by full collections, and gen1 rounds per second then:
    /// garbage reaches the old generation by promotion, so rarer gen1 rounds bring less.
    old_garbage: Avg,
    gen1_rate: Avg,
    /// The same by the young generations in force (`lasting_flow`).
    flow_by_young: Vec<([i64; 2], YoungFlow)>,
    /// Objects per second that died old (see `observe`): what frozen garbage accumulates at.
    old_deaths: Avg,
    /// The chance that an object of the old generation dies, per net allocation: reference
    /// counting frees old objects that no collection counts (a cache's replaced entries), and
    /// between two full collections the counters tell how many (`observe`). What lasts
    /// of the young generations dies at it too (`Collector::accrued`).
    death_per_alloc: Avg,
    /// Seconds since the last full collection, as the windows tell (half of the window that held
    /// it counted on either side).
    since_full_s: Option<f64>,
    /// The share of the objects promoted since the last full collection that it finds dead:
    /// what a freeze now would keep of the pending ones for ever.
    pending_garbage: Avg,
    object_bytes: Avg,
    /// Bytes a deferred young object holds, measured from a change of threshold0.
    young_bytes: Avg,
    /// The share of a young generation that is garbage when it is collected: what a larger one
    /// holds on to (acyclic garbage is freed at once whatever the thresholds).
    young_garbage: Avg,
    /// Garbage a gen1 round finds for each gen0 round since the last, beyond the young
    /// generation's own: what survives a gen0 round and dies before the next gen1 round (a
    /// request's cycles in flight at a round), which a larger threshold1 holds for longer.
    gen1_garbage: Avg,
    /// Bytes a second of the old heap seen dying under neurogc's freeze (`learn_turnover`): old
    /// garbage that unfrozen, the application's full collections find, however few of them the
    /// windows before had shown.
    turnover_bytes: f64,
    /// The last full pause seen, for builds without long-lived counters.
    full_pause_ns: Avg,
    /// Full collections per second, for builds without long-lived counters.
    full_rate: Avg,
    last: Option<Reading>,
    /// Measured over predicted, for the action in force: the share of time in GC, and each
    /// generation's longest pause (the residual correction, applied to every candidate).
    share_ratio: Avg,
    pause_ratio: [PauseRatio; 3],
    /// The same per action that has been in force: what was measured at a setting is what is
    /// predicted there when it comes up again, and a setting at least as large in the thresholds
    /// a generation's pause grows with is predicted no better than the nearest one measured
    /// below it (a larger young generation that walked 1.5× the prediction once does again).
    pause_ratio_at: Vec<(Candidate, [PauseRatio; 3])>,
    /// neurogc froze right after a full collection, and no window has shown it yet: it walked
    /// the whole heap, frozen objects then included (a full collection's cost per object, as
    /// any of the application's), which the frozen action's collections will not.
    collected_for_freeze: bool,
    /// The last window observed held that collection.
    last_held_freeze_collection: bool,
    /// neurogc collected right after its freeze (`froze`), and no window has shown it yet: a
    /// full collection that walked next to nothing, no measure of what full collections cost.
    reset_unseen: bool,
    /// neurogc asked for a freeze without a collection first, and no window has been read since.
    froze_at_once: bool,
    /// See `held_first_full_after_freeze`.
    last_held_first_full: bool,
    /// neurogc undid its freeze and no full collection has run since: the next walks the
    /// thawed heap whole, a pause of the undo's.
    thawing: bool,
    /// See `held_carried_pause`.
    last_held_carried: bool,
    /// When the actuator last changed the setting (Unix ns; `wrote`).
    wrote_ns: u64,
    /// See `held_two_settings`.
    last_held_two: bool,
    /// The action in force at the last reading, as this model knew it then.
    seen: Option<Candidate>,
    /// A freeze (the application's or neurogc's) and no full collection since: the old
    /// generation's counters still include the frozen objects.
    frozen_uncollected: bool,
    /// neurogc's freeze is in force.
    frozen: bool,
    /// Bytes of garbage the freeze in force kept (made without a collection first): what every
    /// frozen setting keeps on top of its own, until an unfreeze.
    frozen_garbage: f64,
    /// What the last full collection of the application's own kept (`long_lived_total`).
    last_kept: Option<f64>,
    /// A full collection kept no more than the one before it (`WARM_GROWTH`): the heap has
    /// stopped growing, so a freeze now takes the heap the process runs on.
    warm: bool,
    windows: u64,
}

impl Collector {
    pub fn new(original: [i64; 3]) -> Collector {
        Collector { original: Some(original), ..Collector::default() }
    }

    /// Windows observed.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// Whether the process has shown enough of itself for predictions to mean something: some
    /// allocation seen and two windows to estimate rates over.
    pub fn ready(&self) -> bool {
        self.windows >= 2
    }

    /// Whether the heap has been seen warm: a full collection of the application's own kept no
    /// more than the one before it.
    pub fn heap_warm(&self) -> bool {
        self.warm
    }

    /// neurogc froze the heap (`collected`: right after a full collection, the application's
    /// own or one of neurogc's, which the window read next holds). Unless `reset`, nothing is
    /// collected after the freeze (the guard's freeze(), python-hook/neurogc_hook.py): the old
    /// generation's counters go on counting the frozen objects until the next full collection.
    /// With it, a full collection right after the freeze started them again from the unfrozen
    /// heap: the frozen setting's small full collections from the first.
    pub fn froze(&mut self, collected: bool, reset: bool) {
        self.frozen_garbage = if collected { 0.0 } else { self.frozen_pending_bytes() };
        self.frozen_uncollected = !reset;
        self.frozen = true;
        self.collected_for_freeze = collected;
        self.froze_at_once = !collected;
        self.reset_unseen = reset;
    }

    /// The counters showed a freeze that was not neurogc's: they count the frozen objects until
    /// the application's next full collection.
    fn app_froze(&mut self) {
        self.frozen_garbage = self.frozen_pending_bytes();
        self.frozen_uncollected = true;
        self.frozen = true;
        self.collected_for_freeze = false;
    }

    /// The action in force at the last reading (None before one with thresholds).
    pub fn in_force(&self) -> Option<Candidate> {
        let t = self.last?.thresholds?;
        Some(Candidate { thresholds: t, frozen: self.frozen })
    }

    /// Whether the heap is frozen, as far as this model knows (neurogc's freeze, or one the
    /// counters showed).
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// neurogc's freeze was undone.
    pub fn unfroze(&mut self) {
        self.frozen_garbage = 0.0;
        self.frozen_uncollected = false;
        self.frozen = false;
        self.collected_for_freeze = false;
        self.froze_at_once = false;
        self.reset_unseen = false;
    }

    /// neurogc's freeze was undone by neurogc: the next full collection walks the thawed heap.
    pub fn thaw(&mut self) {
        self.unfroze();
        self.thawing = true;
    }

    /// Whether the last window's longest pause was a move's rather than the setting in force's:
    /// a collection that began before the move (read when it ends, in the window after), or the
    /// first full collection after neurogc's unfreeze, which walks the thawed heap once. Counted
    /// as the setting's, evaluation draw 1896's undo (a 1.2M-object catalog rebuilt every 7 s)
    /// charged its own thresholds with the frozen heap's 322 ms collection, and the next
    /// setting with the thawed heap's 1.6 s one: each read as the setting missing the pause
    /// budget, and it moved twice to thresholds that put full collections off, each undone for
    /// memory, its p99 1.77x the defaults'.
    /// So is the first window after a move that made a young generation smaller: its first
    /// rounds walk what the larger one held. Seed-59 draw 1050, moved from 5,000/50/10 to
    /// 700/10/10 frozen, ran a 2.1 ms gen1 round the moment it landed (its own ran 0.3-0.5 ms):
    /// counted as 700/10/10's, requests seemed to wait as long there as at 5,000/50/10, and the
    /// agent moved back a window later, then again four windows on, five moves in 20 s.
    pub fn held_carried_pause(&self) -> bool {
        self.last_held_carried
    }

    /// The actuator changed the setting at `ts_ns` (thresholds written, a freeze or unfreeze
    /// made).
    pub fn wrote(&mut self, ts_ns: u64) {
        self.wrote_ns = self.wrote_ns.max(ts_ns);
    }

    /// Whether the last window ran under two settings: the actuator changed it after the window
    /// had run `SETTLED_SHARE` of its length. Its collections are partly the setting before's,
    /// and what it says per collection (a median pause over threshold0, survivors, promotions)
    /// is neither's. A freeze lands late in its window (after the collection it follows, or the
    /// one it waits for), and its thresholds with it: the demo service, frozen at 20,000/10/10
    /// 0.6 s into a window of 700/10/10's rounds, read the window's median young pause (700's,
    /// 0.03 ms) as 20,000's, 1.5 ns an object where that setting's own rounds took 165; the
    /// next window it moved to 100,000/10/10 predicted at 4.8 ms, whose rounds took 16-36 ms
    /// (7 of 10 demo runs moved that far after the freeze).
    pub fn held_two_settings(&self) -> bool {
        self.last_held_two
    }

    /// Whether the last window observed held neurogc's own full collection before its freeze:
    /// the longest pause and the GC share in it are not the action's.
    pub fn held_freeze_collection(&self) -> bool {
        self.last_held_freeze_collection
    }

    /// The last window held the first full collection of the application's own after a freeze
    /// (`Prediction::first_full_ns`): a one-off, not what the frozen setting's pauses are.
    pub fn held_first_full_after_freeze(&self) -> bool {
        self.last_held_first_full
    }

    /// Folds one window into the estimates.
    pub fn observe(&mut self, r: &Reading) {
        self.windows += 1;
        self.last_held_first_full = false;
        // A freeze asked for at once while one of the application's full collections ran lands
        // after it, or inside it once its survivors have moved on (Python runs there only in a
        // finalizer or gc.callbacks' "stop"): the freeze followed a full collection after all,
        // and that one is not the first after it. It ends in the window
        // after the request, having begun before it. Read as the first after the freeze, the
        // demo service's (224 ms) left the real one (47-104 ms, 2 s later) counted as the frozen
        // setting's: "over the 10 ms budget in 50% of windows", and a move to 2,000/10/10, whose
        // gen1 rounds took 8-17 ms, in 3 of 6 runs (pyenv's 3.11.7).
        // (With the collection after the freeze, the window holds that one too.)
        if std::mem::take(&mut self.froze_at_once)
            && r.collections[2] == 1 + u64::from(self.reset_unseen)
            && r.worst().0 == 2
            && r.began_before()
        {
            self.collected_for_freeze = true;
            self.frozen_garbage = 0.0;
        }
        self.last_held_freeze_collection = self.collected_for_freeze && r.collections[2] > 0;
        self.collected_for_freeze &= !self.last_held_freeze_collection;
        // The collection after a freeze is neurogc's too, and walked next to nothing: the window
        // says nothing of what full collections cost, nor of what gen1 rounds promote.
        let reset = self.reset_unseen && r.collections[2] > 0;
        self.reset_unseen &= !reset;
        self.last_held_freeze_collection |= reset;
        // A freeze or unfreeze seen in the counters or in memory (the application's, or
        // neurogc's own, confirmed): the old generation's counters count frozen objects until a
        // full collection. An observing agent sees the application's own this way: a recording
        // holds what each setting did frozen as well as not (the learned model's training data).
        match (self.last.and_then(|l| l.frozen_now()), r.frozen_now()) {
            (Some(false), Some(true)) if !self.frozen => self.app_froze(),
            (Some(true), Some(false)) if self.frozen => self.unfroze(),
            _ => {}
        }
        let setting = r.thresholds.map(|t| Candidate { thresholds: t, frozen: self.frozen });
        let moved = self.seen.is_some() && setting != self.seen;
        let shrank = match (self.seen, setting) {
            (Some(a), Some(b)) => (0..2).any(|g| b.thresholds[g] < a.thresholds[g]),
            _ => false,
        };
        self.last_held_carried =
            (moved && (shrank || r.began_before())) || (self.thawing && r.collections[2] > 0);
        let began_ns = r.ts_ns.saturating_sub((r.secs * 1e9) as u64);
        self.last_held_two = self.wrote_ns > began_ns + (r.secs * 1e9 * SETTLED_SHARE) as u64;
        self.thawing &= r.collections[2] == 0;
        self.seen = setting;
        let Some(t) = r.thresholds else {
            self.last = Some(*r);
            return;
        };
        if r.work_counted() {
            let x = r.alloc_per_s.max(0.0);
            if let Some(mean) = self.alloc.0.filter(|m| *m > 0.0)
                && x > 0.0
            {
                self.alloc_ln_var.add((x / mean).ln().powi(2), 0.3);
            }
            self.alloc.add(x, ALLOC_WEIGHT);
        }
        if !r.idle {
            self.demand.add(r.demand(), 0.3);
            if r.runs_per_s > 0.0 {
                self.runs.add(r.runs_per_s, 0.3);
            }
        }
        let t0 = t[0].max(1) as f64;
        // What follows, up to the full collections, is per collection at the thresholds read at
        // the window's end: not where part of the window ran under others.
        let one_setting = !self.last_held_two;
        if one_setting && r.collections[0] > 0 && r.pause_p50_ns[0] > 0.0 {
            self.young_ns.add(r.pause_p50_ns[0] / t0, 0.3);
            let k = r.pause_p50_ns[0] / t0;
            if let Some(avg) = slot(&mut self.young_by_t0, t0) {
                avg.add(k, 0.3);
            }
        }
        if one_setting && r.collections[0] > 0 {
            self.young_garbage.add((r.collected_per[0] / t0).clamp(0.0, 1.0), 0.3);
        }
        if one_setting && r.collections[1] > 0 {
            let young = t0 * self.young_garbage.or(0.0);
            self.gen1_garbage.add((r.collected_per[1] - young).max(0.0) / t[1].max(1) as f64, 0.3);
        }
        let prev = self.last.and_then(|p| p.long_lived);
        // Promotions per gen1 round: the pending counter's growth. A full collection resets it;
        // every one after the first in a window had to pass the gate again (a quarter of the old
        // generation pending), which a workload that collects fully every window needs counted.
        // A lower bound: the first one's share and manual gc.collect() calls are not known.
        // Each one after the first found dead what was promoted since the one before, at the
        // least: micrograd frozen, its old generation 35,000 objects, passed the gate with
        // 9,000 pending and found 110,000 dead each time.
        if let (Some([total, p1]), Some([_, p0])) = (r.long_lived, prev)
            && r.collections[1] + r.collections[2] > 0
            && !reset
            && one_setting
        {
            let promoted = match r.collections[2] {
                0 => (p1 - p0) as f64,
                n => (n - 1) as f64 * (total as f64 / 4.0).max(r.collected_per[2]) + p1 as f64,
            };
            if promoted >= 0.0 {
                let per_round = promoted / (r.collections[1] + r.collections[2]) as f64;
                if r.collections[2] == 0 {
                    self.lasting.observe(r, per_round);
                }
                self.promoted.add(per_round, 0.3);
                self.promoted_between.add(between_gen1(&t), 0.3);
            }
        }
        if one_setting && r.collections[1] > 0 && r.pause_p50_ns[1] > 0.0 {
            let k = self.young_ns.or(PRIOR_YOUNG_NS);
            let survivors = ((r.pause_p50_ns[1] / k - t0) / t[1].max(1) as f64).max(0.0);
            self.working_set.add(survivors, 0.3);
            self.working_set_t0.add(t0, 0.3);
            self.working_set_t1.add(t[1].max(1) as f64, 0.3);
        }
        let since_full = self.since_full_s.filter(|_| r.collections[2] > 0).map(|s| s + r.secs / 2.0);
        self.since_full_s =
            if r.collections[2] > 0 { Some(r.secs / 2.0) } else { self.since_full_s.map(|s| s + r.secs) };
        if r.collections[2] > 0 {
            // The full collection neurogc's freeze followed walked the whole heap, frozen
            // objects then included; the counters count them until the next one.
            let forced = self.last_held_freeze_collection;
            // Each also walked what it found and what it kept: where several ran in the window,
            // the counters read before them say little of what the later ones walked (after a
            // freeze, 1,341 old objects read before eleven collections that each found 140,000
            // made a full collection look 48 µs an object, and the next predicted 18 s).
            let seen = r.collected_per[2].max(0.0) + r.long_lived.map_or(0, |[l, _]| l.max(0)) as f64;
            let walked = prev
                .map(
                    |[l, p]| {
                        if forced { (l + p) as f64 } else { self.walked(l, p, r.freeze_count, since_full) }
                    },
                )
                .map(|w| w.max(seen));
            if let Some(w) = walked.filter(|w| *w > 1000.0 && !reset) {
                let cost = r.pause_max_ns[2] / w;
                match (forced, self.frozen) {
                    (false, true) if self.frozen_uncollected => self.frozen_first_ns.add(cost, 0.5),
                    (false, true) => self.frozen_full_ns.add(cost, 0.5),
                    _ => self.full_ns.add(cost, 0.5),
                }
            }
            if !forced {
                self.full_pause_ns.add(r.pause_max_ns[2], 0.5);
            }
            // Survivors of the application's own full collection against the last one's.
            if let (false, false, Some([kept, _])) = (forced, self.frozen, r.long_lived) {
                let kept = kept.max(0) as f64;
                self.warm |= self.last_kept.is_some_and(|before| kept <= before * WARM_GROWTH);
                self.last_kept = Some(kept);
            }
            if !forced || r.collections[2] > 1 {
                self.last_held_first_full = self.frozen_uncollected;
                self.frozen_uncollected = false;
            }
        }
        let found = r.collected(2);
        // neurogc's own full collection is not the process's rate of them, nor is the garbage it
        // found what the process's own full collections find.
        if !self.last_held_freeze_collection {
            self.full_rate.add(r.collections[2] as f64 / r.secs.max(1e-3), 0.2);
            let (flow, rounds) =
                (found / r.secs.max(1e-3), (r.collections[1] + r.collections[2]) as f64 / r.secs.max(1e-3));
            self.old_garbage.add(flow, 0.2);
            self.gen1_rate.add(rounds, 0.2);
            if one_setting && let Some(f) = slot(&mut self.flow_by_young, [t[0], t[1]]) {
                f.rounds.add(rounds, 0.3);
                f.found.add(flow, 0.3);
                f.fulls += r.collections[2] as i64;
            }
        }
        // Garbage a full collection finds beyond everything promoted since the last one must
        // have been old: what a freeze would keep forever (a lower bound: old and young garbage
        // are not told apart otherwise).
        // A full collection also frees the young generations' garbage (at most what they hold).
        // Frozen objects are not walked: while neurogc's freeze holds, the estimate stays.
        if !self.frozen && r.collections[2] > 0 {
            let n = r.collections[2] as f64;
            let young = t0 * (t[1].max(1) as f64 + 1.0) * n;
            if let (Some([total, pending]), 1) = (prev, r.collections[2]) {
                let pending_read = pending.max(0);
                // What the one full collection found beyond what was pending at the last reading,
                // and beyond what this window's gen1 rounds promoted (a lower bound of what it
                // walked), must have been old. Counted as old, a service's request garbage
                // promoted within the window made every freeze look like gigabytes kept.
                // At least a quarter of the old generation was pending when it ran (CPython's
                // gate), however little the reading saw: one taken just after the collection its
                // window then counts reads 0, and the demo service's freeze looked like 109 MiB
                // kept in one run of three and was never made.
                let since = self.promoted_at(&t) * r.collections[1] as f64;
                let gate = if self.last_held_freeze_collection { 0.0 } else { total.max(0) as f64 / 4.0 };
                let pending = (pending as f64 + since).max(gate);
                let old = found - pending - young;
                self.old_deaths.add(old.max(0.0) / r.secs.max(1e-3), 0.2);
                // What the counters held before it, what it found and what it kept: what is
                // missing died by reference counting since the last one. The pending count read
                // last is a lower bound of what it was when the collection ran (not CPython's
                // gate, a quarter of the old generation: gc.collect() passes it). Read only where
                // the counters show the collection (the pending count fell).
                if let (Some([kept, after]), Some(since), false) =
                    (r.long_lived, since_full, self.last_held_freeze_collection || self.last_held_first_full)
                    && after < pending_read
                {
                    let before = (total.max(0) + pending_read) as f64;
                    let died = (before - found - kept.max(0) as f64).max(0.0);
                    let allocs = self.alloc.or(0.0) * since;
                    if kept > 1_000 && allocs > 0.0 {
                        self.death_per_alloc.add(died / kept as f64 / allocs, 0.3);
                    }
                }
                if pending > 1_000.0 {
                    self.pending_garbage.add(((found - young).max(0.0) / pending).min(1.0), 0.3);
                }
            } else if let Some([total, _]) = r.long_lived.filter(|_| n >= 2.0) {
                // Several full collections in a window: each after the first was let through by
                // a quarter of the old generation pending (at least), and what they found cannot
                // be told old or new: the old deaths stay as estimated, and the share of pending
                // objects that are garbage is what each found against that quarter.
                if total > 4_000 {
                    let each = (found / n - young / n).max(0.0);
                    self.pending_garbage.add((each / (total as f64 / 4.0)).min(1.0), 0.3);
                }
            }
        } else if !self.frozen {
            self.old_deaths.add(0.0, 0.2);
        }
        // Bytes per tracked object: a heap of few containers holding large buffers (what
        // thresholds do not count) is what makes deferred garbage expensive.
        if let Some([l, p]) = r.long_lived {
            let objects = (l + p + r.freeze_count.unwrap_or(0).max(0)) as f64 + t0;
            if objects > 1_000.0 {
                self.object_bytes.add((r.rss as f64 / objects).clamp(64.0, 4096.0), 0.2);
            }
        }
        self.last = Some(*r);
    }

    /// RSS grew `bytes_per_s` past the application's own pace while neurogc's freeze stood, and
    /// the freeze was undone for it: the old heap turns over at that pace (a catalog rebuilt and
    /// swapped in), the most measured counts.
    pub fn learn_turnover(&mut self, bytes_per_s: f64) {
        if bytes_per_s.is_finite() {
            self.turnover_bytes = self.turnover_bytes.max(bytes_per_s);
        }
    }

    /// A change of threshold0 by `delta_t0` moved RSS by `delta_rss` bytes: what a young object
    /// deferred by a larger young generation really holds.
    pub fn learn_young_bytes(&mut self, delta_rss: f64, delta_t0: f64) {
        if delta_t0.abs() >= 1_000.0 {
            self.young_bytes.add((delta_rss / delta_t0).clamp(0.0, 65_536.0), 0.5);
        }
    }

    /// What a gen1 round under thresholds `t` walks of the gen0 rounds' survivors since the
    /// last one: the working set in flight at each of them, as measured, and what lasts of
    /// their allocations, as it accrues over them (`accrued`).
    pub(super) fn gen1_survivors(&self, t: &[i64; 3]) -> f64 {
        let (t0, t1) = (t[0].max(1) as f64, t[1].max(1) as f64);
        let (m0, m1) = (self.working_set_t0.or(t0).max(1.0), self.working_set_t1.or(t1).max(1.0));
        let (ws, share) = (self.working_set.or(0.0), self.lasting.gen1());
        ws * (1.0 - share) * t1 + ws * share * m1 * self.accrued(t0 * t1, m0 * m1)
    }

    /// Objects a gen1 round promotes under thresholds `t`: those in flight at it, as measured,
    /// and what lasts of the net allocations since the last one, as it accrues over them.
    pub(super) fn promoted_at(&self, t: &[i64; 3]) -> f64 {
        let between = between_gen1(t);
        let ratio = self.accrued(between, self.promoted_between.or(between));
        lasting::scaled(self.promoted.or(0.0), self.lasting.promoted(), ratio)
    }

    /// What lasts of `span` net allocations against what lasted of `measured` ones: in
    /// proportion where nothing old dies, and towards the population the deaths hold it at
    /// where objects die at the old generation's rate (`death_per_alloc`): an object that
    /// outlives its round is as likely to be replaced as an old one is (a cache's entries
    /// replaced at random). Held in proportion, seed-159 draw 1873 (282,000 entries of a
    /// closed-loop cache replaced at 250,000 a second) measured 196 ms gen1 rounds at
    /// 5,000/10/10 frozen, and 20,000/10/10 was predicted at 3.3 s and 50,000/10/10 at 13 s,
    /// where every tracked object of the process would take 0.5 s; freeze + 50,000/20/20 ran
    /// young rounds of 161 ms and took 0.64x its time.
    pub(super) fn accrued(&self, span: f64, measured: f64) -> f64 {
        let measured = measured.max(1.0);
        let d = self.death_per_alloc.or(0.0);
        span * still_alive(d * span) / (measured * still_alive(d * measured))
    }

    /// Garbage objects a second that full collections would find with gen1 rounds at `rounds` a
    /// second, from the two young generations measured furthest apart in them: garbage in flight
    /// at a round is promoted in proportion to the rounds, garbage that outlives several of them
    /// whatever their cadence. A line through the two, its slope and intercept kept to what
    /// garbage can do (no less promoted by more rounds; no more lasting than the sparser cadence
    /// found in all). `None` until two such sizes have each shown enough full collections.
    /// Draw 1890 of the generator (a service whose every request leaves 3,000 cyclic objects):
    /// about one request's garbage a round at 700/10/10 and at 2,000/10/10 alike, 220,000 and
    /// 75,000 objects a second; micrograd's graph of a step, as much a second at both.
    pub(super) fn lasting_flow(&self, rounds: f64) -> Option<f64> {
        let measured: Vec<(f64, f64)> = self
            .flow_by_young
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f.fulls >= MIN_FLOW_FULLS)
            .filter_map(|f| Some((f.rounds.0?, f.found.0?)))
            .filter(|(r, _)| *r > 0.0)
            .collect();
        let lo = *measured.iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
        let hi = *measured.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
        if hi.0 < lo.0 * MIN_FLOW_SPREAD {
            return None;
        }
        let slope = ((hi.1 - lo.1) / (hi.0 - lo.0)).max(0.0);
        let lasting = (lo.1 - slope * lo.0).clamp(0.0, lo.1);
        Some(lasting + slope * rounds.max(0.0))
    }

    /// A young collection's cost per object (ns) with threshold0 at `t0`: from the costs seen at
    /// the nearest thresholds, on a power law between them (per object cost never falling
    /// with size); beyond them, the slope between the last two, or the prior's mild growth.
    fn young_cost(&self, t0: f64) -> f64 {
        self.young_cost_growing(t0, PRIOR_YOUNG_SLOPE)
    }

    /// How many times `young_cost` a young round's cost per object at `t0` may be: 1 up to the
    /// largest threshold0 seen, growing beyond it at `YOUNG_SLOPE_BEYOND` where the estimate
    /// grows slower.
    pub fn young_cost_bound(&self, t0: f64) -> f64 {
        (self.young_cost_growing(t0, YOUNG_SLOPE_BEYOND) / self.young_cost(t0)).max(1.0)
    }

    /// `young_cost`, growing beyond the largest threshold0 seen at `beyond` at the least.
    fn young_cost_growing(&self, t0: f64, beyond: f64) -> f64 {
        let mut seen: Vec<(f64, f64)> =
            self.young_by_t0.iter().filter_map(|(t, a)| a.0.map(|k| (*t, k))).collect();
        seen.sort_by(|a, b| a.0.total_cmp(&b.0));
        let slope = |(t1, k1): (f64, f64), (t2, k2): (f64, f64)| {
            if (t2 / t1).ln().abs() < 1e-9 {
                PRIOR_YOUNG_SLOPE
            } else {
                ((k2 / k1).ln() / (t2 / t1).ln()).clamp(0.0, 1.0)
            }
        };
        let at = |(t, k): (f64, f64), b: f64| k * (t0 / t).powf(b);
        match seen.as_slice() {
            [] => PRIOR_YOUNG_NS * (t0 / 700.0).max(1.0).powf(beyond),
            [one] => at(*one, if t0 > one.0 { beyond } else { PRIOR_YOUNG_SLOPE }),
            _ => {
                let i = seen.partition_point(|(t, _)| *t < t0).clamp(1, seen.len() - 1);
                let (lo, hi) = (seen[i - 1], seen[i]);
                // Extrapolating up, never assume it gets cheaper than the prior says.
                let b = slope(lo, hi);
                let b = if t0 > hi.0 { b.max(beyond) } else { b };
                at(if t0 > hi.0 { hi } else { lo }, b)
            }
        }
    }

    /// Corrects the model with this window's measurement of the action in force (`c`).
    pub fn correct(&mut self, c: &Candidate, frozen_now: bool, r: &Reading) {
        if r.idle || r.thresholds.is_none() || !self.ready() {
            return;
        }
        // The window with neurogc's own collection before a freeze: its full pause and GC share
        // are that collection's, not the frozen action's; nor is the first full collection
        // after the freeze, a one-off, what the next ones will take.
        let one_off = self.held_freeze_collection() || self.last_held_first_full || self.last_held_carried;
        let p = self.raw(c, frozen_now);
        // The one-off's time is in this window's GC share but not in the setting's steady share
        // the model predicts (it is spread over the horizon): the ratio would scale every later
        // window's share by it.
        let two = self.last_held_two;
        if p.share > 1e-4 && !one_off && !two {
            self.share_ratio.add((r.gc_share / p.share).clamp(0.1, 10.0), 0.3);
        }
        let at = match self.pause_ratio_at.iter().position(|(k, _)| k == c) {
            Some(i) => i,
            None => {
                if self.pause_ratio_at.len() >= 32 {
                    self.pause_ratio_at.remove(0);
                }
                self.pause_ratio_at.push((*c, Default::default()));
                self.pause_ratio_at.len() - 1
            }
        };
        for g in 0..3 {
            // A carried pause is the move's in any generation; the other one-offs are full ones.
            let not_the_settings = if g == 2 { one_off } else { self.last_held_carried || two };
            if r.collections[g] > 0 && p.pause_ns[g] > 0.0 && !not_the_settings {
                let ratio = (r.pause_max_ns[g] / p.pause_ns[g]).clamp(0.1, 10.0);
                self.pause_ratio[g].add(ratio, r, g);
                self.pause_ratio_at[at].1[g].add(ratio, r, g);
            }
        }
    }

    /// The correction of generation `g`'s predicted pause under `c`, which runs `per_window` of
    /// its collections a window (None: the count each was measured over, `PauseRatio::at`):
    /// what was measured there, or else no less than at the nearest setting measured that `c`
    /// is at least as large as (a pause grows with the thresholds up to its generation's; a
    /// full one with the freeze undone), or else the correction at the setting in force (with
    /// the same freeze), else the decaying mean over all. The mean over all, taken where the
    /// setting in force had its own, put micrograd's other frozen settings' full collections 6%
    /// under its own, which the model predicts alike (each walks a cycle's promotions): where
    /// they run 25 times the pause budget, that was worth a move at 1.5 times the cost, and
    /// back once measured.
    fn pause_ratio_for(&self, c: &Candidate, g: usize, per_window: Option<f64>) -> f64 {
        let in_force = self
            .in_force()
            .filter(|k| same_freeze_as(k, c, g))
            .and_then(|k| self.pause_ratio_at.iter().find(|(a, _)| *a == k))
            .and_then(|(_, a)| a[g].at(per_window));
        let global = in_force.unwrap_or(self.pause_ratio[g].at(per_window).unwrap_or(1.0));
        let measured = |k: &Candidate, a: &[PauseRatio; 3]| {
            a[g].at(per_window).filter(|_| same_freeze_as(k, c, g)).map(|v| (*k, v))
        };
        let mut below: Option<(f64, f64)> = None;
        for (k, v) in self.pause_ratio_at.iter().filter_map(|(k, a)| measured(k, a)) {
            if (0..=g).all(|i| k.thresholds[i] == c.thresholds[i]) {
                return v;
            }
            if (0..=g).all(|i| k.thresholds[i] <= c.thresholds[i]) {
                let d: f64 = (0..=g)
                    .map(|i| (c.thresholds[i].max(1) as f64 / k.thresholds[i].max(1) as f64).ln())
                    .sum();
                if below.is_none_or(|(bd, _)| d < bd) {
                    below = Some((d, v));
                }
            }
        }
        below.map_or(global, |(_, v)| v.max(global))
    }

    /// Objects a full collection walks, from the long-lived counters, `since_s` after the last
    /// (where known): those of them still alive (`alive`).
    fn walked(&self, total: i64, pending: i64, frozen: Option<i64>, since_s: Option<f64>) -> f64 {
        let span = since_s.map_or(0.0, |s| s * self.alloc.or(0.0));
        let (total, pending) = (total.max(0) as f64, pending.max(0) as f64);
        if self.frozen_uncollected {
            let promoted = (total + pending - frozen.unwrap_or(0) as f64).max(pending);
            self.alive(0.0, promoted, span)
        } else {
            self.alive(total, pending, span)
        }
    }

    /// Of `kept` objects that the last full collection kept and `promoted` ones promoted evenly
    /// since, over `span` net allocations, those alive now: the counters count every one until
    /// the next full collection, and reference counting frees old objects at the rate measured
    /// (`death_per_alloc`), none of which a collection walks. Counted whole, seed-159 draw 1873
    /// (a 282,000-entry cache whose entries are replaced at 250,000 a second), frozen, read
    /// 3 million promoted objects 7 s later, and its next full collection was predicted at 1.4 s,
    /// over every pause of its own, where it took 440 ms.
    pub(super) fn alive(&self, kept: f64, promoted: f64, span: f64) -> f64 {
        let x = self.death_per_alloc.or(0.0) * span.max(0.0);
        kept * (-x).exp() + promoted * still_alive(x)
    }

    /// What `c` would bring from the process's current state, corrected by what the model got
    /// wrong about the action in force.
    pub fn predict(&self, c: &Candidate, frozen_now: bool) -> Prediction {
        let mut p = self.raw(c, frozen_now);
        // A share of wall time: never more than all of it.
        p.share = (p.share * self.share_ratio.or(1.0)).min(1.0);
        let secs = self.last.map_or(1.0, |r| r.secs);
        for g in 0..3 {
            p.pause_ns[g] *= self.pause_ratio_for(c, g, Some(p.rate[g] * secs));
        }
        // A one-off: its window holds one.
        p.first_full_ns *= self.pause_ratio_for(c, 2, Some(1.0));
        p
    }

    /// Bytes of what `n` full collections of the application's that freed `collected_each`
    /// objects each found dead in the old heap (what was there at the one before): each past
    /// the most that can have been promoted since (a quarter of the old generation, the
    /// collection's own trigger, or more where the last reading counted more) and the young
    /// generations at the thresholds in force. Each is held against its own bound: the sum of a
    /// window's ten held against one bound read an evaluation draw's request garbage (a growing
    /// heap collected in full ten times a second) as 73 MiB of old heap replaced, and every
    /// freeze as keeping it. None without the old generation's counters.
    pub fn old_found_bytes(&self, collected_each: f64, n: u64) -> Option<f64> {
        let r = self.last?;
        let [total, pending] = r.long_lived?;
        let t = r.thresholds?;
        let young = t[0].max(0) as f64 * (t[1].max(0) + 1) as f64;
        let promoted = (pending.max(0) as f64).max(total.max(0) as f64 / 4.0);
        let old = (collected_each.max(0.0) - promoted - young).max(0.0) * n as f64;
        Some(self.objects_bytes(old))
    }

    /// Bytes of `objects`, at what an object holds of RSS here.
    pub fn objects_bytes(&self, objects: f64) -> f64 {
        objects.max(0.0) * self.object_bytes.or(PRIOR_OBJECT_BYTES)
    }

    /// Bytes of garbage a freeze without a collection first keeps for ever: of the objects
    /// promoted since the last full collection, and of the young generation, half collected on
    /// average (the guard's plain freeze runs no young collection first).
    pub fn frozen_pending_bytes(&self) -> f64 {
        let pending = self.last.and_then(|r| r.long_lived).map_or(0.0, |[_, p]| p.max(0) as f64);
        let t0 = self.last.and_then(|r| r.thresholds).map_or(0.0, |t| t[0].max(0) as f64);
        let young = t0 / 2.0 * self.young_garbage.or(0.0);
        (pending * self.pending_garbage.or(0.5) + young) * self.object_bytes.or(PRIOR_OBJECT_BYTES)
    }

    /// Net container allocations per second, as estimated.
    pub fn alloc_per_s(&self) -> f64 {
        self.alloc.or(0.0)
    }

    /// How far (ln, one standard error) the average allocation rate the model predicts from is
    /// from the process's own: what windows stray from it by, over the average's memory (a
    /// decaying average of weight w holds w / (2 - w) of one window's variance). The collection
    /// rates it predicts are known within as much (`Prediction::wait_p99_within_ns`). A steady
    /// process reads 0. Taken as one window's stray, the swing of a service's phases priced
    /// 2,000/50/10 at part of its 4 ms gen1 rounds, which one request in 250 starts, and draw
    /// 1041 stayed at 700/10/10 frozen, its p99 1.3 ms against 0.8 at 2,000/50/10.
    pub fn rate_spread_ln(&self) -> f64 {
        (self.alloc_ln_var.or(0.0) * ALLOC_WEIGHT / (2.0 - ALLOC_WEIGHT)).sqrt()
    }

    /// The share of wall time the process has nothing to run (1 until a window tells).
    pub fn idle_share(&self) -> f64 {
        1.0 - self.demand.or(0.0)
    }

    /// About the requests a second of a service that sleeps between them (0 until a window
    /// tells): the times its threads were put on a CPU. Switches between its own threads count
    /// too, which only makes each request's share of the collections look smaller.
    pub fn runs_per_s(&self) -> f64 {
        self.runs.or(0.0)
    }
}

/// Whether a pause of generation `g` measured at `k` speaks for `c`: young ones whatever the
/// freeze, full ones only with the same.
fn same_freeze_as(k: &Candidate, c: &Candidate, g: usize) -> bool {
    g < 2 || k.frozen == c.frozen
}

#[cfg(test)]
mod tests;
