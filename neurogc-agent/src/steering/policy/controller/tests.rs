use super::score::full_cycle;
use super::*;

use crate::steering::policy::budgets::test_config as cfg;

/// A process whose collector behaves as the analytic model says: `alloc` net allocations per
/// second, young rounds walking 40 ns per object, gen1 rounds also walking 1,000 survivors of
/// each round since the last, 1M old objects and 3,000 promoted a second (a 250 ms full
/// collection due in about 50 s). The application's own CPU per allocation is `mutator_ns`,
/// growing as (threshold0 / 700)^`slowdown` (a larger young generation touches more memory).
///
/// `recycled`: objects each collection frees onto the interpreter's free lists, which the
/// application then takes back uncounted: a round holds t0 + `recycled` allocations, and
/// `garbage` of them die in it.
#[derive(Clone, Copy)]
struct Process {
    alloc: f64,
    mutator_ns: f64,
    slowdown: f64,
    recycled: f64,
    garbage: f64,
    /// Objects promoted into the old generation a second.
    promoted: f64,
    /// Bytes of RSS each young slot over 700 holds (garbage waiting for a larger young round).
    young_bytes: f64,
    /// threshold0 from which the young generation never fills: requests free by reference
    /// counting what they allocate, and the gen0 count only drifts.
    drained_from: f64,
    /// The share of wall time it waits for a CPU (another process shares its CPU).
    queued: f64,
    /// Times a second its threads are put on a CPU (0: the kernel does not say).
    runs: f64,
    /// How a young round's cost per object walked grows with the objects it walks, past those
    /// of a round at 700 (a young generation outgrowing the caches): the power of the ratio.
    young_slope: f64,
    /// What any setting but the application's own adds to its own work per allocation, as a
    /// share: a cost the model has no term for.
    unseen: f64,
}

/// A service with always more work than CPU (its CPU time and its wait for one fill the wall
/// clock): what a setting saves of CPU counts whole. Those idle part of the time set `queued`.
const SERVICE: Process = Process {
    alloc: 300_000.0,
    mutator_ns: 200.0,
    slowdown: 0.0,
    recycled: 0.0,
    garbage: 0.5,
    promoted: 3_000.0,
    young_bytes: 0.0,
    drained_from: f64::INFINITY,
    queued: 1.0,
    runs: 0.0,
    young_slope: 0.0,
    unseen: 0.0,
};

impl Process {
    fn reading(&self, t: [i64; 3], window: i64) -> Reading {
        let [t0, t1] = [t[0] as f64, t[1] as f64];
        // A young round walks what the count saw and what the free lists handed out unseen.
        let walked = t0 + self.recycled;
        let per = (walked / (700.0 + self.recycled)).powf(self.young_slope);
        let young = walked * 40.0 * per;
        let gen1 = (t0 + t1 * 1_000.0) * 40.0 * per;
        let r0 = self.alloc / (t0 + self.recycled);
        let r1 = r0 / (t1 + 1.0);
        let gc_share = ((r0 - r1) * young + r1 * gen1) / 1e9;
        let unseen = if t == [700, 10, 10] { 1.0 } else { 1.0 + self.unseen };
        let mutator = self.alloc * self.mutator_ns * (t0 / 700.0).powf(self.slowdown) * unseen / 1e9;
        if t0 >= self.drained_from {
            // No collection at all: the count's drift is all there is to read.
            return Reading {
                collections: [0; 3],
                pause_p50_ns: [0.0; 3],
                pause_max_ns: [0.0; 3],
                collected_per: [0.0; 3],
                gc_share: 0.0,
                alloc_per_s: 500.0,
                cpu_share: mutator,
                runq_share: self.queued,
                long_lived: Some([1_000_000, 100_000]),
                ..Process { drained_from: f64::INFINITY, ..*self }.reading(t, window)
            };
        }
        // The longest of a window's n rounds: the extreme of n pauses whose ln spreads by 0.052
        // (1.2x the median at SERVICE's 428 young rounds a window, none at one).
        let longest = |n: f64| (0.052 * (2.0 * n.max(1.0).ln()).sqrt()).exp();
        Reading {
            ts_ns: window as u64 * 1_000_000_000,
            secs: 1.0,
            collections: [(r0 - r1) as u64, r1 as u64, 0],
            pause_p50_ns: [young, gen1, 0.0],
            pause_max_ns: [young * longest(r0 - r1), gen1 * longest(r1), 0.0],
            // Where every round is garbage, a gen1 round frees its young round's too.
            collected_per: [
                (t0 + self.recycled) * self.garbage,
                if self.garbage >= 1.0 { t0 + self.recycled } else { 50.0 },
                0.0,
            ],
            gc_share,
            alloc_per_s: r0 * t0,
            cpu_share: mutator + gc_share,
            runq_share: self.queued,
            runs_per_s: self.runs,
            rss: (400 << 20) + ((t0 - 700.0).max(0.0) * self.young_bytes) as u64,
            thresholds: Some(t),
            older_counts: Some([3, 5]),
            long_lived: Some([1_000_000, 100_000 + window * self.promoted as i64]),
            freeze_count: Some(0),
            frozen: None,
            idle: false,
            age_s: Some(600.0 + window as f64),
            // The agent's windows tell which collections began before them: none here.
            carried_ns: Some(0.0),
        }
    }
}

/// `SERVICE` at `t` with RSS `grown` bytes over its own and a full collection each window that
/// keeps as many as the last: a warm heap, whose growth neurogc's settings may own.
fn warm(t: [i64; 3], w: i64, grown: u64) -> Reading {
    let mut r = SERVICE.reading(t, w);
    r.collections[2] = 1;
    r.pause_p50_ns[2] = 5e6;
    r.pause_max_ns[2] = 5e6;
    r.long_lived = Some([1_000_000, 0]);
    r.rss = (400 << 20) + grown;
    r
}

impl Reading {
    fn with_rss_mib(self, mib: u64) -> Reading {
        Reading { rss: mib << 20, ..self }
    }
}

/// Budgets that cannot be missed: the cost alone decides.
fn cost_only() -> GuardConfig {
    GuardConfig { pause_budget_ns: None, freeze_after_s: None, gc_budget: None, gc_at_attach: false, ..cfg() }
}

/// The application's 700/10/10 the only setting, without freezing: what the budgets say of it.
fn pinned(pause_budget_ns: Option<u64>) -> GuardConfig {
    GuardConfig { pause_budget_ns, freeze_after_s: None, min: [700, 10, 10], max: [700, 10, 10], ..cfg() }
}

impl Controller {
    /// `decide` on `r` as the target shows it once the actuator has done what was asked: a
    /// freeze of neurogc's counted (one object, so that the readings' counters mean what they
    /// did unfrozen).
    fn step(&mut self, learned: Learned, r: &Reading) -> Verdict {
        let freeze_count = match r.freeze_count {
            Some(0) if self.asked_frozen() => Some(1),
            n => n,
        };
        self.decide(learned, &Reading { freeze_count, ..*r })
    }

    /// Whether neurogc's freeze is asked of the target: in force, or asked for and not shown.
    fn asked_frozen(&self) -> bool {
        self.landing.as_ref().map_or(self.frozen, |l| l.to.c.frozen)
    }

    /// The move asked for put in force, as the next window that shows it would.
    fn land_now(&mut self) {
        if let Some(l) = self.landing.take() {
            self.enter(&l.r, &l.o, l.here, &l.to, l.what);
        }
    }
}

/// No learned model: the analytic predictions stand.
fn analytic(_: &[[f32; FEATURE_COUNT]]) -> Vec<Correction> {
    Vec::new()
}

/// Acts on `p` for `windows` windows: the settings in force, window by window, and the verdicts.
fn act(p: Process, gc: GuardConfig, windows: i64) -> (Vec<[i64; 3]>, Vec<Verdict>) {
    act_on(gc, windows, |t, w| p.reading(t, w))
}

/// `act` on the windows `reading` makes of each setting.
fn act_on(
    gc: GuardConfig,
    windows: i64,
    reading: impl Fn([i64; 3], i64) -> Reading,
) -> (Vec<[i64; 3]>, Vec<Verdict>) {
    let mut c = Controller::new(gc, [700, 10, 10], true);
    let mut settings = Vec::new();
    let verdicts: Vec<Verdict> = (1..=windows)
        .map(|w| {
            settings.push(c.thresholds());
            c.step(&mut analytic, &reading(c.thresholds(), w))
        })
        .collect();
    // Every measured effect is a number a record can carry (JSON has no NaN).
    for e in verdicts.iter().filter_map(|v| v.effect.as_ref()) {
        assert!([e.pause_max_ms, e.gc_share, e.rss_mib].iter().flatten().all(|x| x.is_finite()), "{e:?}");
    }
    (settings, verdicts)
}

#[test]
fn where_collecting_less_often_is_cheaper_it_moves_early_and_stays() {
    let (settings, verdicts) = act(SERVICE, cost_only(), 40);
    let last = *settings.last().unwrap();
    assert!(last[0] >= 5_000, "{settings:?}");
    // Within the first windows, and then it stops on its own: no setting is credibly cheaper.
    let first = verdicts.iter().position(|v| v.change).expect("a change");
    assert!(first <= 3, "window {first}: {verdicts:?}");
    let changes = verdicts.iter().filter(|v| v.change).count();
    assert!(changes <= 3, "{changes} changes: {settings:?}");
    assert!(verdicts[30..].iter().all(|v| !v.change), "{:?}", &verdicts[30..]);
    assert!(
        verdicts[39].reason.starts_with("budgets hold; no setting credibly cheaper"),
        "{:?}",
        verdicts[39]
    );
    assert!(verdicts[39].reason.contains("measured over"), "{:?}", verdicts[39]);
}

#[test]
fn of_settings_whose_pauses_all_fit_the_budget_the_one_requests_wait_less_behind_is_kept() {
    // Young rounds of 40 ns an object at 3M allocations a second: 12% of the time at any
    // threshold0, in pauses as long as the young generation is large. 20,000 is the
    // cheapest the model trusts (gen1 rounds grow rarer), and its 0.8 ms young and 1.2 ms
    // gen1 rounds fit a 2 ms budget; but a request waits 0.77 ms behind them at p99,
    // against 0.22 ms at 5,000, for 8% of the CPU. Its CPU is its own and idle most of the
    // time, so requests arrive while it waits for them: the wait counts.
    let busy = Process { alloc: 3_000_000.0, mutator_ns: 20.0, promoted: 0.0, queued: 0.0, ..SERVICE };
    let (cheapest, _) = act(busy, cost_only(), 40);
    assert_eq!(cheapest.last().unwrap()[0], 20_000, "{cheapest:?}");
    let budget = GuardConfig { pause_budget_ns: Some(2_000_000), ..cost_only() };
    let (waited, verdicts) = act(busy, budget, 40);
    let last = waited.last().unwrap()[0];
    assert!((2_000..=5_000).contains(&last), "{waited:?}");
    assert!(verdicts[30..].iter().all(|v| !v.change), "{verdicts:?}");
}

#[test]
fn a_young_round_each_request_starts_is_waited_out_by_that_request() {
    // 3M allocations a second, 200 ns of the application's own work each: young rounds of
    // 40 ns an object take 12% of the time at any threshold0, and gen1 rounds grow rarer with
    // it, so 20,000 is the cheapest, its 0.8 ms young rounds under the 5 ms budget. Busy 72%
    // of the time, the 0.8x the CPU that 20,000 saves counts for 72% of it; requests arriving
    // in its idle time wait behind its rounds, and 5,000's are a quarter as long. Serving 200
    // requests a second, three in four start a round and wait it out whole: 5,000 the more.
    // With no idle time (its CPU shared), 20,000: the saving is all throughput.
    let p = Process { alloc: 3_000_000.0, mutator_ns: 200.0, promoted: 0.0, queued: 0.0, ..SERVICE };
    let served = Process { runs: 200.0, ..p };
    // (Against a 10 ms budget the two were within 0.5% of each other: a wait of 0.2 ms weighs
    // twice as much against 5.)
    let gc = GuardConfig { pause_budget_ns: Some(5_000_000), ..cost_only() };
    let (unknown, _) = act(p, gc.clone(), 40);
    assert_eq!(unknown.last().unwrap()[0], 5_000, "{unknown:?}");
    let (settings, verdicts) = act(served, gc.clone(), 40);
    assert_eq!(settings.last().unwrap()[0], 5_000, "{settings:?}");
    assert!(verdicts[30..].iter().all(|v| !v.change), "{verdicts:?}");
    let (shared, _) = act(Process { queued: 0.3, ..served }, gc, 40);
    assert_eq!(shared.last().unwrap()[0], 20_000, "{shared:?}");
}

#[test]
fn a_process_that_always_has_work_pays_its_pauses_in_cost_alone() {
    // The process above, its young rounds under a 5 ms budget at 5,000 and at 20,000 alike
    // (with room for what a step from 700 to 20,000 may cost beyond the model's estimate:
    // `Collector::young_cost_bound`).
    // With idle time, requests arriving while it collects wait less behind 5,000's shorter
    // rounds: it stays there. Sharing its CPU with another process, the CPU it gets and its wait
    // for the CPU fill the wall clock: nothing arrives in idle time to wait, what its
    // collections cost it is throughput, which the cost already counts, and 20,000 is cheaper.
    let idle = Process { alloc: 3_000_000.0, mutator_ns: 20.0, promoted: 0.0, queued: 0.0, ..SERVICE };
    let shared = Process { queued: 0.9, ..idle };
    let budget = GuardConfig { pause_budget_ns: Some(5_000_000), ..cost_only() };
    let (waited, _) = act(idle, budget.clone(), 40);
    assert_eq!(waited.last().unwrap()[0], 5_000, "{waited:?}");
    let (settings, verdicts) = act(shared, budget, 40);
    assert_eq!(settings.last().unwrap()[0], 20_000, "{settings:?}");
    assert!(verdicts[30..].iter().all(|v| !v.change), "{verdicts:?}");
}

#[test]
fn a_far_step_up_is_bounded_by_what_young_rounds_cost_an_object_on_real_heaps() {
    // A process whose young rounds cost more per object the larger they are (a young
    // generation that outgrows the caches): gen1 rounds of 1.1 ms at 5,000/10/10 and 4.6 ms at
    // 20,000/10/10, over a 4 ms budget. Its mutator speeds up with a larger young generation,
    // so the cost alone would go as far as the pause budget lets it.
    let cached = Process { young_slope: 0.4, slowdown: -0.02, ..SERVICE };
    let budget = GuardConfig { pause_budget_ns: Some(4_000_000), ..cost_only() };
    let over = |t: &[i64; 3]| cached.reading(*t, 1).pause_max_ns.iter().any(|&p| p > 4e6);
    assert!(over(&[20_000, 10, 10]) && !over(&[5_000, 10, 10]));
    let (settings, _) = act(cached, budget, 30);
    let paid = settings.iter().filter(|t| over(t)).count();
    assert_eq!(paid, 0, "{settings:?}");
}

#[test]
fn a_change_that_cuts_gc_time_but_slows_the_application_is_measured_as_worse() {
    // The application's own work per allocation grows steeply with the young generation:
    // every larger threshold0 saves GC time and costs more than it saves.
    let slow = Process { slowdown: 0.3, ..SERVICE };
    let (settings, verdicts) = act(slow, cost_only(), 40);
    assert!(settings.last().unwrap()[0] <= 1_000, "{settings:?}");
    // The larger young generation tried once, measured, undone; the slowdown carried to the
    // settings not tried: what the run cost is within a few per cent of never moving.
    let far = settings.iter().filter(|t| t[0] >= 5_000).count();
    assert!(far <= 2, "{far} windows at a far setting: {settings:?}");
    let cost = |t: &[i64; 3]| slow.reading(*t, 1).cpu_share;
    let paid: f64 = settings.iter().map(cost).sum::<f64>() / cost(&[700, 10, 10]) / settings.len() as f64;
    assert!(paid < 1.05, "{paid:.3}x of staying: {settings:?}");
    let back = verdicts.iter().find(|v| v.change && v.thresholds[0] == 700).expect("back");
    assert!(back.reason.contains("measured over"), "{back:?}");
}

#[test]
fn a_saving_the_model_predicted_that_did_not_come_true_makes_its_next_ones_less_credible() {
    // Every setting but the application's own costs it more than the collections it saves,
    // in a way the model has no term for: each move for a predicted saving is measured worse
    // and undone, and what the model predicts next counts only as much of a saving as the
    // moves before it measured. Each prediction taken at its face, the controller moved 11
    // times in 60 windows, 21 of them away from its own settings.
    let unseen = Process { unseen: 0.3, ..SERVICE };
    let (settings, verdicts) = act(unseen, cost_only(), 60);
    let away = settings.iter().filter(|t| **t != [700, 10, 10]).count();
    let moves = verdicts.iter().filter(|v| v.change && v.thresholds != [700, 10, 10]).count();
    assert!(moves <= 4 && away <= 10, "{moves} moves away, {away} windows away: {settings:?}");
    assert_eq!(settings[40..].iter().filter(|t| **t != [700, 10, 10]).count(), 0, "{settings:?}");
}

#[test]
fn work_the_free_lists_hide_from_the_count_is_counted_by_what_the_collector_freed() {
    // An ETL-like batch: its garbage is cyclic, lists and dicts among it, and its own work
    // slows a little with a larger young generation (1.24x at 20,000: all told 17% dearer
    // than 700). Collecting often, the free lists hand out 160 objects a round the count
    // never sees: counted, allocations look 22% dearer at 700 than at 20,000, which hides
    // the slowdown (so measured, it stayed at 20,000 and paid 1.145x). Its collections
    // free all it allocates.
    let etl = Process {
        alloc: 2_000_000.0,
        mutator_ns: 400.0,
        slowdown: 0.07,
        recycled: 160.0,
        garbage: 1.0,
        ..SERVICE
    };
    let (settings, _) = act(etl, cost_only(), 40);
    let cost = |t: &[i64; 3]| etl.reading(*t, 1).cpu_share;
    let paid: f64 = settings.iter().map(cost).sum::<f64>() / cost(&[700, 10, 10]) / settings.len() as f64;
    assert!(paid < 1.03, "{paid:.3}x of staying: {settings:?}");
    assert!(settings[30..].iter().all(|t| cost(t) <= 1.01 * cost(&[700, 10, 10])), "{settings:?}");
}

#[test]
fn a_frozen_setting_is_estimated_from_what_its_thresholds_measured_unfrozen() {
    // An evaluation draw's closed loop (a 1.39M-tuple heap, 83 cyclic tuples a request) at 45%
    // GC: its young rounds at 700 walk twice what the count sees (the free lists hand out the
    // rest), and a round of 10,000 walks each object 1.6x slower (past the caches). Moved to
    // 10,000/10/10 frozen, it measured 56% and stayed, "no setting credibly cheaper": 700/10/10
    // frozen was told from the setting in force by the model, which counts rounds from the
    // allocations counted there and put 700's at twice as many as they were. Measured at its
    // own 700/10/10 before the freeze, those thresholds' cost is known but for the full
    // collections a freeze spares.
    let p = Process {
        alloc: 3_000_000.0,
        mutator_ns: 20.0,
        recycled: 660.0,
        garbage: 1.0,
        young_slope: 0.35,
        ..SERVICE
    };
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    for w in 1..=4 {
        c.step(&mut analytic, &p.reading([700, 10, 10], w));
        c.current = [700, 10, 10];
    }
    c.deferred = None;
    c.current = [10_000, 10, 10];
    landed(&mut c, 400.0, 4.0);
    let mut settings = Vec::new();
    for w in 5..=16 {
        let r = Reading { freeze_count: Some(1_000_000), ..p.reading(c.thresholds(), w) };
        c.step(&mut analytic, &r);
        settings.push(c.thresholds());
    }
    let cost = |t: &[i64; 3]| p.reading(*t, 1).cpu_share;
    assert!(cost(&[10_000, 10, 10]) > 1.2 * cost(&[700, 10, 10]));
    let last = settings.last().unwrap();
    assert!(cost(last) < 1.05 * cost(&[700, 10, 10]), "{settings:?}");
    assert!(c.frozen(), "the freeze stands");
}

#[test]
fn a_young_generation_that_never_fills_is_not_taken_for_one_that_does_no_work() {
    // A service whose requests free what they allocate: from threshold0 5,000 on, no
    // collection runs at all and the gen0 count only drifts (500 a second). Read as work,
    // that made 5,000 look 600 times dearer per allocation than 700, and the document search
    // went back to collecting 275 times a second (then waited out a 460 ms full collection).
    let drained = Process { drained_from: 5_000.0, ..SERVICE };
    let (settings, verdicts) = act(drained, cost_only(), 30);
    let last = *settings.last().unwrap();
    assert!(last[0] >= 5_000, "{settings:?}");
    assert!(
        !verdicts.iter().any(|v| v.change && v.thresholds[0] < 5_000 && v.reason.contains("measured over")),
        "{verdicts:?}"
    );
}

#[test]
fn a_young_generation_whose_rss_outgrows_the_memory_budget_is_left_once_rss_shows_it() {
    // Every young object holds 64 KiB the model cannot see (an untracked payload, as the
    // ETL batch's records): a larger threshold0 is entered on the model's bytes per object,
    // and RSS decides, settings in force being judged on what RSS shows. A 5% budget of
    // 400 MiB allows 20 MiB: 320 more young slots than 700.
    let heavy = Process { young_bytes: 65_536.0, ..SERVICE };
    let gc = GuardConfig { memory_budget: 0.05, ..cost_only() };
    let (settings, verdicts) = act(heavy, gc, 40);
    assert!(settings.iter().any(|t| t[0] > 1_020), "never left 700: {settings:?}");
    let left = verdicts.iter().any(|v| v.change && v.budget == Some(Budget::Memory));
    assert!(left, "no move for memory: {verdicts:?}");
    assert!(settings[30..].iter().all(|t| t[0] <= 1_020), "{settings:?}");
}

#[test]
fn a_setting_whose_rss_keeps_growing_past_its_prediction_is_left_on_what_rss_shows() {
    // Above the application's threshold0, garbage piles up where the model cannot see it
    // (micrograd's step graphs at 2,000/10/10 frozen: +41 MiB over seven windows, predicted
    // +13): RSS grows 4 MiB a window towards 6 KiB per young slot over 700, and a move to a
    // smaller young generation gives back what it would not keep. The first window after a
    // move shows 4 MiB, what the model learns its bytes per slot from; the rest is the
    // measurement's to tell. A 5% budget of 400 MiB allows 20 MiB.
    let gc = GuardConfig { memory_budget: 0.05, ..cost_only() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    let (mut grown, mut trace, mut verdicts) = (0u64, Vec::new(), Vec::new());
    for w in 1..=60 {
        let t = c.thresholds();
        let fills = (t[0] - 700).max(0) as u64 * 6144;
        grown = (grown + if t[0] > 700 { 4 << 20 } else { 0 }).min(fills);
        trace.push((t[0], grown >> 20));
        verdicts.push(c.step(&mut analytic, &warm(t, w, grown)));
    }
    assert!(trace.iter().any(|&(t0, _)| t0 > 5_000), "never tried a larger young generation: {trace:?}");
    let left = verdicts.iter().any(|v| v.change && v.budget == Some(Budget::Memory));
    assert!(left, "never left for memory: {trace:?}");
    // Left before RSS passed the allowance, not 113 MiB later: decisions come a window apart,
    // and a setting is left when its next window's growth would cross the bound. Then within
    // it, at a setting still larger than the application's.
    assert!(trace.iter().all(|&(_, g)| g <= 20), "(threshold0, RSS grown MiB): {trace:?}");
    assert!(trace[40..].iter().all(|&(t0, g)| g <= 20 && t0 > 700), "{trace:?}");
    let changes = verdicts[40..].iter().filter(|v| v.change).count();
    assert!(changes <= 1, "{changes} changes in the last 20 windows: {trace:?}");
}

#[test]
fn growth_while_the_heap_fills_is_the_applications_not_the_settings() {
    // The ETL batch's RSS rose 58 MiB in the windows after neurogc's first move, its garbage
    // piling up at any setting until its first full collection. Here RSS rises 10 MiB a window
    // for ten windows, none with a full collection, then the heap is warm and RSS flat: 80 MiB
    // since the first move, over the 63 a 15% budget allows, none of it the larger young
    // generation's (which keeps nothing). Counted as the setting's, it sent the agent back to
    // 700/10/10.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let (mut trace, mut verdicts) = (Vec::new(), Vec::new());
    for w in 1..=30 {
        let t = c.thresholds();
        let filled = w.min(10) as u64 * (10 << 20);
        let r = if w <= 10 {
            Reading { rss: (400 << 20) + filled, ..SERVICE.reading(t, w) }
        } else {
            warm(t, w, filled)
        };
        trace.push(t[0]);
        verdicts.push(c.step(&mut analytic, &r));
    }
    assert!(trace[..10].iter().any(|&t0| t0 > 700), "never moved while the heap filled: {trace:?}");
    let memory = verdicts.iter().find(|v| v.budget == Some(Budget::Memory));
    assert!(memory.is_none(), "{memory:?}: {trace:?}");
    assert!(trace[12..].iter().all(|&t0| t0 > 700), "{trace:?}");
}

#[test]
fn rss_grown_past_the_allowance_at_neurogcs_thresholds_bars_every_one_of_them() {
    // A warm heap whose RSS grows 10 MiB a window at any thresholds but the application's own
    // (garbage its full collections would have freed, which no model figure shows); 15% of
    // 400 MiB allows 60. What RSS has grown since the first move is what any threshold setting
    // of neurogc's is judged on once in force: entered on the model's figure alone, each was
    // left a window after it was entered, the agent leaving 700/10/10 again and again.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let (mut grown, mut trace, mut verdicts) = (0u64, Vec::new(), Vec::new());
    for w in 1..=30 {
        let t = c.thresholds();
        if t != [700, 10, 10] {
            grown += 10 << 20;
        }
        trace.push((t[0], grown >> 20));
        verdicts.push(c.step(&mut analytic, &warm(t, w, grown)));
    }
    assert!(trace.iter().any(|&(t0, _)| t0 > 700), "never moved: {trace:?}");
    let memory = verdicts.iter().position(|v| v.change && v.budget == Some(Budget::Memory));
    let why: Vec<&str> = verdicts.iter().map(|v| v.reason.as_str()).collect();
    let first = memory.unwrap_or_else(|| panic!("never left for memory: {trace:?} {why:#?}"));
    // Left for the application's own thresholds within a window (the first miss is a window's
    // growth over, where a smaller setting was still predicted to hold), and none entered after.
    assert!(trace[first + 2..].iter().all(|&(t0, _)| t0 == 700), "{trace:?} {why:#?}");
    assert!(trace.iter().all(|&(_, g)| g <= 80), "(threshold0, RSS grown MiB): {trace:?}");
}

#[test]
fn growth_at_neurogcs_thresholds_before_the_heap_is_warm_counts_past_its_own_pace() {
    // Evaluation draw 1580's shape: RSS grows 1 MiB a window at the application's own settings
    // and 8 at any of neurogc's (each replaced copy of a catalog waits there for a full
    // collection put off), and no full collection is seen: the heap is never warm. Its own
    // windows' pace is its own; the rest is the settings'. Counted as none, the agent stayed
    // where it moved while RSS grew past the 60 MiB a 15% budget of 400 allows.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let (mut grown, mut past_pace, mut trace, mut verdicts) = (0u64, 0u64, Vec::new(), Vec::new());
    for w in 1..=30 {
        let t = c.thresholds();
        let own = t == [700, 10, 10];
        grown += if own { 1 << 20 } else { 8 << 20 };
        past_pace += if own { 0 } else { 7 << 20 };
        trace.push((t, past_pace >> 20));
        let r = Reading { rss: (400 << 20) + grown, ..SERVICE.reading(t, w) };
        verdicts.push(c.step(&mut analytic, &r));
    }
    let why: Vec<&str> = verdicts.iter().map(|v| v.reason.as_str()).collect();
    assert!(trace.iter().any(|&(t, _)| t != [700, 10, 10]), "never moved: {trace:?}");
    let left = verdicts.iter().any(|v| v.change && v.budget == Some(Budget::Memory));
    assert!(left, "never left for memory: {trace:?} {why:#?}");
    // Within the allowance (15% of what RSS would be at its own pace, 400 MiB + 1 a window)
    // but for the window that shows the last step over it.
    let within = |w: usize, g: u64| g as f64 <= 0.15 * (400 + w) as f64 + 8.0;
    let over: Vec<_> = trace.iter().enumerate().filter(|&(w, &(_, g))| !within(w + 1, g)).collect();
    assert!(over.is_empty(), "(window - 1, (thresholds, MiB past its pace)): {over:?} of {trace:?}");
}

/// `SERVICE` at `t`, its RSS at `mib`, with a full collection of the application's own that
/// found `dead` objects.
fn full_finding(t: [i64; 3], w: i64, mib: u64, dead: f64) -> Reading {
    let mut r = SERVICE.reading(t, w).with_rss_mib(mib);
    r.collections[2] = 1;
    r.pause_p50_ns[2] = 5e6;
    r.pause_max_ns[2] = 5e6;
    r.collected_per[2] = dead;
    r.long_lived = Some([1_000_000, 0]);
    r
}

/// Settings in force window by window: RSS rises 150 MiB in window `rise` (15% of 400 MiB
/// allows 60), then holds; window `full` holds the application's own full collection, which
/// finds `dead` objects. Unasked, this process moves to a larger young generation in window 2
/// (`where_collecting_less_often_is_cheaper_it_moves_early_and_stays`).
fn after_a_rise(rise: i64, full: i64, dead: f64) -> Vec<[i64; 3]> {
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    (1..=16)
        .map(|w| {
            let t = c.thresholds();
            let mib = if w < rise { 400 } else { 550 };
            let r = if w == full {
                full_finding(t, w, mib, dead)
            } else {
                SERVICE.reading(t, w).with_rss_mib(mib)
            };
            c.step(&mut analytic, &r);
            t
        })
        .collect()
}

#[test]
fn a_rise_past_the_allowance_keeps_full_collections_in_time_until_one_tells_what_it_was() {
    // Unasked, this process moves to a larger young generation by its third window
    // (`where_collecting_less_often_is_cheaper_it_moves_early_and_stays`). A rise of 150 MiB in
    // one window may be a structure replacing another: a setting that puts the next full
    // collection off keeps the old copy. So none is entered until that collection, at the
    // application's own settings, shows what the rise was: 1M objects found dead of the old heap
    // (a replacement: none is entered after either), or next to none (growth: moved).
    let replaced = after_a_rise(2, 8, 1_000_000.0);
    assert!(replaced.iter().all(|t| *t == [700, 10, 10]), "{replaced:?}");
    let grew = after_a_rise(2, 8, 100.0);
    assert!(grew[..8].iter().all(|t| *t == [700, 10, 10]), "{grew:?}");
    assert!(grew[8..].iter().any(|t| t[0] > 700), "never moved once the rise was told: {grew:?}");
}

#[test]
fn a_rise_told_by_a_collection_freeing_as_much_is_a_replacement_though_it_was_promoted() {
    // Each of the application's full collections pauses it 300 ms, over the 10 ms budget: a
    // freeze is what holds it. RSS rises 150 MiB in window 2 and holds; window 8's full
    // collection tells what the rise was. Finding next to nothing dead, it was growth, and the
    // freeze is made. Freeing 240k objects (about 116 MiB, past the 82 allowed), it was a
    // copy replacing one, though fewer than the quarter of the old generation that let that
    // collection run (what it found of the old heap reads as nothing: the new copy was
    // promoted since the last full collection, and the old one as large died): a freeze keeps
    // the next copy it replaces, so none is made. Read as growth, seed-60 draw 1105 (a catalog
    // rebuilt by a builder thread) was frozen at 5,000/10/10 and grew 86 MiB in 4 s.
    // Only past what the application's full collections free anyway: where the one before the
    // rise freed as many, the rise was its own garbage between them (the unit test
    // `a_rise_told_by_a_collection_freeing_what_each_one_frees_is_no_copy`).
    assert!(frozen_after_fulls_finding(1, 100.0, 100.0));
    assert!(!frozen_after_fulls_finding(1, 100.0, 240_000.0));
}

#[test]
fn a_rise_told_by_a_collection_freeing_what_each_one_frees_is_no_copy() {
    // Tuning draw 813 (a closed loop whose requests' cyclic garbage is promoted): each of its
    // full collections frees 54k objects, every 1.4 s, and RSS rises and falls by as much
    // between them. Read as a copy replaced, the rise before the second one barred every freeze
    // for keeping two copies (+46 MiB), though freeze + 50,000/20/20 took its p99 to 0.43x the
    // defaults' and its RSS to 0.69x.
    assert!(frozen_after_fulls_finding(1, 240_000.0, 240_000.0));
    // What one that ran as RSS rose freed may be a copy (a rebuild whose every full collection
    // frees the copy before): it is no measure of what each one frees anyway.
    assert!(!frozen_after_fulls_finding(2, 240_000.0, 240_000.0));
}

/// Whether a service whose full collections each pause it 300 ms (a freeze is what holds the
/// pause budget) is frozen, where the full collection in window `first_at` frees `first`
/// objects, RSS rises 150 MiB in window 2 and holds, and window 8's full collection frees `then`.
fn frozen_after_fulls_finding(first_at: i64, first: f64, then: f64) -> bool {
    let fulls = [(first_at, first, false), (8, then, false)];
    frozen_in(|w| if w < 2 { 400 } else { 550 }, &fulls).is_some()
}

/// The window in which a service whose full collections each pause it 300 ms (a freeze is what
/// holds the pause budget) is frozen, if any of 14: its RSS at `mib(window)`; `fulls`, the
/// windows that hold one of the application's full collections, the objects it found dead, and
/// whether it began in the window before (the first listed for a window counts).
fn frozen_in(mib: impl Fn(i64) -> u64, fulls: &[(i64, f64, bool)]) -> Option<i64> {
    frozen_in_aged(600.0, mib, fulls)
}

/// `frozen_in` for a process that had run `unseen` seconds before the agent's first window (0:
/// launched under the agent).
fn frozen_in_aged(unseen: f64, mib: impl Fn(i64) -> u64, fulls: &[(i64, f64, bool)]) -> Option<i64> {
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    (1..=14).find(|&w| {
        let t = c.thresholds();
        let r = match fulls.iter().find(|f| f.0 == w) {
            Some(&(_, dead, carried)) => {
                let mut r = full_finding(t, w, mib(w), dead);
                (r.pause_p50_ns[2], r.pause_max_ns[2]) = (300e6, 300e6);
                if carried {
                    r.carried_ns = Some(300e6);
                }
                r
            }
            None => SERVICE.reading(t, w).with_rss_mib(mib(w)),
        };
        let r = Reading { age_s: Some(unseen + w as f64), ..r };
        c.step(&mut analytic, &r).freeze == Some(true)
    })
}

#[test]
fn a_full_collection_while_rss_still_rises_does_not_tell_what_the_rise_was() {
    // A catalog rebuilt on the main thread (an evaluation draw: 160k slots, every 6.9 s): RSS
    // rose 72 MiB in one window and 18 more in the next, whose full collection, run while the
    // new copy was still being built, found nothing of the old one dead. Taken as telling, the
    // rise was read as growth and the next window froze both copies (1.57x the application's
    // RSS, undone with a 407 ms collection of the thawed heap). A full collection tells what a
    // rise was once RSS has stopped rising; here the one after the swap finds the old copy.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let settings: Vec<[i64; 3]> = (1..=16)
        .map(|w| {
            let t = c.thresholds();
            let mib = match w {
                1 => 400,
                2 => 550,
                _ => 575,
            };
            let r = match w {
                3 => full_finding(t, w, mib, 100.0),
                8 => full_finding(t, w, mib, 1_000_000.0),
                _ => SERVICE.reading(t, w).with_rss_mib(mib),
            };
            c.step(&mut analytic, &r);
            t
        })
        .collect();
    assert!(settings.iter().all(|t| *t == [700, 10, 10]), "{settings:?}");
}

#[test]
fn a_full_collection_begun_while_rss_rose_does_not_tell_what_the_rise_was_where_it_ends() {
    // Seed-144 draw 1751 (a catalog rebuilt every 7.1 s by a builder thread, each of its full
    // collections pausing it 300-550 ms, over the 10 ms budget: a freeze is what holds it). RSS
    // rose 75 MiB in window 2 and 75 in window 3, where a full collection began before the swap;
    // it ended in window 4, in which RSS rose 5 MiB, having found next to nothing dead. Taken as
    // telling, the rise read as growth and the freeze kept the copy the new one had replaced:
    // the next rebuild took RSS past the bound. Window 9's full collection, begun and ended once
    // RSS stood, finds the old copy dead, and with it no freeze is made either.
    let mib = |w| match w {
        1 => 400,
        2 => 475,
        3 => 550,
        _ => 555,
    };
    let froze = frozen_in(mib, &[(4, 100.0, true), (9, 1_000_000.0, false)]);
    assert_eq!(froze, None, "frozen in window {froze:?}");
}

#[test]
fn a_rise_under_way_at_attach_waits_once_it_stops_for_a_full_collection_to_tell_what_it_was() {
    // Seed-148 draw 1734 at half speed (a 474k-object batch whose heap a builder thread
    // rebuilds whole every 3.9 s): the agent attached while a rebuild was under way, and RSS
    // rose 60-65 MiB a window in its first windows, then stood. With no window before it in
    // which RSS stood, the rise read as the application's pace, not as a step, and nothing
    // waited for a full collection to tell what it was: the freeze the next window kept the
    // copy the rebuild had replaced (peak RSS 582 MiB against the 560 allowed; the undo's
    // thawed heap collected in 2,755 ms against the defaults' longest 1,913). Here RSS rises
    // 150 MiB a window to window 4 (each past the allowance: no freeze is priced within it
    // while the rise is new) and stands; window 10's full collection finds the old copy dead
    // (no freeze) or next to nothing (frozen then); window 4's, run as RSS still rose, cannot
    // tell. Launched under the agent, the rise is the process's first fill, seen whole from its
    // start: there was nothing before it to replace, and it is frozen once RSS stands.
    let mib = |w: i64| 400 + 150 * (w.min(4) - 1) as u64;
    let replaced = frozen_in_aged(600.0, mib, &[(4, 100.0, false), (10, 1_000_000.0, false)]);
    assert_eq!(replaced, None, "frozen in window {replaced:?}");
    let grew = frozen_in_aged(600.0, mib, &[(4, 100.0, false), (10, 100.0, false)]);
    assert!(grew.is_some_and(|w| w >= 10), "frozen in window {grew:?}");
    let launched = frozen_in_aged(0.0, mib, &[(4, 100.0, false), (10, 1_000_000.0, false)]);
    assert!(launched.is_some_and(|w| w < 10), "frozen in window {launched:?}");
}

#[test]
fn a_step_after_a_rise_under_way_at_attach_is_told_against_the_pace_rss_stood_at() {
    // Seed-151 draw 1633 (a 551k-object batch rebuilt every 3.7 s): RSS rose 22 MiB in the
    // second window after attach and stood in the third; the rise waited to be told, and no
    // pace was set where RSS stood. The next rebuild's rise was then told against the pace read
    // over the rise before it, which explained it: no step, and a setting that puts full
    // collections off was kept a window longer, to 1.79x the RSS of the application's own.
    let mib = 1_048_576.0;
    let allowance = 60.0 * mib;
    let mut r = Replacement { before_first_stand: true, ..Replacement::default() };
    r.window((0.0, 1.0, 0.0), None, allowance);
    r.window((40.0 * mib, 1.0, 40.0 * mib), None, allowance);
    r.window((mib, 1.0, 40.0 * mib), None, allowance);
    assert_eq!(r.unresolved(), 40.0 * mib, "the rise under way at attach waits once RSS stands");
    r.window((40.0 * mib, 1.0, 40.0 * mib), None, allowance);
    assert!(r.stepping(), "the next rise is a step from where RSS stood");
    assert!(r.untold() > 75.0 * mib, "both rises wait: {} MiB", r.untold() / mib);
}

#[test]
fn full_collections_that_each_find_what_was_promoted_are_no_replacement() {
    // A growing heap whose request garbage reaches the old generation, collected in full ten
    // times a window (an evaluation draw: a batch at 80% GC, 100 ms full collections ten times
    // a second). Each found less than the quarter of the old generation that let it run: no
    // more than was promoted since the one before. Summed over the window and held against one
    // collection's bound, they read as old heap replaced (here 97 MiB; the draw's, 73 MiB), and
    // every setting that puts full collections off, or freezes, as keeping it: the draw stayed
    // at 700/10/10 for 25 s, where a freeze took 0.61x the time. Unasked, this process moves to
    // a larger young generation by its third window
    // (`where_collecting_less_often_is_cheaper_it_moves_early_and_stays`).
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let settings: Vec<[i64; 3]> = (1..=8)
        .map(|w| {
            let t = c.thresholds();
            let mut r = SERVICE.reading(t, w);
            r.collections[2] = 10;
            r.pause_p50_ns[2] = 5e6;
            r.pause_max_ns[2] = 5e6;
            r.collected_per[2] = 50_000.0;
            r.long_lived = Some([1_000_000, 0]);
            c.step(&mut analytic, &r);
            t
        })
        .collect();
    assert!(settings.iter().any(|t| t[0] > 700), "never moved: {settings:?}");
}

/// A controller frozen by neurogc at `t` two windows ago, after three warm windows at the
/// application's own 700/10/10 with RSS at 400 MiB.
fn frozen_at(gc: GuardConfig, t: [i64; 3]) -> Controller {
    frozen_after(gc, t, true)
}

/// `frozen_at`, the freeze made after a full collection (`collected`: "... + freeze", a freeze
/// decided to follow one, landed) or at once.
fn frozen_after(gc: GuardConfig, t: [i64; 3], collected: bool) -> Controller {
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    for w in 1..=3 {
        c.step(&mut analytic, &warm([700, 10, 10], w, 0));
    }
    // As the actuator would have it after the move.
    (c.deferred, c.landing) = (None, None);
    c.current = t;
    froze(&mut c, 400.0, 0.0, collected);
    c
}

/// `c` as a freeze of neurogc's that followed a full collection leaves it, RSS at `rss_mib`, at
/// `t_s`: neurogc's first change.
fn landed(c: &mut Controller, rss_mib: f64, t_s: f64) {
    froze(c, rss_mib, t_s, true);
}

/// `landed`, or with `collected` false a freeze made at once.
fn froze(c: &mut Controller, rss_mib: f64, t_s: f64, collected: bool) {
    (c.frozen, c.freeze_used) = (true, true);
    c.collector.froze(collected, false);
    let rss = (rss_mib * 1048576.0) as u64;
    c.froze_at(&Reading { rss, ts_ns: (t_s * 1e9) as u64, ..SERVICE.reading(c.current, 0) });
    c.kept.changed(rss_mib * 1048576.0, true, t_s);
}

#[test]
fn a_frozen_setting_whose_rss_grew_past_the_budget_since_the_freeze_undoes_the_freeze_too() {
    // Frozen at 5,000/10/10, RSS has grown 30 MiB of the 20 allowed since the freeze. The
    // freeze could have caused it (frozen objects that die are never freed): the budget is a
    // promise, so everything neurogc set is undone, and the decision says what RSS measured.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = frozen_at(gc, [5000, 10, 10]);
    let v = c.step(&mut analytic, &warm(c.thresholds(), 4, 30 << 20));
    let seen = (v.thresholds, v.freeze, &v.reason);
    assert_eq!(
        (v.thresholds, v.freeze, v.budget),
        ([700, 10, 10], Some(false), Some(Budget::Memory)),
        "{seen:?}"
    );
    // And what the freeze kept is freed at once, before more of the heap dies into it.
    assert!(v.collect && v.what.as_deref() == Some("5000/10/10 -> 700/10/10 + unfreeze, collect"), "{v:?}");
    assert!(
        v.reason.starts_with("memory budget missed at 5000/10/10 frozen (RSS 430 MiB, 1.07x the 400 MiB")
            && v.reason.contains("+30 MiB since the freeze"),
        "{seen:?}"
    );
    // Undone for good: no freeze again, and RSS is counted from where it stands now.
    for w in 5..=20 {
        let v = c.step(&mut analytic, &warm(c.thresholds(), w, 30 << 20));
        assert!(v.freeze.is_none() && v.budget != Some(Budget::Memory), "{v:?}");
    }
}

#[test]
fn what_rss_holds_after_a_freeze_undone_for_memory_stays_neurogcs() {
    // As above: frozen at 5,000/10/10, RSS grew 30 MiB of the 20 allowed, and all is undone.
    // RSS stays at 430 MiB, the allocator keeping the pages the freeze took: that is not the
    // application's, so the bound stays the 420 MiB its own 400 allow, and no setting of
    // neurogc's is entered on top of what RSS already holds of neurogc's. Counted afresh after
    // its undo, evaluation draw 1820 at half speed took two more moves to 1.9x the defaults'
    // peak RSS.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = frozen_at(gc, [5000, 10, 10]);
    let v = c.step(&mut analytic, &warm(c.thresholds(), 4, 30 << 20));
    assert_eq!((v.freeze, v.budget), (Some(false), Some(Budget::Memory)), "{v:?}");
    c.land_now();
    for w in 5..=20 {
        let v = c.step(&mut analytic, &warm(c.thresholds(), w, 30 << 20));
        let limit = v.observed.rss_limit_mib.unwrap_or(f64::INFINITY);
        assert!(limit <= 421.0, "window {w}: RSS allowed to {limit:.1} MiB");
        assert_eq!(v.thresholds, [700, 10, 10], "window {w}: {v:?}");
    }
}

/// A window of `SERVICE` frozen at `t` whose full collection walked `walked` objects of the old
/// generation (the frozen million not counted), pausing it `pause_ms`.
fn frozen_full(t: [i64; 3], w: i64, walked: i64, pause_ms: f64) -> Reading {
    let mut r = SERVICE.reading(t, w);
    r.collections[2] = 1;
    (r.pause_p50_ns[2], r.pause_max_ns[2]) = (pause_ms * 1e6, pause_ms * 1e6);
    (r.long_lived, r.freeze_count) = (Some([walked, 3_000]), Some(1_000_000));
    r
}

/// Frozen at the application's own 700/10/10 over a million objects, full collections every
/// window over what came since, longer each time (`frozen_full`), its own longest pause
/// measured `own_longest_ns`: the window (up to 24) and verdict of the undo, if any.
fn frozen_full_undone(own_longest_ns: f64) -> Option<(i64, Verdict)> {
    let gc = GuardConfig { freeze_after_s: Some(0.0), min: [700, 10, 10], max: [700, 10, 10], ..cfg() };
    let mut c = frozen_at(gc, [700, 10, 10]);
    c.own_longest_ns = own_longest_ns;
    (4..=24).find_map(|w| {
        let v = c.step(&mut analytic, &frozen_full(c.thresholds(), w, 5_000 * (w - 3), 2.0 + w as f64));
        assert_ne!(v.budget, Some(Budget::Memory), "{v:?}");
        (v.freeze == Some(false)).then_some((w, v))
    })
}

#[test]
fn a_freeze_whose_thawed_heap_would_pause_past_the_applications_own_longest_stands() {
    // The bottle web service (held out): unfrozen for a GC share missed, its thawed heap's full
    // collection took 132 ms where its own longest pause was 0.3 ms, and its p99 went from
    // 1.2 to 124 ms. Where the application's own pauses were all short, the one-off of the
    // thawed heap (about 200 ms over a million objects here) is a pause of neurogc's: the
    // freeze stands, whatever its own settings would hold after it.
    assert!(frozen_full_undone(5e6).is_none());
}

#[test]
fn a_freeze_measured_missing_the_pause_budget_its_own_settings_hold_is_undone() {
    // Seed-155 draw 1936 (a 1.25M-object heap whose entries are replaced): frozen once the
    // pending count had passed a quarter of the heap's, the counters then ran a full collection
    // every window over what replaced frozen entries, longer each time, past the 10 ms budget.
    // Its own thresholds unfrozen hold it (a full collection of the whole heap, as before the
    // freeze): the freeze is undone, though no memory was missed, and with no collection of
    // neurogc's (the application's own next one walks the thawed heap). The build before kept
    // only frozen settings in play: "budgets hold but pause (none can)" to the end.
    // Its own full collections took 250-730 ms: the thawed heap's first is no longer.
    let Some((w, v)) = frozen_full_undone(300e6) else { panic!("the freeze stood to the end") };
    // At the budget in window 8 and past it after: undone once three windows have measured
    // the frozen setting, by the second over the budget.
    assert!((7..=10).contains(&w), "undone in window {w}: {v:?}");
    assert_eq!((v.thresholds, v.budget, v.collect), ([700, 10, 10], Some(Budget::Pause), false), "{v:?}");
    assert!(v.reason.starts_with("pause budget missed at 700/10/10 frozen"), "{}", v.reason);
    assert_eq!(v.what.as_deref(), Some("700/10/10 + unfreeze"), "{v:?}");
}

#[test]
fn an_undo_for_memory_teaches_the_model_that_the_old_heap_turns_over() {
    // Frozen at 700/10/10, RSS grew 30 MiB in 4 s past the allowance: the old heap dies at
    // about 7.5 MiB/s, which its full collections (finding little) had not shown. Undone, a
    // setting that puts full collections off holds that garbage the longer, and says so.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = frozen_at(gc, [700, 10, 10]);
    let rarer = Candidate { thresholds: [20_000, 50, 100], frozen: false };
    // The same collector told the same windows, but not of the undo's reason.
    let mut unlearned = c.collector.clone();
    let undone = warm(c.thresholds(), 4, 30 << 20);
    let v = c.step(&mut analytic, &undone);
    assert_eq!(v.freeze, Some(false), "{v:?}");
    // A window at its own settings, whose full collection the counts put 45 s off.
    let r = Reading { rss: 430 << 20, ..SERVICE.reading(c.thresholds(), 5) };
    c.step(&mut analytic, &r);
    unlearned.observe(&undone);
    unlearned.unfroze();
    unlearned.observe(&r);
    let before = unlearned.predict(&rarer, false).memory_bytes;
    let after = c.collector.predict(&rarer, false).memory_bytes;
    assert!(after > before + 100.0 * 1048576.0, "{before} -> {after}");
    let own = Candidate { thresholds: [700, 10, 10], frozen: false };
    assert_eq!(c.collector.predict(&own, false).memory_bytes, 0.0);
}

#[test]
fn after_an_undo_for_memory_growth_at_neurogcs_thresholds_is_theirs_warm_heap_or_not() {
    // Frozen at 700/10/10, RSS grew past the allowance: everything is undone. Then, moved to
    // 2000/50/100 (as a later decision may), RSS climbs 40 MiB a window while no window shows
    // the heap warm (a catalog rebuilt every few seconds, each old one left to a rarer full
    // collection). The growth is the setting's: neurogc goes back to the application's own
    // thresholds within a few windows, not 1.4 GiB later.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = frozen_at(gc, [700, 10, 10]);
    let v = c.step(&mut analytic, &warm(c.thresholds(), 4, 30 << 20));
    assert_eq!(v.freeze, Some(false), "{v:?}");
    c.land_now();
    c.current = [2000, 50, 100];
    c.kept.changed(430.0 * 1048576.0, false, 0.0);
    let back = (5..=14).find(|&w| {
        let r = Reading {
            rss: (430 << 20) + ((w - 4) as u64) * (40 << 20),
            ..SERVICE.reading(c.thresholds(), w)
        };
        let v = c.step(&mut analytic, &r);
        v.budget == Some(Budget::Memory) && v.thresholds == [700, 10, 10]
    });
    assert!(back.is_some_and(|w| w <= 7), "back at window {back:?}");
}

#[test]
fn after_an_undo_for_memory_growth_counts_though_no_full_collection_was_ever_seen() {
    // As above, but the heap was never seen warm (no full collection in any window): what RSS
    // grows at neurogc's thresholds after the undo is still theirs.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    for w in 1..=3 {
        c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w));
    }
    (c.deferred, c.landing, c.current, c.frozen, c.freeze_used) = (None, None, [700, 10, 10], true, true);
    c.collector.froze(false, false);
    c.kept.changed(400.0 * 1048576.0, false, 0.0);
    c.rss_at_freeze = Some((400.0 * 1048576.0, 0.0));
    assert!(!c.collector.heap_warm());
    let undo = c.step(&mut analytic, &SERVICE.reading(c.thresholds(), 4).with_rss_mib(430));
    assert_eq!(undo.freeze, Some(false), "{undo:?}");
    c.land_now();
    c.current = [2000, 50, 100];
    let back = (5..=14).find(|&w| {
        let r = SERVICE.reading(c.thresholds(), w).with_rss_mib(430 + (w as u64 - 4) * 40);
        let v = c.step(&mut analytic, &r);
        v.budget == Some(Budget::Memory) && v.thresholds == [700, 10, 10]
    });
    assert!(back.is_some_and(|w| w <= 8), "back at window {back:?}");
}

#[test]
fn rss_growing_at_the_applications_own_pace_after_a_freeze_is_not_the_freezes() {
    // A cache still filling: RSS grows 8 MiB a window at the application's own settings, for
    // six windows, and is frozen. Growing on at that pace, it is the application's (for as long
    // as its own pace was measured, 5 s), and the freeze stands; the 20 MiB a 5% budget
    // allows are past after three windows where all growth counts as the freeze's. Growing
    // 20 MiB a window faster than its own pace, the freeze is undone within two.
    let undone_at = |extra: u64| {
        let gc = GuardConfig { memory_budget: 0.05, ..pinned(Some(10_000_000)) };
        let mut c = Controller::new(gc, [700, 10, 10], true);
        for w in 1..=6 {
            c.step(&mut analytic, &warm([700, 10, 10], w, (w as u64 - 1) * (8 << 20)));
        }
        landed(&mut c, 440.0, 6.0);
        (7..=12).find(|&w| {
            let grown = (w as u64 - 1) * (8 << 20) + (w as u64 - 6) * (extra << 20);
            let v = c.step(&mut analytic, &warm([700, 10, 10], w, grown));
            v.freeze == Some(false)
        })
    };
    assert_eq!(undone_at(0), None);
    assert_eq!(undone_at(20), Some(8));
}

#[test]
fn rss_growing_at_the_applications_own_pace_is_its_own_until_its_full_collection_was_due() {
    // A heap growing 8 MiB a window at its own settings, measured over three seconds, with no
    // full collection: its counters put the next one 45 s off. Frozen in window 4, it grows on
    // at that pace, which its own settings would have freed none of before that collection:
    // the freeze stands (twelve windows, past the 21 MiB a 5% budget allows after three, and
    // past the three seconds its pace was measured over). Where the counters put that
    // collection a second off, growth past the pace's measured span is the freeze's.
    let undone_at = |pending: i64| {
        let gc = GuardConfig { memory_budget: 0.05, ..pinned(Some(10_000_000)) };
        let mut c = Controller::new(gc, [700, 10, 10], true);
        let reading = |w: i64| {
            let r = SERVICE.reading([700, 10, 10], w);
            let rss = (400 << 20) + (w as u64 - 1) * (8 << 20);
            Reading { rss, long_lived: Some([1_000_000, pending + w * 3_000]), ..r }
        };
        for w in 1..=4 {
            c.step(&mut analytic, &reading(w));
            c.current = [700, 10, 10];
        }
        c.deferred = None;
        landed(&mut c, 424.0, 4.0);
        (5..=16).find(|&w| c.step(&mut analytic, &reading(w)).freeze == Some(false))
    };
    assert_eq!(undone_at(100_000), None);
    assert!(matches!(undone_at(235_000), Some(8..=11)), "{:?}", undone_at(235_000));
}

#[test]
fn a_fill_that_stops_at_neurogcs_settings_is_credited_no_further() {
    // Evaluation draw 1396's shape: a heap filling at 20 MiB a window at its own 700/10/10,
    // its full collection far off, frozen there in window 5. Frozen, RSS grows 1 MiB a window
    // for four windows (the fill has stopped: a freeze keeps more than the application's own
    // settings, never less), then 30 MiB a window. The fill is credited no further than RSS
    // kept it: undone within a few windows, where the 20 MiB a window credited until the
    // application's own full collection was due hid the growth for ten more. Where RSS keeps
    // the pace all through, the fill is credited and the freeze stands.
    let undone_at = |stopped: u64, then: u64| {
        let gc = GuardConfig { memory_budget: 0.15, ..pinned(Some(10_000_000)) };
        let mut c = Controller::new(gc, [700, 10, 10], true);
        let rss = |w: u64| match w {
            ..=5 => 400 + (w - 1) * 20,
            6..=9 => 480 + (w - 5) * stopped,
            _ => 480 + 4 * stopped + (w - 9) * then,
        };
        for w in 1..=5 {
            c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w).with_rss_mib(rss(w as u64)));
            c.current = [700, 10, 10];
        }
        c.deferred = None;
        landed(&mut c, 480.0, 5.0);
        (6..=25).find(|&w| {
            let r = SERVICE.reading(c.thresholds(), w).with_rss_mib(rss(w as u64));
            c.step(&mut analytic, &r).freeze == Some(false)
        })
    };
    assert_eq!(undone_at(20, 20), None);
    assert!(matches!(undone_at(1, 30), Some(10..=13)), "{:?}", undone_at(1, 30));
}

/// A window of the filling-cache tests at thresholds `t`: RSS 400 MiB and `grown` bytes;
/// `fulls`: it holds a full collection that finds nothing dead.
fn cache_reading(t: [i64; 3], w: i64, grown: u64, fulls: bool) -> Reading {
    let r = if fulls { warm(t, w, 0) } else { SERVICE.reading(t, w) };
    Reading { rss: (400 << 20) + grown, ..r }
}

/// A cache filling at 8 MiB a window whatever the thresholds: neurogc moves off the
/// application's own settings after two windows, too few to read its own pace from, and freezes
/// in window 6; the window the freeze stands from (up to 18) in which it is undone, if any.
/// `fulls`: each window holds a full collection that finds nothing dead; `own_grows`: RSS grows
/// at the application's own settings too (else it is flat there); `extra`: MiB a window RSS
/// grows past that pace once frozen; `jump`: MiB it rises by once, in the window after the
/// freeze.
fn filling_cache_undone_at(fulls: bool, own_grows: bool, extra: u64, jump: u64) -> Option<i64> {
    let mut c =
        Controller::new(GuardConfig { memory_budget: 0.05, ..pinned(Some(10_000_000)) }, [700, 10, 10], true);
    let reading = |c: &Controller, w: i64, grown: u64| cache_reading(c.thresholds(), w, grown, fulls);
    let before = |w: i64| if own_grows || w > 2 { (w as u64 - 1) * (8 << 20) } else { 0 };
    for w in 1..=6 {
        let r = reading(&c, w, before(w));
        c.step(&mut analytic, &r);
        // As moved by neurogc after its two windows of learning.
        if w >= 2 {
            c.current = [5000, 10, 10];
        }
    }
    assert_eq!(c.own_growth.rate(), 0.0);
    landed(&mut c, 440.0, 6.0);
    (7..=18).find(|&w| {
        let grown = (w as u64 - 1) * (8 << 20) + (w as u64 - 6) * (extra << 20) + (jump << 20);
        c.step(&mut analytic, &reading(&c, w, grown)).freeze == Some(false)
    })
}

#[test]
fn a_freeze_made_before_the_applications_own_pace_was_read_is_told_against_the_unfrozen_pace() {
    // Where the application's full collections found none of its old heap dead, the pace RSS
    // kept at every unfrozen setting before the freeze is the application's for as long as the
    // freeze stands (twelve windows here, past the 20 MiB a 5% budget allows after three), and
    // growth past it is the freeze's: undone within two windows. Where no full collection has
    // looked at the old heap, what fills may be a structure replacing one, and the growth is the
    // freeze's once past the allowance; so too where RSS stood still in the application's own
    // windows and grew only at neurogc's thresholds.
    let undone_at = |fulls, own_grows, extra| filling_cache_undone_at(fulls, own_grows, extra, 0);
    assert_eq!(undone_at(true, true, 0), None);
    assert!(matches!(undone_at(true, true, 20), Some(7..=8)));
    assert!(matches!(undone_at(false, true, 0), Some(7..=10)), "{:?}", undone_at(false, true, 0));
    assert!(matches!(undone_at(true, false, 0), Some(7..=10)), "{:?}", undone_at(true, false, 0));
}

/// A cache filling at 2 MiB a window at its own 700/10/10 (400 MiB, a 5% budget), frozen by
/// neurogc at 5,000/10/10 right after its two windows of learning, before any pace was read
/// unfrozen; the window (up to 18) in which the freeze is undone, if any. `fulls`, `own_grows`
/// as `filling_cache_undone_at`; `extra`: MiB a window RSS grows past that pace once frozen;
/// `steps`: frozen, RSS grows as much, but by 6 MiB every third window (a structure rebuilt
/// every 3 s, each replaced copy kept frozen).
fn frozen_early_undone_at(fulls: bool, own_grows: bool, extra: u64, steps: bool) -> Option<i64> {
    let mut c =
        Controller::new(GuardConfig { memory_budget: 0.05, ..pinned(Some(10_000_000)) }, [700, 10, 10], true);
    let reading = |c: &Controller, w: i64, grown: u64| cache_reading(c.thresholds(), w, grown, fulls);
    let own = |w: i64| if own_grows { (w as u64 - 1) * (2 << 20) } else { 0 };
    for w in 1..=2 {
        c.step(&mut analytic, &reading(&c, w, own(w)));
    }
    c.current = [5000, 10, 10];
    landed(&mut c, 402.0, 2.0);
    (3..=18).find(|&w| {
        let since = if steps { (w as u64 - 2) / 3 * 3 } else { w as u64 - 2 };
        let grown = own(2) + since * ((2 + extra) << 20);
        c.step(&mut analytic, &reading(&c, w, grown)).freeze == Some(false)
    })
}

#[test]
fn a_freeze_made_before_any_pace_was_read_is_told_against_the_pace_it_keeps() {
    // The freeze came after the application's two windows, too few to read its rate from, and
    // before any unfrozen setting of neurogc's: once four frozen windows keep the pace its own
    // two showed, with its full collections finding none of its old heap dead, that pace is
    // the application's growth for as long as the freeze stands (sixteen windows here, 32 MiB
    // of the 20 a 5% budget allows; evaluation draw 1816). Frozen growth past that pace, growth
    // where no full collection looked at the old heap, growth its own windows did not show,
    // and growth in steps that stand still between them (a copy kept at each rebuild) stay
    // the freeze's: undone.
    assert_eq!(frozen_early_undone_at(true, true, 0, false), None);
    assert!(matches!(frozen_early_undone_at(true, true, 20, false), Some(3..=4)));
    assert!(frozen_early_undone_at(false, true, 0, false).is_some());
    assert!(frozen_early_undone_at(true, false, 0, false).is_some());
    assert!(frozen_early_undone_at(true, true, 0, true).is_some());
}

#[test]
fn a_rise_at_the_applications_own_pace_is_not_read_as_a_copy_waiting() {
    // The cache of the test above, filling at 8 MiB a window at every setting, its full
    // collections finding nothing dead, rises once by more than a window's pace in the window
    // after the freeze (a burst of requests served after its pause). What rose at the pace is
    // its growth: only the rest could be a replaced copy waiting for a full collection, and
    // 14 MiB past the pace is within the 20 MiB a 5% budget allows, so the credit for the
    // application's pace stands and so does the freeze. Read whole (22 MiB), the rise ended
    // that credit and the freeze was undone for the application's own growth (seed-60 draw
    // 1931). A jump of 30 MiB past the pace is past the allowance either way: undone.
    let undone_at = |jump| filling_cache_undone_at(true, true, 0, jump);
    assert_eq!(undone_at(14), None);
    assert!(matches!(undone_at(30), Some(7..=8)), "{:?}", undone_at(30));
}

#[test]
fn rss_that_stays_below_its_own_peak_after_a_freeze_is_not_the_freezes() {
    // The application's RSS swung up to 400 MiB at its own settings; the freeze came at a low
    // point of the swing (340 MiB). RSS back at 395 MiB has grown 55 MiB since the freeze, more
    // than the 20 allowed, but never past what the application had at its own settings: the
    // freeze stands. Past it by more than the allowance, it is undone.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = frozen_at(gc, [700, 10, 10]);
    c.rss_at_freeze = Some((340.0 * 1048576.0, 0.0));
    c.kept.changed(340.0 * 1048576.0, true, 0.0);
    let v = c.step(&mut analytic, &warm(c.thresholds(), 4, 0).with_rss_mib(395));
    assert!(v.freeze.is_none() && c.frozen(), "{v:?}");
    let v = c.step(&mut analytic, &warm(c.thresholds(), 5, 0).with_rss_mib(430));
    assert_eq!(v.freeze, Some(false), "{v:?}");
}

#[test]
fn a_freeze_at_the_applications_own_thresholds_is_judged_by_what_rss_does_while_it_stands() {
    // The catalog service: frozen at its own 700/10/10, each swapped-out cyclic catalog stays
    // frozen, and RSS climbs 10 MiB a window. The model's figure for the freeze is small; RSS
    // says otherwise, and the freeze is undone once RSS is past the 60 MiB a 15% budget allows,
    // not left to grow. So too where no setting holds the pause budget (the undo is not
    // weighed against pauses), and where the heap was never seen warm (growth while a freeze
    // stands is the freeze's all the same).
    for (pause_ms, warm_heap) in [(10, true), (1, true), (10, false)] {
        let gc =
            GuardConfig { freeze_after_s: Some(0.0), pause_budget_ns: Some(pause_ms * 1_000_000), ..cfg() };
        let mut c = frozen_at(gc, [700, 10, 10]);
        let mut undone = None;
        for w in 4..=20 {
            let grown = (w - 3) as u64 * (10 << 20);
            let r = if warm_heap {
                warm(c.thresholds(), w, grown)
            } else {
                Reading { rss: (400 << 20) + grown, ..SERVICE.reading(c.thresholds(), w) }
            };
            let v = c.step(&mut analytic, &r);
            if v.freeze == Some(false) {
                undone = Some((grown >> 20, v));
                break;
            }
        }
        let (grown, v) = undone.unwrap_or_else(|| panic!("not undone ({pause_ms} ms, warm {warm_heap})"));
        assert!((60..=80).contains(&grown), "undone at +{grown} MiB: {v:?}");
        assert!(v.reason.contains("since the freeze") && v.thresholds == [700, 10, 10], "{v:?}");
    }
}

#[test]
fn what_grew_at_neurogcs_thresholds_before_a_freeze_stays_counted_while_it_stands() {
    // Evaluation draw 1580's shape: 40 MiB grew at 5,000/50/100 (garbage its put-off full
    // collections would have freed), then neurogc froze at the application's 700/10/10, and
    // RSS goes on growing 10 MiB a window. The freeze keeps what had grown (the garbage is
    // frozen with the rest): the 60 MiB a 15% budget of 400 allows are reached 20 MiB after the
    // freeze, not 60. Counted from the RSS it froze at, it read 2.4x its own RSS as within.
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    for w in 1..=3 {
        c.step(&mut analytic, &warm([700, 10, 10], w, 0));
    }
    c.current = [5000, 50, 100];
    c.kept.changed(400.0 * 1048576.0, true, 3.0);
    for w in 4..=7 {
        let mut r = warm(c.thresholds(), w, (w - 3) as u64 * (10 << 20));
        r.collections[2] = 0;
        c.step(&mut analytic, &r);
    }
    c.current = [700, 10, 10];
    froze(&mut c, 440.0, 7.0, true);
    let mut undone = None;
    for w in 8..=20 {
        let grown = 40 + (w - 7) as u64 * 10;
        let v = c.step(&mut analytic, &warm(c.thresholds(), w, grown << 20));
        if v.freeze == Some(false) {
            undone = Some((grown, v));
            break;
        }
    }
    let (grown, v) = undone.expect("the freeze was never undone");
    assert!((60..=70).contains(&grown), "undone at +{grown} MiB over its own RSS: {v:?}");
    assert!(v.reason.contains("counting 40 grown at neurogc's thresholds before it"), "{v:?}");
}

#[test]
fn a_setting_past_the_memory_budget_is_left_though_no_setting_holds_the_pause_budget() {
    // At 5,000/50/100, RSS has grown 100 MiB of the 60 a 15% budget allows. Every setting misses
    // the 1 ms pause budget (5 ms full collections, 50 ms at the application's own), which is
    // set aside: the move is made for memory, to a smaller young generation, and says so.
    let gc = GuardConfig { freeze_after_s: None, pause_budget_ns: Some(1_000_000), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    for w in 1..=3 {
        let mut r = warm([700, 10, 10], w, 0);
        (r.pause_p50_ns[2], r.pause_max_ns[2]) = (50e6, 50e6);
        c.step(&mut analytic, &r);
    }
    c.current = [5000, 50, 100];
    c.kept.changed(400.0 * 1048576.0, true, 0.0);
    let mut left = None;
    for w in 4..=12 {
        let v = c.step(&mut analytic, &warm(c.thresholds(), w, (w - 3) as u64 * (100 << 20)));
        if v.change {
            left = Some(v);
            break;
        }
    }
    let v = left.expect("left 5000/50/100");
    assert!(v.budget == Some(Budget::Memory) && v.thresholds[0] < 5000, "{v:?}");
    assert!(v.reason.contains("RSS") && v.reason.contains("x the 400 MiB"), "{v:?}");
}

#[test]
fn a_frozen_setting_whose_growth_since_the_freeze_is_within_the_budget_stays_frozen() {
    // RSS up 10 MiB since the freeze at 5,000/10/10, within the 20 a 5% budget allows: no
    // reason to give the freeze up.
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let mut c = frozen_at(gc, [5000, 10, 10]);
    for w in 4..=10 {
        let v = c.step(&mut analytic, &warm(c.thresholds(), w, 10 << 20));
        assert!(v.freeze.is_none(), "{v:?}");
    }
}

#[test]
fn a_frozen_setting_whose_rss_stepped_up_by_more_than_half_the_allowance_is_undone_in_that_window() {
    // A catalog rebuilt and swapped in, its old 12 MiB copy found dead by the application's
    // own full collection before the freeze. Frozen at its own thresholds, RSS steps up 12 MiB
    // in one window (20 MiB allowed) and stands: the copy replaced now is kept frozen (seed-83
    // draw 1553, 12.6 MiB of 16). The next rebuild steps it up as much again, the frozen copy
    // still there: undone in the window of the step, before that one. A step of 8 MiB leaves
    // room for another; where no replaced copy was ever seen, a step is a burst of the
    // application's growth (`a_rise_at_the_applications_own_pace_is_not_read_as_a_copy_
    // waiting`). The freeze stays in both.
    let run = |step: u64, replaced: bool| {
        let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
        let mut c = frozen_at(gc, [700, 10, 10]);
        if replaced {
            c.replacement.found(12.0 * 1048576.0, 20.0 * 1048576.0);
        }
        (4..=8).map(|w| c.step(&mut analytic, &warm(c.thresholds(), w, step << 20))).find(|v| v.change)
    };
    let v = run(12, true).expect("undone");
    assert_eq!((v.freeze, v.budget), (Some(false), Some(Budget::Memory)), "{v:?}");
    assert!(
        v.reason.contains("+12 MiB since the freeze, +24 MiB once the next copy is built"),
        "{}",
        v.reason
    );
    assert!(run(8, true).is_none());
    assert!(run(12, false).is_none());
}

#[test]
fn a_change_from_a_setting_with_no_evidence_of_its_own_is_measured_from_the_window_before() {
    // The setting left was in force for no window that counted (only neurogc's own
    // collection, or the actuator had not written it yet): the effect starts from the last
    // window before the change, never from nothing (a record cannot carry NaN).
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let mut effect = None;
    for w in 1..=12 {
        let v = c.step(&mut analytic, &SERVICE.reading(c.thresholds(), w));
        if v.change {
            let asked = c.landing.as_mut().expect("the change is asked for");
            asked.here = Candidate { thresholds: [1_234, 10, 10], frozen: false };
        }
        effect = effect.or(v.effect);
    }
    let e = effect.expect("an effect measured");
    assert!([e.pause_max_ms, e.gc_share, e.rss_mib].iter().flatten().all(|x| x.is_finite()), "{e:?}");
    assert!(e.rss_mib[0] == 400.0, "{e:?}");
}

#[test]
fn a_slower_machine_takes_longer_to_be_sure_not_a_different_answer() {
    let fast = act(SERVICE, cost_only(), 40).0;
    // Half the work a window at the same cost per allocation: a CPU at half speed.
    let half = Process { alloc: SERVICE.alloc / 2.0, ..SERVICE };
    let slow = act(half, cost_only(), 80).0;
    assert_eq!(fast.last(), slow.last(), "{fast:?}\n{slow:?}");
    let slowed = Process { slowdown: 0.3, ..half };
    assert_eq!(act(slowed, cost_only(), 80).0.last(), Some(&[700, 10, 10]));
}

#[test]
fn the_first_long_full_collection_is_put_off_before_it_comes() {
    let gc = GuardConfig { freeze_after_s: None, ..cfg() };
    let (settings, verdicts) = act(SERVICE, gc, 6);
    let v = verdicts.iter().find(|v| v.change).expect("a change");
    // At defaults a 250 ms full collection is due within a minute; after the change it is
    // predicted much later.
    assert!(v.predicted.unwrap().next_full_s.unwrap() > 100.0, "{v:?}");
    assert!(verdicts.iter().all(|v| v.observed.pause_gen < 2), "no full collection was seen");
    assert_ne!(settings[3], [700, 10, 10], "moved by the third window: {settings:?}");
}

#[test]
fn a_freeze_whose_collection_would_miss_the_pause_budget_is_made_without_it() {
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc.clone(), [700, 10, 10], true);
    c.allow_freeze(true);
    let froze = (1..=6).find_map(|w| {
        let v = c.step(&mut analytic, &SERVICE.reading(c.thresholds(), w));
        (v.freeze == Some(true)).then_some(v)
    });
    // The next full collection is far off: one of neurogc's own now would stop the process
    // for 250 ms, where freezing the pending objects with the heap costs a few MiB.
    let v = froze.expect("frozen");
    assert!(!v.collect && v.what.as_deref().is_some_and(|w| w.ends_with(" + freeze")), "{v:?}");
    // Its first full collection is due past the model's horizon (20,000/10/10 promotes little):
    // no collection after the freeze either, which would only bring full collections on.
    let due = v.predicted.and_then(|p| p.next_full_s).unwrap_or(0.0);
    assert!(!v.reset && due > HORIZON_S, "{v:?}");
    // A memory budget too small for the pending garbage, and no full collection of the
    // application's measured: a collection of neurogc's own would be a pause with nothing to
    // hold it against, so there is none (the cache service's 459 ms one was its run's p99).
    // The counts put the application's own within a minute: the freeze waits for it.
    let tight = GuardConfig { memory_limit_bytes: Some((400 << 20) + (1 << 20)), ..gc };
    let mut c = Controller::new(tight, [700, 10, 10], true);
    c.allow_freeze(true);
    let verdicts: Vec<Verdict> =
        (1..=6).map(|w| c.step(&mut analytic, &SERVICE.reading(c.thresholds(), w))).collect();
    let frozen = verdicts.iter().find(|v| v.freeze == Some(true)).expect("a freeze");
    assert!(
        frozen.what.as_deref().is_some_and(|w| w.contains(" + freeze after the next full collection")),
        "{frozen:?}"
    );
    // There the first full collection after the freeze (a quarter of the frozen count promoted)
    // comes within the horizon and is over the pause budget, and the later ones are not: the
    // freeze collects after itself, so that one-off never comes.
    assert!(
        frozen.reset && frozen.what.as_deref().is_some_and(|w| w.ends_with(", then collect")),
        "{frozen:?}"
    );
    assert!(c.freeze_deferred() && !c.frozen(), "{verdicts:?}");
}

#[test]
fn a_freeze_the_main_thread_did_not_run_is_asked_for_again_later_and_then_no_more() {
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let mut asked = Vec::new();
    for w in 1..=60 {
        let v = c.step(&mut analytic, &SERVICE.reading(c.thresholds(), w));
        if v.freeze == Some(true) {
            asked.push(w);
            // Nothing changed in the target: the call never ran.
            c.freeze_failed();
            assert!(!c.frozen());
        }
    }
    // Asked again after 2, 4 and 8 windows, then never: four tries in all.
    assert_eq!(asked.len(), 4, "{asked:?}");
    let gaps: Vec<i64> = asked.windows(2).map(|p| p[1] - p[0]).collect();
    assert!(gaps.iter().zip([2, 4, 8]).all(|(g, least)| *g >= least), "{asked:?}");
    assert!(asked[3] < 40, "twenty windows and more without a fifth: {asked:?}");
}

/// `SERVICE` with no full collection measured yet, and the objects promoted since the last a
/// hair under a quarter of the old generation: the application's own comes within a window or
/// two.
fn full_collection_near(c: &Controller, w: i64) -> Reading {
    let mut r = SERVICE.reading(c.thresholds(), w);
    r.long_lived = Some([1_000_000, 240_000 + w * 3_000]);
    r
}

/// A controller, freezing allowed at once and a memory budget with no room for garbage frozen
/// with the heap, run on `full_collection_near` until it decides a freeze: the verdict, and
/// its window.
fn freeze_decided_near_a_full_collection() -> (Controller, Verdict, i64) {
    let gc =
        GuardConfig { freeze_after_s: Some(0.0), memory_limit_bytes: Some((400 << 20) + (1 << 20)), ..cfg() };
    first_freeze(gc, 6, full_collection_near)
}

/// A controller, freezing allowed at once, run on `reading` for up to `windows` windows until
/// it decides a freeze: it, the verdict, and its window.
fn first_freeze(
    gc: GuardConfig,
    windows: i64,
    reading: impl Fn(&Controller, i64) -> Reading,
) -> (Controller, Verdict, i64) {
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let (w, v) = (1..=windows)
        .map(|w| (w, c.step(&mut analytic, &reading(&c, w))))
        .find(|(_, v)| v.freeze == Some(true))
        .expect("a freeze");
    (c, v, w)
}

#[test]
fn a_window_without_collections_says_how_little_cpu_it_ran() {
    // A service between requests: no collection in the window, 3% of a CPU.
    let mut c = Controller::new(cfg(), [700, 10, 10], true);
    let mut r = SERVICE.reading([700, 10, 10], 1);
    (r.collections, r.cpu_share, r.gc_share, r.idle) = ([0; 3], 0.03, 0.0, true);
    let v = c.step(&mut analytic, &r);
    assert!(!v.change, "{v:?}");
    assert_eq!(v.reason, "idle: no collection in this window and under 5% of a CPU: nothing to improve");
}

#[test]
fn a_freeze_waits_for_the_applications_full_collection_the_counts_say_is_near() {
    // Frozen now, the 240,000 pending objects would be kept, and the memory budget has no room
    // for them; frozen after the application's full collection, none are.
    let (mut c, v, _) = freeze_decided_near_a_full_collection();
    assert!(v.collect && c.freeze_deferred(), "{v:?}");
    // Where it is further off, a freeze is made at once (the test above).
    // The full collection comes and frees what was promoted since the last and the young
    // generations' garbage: the freeze lands.
    assert!(c.deferred_lands(250_000), "nothing old died");
}

#[test]
fn a_collection_begun_before_neurogcs_first_request_is_the_applications_own_pause() {
    // Evaluation draw 1349: a freeze was asked for while the application's own full
    // collection ran (1.3 s over its heap); the window it ended in held the freeze and was no
    // setting's evidence, so the longest pause of its own read as its young rounds', and every
    // setting pausing past those was barred as longer than the application's own.
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let r = SERVICE.reading([700, 10, 10], 1);
    let young = r.worst().1;
    assert!(young > 0.0 && young < 1.3e9, "{young}");
    c.step(&mut analytic, &r);
    assert_eq!(c.own_longest_ns, young);
    // The full collection began at 1.6 s; the freeze was asked for at 2.0 s and made at 2.9 s,
    // as it ended.
    c.wrote(2_900_000_000, 900_000_000);
    c.collection_ended(1_600_000_000, 1_300_000_000);
    assert_eq!(c.own_longest_ns, 1.3e9);
    // One begun after neurogc asked is not the application's own alone: it may be the
    // collection neurogc runs with a freeze, or one at its thresholds.
    c.collection_ended(3_000_000_000, 2_000_000_000);
    assert_eq!(c.own_longest_ns, 1.3e9);
}

#[test]
fn a_deferred_freeze_is_dropped_where_its_full_collection_finds_the_old_heap_turning_over() {
    let (mut c, _, w) = freeze_decided_near_a_full_collection();
    assert!(c.freeze_deferred());
    // It frees 900,000 objects: 600,000 more than can have been promoted since the last one or
    // be young, some 190 MiB of the 400 MiB heap, past the memory budget. A catalog rebuilt and
    // swapped in: frozen, each copy replaced would be kept.
    assert!(!c.deferred_lands(900_000));
    assert!(!c.freeze_deferred() && !c.frozen());
    let next = c.step(&mut analytic, &full_collection_near(&c, w + 1));
    assert!(next.reason.starts_with("freeze dropped: the full collection it waited for found"), "{next:?}");
}

/// `SERVICE` with one of the application's own full collections in each window, 300 ms long
/// over its million-object heap, and `frozen` objects counted by the hook.
fn full_collection_each_window(c: &Controller, w: i64, frozen: i64) -> Reading {
    let mut r = SERVICE.reading(c.thresholds(), w);
    r.collections[2] = 1;
    (r.pause_p50_ns[2], r.pause_max_ns[2]) = (300e6, 300e6);
    r.collected_per[2] = 250_000.0;
    r.long_lived = Some([1_000_000, 250_000]);
    r.freeze_count = Some(frozen);
    r
}

#[test]
fn a_freeze_follows_the_applications_own_full_collection_and_no_collection_of_neurogcs() {
    // Each window holds one of the application's own full collections, 300 ms long, over its
    // million-object heap, and the memory budget leaves no room for pending garbage.
    let gc = GuardConfig {
        freeze_after_s: Some(0.0),
        pause_budget_ns: None,
        memory_limit_bytes: Some((400 << 20) + (1 << 20)),
        ..cfg()
    };
    let reading = full_collection_each_window;
    let (mut c, v, w) = first_freeze(gc.clone(), 8, |c, w| reading(c, w, 0));
    // Decided to follow the application's next full collection: nothing of neurogc's runs
    // before it, and the controller does not count it in force yet.
    assert!(
        v.collect && v.what.as_deref().is_some_and(|x| x.ends_with("after the next full collection")),
        "{v:?}"
    );
    assert!(c.freeze_deferred() && !c.frozen() && c.thresholds() == [700, 10, 10], "{v:?}");
    // While it waits, nothing else moves.
    let waiting = c.step(&mut analytic, &reading(&c, w + 1, 0));
    assert!(
        !waiting.change && waiting.reason.contains("waiting for the application's next full collection"),
        "{waiting:?}"
    );
    // The hook counts frozen objects: the move is in force, with its thresholds.
    let landed = c.step(&mut analytic, &reading(&c, w + 2, 900_000));
    assert!(c.frozen() && !c.freeze_deferred(), "{landed:?}");
    assert_eq!(c.thresholds(), v.thresholds);

    // No full collection comes: the freeze is dropped within the windows the model gave it,
    // and the controller decides again, without waiting for one.
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let w =
        (1..=8).find(|w| c.step(&mut analytic, &reading(&c, *w, 0)).freeze == Some(true)).expect("a freeze");
    let dropped = (w + 1..w + 2 + MAX_FREEZE_WAIT_WINDOWS as i64).find(|w| {
        c.step(&mut analytic, &SERVICE.reading(c.thresholds(), *w));
        !c.freeze_deferred()
    });
    assert!(dropped.is_some(), "still waiting after {MAX_FREEZE_WAIT_WINDOWS} windows");
}

/// `full_collection_each_window` at RSS `rss`.
fn full_each_window_at(c: &Controller, w: i64, frozen: i64, rss: u64) -> Reading {
    Reading { rss, ..full_collection_each_window(c, w, frozen) }
}

/// A controller whose memory budget (5% of 400 MiB) leaves no room for pending garbage, in
/// the window it decided a freeze that waits for the application's full collection: that
/// window's number.
fn deferred_freeze_decided() -> (Controller, i64) {
    let gc = GuardConfig { freeze_after_s: Some(0.0), pause_budget_ns: None, memory_budget: 0.05, ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let w = (1..=8)
        .find(|&w| c.step(&mut analytic, &full_each_window_at(&c, w, 0, 400 << 20)).freeze == Some(true))
        .expect("a freeze");
    assert!(c.freeze_deferred(), "made at once");
    (c, w)
}

#[test]
fn what_a_deferred_freeze_keeps_is_counted_from_the_window_it_landed_in() {
    // Evaluation draw 1401: a deferred freeze landed with 100,000/10/10, whose young generation
    // filled with 4 KiB payloads, RSS rising from the moment it landed. Here it rises 4 MiB a
    // window at any setting of neurogc's, the landing window's included, and stops once
    // neurogc's thresholds are left; 5% of 400 MiB allows 20. Counted from the end of the
    // landing window, the budget saw the move keep 4 MiB less than it did, and RSS went that
    // far past the bound before it was left.
    let (mut c, w) = deferred_freeze_decided();
    let (mut rss, mut trace) = (400u64 << 20, Vec::new());
    for w in w + 1..w + 20 {
        // The freeze lands in the first of these windows.
        if c.freeze_deferred() || c.asked_frozen() || c.thresholds() != [700, 10, 10] {
            rss += 4 << 20;
        }
        // Counted by the actuator from the landing until an undo.
        let frozen = if c.freeze_deferred() || c.asked_frozen() { 900_000 } else { 0 };
        let v = c.step(&mut analytic, &full_each_window_at(&c, w, frozen, rss));
        trace.push((c.thresholds(), c.frozen(), rss >> 20, v.reason));
    }
    assert!(trace[0].1, "never frozen: {trace:#?}");
    assert!(trace.iter().all(|t| t.2 <= 420), "RSS past the 420 MiB bound: {trace:#?}");
    // Undone, saying why: no copy was replaced, RSS rises at a pace.
    let undo = trace.iter().find(|t| t.3.starts_with("memory budget missed")).expect("no undo");
    assert!(undo.3.contains("+20 MiB since the freeze, +24 MiB by the next window"), "{undo:?}");
}

#[test]
fn a_deferred_freeze_queued_in_the_target_is_not_dropped_and_is_undone_as_it_lands() {
    // Seed-157 draw 1118 (a service rebuilding its heap every 7.7 s): the full collection a
    // deferred freeze waited for ended, and the freeze was queued in the target; the next
    // window read the rebuild's RSS past the allowance, and the build before dropped the
    // freeze as one still waiting. The target ran it all the same: frozen, with the
    // controller reading the frozen objects as the application's, nothing was undone, and the
    // next rebuild's copy was kept (peak RSS 1.28x the defaults'). Queued, the freeze waits
    // for the actuator's answer; landed, all neurogc set is undone for the memory missed.
    let (mut c, w) = deferred_freeze_decided();
    // The application's full collection ends: the agent queues the freeze in the target.
    assert!(c.deferred_lands(1_000));
    // The window's end reads RSS 40 MiB up (20 allowed) before the target has run it.
    let v = c.step(&mut analytic, &full_each_window_at(&c, w + 1, 0, 440 << 20));
    assert!(c.freeze_deferred(), "dropped while queued: {}", v.reason);
    assert!(v.reason.ends_with("then undoing all neurogc set for memory"), "{}", v.reason);
    // It lands: undone at once, the freeze included.
    let v = c.step(&mut analytic, &full_each_window_at(&c, w + 2, 900_000, 440 << 20));
    assert_eq!(
        (v.freeze, v.budget, v.thresholds),
        (Some(false), Some(Budget::Memory), [700, 10, 10]),
        "{v:?}"
    );
    assert!(v.reason.starts_with("memory budget missed at"), "{}", v.reason);
}

/// `SERVICE` whose application ran a full collection (300 ms) in the first window; since then,
/// a handful of objects promoted of the quarter-million that call the next one.
fn full_collection_long_ago(c: &Controller, w: i64) -> Reading {
    let mut r = SERVICE.reading(c.thresholds(), w);
    if w == 1 {
        r.collections[2] = 1;
        (r.pause_p50_ns[2], r.pause_max_ns[2]) = (300e6, 300e6);
        r.collected_per[2] = 1_000.0;
    }
    r.long_lived = Some([1_000_000, 10 * w]);
    r
}

#[test]
fn a_freeze_waits_for_no_full_collection_the_counts_put_far_off_though_one_was_measured() {
    let (c, v, _) = freeze_asked_at_once();
    // Made at once, with the move it comes with: the few objects pending are all it keeps.
    assert!(!v.collect && !c.freeze_deferred() && c.asked_frozen(), "{v:?}");
    assert_eq!(c.thresholds(), v.thresholds);
}

/// A controller that has just asked for a freeze at once (with thresholds of its own) on
/// `full_collection_long_ago`: it, the verdict and its window.
fn freeze_asked_at_once() -> (Controller, Verdict, i64) {
    let gc = GuardConfig { freeze_after_s: Some(0.0), pause_budget_ns: None, ..cfg() };
    let (c, v, w) = first_freeze(gc, 8, full_collection_long_ago);
    assert!(!v.collect && !c.freeze_deferred(), "{v:?}");
    (c, v, w)
}

#[test]
fn a_move_the_target_has_not_run_yet_is_waited_for_and_its_window_is_the_setting_befores() {
    // Evaluation draw 1483: a freeze asked at 2.0 s ran at 3.2 s, behind the application's own
    // 1 s full collection. The window between ran the application's 700/10/10 unfrozen (the
    // thresholds read back, nothing frozen) and held that collection: it is 700/10/10's
    // evidence, and nothing else is asked for until the move shows.
    let (mut c, v, w) = freeze_asked_at_once();
    let own = Candidate { thresholds: [700, 10, 10], frozen: false };
    let to = Candidate { thresholds: v.thresholds, frozen: true };
    let windows_before = c.evidence.get(&own).map_or(0.0, |s| s.windows());
    let mut r = SERVICE.reading([700, 10, 10], w + 1);
    r.collections[2] = 1;
    (r.pause_p50_ns[2], r.pause_max_ns[2]) = (600e6, 600e6);
    r.gc_share += 0.6;
    r.cpu_share += 0.6;
    let held = c.decide(&mut analytic, &r);
    assert!(!held.change && held.freeze.is_none(), "{held:?}");
    assert!(held.reason.starts_with("waiting for 700/10/10 -> "), "{}", held.reason);
    assert!(!c.frozen() && c.thresholds() == v.thresholds, "asked for, not in force");
    // Counted (evidence only fades otherwise), with the collection the move waited behind.
    let own_stats = c.evidence.get(&own).expect("700/10/10's evidence");
    assert!(own_stats.windows() > windows_before, "{own_stats:?}");
    assert!(own_stats.pause_max_ms().is_some_and(|p| p > 100.0), "{own_stats:?}");
    assert!(c.evidence.get(&to).is_none());
    // The next window shows it (thresholds read back, the freeze counted): in force from there.
    let shown = Reading { freeze_count: Some(1_000_000), ..SERVICE.reading(v.thresholds, w + 2) };
    let after = c.decide(&mut analytic, &shown);
    assert!(c.frozen() && !after.reason.starts_with("waiting"), "{after:?}");
}

#[test]
fn a_move_never_shown_is_taken_as_asked_once_the_actuator_has_had_time_to_answer() {
    // An undo queued behind a blocked main thread is never counted: the controller waits no
    // longer than the actuator takes to answer, and a window more.
    let (mut c, v, w) = freeze_asked_at_once();
    let waits = (1..=10)
        .take_while(|i| {
            let r = SERVICE.reading([700, 10, 10], w + i);
            c.decide(&mut analytic, &r).reason.starts_with("waiting for")
        })
        .count() as f64;
    assert!(c.frozen() && c.thresholds() == v.thresholds);
    assert!(waits >= ANSWERS_WITHIN.as_secs_f64() && waits <= ANSWERS_WITHIN.as_secs_f64() + 1.0, "{waits}");
}

#[test]
fn a_freeze_that_failed_leaves_the_thresholds_sent_with_it_in_force() {
    let (mut c, v, _) = freeze_asked_at_once();
    c.freeze_failed();
    assert!(!c.frozen() && c.thresholds() == v.thresholds && c.landing.is_none());
}

#[test]
fn a_heap_growing_from_the_first_window_at_its_own_pace_is_frozen_at_once() {
    // As above, a freeze is due at once; and RSS grows 45 MiB a window from the first, at the
    // application's settings and at neurogc's alike: past a third of the allowance (60 MiB at
    // first), each window's rise could be a copy replacing another until a pace is measured,
    // and the first windows' were read before one was. Growth at the pace measured since replaces
    // nothing: a freeze made at once keeps no dead copy, and does not wait for a full
    // collection the counts put far off (seed-69 draw 1871 waited 5 s for a 160 ms one).
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let mut why = Vec::new();
    for w in 1..=8 {
        let r = Reading { rss: (400 << 20) + (w as u64) * (45 << 20), ..full_collection_long_ago(&c, w) };
        let v = c.step(&mut analytic, &r);
        why.push(v.reason.clone());
        if v.freeze == Some(true) {
            assert!(!v.collect && !c.freeze_deferred() && c.asked_frozen(), "{v:?}: {why:#?}");
            return;
        }
    }
    panic!("no freeze: {why:#?}");
}

#[test]
fn no_freeze_is_made_after_rss_rose_past_the_allowance_until_a_full_collection_tells_why() {
    // As above, a freeze is due at once; but after two windows in which it held, RSS rises
    // 900 MiB in one (a structure built beside the one in use, or the heap growing), past the
    // allowance (15% of an RSS that grows with it) and past any pace of the application's,
    // then holds. A freeze would keep what the new structure replaces: it waits for the
    // application's next full collection (window 7), which finds next to nothing dead of the
    // old heap: the heap grew, nothing was replaced.
    let gc = GuardConfig { freeze_after_s: Some(0.0), pause_budget_ns: None, ..cfg() };
    let reading = |c: &Controller, w: i64| {
        let rose = if w >= 3 { 900 << 20 } else { 0 };
        let mut r = Reading { rss: (400 << 20) + rose, ..full_collection_long_ago(c, w) };
        if w == 7 {
            r.collections[2] = 1;
            (r.pause_p50_ns[2], r.pause_max_ns[2]) = (300e6, 300e6);
            r.collected_per[2] = 1_000.0;
            r.long_lived = Some([1_000_000, 0]);
        }
        r
    };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let verdicts: Vec<Verdict> = (1..=12).map(|w| c.step(&mut analytic, &reading(&c, w))).collect();
    let froze = verdicts.iter().position(|v| v.freeze == Some(true)).map(|i| i + 1);
    let why: Vec<&str> = verdicts.iter().map(|v| v.reason.as_str()).collect();
    assert!(froze.is_some_and(|w| w >= 7), "frozen in window {froze:?}: {why:#?}");
}

#[test]
fn a_freeze_waits_while_rss_steps_up_from_where_it_stood_and_advice_does_not() {
    // RSS stands for two windows, then rises 25 MiB in each of two (a structure built beside
    // the one in use: past a third of the 60 MiB allowed, and past the application's pace,
    // none), then stands. While it rises, what a freeze would keep of what the new structure
    // replaces cannot be priced: act mode waits, and says so. The first window's rise is
    // unknown (no RSS before it), not flat: a heap growing from attach takes no step.
    let mib = 1048576.0;
    let steps = |rises: &[f64]| {
        let mut r = Replacement::default();
        rises
            .iter()
            .map(|rise| {
                r.window((rise * mib, 1.0, 0.0), None, 60.0 * mib);
                r.stepping()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(steps(&[0.0, 0.0, 25.0, 25.0, 0.0, 25.0]), [false, false, true, true, false, true]);
    assert_eq!(steps(&[0.0, 45.0, 45.0, 45.0]), [false, false, false, false]);
    // Under a third of the allowance, a rise is no copy that matters (`MAX_COPIES`).
    assert_eq!(steps(&[0.0, 0.0, 15.0, 15.0]), [false; 4]);
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let stepping = |act: bool| {
        let mut c = Controller::new(gc.clone(), [700, 10, 10], act);
        c.allow_freeze(true);
        let r = SERVICE.reading([700, 10, 10], 1);
        let free = c.may_freeze(&r);
        for rise in [0.0, 0.0, 25.0] {
            c.replacement.window((rise * mib, 1.0, 0.0), None, 60.0 * mib);
        }
        (free, c.may_freeze(&r), c.freeze_note(&r))
    };
    assert_eq!(stepping(true), (true, false, "; freezing waits for RSS to stop stepping up"));
    assert_eq!(stepping(false), (true, true, ""));
}

/// SERVICE, where a larger young generation is cheaper (it moves within the first windows of
/// evidence: `where_collecting_less_often_is_cheaper_it_moves_early_and_stays`): two idle
/// windows first, then RSS steps up 25 MiB in each of windows 3 and 4 (a structure built beside
/// the one in use, past a third of the 60 MiB allowed) and stands.
fn service_stepping_up(t: [i64; 3], w: i64) -> Reading {
    let mut r = SERVICE.reading(t, w).with_rss_mib(400 + 25 * (w.clamp(2, 4) - 2) as u64);
    if w <= 2 {
        (r.collections, r.cpu_share, r.gc_share, r.idle) = ([0; 3], 0.03, 0.0, true);
    }
    r
}

#[test]
fn no_setting_that_puts_full_collections_off_is_entered_while_rss_steps_up() {
    // `service_stepping_up`. While RSS steps, a setting that runs full collections further
    // apart would keep the replaced copy longer, at a price that cannot be told yet: none is
    // entered until the step ends.
    let (settings, verdicts) = act_on(cost_only(), 12, service_stepping_up);
    let cycle = |t: &[i64; 3]| full_cycle(&Candidate { thresholds: *t, frozen: false });
    for w in 3..=4 {
        // `settings[w]` is what the decision in window w left in force.
        let (before, after) = (&settings[w - 1], &settings[w]);
        assert!(cycle(after) <= cycle(before), "window {w}: {settings:?} {verdicts:#?}");
    }
    // A decision to stay says what waits.
    let waits = "settings that put full collections off wait for RSS to stop stepping up";
    assert!(verdicts[2..4].iter().all(|v| v.change || v.reason.contains(waits)), "{verdicts:#?}");
    // Once RSS stands, the cheaper setting is entered as before.
    assert!(settings.last().unwrap()[0] >= 5_000, "{settings:?}");
}

#[test]
fn a_decision_to_stay_while_rss_steps_up_says_once_what_waits() {
    // As above, freezing allowed: the freeze waits for the step as the settings that put full
    // collections off do, and a decision to stay says so in one clause, not two.
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cost_only() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let reasons: Vec<String> =
        (1..=4).map(|w| c.step(&mut analytic, &service_stepping_up(c.thresholds(), w)).reason).collect();
    let both = "; freezing and settings that put full collections off wait for RSS to stop stepping up";
    assert!(reasons.iter().any(|r| r.ends_with(both)), "{reasons:#?}");
    assert!(reasons.iter().all(|r| r.matches("stop stepping up").count() <= 1), "{reasons:#?}");
}

#[test]
fn the_learned_model_corrects_every_candidate_in_one_call_once_it_has_come_true_here() {
    let d_ln_t0 = crate::steering::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
    let first_move = |learned: Learned, borne_out: usize| {
        let mut c = Controller::new(cost_only(), [700, 10, 10], true);
        // Moves made earlier in which the model's corrections came true.
        for _ in 0..borne_out {
            let t = Trial { to: (), analytic_share: 0.1, learned: 1.0 };
            c.trust.record(&t, 0.1 * 1f64.exp());
        }
        (1..=4).map(|w| c.decide(learned, &SERVICE.reading(c.thresholds(), w))).find(|v| v.change)
    };
    let alone = first_move(&mut analytic, 0).expect("a move");
    assert!(alone.thresholds[0] > 700, "{alone:?}");
    // A learned model that says every larger young generation costs far more time in GC.
    let calls = std::cell::Cell::new(0);
    let mut learned = |rows: &[[f32; FEATURE_COUNT]]| {
        calls.set(calls.get() + 1);
        rows.iter().map(|f| if f[d_ln_t0] > 0.0 { [3.0, 3.0, 3.0, 0.0] } else { [0.0; 4] }).collect()
    };
    // Not borne out in this process yet: not asked while deciding, and the analytic model's
    // choice stands.
    assert_eq!(first_move(&mut learned, 0).map(|v| v.thresholds), Some(alone.thresholds));
    assert_eq!(calls.get(), 0);
    // Borne out by a few moves: it changes the choice, asked once a window (the first
    // learns) about every candidate.
    let corrected = first_move(&mut learned, 4);
    assert!(corrected.as_ref().is_none_or(|v| v.thresholds[0] <= 700), "{corrected:?}");
    assert_eq!(calls.get(), 3);
}

#[test]
fn every_decision_says_what_the_learned_model_moved_and_with_what_weight() {
    // A model that puts a larger young generation's GC share lower and its young pauses longer,
    // trusted from the start: each decision that weighed a setting names it, the share the
    // analytic model gave it and the one corrected, and the factors on its pauses.
    let d_ln_t0 = crate::steering::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
    let mut learned = |rows: &[[f32; FEATURE_COUNT]]| -> Vec<Correction> {
        rows.iter().map(|f| [-0.5 * f[d_ln_t0], 0.2 * f[d_ln_t0], 0.0, 0.0]).collect()
    };
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    c.trust = Trust::full();
    let (mut moves, mut stays) = (0, 0);
    for w in 1..=12 {
        let here = c.thresholds();
        let v = c.step(&mut learned, &SERVICE.reading(here, w));
        let Some(m) = v.model.clone() else { continue };
        // The weight the corrections carried: full at first, less once a move measured short.
        let w = m.weight;
        assert_eq!(w, c.trust.weight(), "{v:?}");
        let Some(moved) = m.moved else {
            assert_eq!(w, 0.0, "{v:?}");
            continue;
        };
        let t0: i64 = moved.setting.split('/').next().unwrap().parse().unwrap();
        let d = (t0 as f64 / here[0] as f64).ln();
        // Within the bound on any one correction (a factor of 10).
        let applied = |k: f64| k.clamp(-std::f64::consts::LN_10, std::f64::consts::LN_10);
        let [analytic, corrected] = moved.gc_share;
        let expected = (analytic * applied(-0.5 * d * w).exp()).min(1.0);
        assert!((corrected - expected).abs() < 1e-5 * analytic.max(1e-9), "{moved:?}");
        assert!((moved.pause_ln[0] - applied(0.2 * d * w)).abs() < 1e-4, "{moved:?}");
        if v.change {
            moves += 1;
            assert_eq!(
                moved.setting,
                thresholds(v.thresholds) + " frozen".repeat(usize::from(c.frozen())).as_str()
            );
        } else {
            // A decision to stay weighed the best other setting.
            stays += 1;
            assert!(moved.setting != thresholds(here) || c.frozen(), "{v:?}");
        }
    }
    assert!(moves >= 1 && stays >= 1, "{moves} moves, {stays} stays");
    // With no weight, the decision says so and names nothing moved.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let v = (1..=4)
        .map(|w| c.step(&mut learned, &SERVICE.reading(c.thresholds(), w)))
        .find(|v| v.model.is_some());
    let m = v.and_then(|v| v.model).expect("a setting weighed");
    assert_eq!((m.weight, m.moved), (0.0, None));
}

#[test]
fn a_move_made_without_the_model_asks_it_afterwards_what_the_move_will_check() {
    let d_ln_t0 = crate::steering::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
    let asked = std::cell::RefCell::new(Vec::new());
    let mut learned = |rows: &[[f32; FEATURE_COUNT]]| -> Vec<Correction> {
        asked.borrow_mut().push(rows.len());
        rows.iter().map(|f| [0.5 * f[d_ln_t0], 0.0, 0.0, 0.0]).collect()
    };
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let moved = (1..=4)
        .find_map(|w| {
            let v = c.step(&mut analytic, &SERVICE.reading(c.thresholds(), w));
            c.learn_trial(&mut learned);
            v.change.then_some(v.thresholds)
        })
        .expect("a move");
    // Asked once, about the move's two ends; its correction is the trial's.
    assert_eq!(*asked.borrow(), [2]);
    let trial = c.trial.expect("a trial");
    let expected = 0.5 * (moved[0] as f64 / 700.0).ln();
    assert!((trial.learned - expected).abs() < 1e-3, "{} vs {expected}", trial.learned);
    // Asked no more until the next move.
    c.learn_trial(&mut learned);
    assert_eq!(*asked.borrow(), [2]);
}

#[test]
fn a_learned_model_whose_corrections_do_not_come_true_here_loses_its_weight() {
    // A model that promises a larger young generation far less GC time than the analytic
    // model does, for a process where it is not so and the application slows too: each far
    // setting looks cheap until measured. After a move or two measured against it, its
    // corrections fade and the run costs about what staying would.
    let d_ln_t0 = crate::steering::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
    let mut promise = |rows: &[[f32; FEATURE_COUNT]]| -> Vec<Correction> {
        rows.iter().map(|f| [-1.5 * f[d_ln_t0].max(0.0), 0.0, 0.0, 0.0]).collect()
    };
    let slow = Process { slowdown: 0.3, ..SERVICE };
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let mut settings = Vec::new();
    for w in 1..=40 {
        settings.push(c.thresholds());
        c.step(&mut promise, &slow.reading(c.thresholds(), w));
        c.learn_trial(&mut promise);
    }
    assert!(c.trust.weight() < 0.3, "weight {}: {settings:?}", c.trust.weight());
    let far = settings.iter().filter(|t| t[0] >= 5_000).count();
    assert!(far <= 3, "{far} windows at a far setting: {settings:?}");
    let cost = |t: &[i64; 3]| slow.reading(*t, 1).cpu_share;
    let paid: f64 = settings.iter().map(cost).sum::<f64>() / cost(&[700, 10, 10]) / settings.len() as f64;
    assert!(paid < 1.05, "{paid:.3}x of staying: {settings:?}");
}

#[test]
fn each_window_checks_the_last_prediction_for_the_setting_in_force() {
    let mut c = Controller::new(cfg(), [700, 10, 10], false);
    let checks: Vec<Check> =
        (1..=4).filter_map(|w| c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w)).check).collect();
    assert_eq!(checks.len(), 2, "from the third window: {checks:?}");
    let k = &checks[1];
    assert_eq!(k.features.len(), FEATURE_COUNT);
    let (p, m) = (k.predicted[1], k.measured[1].unwrap());
    assert!(m / p > 0.5 && m / p < 2.0, "{k:?}");
    assert_eq!(k.measured[3], None, "no full collection ran");
}

#[test]
fn a_check_after_a_change_carries_the_memory_predicted_for_both_settings() {
    // Training reads a change's RSS, over the windows it stays in force, against the analytic
    // model's figures for the setting moved to and the one before (training/memory.py).
    let mut c = Controller::new(cfg(), [700, 10, 10], false);
    let checks: Vec<Check> = (1..=6)
        .filter_map(|w| {
            let t = if w <= 4 { [700, 10, 10] } else { [20_000, 10, 10] };
            c.step(&mut analytic, &SERVICE.reading(t, w)).check
        })
        .collect();
    let memory = |k: &Check| k.memory.expect("every check carries the memory side");
    let changed: Vec<&Check> = checks.iter().filter(|k| k.from.is_some()).collect();
    assert_eq!(changed.len(), 1, "{checks:?}");
    let m = memory(changed[0]);
    // The application's own setting keeps nothing over itself; a young generation 28x larger
    // holds the garbage that waits in it.
    assert_eq!(m.from_mib, Some(0.0), "{m:?}");
    assert!(m.predicted_mib > 0.1, "{m:?}");
    let still = checks.iter().find(|k| k.from.is_none()).unwrap();
    assert_eq!(memory(still).from_mib, None, "{still:?}");
}

#[test]
fn advise_mode_says_what_it_would_do_and_never_measures_an_effect_it_did_not_cause() {
    let mut c = Controller::new(cfg(), [700, 10, 10], false);
    c.allow_freeze(true);
    let mut advice = Vec::new();
    for w in 1..=12 {
        let v = c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w));
        assert!(v.effect.is_none(), "{v:?}");
        if w >= 3 {
            assert!(v.change, "the advice stands every window: {v:?}");
            assert!(v.what.as_deref().is_some_and(|w| w.starts_with("700/10/10 -> ")), "{v:?}");
            advice.push((v.thresholds, v.freeze, v.what));
        }
    }
    advice.dedup();
    assert_eq!(advice.len(), 1, "{advice:?}");
    assert!(!c.frozen());
    assert_eq!(c.thresholds(), [700, 10, 10]);
}

#[test]
fn advice_to_freeze_does_not_turn_over_with_the_pending_count() {
    // The long-lived generation's pending count swings window by window (a sample taken
    // between full collections): whether a full collection is due within the next windows
    // turns with it. The user freezes once, after start-up, where the collection first costs
    // the service nothing: the advice is one recommendation, not "collect" one window and not
    // the next (the demo's advice turned over ten times in a minute on this).
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], false);
    c.allow_freeze(true);
    let mut advice = Vec::new();
    for w in 1..=16 {
        let mut r = SERVICE.reading([700, 10, 10], w);
        r.long_lived = Some([1_000_000, if w % 2 == 0 { 240_000 } else { 100_000 }]);
        let v = c.step(&mut analytic, &r);
        if w >= 3 {
            advice.push((v.thresholds, v.freeze, v.what.clone()));
        }
    }
    advice.dedup();
    assert_eq!(advice.len(), 1, "{advice:#?}");
    let what = advice[0].2.as_deref().unwrap_or_default();
    assert!(what.ends_with(" + collect, freeze"), "{what}");
}

#[test]
fn advice_says_which_figures_were_measured_and_which_predicted() {
    // The service's 250 ms full collection comes every 50 s or so: the application's setting
    // is measured (no full collection in its windows yet), the move's full collection is
    // predicted, over the 10 ms pause budget in a share of windows the budget allows.
    let mut c = Controller::new(GuardConfig { freeze_after_s: None, ..cfg() }, [700, 10, 10], false);
    let mut reasons = Vec::new();
    for w in 1..=8 {
        reasons.push(c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w)).reason);
    }
    for r in &reasons {
        // Every predicted pause over the budget says how often.
        for (i, _) in r.match_indices("predicted: longest pause ") {
            let rest = &r[i + "predicted: longest pause ".len()..];
            let ms: f64 = rest.split(' ').next().unwrap().parse().unwrap();
            if ms > 10.0 {
                assert!(rest.contains(" ms (over the 10 ms budget in "), "{r}");
            }
        }
    }
    assert!(reasons.iter().any(|r| r.contains("over the 10 ms budget in")), "{reasons:#?}");
    // Where it stays, the setting in force's figures are what its windows measured.
    let mut c = Controller::new(pinned(Some(10_000_000)), [700, 10, 10], false);
    let mut last = String::new();
    for w in 1..=5 {
        last = c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w)).reason;
    }
    assert!(
        last.contains("700/10/10 (measured over ") && last.contains("ms a window (mean), GC 2."),
        "{last}"
    );
}

#[test]
fn where_no_setting_holds_a_budget_it_says_so_once_and_stays() {
    let mut c = Controller::new(pinned(Some(100_000)), [700, 10, 10], true);
    let mut said = 0;
    for w in 1..=10 {
        let v = c.step(&mut analytic, &SERVICE.reading([700, 10, 10], w));
        assert!(!v.change, "{v:?}");
        if let Some(g) = &v.given_up {
            said += 1;
            assert!(g.starts_with("no setting holds the pause budget"), "{g}");
        }
        if w >= 3 {
            assert_eq!(v.unholdable, [Budget::Pause], "{v:?}");
        }
    }
    assert_eq!(said, 1);
}

#[test]
fn the_default_gc_budget_counts_the_full_collections_the_first_windows_did_not_hold() {
    // 15,000 objects promoted a second into a 1M-object old generation: a 250 ms full
    // collection every 17 windows, none in the first ones. The application's own setting
    // holds the budget taken at attach over its whole run.
    let mut c = Controller::new(pinned(None), [700, 10, 10], true);
    let mut pending = 100_000;
    let mut shares = Vec::new();
    for w in 1..=60 {
        let mut r = SERVICE.reading([700, 10, 10], w);
        pending += 15_000;
        if pending > 250_000 {
            pending = 0;
            r.collections[2] = 1;
            (r.pause_p50_ns[2], r.pause_max_ns[2]) = (250e6, 250e6);
            r.gc_share += 0.25;
            r.cpu_share += 0.25;
        }
        r.long_lived = Some([1_000_000, pending]);
        shares.push(r.gc_share);
        let v = c.step(&mut analytic, &r);
        assert!(!v.unholdable.contains(&Budget::Gc), "window {w}: {v:?}");
        assert!(!v.reason.contains("GC share budget missed"), "window {w}: {}", v.reason);
    }
    let run = shares.iter().sum::<f64>() / shares.len() as f64;
    let budget = c.budgets.share().unwrap();
    assert!(budget >= run, "budget {budget:.4} under the run's {run:.4}");
    assert!(budget < run * 1.5, "budget {budget:.4} far over the run's {run:.4}");
}

#[test]
fn a_budget_no_setting_holds_is_set_aside_and_the_cost_decides() {
    // Every gen1 round walks over 100 µs at any setting: the pause budget cannot be held. The
    // application's own full collections, in the windows before the first move, paused it
    // 5 ms: young rounds shorter than that are no pause of neurogc's.
    let gc = GuardConfig { pause_budget_ns: Some(100_000), freeze_after_s: None, ..cost_only() };
    let (settings, verdicts) = act_on(gc, 40, |t, w| {
        let mut r = SERVICE.reading(t, w);
        if w <= 2 {
            r.collections[2] = 1;
            (r.pause_p50_ns[2], r.pause_max_ns[2]) = (5e6, 5e6);
        }
        r
    });
    assert!(verdicts[2..].iter().all(|v| v.unholdable == [Budget::Pause]), "{verdicts:?}");
    assert_eq!(verdicts.iter().filter(|v| v.given_up.is_some()).count(), 1);
    // As where no budget binds: a cheaper setting (no further than its young rounds' wait
    // allows: the full collection, 250 ms wherever it comes, is no reason to go further),
    // then it stops.
    assert!(settings.last().unwrap()[0] > 700, "{settings:?}");
    assert!(verdicts[30..].iter().all(|v| !v.change), "{verdicts:?}");
    assert!(verdicts[39].reason.starts_with("budgets hold but pause (none can)"), "{}", verdicts[39].reason);
}

#[test]
fn a_pause_budget_no_setting_holds_bars_pauses_longer_than_the_applications_own() {
    // As above, with no full collection (nothing promoted): the application's own longest
    // pause is its gen1 round at 700/10/10 (0.5 ms). Each larger young generation is cheaper,
    // and its gen1 rounds longer: with the budget set aside, none is a move neurogc may make
    // for the cost. (With full collections to come, a larger young generation puts them off
    // and misses the budget less by what they would pause: a move for the budget, not the cost.)
    let gc = GuardConfig { pause_budget_ns: Some(100_000), freeze_after_s: None, ..cost_only() };
    let (settings, verdicts) = act(Process { promoted: 0.0, ..SERVICE }, gc.clone(), 40);
    assert!(verdicts[2..].iter().all(|v| v.unholdable == [Budget::Pause]), "{verdicts:?}");
    assert!(settings.iter().all(|t| t[0] <= 700 && t[1] <= 10), "{settings:?}");
    // And staying says why.
    let why = &verdicts[39].reason;
    assert!(why.contains("settings pausing longer than the application's own 0."), "{why}");
    // A GC share budget that the application's own setting misses does not take it there either.
    let gc = GuardConfig { gc_budget: Some(0.02), gc_at_attach: false, ..gc };
    let (settings, _) = act(Process { promoted: 0.0, ..SERVICE }, gc, 40);
    assert!(settings.iter().all(|t| t[0] <= 700 && t[1] <= 10), "{settings:?}");
}

#[test]
fn a_setting_whose_pauses_are_measured_over_the_budget_is_left_and_its_evidence_kept() {
    // Gen1 rounds at any threshold1 over 10 take 30 ms in this process, whatever the model
    // says; only the setting in force shows it.
    let gc = GuardConfig { freeze_after_s: None, ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    let mut over = Vec::new();
    for w in 1..=30 {
        let t = c.thresholds();
        let mut r = SERVICE.reading(t, w);
        if t[1] > 10 {
            r.pause_max_ns[1] = 30e6;
            over.push(w);
        }
        c.step(&mut analytic, &r);
    }
    // Tried, measured, left: not a window in three spent there.
    assert!(over.len() <= 10, "{over:?}");
    assert!(c.thresholds()[1] <= 10, "{:?}", c.thresholds());
}

#[test]
fn a_budget_set_aside_is_not_traded_away_for_another() {
    // No setting holds a 100 µs pause budget: 700/10/10's 0.5 ms gen1 rounds are the shortest
    // (threshold1 stays 10). Its GC share, 2.8%, misses a 2% budget that a larger threshold0
    // holds, where gen1 rounds measure three times longer than the model says.
    let gc = GuardConfig {
        pause_budget_ns: Some(100_000),
        gc_budget: Some(0.02),
        gc_at_attach: false,
        freeze_after_s: None,
        min: [100, 10, 10],
        ..cfg()
    };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    let mut settings = Vec::new();
    let p = Process { promoted: 0.0, ..SERVICE };
    for w in 1..=40 {
        let t = c.thresholds();
        let mut r = p.reading(t, w);
        if t[0] > 700 {
            r.pause_max_ns[1] *= 3.0;
        }
        settings.push(t);
        c.step(&mut analytic, &r);
    }
    // Each tried once, measured, left; none returned to for the GC share.
    let mut runs: Vec<[i64; 3]> = settings.clone();
    runs.dedup();
    let mut seen = std::collections::HashSet::new();
    let again: Vec<_> = runs.iter().filter(|t| t[0] > 700 && !seen.insert(**t)).collect();
    assert!(again.is_empty(), "returned to {again:?}: {settings:?}");
    assert!(settings[20..].iter().all(|t| t[0] <= 700), "{settings:?}");
}

#[test]
fn a_memory_budget_no_setting_holds_is_not_traded_for_a_cheaper_setting_missing_it_more() {
    // The bounds keep threshold0 at 2,000 or more against the application's 700, and RSS grows
    // 2 KiB for each young slot over 700: with 1 MiB allowed over the application's own RSS, no
    // setting holds the memory budget. Each larger young generation is cheaper here, and misses
    // the budget by more: memory set aside, no move goes up.
    let gc = GuardConfig { memory_limit_bytes: Some(401 << 20), min: [2_000, 10, 10], ..cost_only() };
    let p = Process { young_bytes: 2048.0, ..SERVICE };
    let (settings, verdicts) = act(p, gc, 30);
    assert!(verdicts.iter().any(|v| v.unholdable.contains(&Budget::Memory)), "{verdicts:?}");
    assert!(settings.iter().all(|t| t[0] <= 2_000), "{settings:?}");
}

#[test]
fn a_setting_of_neurogcs_stays_only_while_the_evidence_says_it_is_cheaper() {
    // A larger young generation costs this application a little more CPU (less than a window's
    // noise shows at first) and saves the collector a little: once frozen, 1,000/10/10 is
    // measured no cheaper than the application's own 700/10/10, and the tie goes back to it.
    let p = Process { slowdown: 0.15, ..SERVICE };
    let mut c = Controller::new(cfg(), [700, 10, 10], true);
    c.allow_freeze(true);
    let mut settings = Vec::new();
    let mut back = None;
    for w in 1..=40 {
        settings.push((c.thresholds(), c.frozen()));
        let mut r = p.reading(c.thresholds(), w);
        if c.frozen() {
            // The old generation frozen: full collections walk what came since.
            r.long_lived = Some([10_000, 1_000]);
            r.freeze_count = Some(1_000_000);
        }
        let v = c.step(&mut analytic, &r);
        if v.change && v.thresholds == [700, 10, 10] {
            back.get_or_insert(v.reason);
        }
    }
    assert!(settings.iter().any(|(t, _)| t[0] > 700), "it moved: {settings:?}");
    assert!(settings[10..].iter().all(|s| *s == ([700, 10, 10], true)), "{settings:?}");
    let why = back.expect("a move back");
    // Back on a measured tie, taken over a move that is not credibly cheaper than it, or as
    // cheaper: its young rounds measured before the freeze, 700/10/10 frozen is told from them.
    assert!(
        (why.contains("is not credibly cheaper")
            && (why.contains("back to the application's own")
                || why.contains("(the application's own thresholds: ")))
            || why.starts_with("budgets hold either way; 0."),
        "{why}"
    );
}

#[test]
fn a_tie_is_not_judged_where_the_setting_in_force_has_no_evidence_yet() {
    // Windows at the new setting that cannot be its evidence (here the target still reads the
    // old thresholds: the actuator's write is late). Unmeasured, every estimate is the model's
    // alone and nothing is credibly cheaper than anything: a tie judged there went back to
    // 700/10/10, and out again on the same prediction, every other window.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let mut settings = Vec::new();
    let mut backs = 0;
    for w in 1..=30 {
        let t = c.thresholds();
        settings.push(t);
        let mut r = SERVICE.reading(t, w);
        r.thresholds = Some([700, 10, 10]);
        let v = c.step(&mut analytic, &r);
        backs += usize::from(v.reason.contains("back to the application's own"));
    }
    let changes = settings.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(backs == 0 && changes <= 1, "{changes} changes, {backs} back: {settings:?}");
}

#[test]
fn the_memory_of_a_young_generation_far_from_any_measured_is_bounded_more_pessimistically() {
    let mut c = Controller::new(cfg(), [700, 10, 10], true);
    let at = |t: [i64; 3]| Candidate { thresholds: t, frozen: false };
    assert_eq!(c.young_extrapolation(&at([50_000, 20, 10])), 0.0, "nothing measured: the model alone");
    let o = Observation { ln_cost: Some(1.0), rounds: 1.0, ..Default::default() };
    c.evidence.add(at([700, 10, 10]), &o);
    c.evidence.add(at([5_000, 20, 10]), &o);
    // What a young generation holds before a gen1 round: threshold0 × (threshold1 + 1).
    assert!(c.young_extrapolation(&at([700, 10, 10])).abs() < 1e-9);
    let far = c.young_extrapolation(&at([50_000, 20, 10]));
    assert!((far - 10f64.ln()).abs() < 1e-9, "{far}");
    // 1,000/50/10 holds 51,000 objects, nearer 5,000/20/10's 105,000 than 700/10/10's 7,700.
    let wide = c.young_extrapolation(&at([1_000, 50, 10]));
    assert!((wide - (105_000f64 / 51_000.0).ln()).abs() < 1e-9, "{wide}");
}

#[test]
fn a_far_young_generation_is_entered_on_its_pauses_bounded_pessimistically() {
    // The cost per object walked grows with the young generations' size (more of what they
    // hold is alive, and walked with what it references): √ of their size over 700/10/10's.
    // The model learns that only from the sizes tried: without the bound, the first move was to
    // 5,000/50/10, predicted at 2.2 ms and measured at 15 ms, almost four times the budget.
    let gc = GuardConfig { freeze_after_s: None, pause_budget_ns: Some(4_000_000), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    let mut worst: f64 = 0.0;
    for w in 1..=40 {
        let t = c.thresholds();
        let mut r = Process { queued: 0.0, ..SERVICE }.reading(t, w);
        let young = (t[0] * (t[1] + 1)) as f64 / 7_700.0;
        for g in 0..2 {
            r.pause_p50_ns[g] *= young.sqrt();
            r.pause_max_ns[g] *= young.sqrt();
        }
        r.gc_share *= young.sqrt().min(1.5);
        worst = worst.max(r.pause_max_ns[1]);
        c.step(&mut analytic, &r);
    }
    // Cheaper settings are still found, nearer ones first, and no trial's pauses are far over
    // the budget.
    assert!(c.thresholds()[0] > 700, "{:?}", c.thresholds());
    assert!(worst <= 6e6, "a young pause of {:.1} ms", worst / 1e6);
}

#[test]
fn a_windows_longest_pause_is_compared_with_its_like_not_with_one_collections_prediction() {
    // A full collection every ten gen1 rounds, several a window at every setting allowed,
    // 120 ms each at the median and the window's longest 260 ms (micrograd's: its graphs
    // outlive gen1 rounds). The model's pause for a setting is one collection's; what the
    // setting in force measured is each window's longest. Compared as they were, every setting
    // not measured yet looked to miss the pause budget by half as much, and the training loop
    // moved from one to the next every few windows, each measured as long as the last.
    let gc = GuardConfig { max: [2_000, 20, 10], ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    c.allow_freeze(true);
    let mut settings = Vec::new();
    for w in 1..=30 {
        let t = c.thresholds();
        settings.push((t, c.frozen()));
        let mut r = SERVICE.reading(t, w);
        let full = (r.collections[1] as f64 / t[2] as f64).round();
        r.collections[2] = full as u64;
        r.pause_p50_ns[2] = 120e6;
        r.pause_max_ns[2] = 260e6;
        r.gc_share += full * 0.12;
        r.cpu_share += full * 0.12;
        r.long_lived = Some([1_000_000, 300_000]);
        let v = c.step(&mut analytic, &r);
        let was_frozen = settings.last().unwrap().1;
        assert!(!(was_frozen && v.reason.contains("misses less")), "window {w}: {}", v.reason);
    }
    let changes = settings.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(changes <= 2, "{changes} changes: {settings:?}");
}

#[test]
fn a_long_full_collection_the_counts_put_near_misses_the_pause_budget_a_freeze_spares() {
    // A service whose 250 ms full collection over its million objects is rare (a few objects
    // promoted a gen1 round), and the counts put the next 22 s off. As a share of windows it
    // held the 10 ms budget, nothing was credibly cheaper than staying, and it came. It is 25
    // budgets long, in the horizon for certain: every unfrozen setting misses the budget
    // (rarer gen1 rounds put it off only in the model), and the heap is frozen at once, before
    // it, for the pending garbage the memory budget allows.
    let gc = GuardConfig { freeze_after_s: Some(0.0), gc_budget: None, gc_at_attach: false, ..cfg() };
    let few = Process { promoted: 10.0, mutator_ns: 5_000.0, ..SERVICE };
    let reading = |c: &Controller, w: i64| {
        let mut r = few.reading(c.thresholds(), w);
        r.long_lived = Some([1_000_000, 240_000 + w * 400]);
        r
    };
    let mut c = Controller::new(gc.clone(), [700, 10, 100], true);
    c.allow_freeze(true);
    let moved = (1..=6).find_map(|w| Some(c.step(&mut analytic, &reading(&c, w))).filter(|v| v.change));
    let v = moved.expect("a move");
    assert!(v.reason.contains("its 250 ms full collection due in 22 s"), "{v:?}");
    assert!(v.freeze == Some(true) && !v.collect, "{v:?}");
    // No freeze on offer: every setting has it coming, it is no miss, and no decision names it.
    let no_freeze = GuardConfig { freeze_after_s: None, ..gc };
    let mut c = Controller::new(no_freeze, [700, 10, 100], true);
    for w in 1..=6 {
        let v = c.step(&mut analytic, &reading(&c, w));
        assert!(!v.reason.contains("due in"), "{v:?}");
    }
}

#[test]
fn a_rise_past_the_allowance_at_thresholds_that_put_full_collections_off_leaves_them_at_once() {
    // The rise may be a structure replacing another, whose old copy such thresholds keep until
    // their full collection comes: they are left in the window it shows (window 5 is the
    // application's own again), and entered again only once the application's own full
    // collection has told what the rise was: the old heap found dead (a replacement) or not.
    // RSS rises in window 4, after the move; the full collection comes in window 9.
    let replaced = after_a_rise(4, 9, 1_000_000.0);
    assert!(replaced[2..4].iter().all(|t| t[0] > 700), "never moved: {replaced:?}");
    assert!(replaced[4..].iter().all(|t| *t == [700, 10, 10]), "{replaced:?}");
    let grew = after_a_rise(4, 9, 100.0);
    assert!(grew[4..9].iter().all(|t| *t == [700, 10, 10]), "{grew:?}");
    assert!(grew[9..].iter().any(|t| t[0] > 700), "never moved once the rise was told: {grew:?}");
}

#[test]
fn rss_that_steps_up_at_neurogcs_thresholds_is_theirs_where_the_applications_stood_still() {
    // A catalog rebuilt by a builder thread, whose old copies thresholds that put full
    // collections off keep: RSS steps up 25 MiB every third window spent at them, and stays up
    // (the allocator keeps what they held); at the application's own settings it stands still.
    // No full collection is seen, so the heap is never seen warm: the application's own windows
    // standing still are what tells the growth is the thresholds'. Each such setting is left
    // before RSS passes the allowance (15% of 400 MiB), counting the rise of the window, for
    // the application's own thresholds, not for another of neurogc's that keeps as much.
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let (mut at_neurogcs, mut mib, mut trace) = (0u64, 400u64, Vec::new());
    for w in 1..=30 {
        let t = c.thresholds();
        if t != [700, 10, 10] {
            at_neurogcs += 1;
            mib = mib.max(400 + 25 * (at_neurogcs / 3));
        }
        c.step(&mut analytic, &SERVICE.reading(t, w).with_rss_mib(mib));
        trace.push((t[0], mib));
    }
    assert!(trace.iter().any(|&(t0, _)| t0 > 700), "never moved: {trace:?}");
    assert!(trace.iter().all(|&(_, mib)| mib <= 460), "(threshold0, RSS MiB): {trace:?}");
}

/// A controller, freezing allowed at once from window `freezable_from`, run on
/// `full_collection_near` with RSS at `rss_mib(window)` for up to `windows` windows, until it
/// freezes or defers a freeze: the controller, and its verdicts. `replaced_mib`: a copy of a
/// structure replaced whole that a full collection of the application's own found dead before
/// the first window (0: none).
fn until_frozen(
    replaced_mib: f64,
    windows: i64,
    freezable_from: i64,
    rss_mib: impl Fn(i64) -> u64,
) -> (Controller, Vec<Verdict>) {
    let gc = GuardConfig { freeze_after_s: Some(0.0), ..cfg() };
    let mut c = Controller::new(gc, [700, 10, 10], true);
    // Only where one was: `found` also marks the old heap as looked at.
    if replaced_mib > 0.0 {
        c.replacement.found(replaced_mib * 1048576.0, c.budgets.memory_allowance(400.0 * 1048576.0));
    }
    let mut verdicts = Vec::new();
    for w in 1..=windows {
        c.allow_freeze(w >= freezable_from);
        let r = full_collection_near(&c, w).with_rss_mib(rss_mib(w));
        verdicts.push(c.step(&mut analytic, &r));
        if c.freeze_deferred() || c.frozen() {
            break;
        }
    }
    (c, verdicts)
}

#[test]
fn a_freeze_of_a_heap_seen_to_replace_a_copy_counts_the_next_copy_too() {
    // The application's own full collection found a 35 MiB copy of a catalog dead (60 MiB
    // allowed): frozen, the live copy is kept once replaced, and the next is built beside it
    // where the application would have built it in the space of the one before last (seed-83
    // draw 1553 peaked 1.25-1.75 copies over the defaults). Two copies are over the budget: no
    // freeze, at once or after a full collection. A 25 MiB copy leaves room for both.
    let (c, verdicts) = until_frozen(35.0, 8, 3, |_| 400);
    let own = Candidate { thresholds: [700, 10, 10], frozen: true };
    assert_eq!(c.replaced_kept(&own, false), 70.0 * 1048576.0);
    assert!(!verdicts.iter().any(|v| v.freeze == Some(true)), "{verdicts:?}");
    let unfrozen = Candidate { thresholds: [700, 10, 10], frozen: false };
    assert_eq!(c.replaced_kept(&unfrozen, false), 0.0);
    let (_, verdicts) = until_frozen(25.0, 8, 3, |_| 400);
    assert!(verdicts.iter().any(|v| v.freeze == Some(true)), "{verdicts:?}");
}

#[test]
fn a_freeze_at_once_after_a_rise_counts_both_copies_it_may_keep() {
    // A 35 MiB catalog rebuilt and swapped in (seed-57 draw 1033: 11 MiB of a 16 MiB
    // allowance), the rise under the 60 MiB allowed but past a third of it. No full collection
    // has run since to say whether it replaced a copy. Frozen at once, the freeze would keep the
    // copy it may have replaced, dead and uncollected, and the new one once it is replaced in
    // turn: 70 MiB, over the budget. Frozen after the application's full collection, only the
    // new one. Counted as one copy, the draw was frozen at once the window after its rebuild
    // and held four copies two rebuilds later (1.61x its own RSS).
    // Freezing becomes a move as the catalog arrives.
    let run = |rise: u64| until_frozen(0.0, 8, 3, |w| if w < 3 { 400 } else { 400 + rise });
    let (c, verdicts) = run(35);
    let own = Candidate { thresholds: [700, 10, 10], frozen: true };
    let copy = 35.0 * 1048576.0;
    assert_eq!(c.replaced_kept(&own, true), 2.0 * copy);
    assert_eq!(c.replaced_kept(&own, false), copy);
    let rarer = Candidate { thresholds: [5000, 10, 10], frozen: true };
    assert_eq!(c.replaced_kept(&rarer, false), 2.0 * copy);
    let at_once = |v: &Verdict| v.freeze == Some(true) && !v.collect;
    assert!(!verdicts.iter().any(at_once), "frozen at once after the rise: {verdicts:?}");
    // Without the rise, the same process is frozen at once.
    let (_, verdicts) = run(0);
    assert!(verdicts.iter().any(at_once), "{verdicts:?}");
}

#[test]
fn a_copy_built_over_several_windows_is_counted_whole_against_a_freeze() {
    // A catalog rebuilt beside the one in use over three windows, 25 MiB in each (evaluation
    // draw 1109 at half speed: 143, 152, 181 and 78 MiB over one rebuild, 185 allowed), no
    // full collection since to tell what it replaced. Each rise is under the 60 MiB allowed;
    // the copy, 75 MiB, is not: a freeze, at once or after the application's full collection,
    // would keep it once it is replaced in turn. Priced at the largest rise, 1109 was frozen
    // and kept a 598 MiB copy. Built in one window of 25 MiB, the same copy leaves room.
    // Freezing becomes a move once the rebuild is done, as 1109's did.
    let run = |windows: i64| until_frozen(0.0, 10, 6, |w| 400 + 25 * (w - 2).clamp(0, windows) as u64);
    let freezes = |v: &[Verdict]| v.iter().any(|v| v.freeze == Some(true));
    let (c, verdicts) = run(3);
    let own = Candidate { thresholds: [700, 10, 10], frozen: true };
    assert_eq!(c.replaced_kept(&own, false), 75.0 * 1048576.0);
    assert!(!freezes(&verdicts), "frozen with a 75 MiB copy untold: {verdicts:?}");
    let (_, verdicts) = run(1);
    assert!(freezes(&verdicts), "{verdicts:?}");
}

#[test]
fn frozen_at_thresholds_that_put_full_collections_off_a_replacement_leaves_for_its_own() {
    // Frozen at 700/10/20, RSS rises 12 MiB in a window (of the 20 allowed): a catalog rebuilt
    // and swapped in, the copy it replaced kept frozen. RSS shows that copy; the next one
    // replaced waits for a full collection that 700/10/20 puts off, so the setting keeps two,
    // over the budget. Below the allowance the freeze stands: the thresholds go back to ones
    // that collect in time, frozen (seed-57 draw 1239 stayed, reached 1.85x its own RSS at
    // the next rebuild, and was undone with a 133 ms collection of the thawed heap). RSS that
    // rose by as little would not move it.
    let moved = |mib: u64| {
        let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
        let mut c = frozen_at(gc, [700, 10, 20]);
        // Entered in the window before, which is all RSS is measured from there.
        c.rss_before = None;
        c.step(&mut analytic, &warm(c.thresholds(), 4, mib << 20))
    };
    let v = moved(12);
    assert_eq!((v.freeze, v.budget), (None, Some(Budget::Memory)), "{v:?}");
    assert!(v.thresholds[0] * (v.thresholds[1] + 1) * (v.thresholds[2] + 1) <= 700 * 11 * 11, "{v:?}");
    let v = moved(4);
    assert_ne!(v.budget, Some(Budget::Memory), "{v:?}");
}

#[test]
fn an_undo_for_memory_pauses_the_application_no_longer_than_its_own_collections_did() {
    // Frozen at its own 700/10/10 after windows with no full collection of its own (a 1M-object
    // heap promoting 300 objects a second: its full collection about 8 minutes off), RSS grew
    // past the allowance. The undo is made, but the thawed heap's collection (about the whole
    // heap's worth) is left to the application's own next full collection: one of neurogc's now
    // would be the longest pause of its run (seed-59 draw 1050: 558 ms, where its own longest
    // was 1.4 ms).
    let slow = Process { promoted: 300.0, ..SERVICE };
    let gc = GuardConfig { freeze_after_s: Some(0.0), memory_budget: 0.05, ..cfg() };
    let undo = |p: Process| {
        let mut c = Controller::new(gc.clone(), [700, 10, 10], true);
        c.allow_freeze(true);
        for w in 1..=3 {
            c.step(&mut analytic, &p.reading([700, 10, 10], w));
        }
        // Frozen at its own thresholds, at once (as the actuator would have it after "+ freeze").
        (c.deferred, c.landing, c.current) = (None, None, [700, 10, 10]);
        landed(&mut c, 400.0, 3.0);
        c.collector.froze(false, false);
        let mut r = p.reading(c.thresholds(), 4);
        r.rss = (430 << 20) as u64;
        c.step(&mut analytic, &r)
    };
    let v = undo(slow);
    assert_eq!(
        (v.thresholds, v.freeze, v.budget),
        ([700, 10, 10], Some(false), Some(Budget::Memory)),
        "{v:?}"
    );
    assert!(!v.collect && v.what.as_deref() == Some("700/10/10 + unfreeze"), "{v:?}");
    assert!(
        v.reason.contains("freed by the application's own next full collection")
            && v.reason.contains("its own longest measured"),
        "{}",
        v.reason
    );
    // Promoting 3,000 a second, its own full collection comes within a minute of the undo,
    // walking the thawed heap and more: at once, the collection pauses it no longer.
    let v = undo(SERVICE);
    assert!(v.collect && v.what.as_deref() == Some("700/10/10 + unfreeze, collect"), "{v:?}");
}

/// A window of SERVICE frozen at 700/10/10 (a million objects frozen), `old` objects in the old
/// generation, and a full collection of `full_ms` if above 0.
fn frozen_service(w: i64, full_ms: f64, old: i64) -> Reading {
    let mut r = SERVICE.reading([700, 10, 10], w);
    r.freeze_count = Some(1_000_000);
    r.long_lived = Some([old, 0]);
    if full_ms > 0.0 {
        r.collections[2] = 1;
        (r.pause_p50_ns[2], r.pause_max_ns[2]) = (full_ms * 1e6, full_ms * 1e6);
        r.collected_per[2] = 200_000.0;
    }
    r
}

/// After `c`'s freeze at 700/10/10 (the only thresholds allowed) and windows 4 to 7 (`first`:
/// window 4's), the first full collection after the freeze (60 ms, over the 10 ms budget: it
/// walks what a quarter of the frozen count took to be promoted), then six whose full
/// collections walk what is in flight (3 ms): the frozen setting's evidence, and the verdicts
/// after the first.
fn after_the_first_full_collection(mut c: Controller, first: Reading) -> (Controller, Vec<Verdict>) {
    c.step(&mut analytic, &first);
    for w in 5..=7 {
        c.step(&mut analytic, &frozen_service(w, 0.0, 1_000_000));
    }
    let one_off = c.step(&mut analytic, &frozen_service(8, 60.0, 2_000));
    assert!(c.frozen() && !one_off.change, "{one_off:?}");
    assert!(!one_off.reason.contains("budget missed"), "{}", one_off.reason);
    let verdicts = (9..=14).map(|w| c.step(&mut analytic, &frozen_service(w, 3.0, 2_000))).collect();
    (c, verdicts)
}

/// No window of the frozen setting's evidence is over the budget, and it stays.
fn frozen_evidence_holds(c: &Controller, verdicts: &[Verdict]) {
    let frozen = Candidate { thresholds: [700, 10, 10], frozen: true };
    let s = c.evidence.get(&frozen).expect("measured frozen");
    assert_eq!(s.over_budget().0, 0.0, "{s:?}");
    assert!(s.pause_max_ms().is_some_and(|p| p < 10.0), "{s:?}");
    assert!(verdicts.iter().all(|v| !v.change && v.freeze.is_none()), "{verdicts:?}");
    assert!(c.frozen());
}

fn frozen_pinned() -> GuardConfig {
    GuardConfig { freeze_after_s: Some(0.0), ..pinned(Some(10_000_000)) }
}

#[test]
fn the_first_full_collection_after_a_freeze_is_the_freezes_not_the_frozen_settings() {
    // Frozen after neurogc's own collection (window 4's, 250 ms).
    let c = frozen_at(frozen_pinned(), [700, 10, 10]);
    let (c, verdicts) = after_the_first_full_collection(c, frozen_service(4, 250.0, 1_000_000));
    frozen_evidence_holds(&c, &verdicts);
}

#[test]
fn a_full_collection_begun_before_a_move_is_no_evidence_for_the_setting_moved_to() {
    // The first window at the setting `SERVICE` moves to ends a 355 ms full collection begun at
    // 700/10/10, among the new setting's own rounds, a third of the window in collections
    // (evaluation draw 1681's, whose agent read it as the new setting missing the pause budget
    // and moved on). `carried`: the window says it began before it.
    let windows_there = |carried: bool| {
        let mut c = Controller::new(cost_only(), [700, 10, 10], true);
        let mut w = 1;
        while c.thresholds() == [700, 10, 10] {
            assert!(w < 10, "no move");
            c.step(&mut analytic, &SERVICE.reading(c.thresholds(), w));
            w += 1;
        }
        let mut r = SERVICE.reading(c.thresholds(), w);
        r.collections[2] = 1;
        (r.pause_p50_ns[2], r.pause_max_ns[2]) = (355e6, 355e6);
        r.gc_share = 0.33;
        r.carried_ns = Some(if carried { 355e6 } else { 0.0 });
        c.step(&mut analytic, &r);
        c.evidence.get(&c.in_force()).map_or(0.0, |s| s.windows())
    };
    assert_eq!(windows_there(true), 0.0);
    // Begun inside the window, the same pause is the setting's own.
    assert!(windows_there(false) > 0.0);
}

#[test]
fn a_full_collection_running_as_a_freeze_is_asked_for_is_not_the_first_after_it() {
    // Frozen at once (no collection asked for) while one of the application's full collections
    // ran: the freeze lands after it, and window 4 reads it (224 ms, 170 of them before the
    // window began). The demo service's, read as the first after the freeze, left the real one
    // counted as the frozen setting's, and a move in 3 of 6 runs.
    let c = frozen_after(frozen_pinned(), [700, 10, 10], false);
    let mut first = frozen_service(4, 224.0, 1_000_000);
    // The window's time in collections counts only what fell inside it: 54 ms of that one.
    first.gc_share = (224.0 - 170.0) / 1e3 + first.gc_share.min(0.05);
    first.carried_ns = Some(224e6);
    assert!(first.began_before(), "{first:?}");
    let (c, verdicts) = after_the_first_full_collection(c, first);
    frozen_evidence_holds(&c, &verdicts);
}

#[test]
fn a_move_whose_thresholds_the_counts_are_past_does_not_run_a_full_collection_of_its_own() {
    // Tuning draw 739's shape: frozen at 20,000/10/100 over a heap still growing, its gen1 rounds
    // over the 10 ms budget in every window, 77 gen1 rounds counted since the last full
    // collection and more than a quarter of the old generation promoted since. Any threshold2
    // under 77 runs the first full collection after the freeze at once, over the 1.2M objects
    // promoted since it, far longer than the 5 ms its own full collections took.
    let gc = GuardConfig {
        freeze_after_s: Some(0.0),
        min: [700, 10, 10],
        max: [100_000, 100, 100],
        ..pinned(Some(10_000_000))
    };
    let mut c = frozen_at(gc, [20_000, 10, 100]);
    let mut settings = Vec::new();
    for w in 4..=12 {
        let t = c.thresholds();
        let mut r = SERVICE.reading(t, w);
        r.freeze_count = Some(2_400_000);
        r.older_counts = Some([3, 77]);
        r.long_lived = Some([2_400_000, 1_100_000 + w * 100_000]);
        (r.pause_p50_ns[1], r.pause_max_ns[1]) = (12e6, 14e6);
        let v = c.step(&mut analytic, &r);
        settings.push((t, v.thresholds, v.reason));
    }
    let moved: Vec<_> = settings.iter().filter(|(from, to, _)| from != to).collect();
    assert!(
        moved.iter().all(|(_, to, _)| to[2] >= 77 || *to == [700, 10, 10]),
        "a move ran a full collection of neurogc's: {moved:#?}"
    );
}

/// A heap growing 20 MiB a window at every setting (each window's full collection finds none of
/// it dead, and keeps 10% more; 15% of its own 400 MiB allows 60), steered on cost alone, whose
/// RSS rises `jump` MiB past that pace once, in window 10 (a step of its own, or a structure
/// replacing one): the thresholds window by window, and the first window left for memory.
fn growing_heap_with_a_step(jump: u64) -> (Vec<i64>, Option<usize>) {
    let mut c = Controller::new(cost_only(), [700, 10, 10], true);
    let (mut trace, mut memory) = (Vec::new(), None);
    for w in 1..=20 {
        let t = c.thresholds();
        trace.push(t[0]);
        let grown = (w as u64 - 1) * (20 << 20) + if w >= 10 { jump << 20 } else { 0 };
        // A full collection in each window, finding nothing dead: the heap it keeps grows.
        let r = Reading { long_lived: Some([1_000_000 + w * 100_000, 0]), ..warm(t, w, grown) };
        let v = c.step(&mut analytic, &r);
        if v.change && v.budget == Some(Budget::Memory) {
            memory.get_or_insert(w as usize);
        }
    }
    (trace, memory)
}

#[test]
fn a_step_within_the_allowance_of_a_growing_heap_leaves_its_own_pace_its_own() {
    // The step waits for a full collection at the application's own settings to tell whether
    // it replaced something, and counts as kept meanwhile; the pace around it is still the
    // application's growth. By window 10 it would have 580 MiB at its own pace, of which 15%
    // allows 87: a step of 70 MiB holds the budget. Where a waiting rise past the allowance of
    // the RSS it had at its own settings (60 MiB) ended the credit for its pace, all it had
    // grown since the first move read as the setting's, and it was moved back for memory
    // (seed-104 draw 1392). A step of 100 MiB is past the allowance either way.
    let (trace, memory) = growing_heap_with_a_step(70);
    assert!(trace[..10].iter().any(|&t0| t0 > 700), "never moved: {trace:?}");
    assert_eq!(memory, None, "{trace:?}");
    let (trace, memory) = growing_heap_with_a_step(100);
    assert!(matches!(memory, Some(10..=11)), "{memory:?} {trace:?}");
}

#[test]
fn a_step_from_where_rss_stood_is_told_against_the_pace_before_it() {
    // RSS stands, then rises 65 MiB in each of three windows (a copy built by a builder
    // thread) and stands again. Read over windows that include the step, the application's
    // pace is the step itself: it explained every rise away, and a freeze made at once kept the
    // copy the new one replaced (tuning draw 1355: 200 -> 267 -> 339 -> 400 MiB at its own
    // settings, read as 61.5 MiB a second; frozen at once with 2.63M objects, it reached
    // 785 MiB against the defaults' 484-499). A step from where RSS stood is told against the
    // pace before it, until a full collection of the application's own tells what it was. A
    // heap that grows from its first window took no step, and any pace measured since explains
    // its rises (`a_freeze_waits_while_rss_steps_up_from_where_it_stood_and_advice_does_not`).
    let mib = 1048576.0;
    let step = [(0.0, 0.0), (3.0, 3.0), (67.0, 3.0), (72.0, 3.0), (61.0, 61.0), (7.0, 61.0)];
    let from_attach = [(0.0, 0.0), (67.0, 0.0), (72.0, 0.0), (61.0, 61.0), (7.0, 61.0)];
    let after = |rises: &[(f64, f64)]| {
        let mut c = Controller::new(cfg(), [700, 10, 10], true);
        for &(rise, pace) in rises {
            c.replacement.window((rise * mib, 1.0, pace * mib), None, 60.0 * mib);
        }
        c
    };
    let c = after(&step);
    assert_eq!(c.replacement.unresolved() / mib, 69.0);
    // Frozen at once, the freeze is priced with the copy the step may have replaced, dead and
    // uncollected, and with the new one it keeps once that is replaced in turn: two copies of
    // 191 MiB (64 + 69 + 58, each rise past the pace before the step).
    let own = Candidate { thresholds: [700, 10, 10], frozen: true };
    assert_eq!(c.replaced_kept(&own, true) / mib, 2.0 * 191.0);
    let grown = after(&from_attach);
    assert_eq!(grown.replacement.unresolved(), 0.0);
    assert_eq!(grown.replaced_kept(&own, true), 0.0);
}

#[test]
fn a_budget_is_told_apart_only_by_settings_that_hold_the_budgets_above_it() {
    // Cycles a small young generation lets through fill the old one: 30 ms full collections,
    // several a window at 700/10/10, fewer as threshold0 grows. Only threshold0 of 20,000 and
    // more would halve the pause budget's miss, and they keep far more than the 1 MiB of
    // memory allowed: no setting neurogc may move to holds the pause budget or halves its
    // miss, so it is set aside and the cost decides, as where none could at all.
    let gc = GuardConfig {
        freeze_after_s: None,
        gc_budget: None,
        gc_at_attach: false,
        memory_limit_bytes: Some(401 << 20),
        ..cfg()
    };
    let reading = |t: [i64; 3], w: i64| {
        let mut r = SERVICE.reading(t, w);
        let promoted = 200_000.0 * (700.0 / t[0] as f64).powi(2);
        let fulls = (promoted / 25_000.0).floor();
        r.collections[2] = fulls as u64;
        (r.pause_p50_ns[2], r.pause_max_ns[2]) = (30e6, 30e6);
        r.gc_share += fulls * 0.03;
        r.cpu_share += fulls * 0.03;
        r.long_lived = Some([100_000, (promoted * w as f64) as i64 % 25_000]);
        r
    };
    let (settings, verdicts) = act_on(gc, 6, reading);
    let v = verdicts.iter().find(|v| v.change).unwrap_or_else(|| panic!("no move: {verdicts:?}"));
    assert!(v.reason.starts_with("budgets hold but pause (none can)"), "{}", v.reason);
    assert!(v.unholdable == [Budget::Pause] && v.budget.is_none(), "{v:?}");
    // Where it went holds the memory budget: a threshold0 of 20,000 or more would not.
    assert!(settings.iter().all(|t| t[0] < 20_000), "{settings:?}");
}
