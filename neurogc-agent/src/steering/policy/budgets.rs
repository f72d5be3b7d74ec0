//! The user's budgets, and what a prediction does to each: memory first, then pauses, then the
//! GC share. Pure arithmetic, testable without a target.
//!
//! - **Memory** counts what neurogc's changes cost (garbage deferred by larger thresholds, garbage
//!   among frozen objects), as the model predicts it, never the application's own growth at its
//!   own settings: a relative budget is a share of the RSS the application would have without
//!   neurogc (at least 16 MiB), an absolute one a ceiling on RSS that neurogc's part must fit
//!   under.
//! - **Pauses**: the longest collection predicted within the next minute.
//! - **GC share** of wall time: the user's figure, or by default no worse than the application's
//!   own setting over its run, as measured at attach (`Controller::long_run_share`).
pub use neurogc_trace::GuardConfig;

use super::predict::{HORIZON_S, Prediction};

/// The least a relative memory budget allows: a few MiB either way is the allocator's noise.
pub const MIN_HEADROOM: f64 = (16u64 << 20) as f64;

/// One of the user's budgets, in the order they are held: memory first, then pauses, then the
/// GC share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Memory,
    Pause,
    Gc,
}

impl Budget {
    pub const ALL: [Budget; 3] = [Budget::Memory, Budget::Pause, Budget::Gc];

    /// Budgets in words: "pause", "memory, pause".
    pub fn list(budgets: impl IntoIterator<Item = Budget>) -> String {
        budgets.into_iter().map(Budget::words).collect::<Vec<_>>().join(", ")
    }

    /// As decision records name it.
    pub fn name(self) -> &'static str {
        match self {
            Budget::Memory => "memory",
            Budget::Pause => "pause",
            Budget::Gc => "gc",
        }
    }

    /// As a sentence names it.
    pub fn words(self) -> &'static str {
        match self {
            Budget::Memory => "memory",
            Budget::Pause => "pause",
            Budget::Gc => "GC share",
        }
    }
}

/// How far a prediction is from each budget: 0 where it holds, else the excess over the budget
/// as a fraction of it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Misses {
    pub memory: f64,
    pub pause: f64,
    pub share: f64,
}

impl Misses {
    pub fn none(&self) -> bool {
        self.memory == 0.0 && self.pause == 0.0 && self.share == 0.0
    }

    /// Lexicographic by priority: memory, then pauses, then the GC share.
    pub fn key(&self) -> [f64; 3] {
        [self.memory, self.pause, self.share]
    }

    /// The budgets missed, by priority.
    pub fn missed(&self) -> impl Iterator<Item = Budget> + '_ {
        self.key().into_iter().zip(Budget::ALL).filter(|(m, _)| *m > 0.0).map(|(_, b)| b)
    }

    /// The budgets missed, in words ("pause, GC share").
    pub fn names(&self) -> String {
        Budget::list(self.missed())
    }

    /// The highest-priority budget missed.
    pub fn first(&self) -> Option<Budget> {
        self.missed().next()
    }

    /// The same, counting `budget` as held.
    pub fn except(mut self, budget: Budget) -> Misses {
        match budget {
            Budget::Memory => self.memory = 0.0,
            Budget::Pause => self.pause = 0.0,
            Budget::Gc => self.share = 0.0,
        }
        self
    }
}

pub struct Budgets {
    cfg: GuardConfig,
    /// The application's own setting's GC share over its run, from the first windows (their
    /// mean, each with its full collections at their long-run rate): the default GC budget.
    attach_share: Option<f64>,
    first_shares: Vec<f64>,
    /// The window's length (s): what "a window with a pause over the budget" means.
    window_s: f64,
}

/// What RSS holds of neurogc's settings, against what is the application's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kept {
    /// RSS in the window neurogc made its first change: what its changes cost since can be no
    /// more than what RSS grew from there.
    base: Option<f64>,
    /// The most a setting in force was predicted to keep since then (bytes): what garbage once
    /// took the allocator seldom hands back, so RSS holds it after a move back (the training
    /// loop's stayed 15 MiB up after 700/20/10 was left, and a budget counted from there let its
    /// peak RSS reach 1.27x the application's own).
    most: f64,
    /// RSS from which growth is measured as a setting's own (`grown`): the first change's, or,
    /// where that came before the application's heap was warm, the first warm window's. The
    /// ETL batch's RSS rose from 223 to 281 MiB while its heap filled after neurogc's first move
    /// (its garbage piles up until its first full collection, at any setting); counted as the
    /// setting's, that warm-up missed the memory budget (34 MiB allowed) and sent the agent to
    /// a collection, a freeze and four more moves (1.24x the defaults' time in that run).
    grown_from: Option<f64>,
    /// When `grown_from` was read (s, on the readings' clock).
    grown_since_s: f64,
}

/// How fast RSS grows at the application's own settings (its thresholds, nothing frozen by
/// neurogc): the growth the memory budget credits to the application while a setting of
/// neurogc's stands, for the budget bounds RSS against what the application would have had.
/// An evaluation draw's cache, still filling at 7.4 MiB/s at every setting, was frozen; its
/// own growth read as the freeze's ("+42 MiB since the freeze", 34 allowed), and the undo put
/// back its 230 ms full collections (0.92x the defaults' p99, where a freeze held 0.01x).
#[derive(Debug, Clone, Default)]
pub struct OwnGrowth {
    /// The latest run of consecutive windows at the application's own settings, and the one
    /// before it: (s, RSS bytes) each.
    run: Vec<(f64, f64)>,
    before: Vec<(f64, f64)>,
}

/// Windows of the application's own settings a growth rate is read from, at least.
const GROWTH_WINDOWS: usize = 4;
/// Windows of a run kept: the latest growth is the application's now.
const GROWTH_KEPT: usize = 120;

impl OwnGrowth {
    /// A window at the application's own settings, ending at `t_s` with RSS at `rss`; `next`:
    /// whether it follows the last one added directly.
    pub fn add(&mut self, t_s: f64, rss: f64, next: bool) {
        if !next && !self.run.is_empty() {
            if self.run.len() >= GROWTH_WINDOWS {
                self.before = std::mem::take(&mut self.run);
            }
            self.run.clear();
        }
        if self.run.len() == GROWTH_KEPT {
            self.run.remove(0);
        }
        self.run.push((t_s, rss));
    }

    /// The run a rate is read from: the latest long enough.
    fn measured(&self) -> &[(f64, f64)] {
        if self.run.len() >= GROWTH_WINDOWS { &self.run } else { &self.before }
    }

    /// Bytes a second RSS grew at the application's own settings: the slower of the run's two
    /// halves (a heap that fills up slows down, and is credited as the slower), and none where
    /// either half did not grow or fewer than `GROWTH_WINDOWS` windows were measured.
    pub fn rate(&self) -> f64 {
        let run = self.measured();
        if run.len() < GROWTH_WINDOWS {
            return 0.0;
        }
        let slope = |h: &[(f64, f64)]| {
            let (a, b) = (h[0], h[h.len() - 1]);
            if b.0 > a.0 { (b.1 - a.1) / (b.0 - a.0) } else { 0.0 }
        };
        let mid = run.len() / 2;
        slope(&run[..=mid]).min(slope(&run[mid..])).max(0.0)
    }

    /// What the application's own growth accounts for over `secs` since a change: at its
    /// rate, and for no longer than it was measured growing (past that, growth is the
    /// change's again: what stops growing at its own settings may have stopped).
    pub fn over(&self, secs: f64) -> f64 {
        let run = self.measured();
        let span = match (run.first(), run.last()) {
            (Some(a), Some(b)) => b.0 - a.0,
            _ => 0.0,
        };
        self.rate() * secs.clamp(0.0, span)
    }
}

impl Kept {
    /// neurogc changed something, with RSS at `rss` (the first change counts) and the
    /// application's heap `warm` or not.
    pub fn changed(&mut self, rss: f64, warm: bool, t_s: f64) {
        self.base.get_or_insert(rss);
        if warm {
            self.warmed(rss, t_s);
        }
    }

    /// The application's heap is warm, with RSS at `rss`: growth from here on can be a
    /// setting's own (the first such window after a change counts).
    pub fn warmed(&mut self, rss: f64, t_s: f64) {
        if self.base.is_some() && self.grown_from.is_none() {
            self.grown_from = Some(rss);
            self.grown_since_s = t_s;
        }
    }

    /// Whether neurogc has changed anything yet.
    pub fn any(&self) -> bool {
        self.base.is_some()
    }

    /// What RSS has grown since neurogc's first change, or since the heap was warm where that
    /// came later (0 before either), at `t_s`, past the application's `own` growth since.
    pub fn grown(&self, rss: f64, t_s: f64, own: &OwnGrowth) -> f64 {
        self.grown_from.map_or(0.0, |from| (rss - from - own.over(t_s - self.grown_since_s)).max(0.0))
    }

    /// `keeps`: the model's figure for the setting in force, over its horizon (garbage takes
    /// that long to pile up, and RSS shows what has so far). Returns what the setting in force
    /// costs, which its budget judges, and the RSS the application would have without neurogc,
    /// which a relative budget is a share of: growth past what neurogc's settings keep is the
    /// application's own.
    pub fn split(&mut self, rss: f64, keeps: f64) -> (f64, f64) {
        let Some(base) = self.base else { return (0.0, rss) };
        let grown = (rss - base).max(0.0);
        self.most = self.most.max(keeps);
        (keeps.min(grown), (rss - self.most.min(grown)).max(0.0))
    }
}

/// The share of windows a pause budget may be missed in and still hold.
pub const HELD_WINDOWS: f64 = 0.01;

/// Windows over which the GC share at attach is measured.
const ATTACH_WINDOWS: usize = 3;

impl Budgets {
    pub fn new(cfg: GuardConfig) -> Budgets {
        Budgets { cfg, attach_share: None, first_shares: Vec::new(), window_s: 1.0 }
    }

    pub fn window_s(&self) -> f64 {
        self.window_s
    }

    pub fn set_window(&mut self, secs: f64) {
        self.window_s = secs.clamp(0.05, 3600.0);
    }

    pub fn config(&self) -> &GuardConfig {
        &self.cfg
    }

    /// Feeds the GC share of the windows before neurogc changed anything.
    pub fn at_attach(&mut self, share: f64) {
        if self.attach_share.is_none() {
            self.first_shares.push(share);
            if self.first_shares.len() >= ATTACH_WINDOWS {
                self.attach_share =
                    Some(self.first_shares.iter().sum::<f64>() / self.first_shares.len() as f64);
            }
        }
    }

    /// The GC share budget in force: the user's, else (by default) no worse than before the
    /// first change, with a little slack for noise.
    pub fn share(&self) -> Option<f64> {
        let attach = self.attach_share.or_else(|| {
            (!self.first_shares.is_empty())
                .then(|| self.first_shares.iter().sum::<f64>() / self.first_shares.len() as f64)
        });
        match self.cfg.gc_budget {
            Some(share) => Some(share),
            None if self.cfg.gc_at_attach => attach.map(|s| s * 1.1 + 0.002),
            None => None,
        }
    }

    pub fn pause_ns(&self) -> Option<f64> {
        self.cfg.pause_budget_ns.map(|b| b as f64)
    }

    /// The RSS the memory budget allows, given the RSS the application would have without
    /// neurogc's changes.
    pub fn rss_limit(&self, app_rss: f64) -> f64 {
        app_rss + self.memory_allowance(app_rss)
    }

    /// Bytes neurogc's changes may cost, given the RSS the application would have without them.
    pub fn memory_allowance(&self, app_rss: f64) -> f64 {
        match self.cfg.memory_limit_bytes {
            Some(limit) => (limit as f64 - app_rss).max(0.0),
            None => (app_rss * self.cfg.memory_budget).max(MIN_HEADROOM),
        }
    }

    /// Pauses: the budget holds where at most 1% of windows hold a longer pause; past that, the
    /// miss grows with both the share of windows (`over`) and how far over the pause such a
    /// window holds is (`Prediction::windows_over`).
    pub fn pause_miss(&self, over: f64, pause_ns: f64) -> f64 {
        let Some(budget) = self.pause_ns() else { return 0.0 };
        if over <= HELD_WINDOWS { 0.0 } else { over * pause_ns.max(budget) / budget }
    }

    /// Pauses: one pause of `pause_ns` in the horizon, counted as one window for every budget
    /// it spans (a request that arrives during a pause waits the rest of it), held where that
    /// is at most the share of windows the budget may be missed in.
    pub fn pause_once_miss(&self, pause_ns: f64) -> f64 {
        let Some(budget) = self.pause_ns() else { return 0.0 };
        let miss = self.window_s / HORIZON_S * pause_ns.max(budget) / budget;
        if miss <= HELD_WINDOWS { 0.0 } else { miss }
    }

    fn predicted_pause_miss(&self, p: &Prediction) -> f64 {
        let Some(budget) = self.pause_ns() else { return 0.0 };
        let (windows, pause) = p.windows_over(budget, self.window_s);
        self.pause_miss(windows, pause)
    }

    /// How far a GC share is over its budget, as a fraction of it (0 where it holds).
    pub fn share_miss(&self, share: f64) -> f64 {
        match self.share() {
            Some(b) if b > 0.0 && share > b => (share - b) / b,
            _ => 0.0,
        }
    }

    /// How far `bytes` kept by neurogc's settings are over the allowance, as a fraction of it.
    pub fn memory_miss(&self, bytes: f64, app_rss: f64) -> f64 {
        let allowance = self.memory_allowance(app_rss);
        if bytes > allowance { (bytes - allowance) / allowance.max(1.0) } else { 0.0 }
    }

    pub fn misses(&self, p: &Prediction, app_rss: f64) -> Misses {
        Misses {
            memory: self.memory_miss(p.memory_bytes, app_rss),
            pause: self.predicted_pause_miss(p),
            share: self.share_miss(p.share),
        }
    }
}

/// The guard on a free-threaded build (3.13t), around the application's `original` thresholds.
/// Every collection there walks the whole heap (no generations: automatic ones are labelled 0),
/// a collection waits for `count0 > max(threshold0, long_lived_total / 4)`, threshold1 is read
/// only as a switch (0: collect at once) and threshold2 not at all; the collector model neurogc
/// predicts with is generational. So the only threshold move is rarer collections (threshold0
/// at or above the application's, never more frequent whole-heap walks); threshold1 and
/// threshold2 stay the application's. `gc.freeze()` is not offered there at all (steer.rs):
/// frozen objects leave `long_lived_total`, so collections come far more often
/// (workloads/bench/free_threaded_freeze.py, docs/limits.md).
pub fn free_threaded_guard(cfg: &GuardConfig, original: [i64; 3]) -> GuardConfig {
    let mut c = cfg.clone();
    c.min[0] = c.min[0].max(original[0]).min(c.max[0]);
    for (g, &own) in original.iter().enumerate().skip(1) {
        (c.min[g], c.max[g]) = (own, own);
    }
    c
}

/// The defaults as the command line gives them, for the policy's tests.
#[cfg(test)]
pub fn test_config() -> GuardConfig {
    GuardConfig {
        min: [100, 2, 2],
        max: [100_000, 100, 100],
        memory_budget: 0.15,
        memory_limit_bytes: None,
        pause_budget_ns: Some(10_000_000),
        gc_budget: None,
        gc_at_attach: true,
        freeze_after_s: Some(5.0),
        allow_disable: false,
        model_full_weight: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_config as cfg;

    fn predicted(pause_ms: f64, share: f64, memory_mib: f64) -> Prediction {
        Prediction {
            pause_ns: [0.0, 0.0, pause_ms * 1e6],
            rate: [0.0, 0.0, 0.5],
            share,
            memory_bytes: memory_mib * 1048576.0,
            memory_upper_bytes: memory_mib * 1048576.0,
            next_full_s: None,
            first_full_ns: 0.0,
        }
    }

    #[test]
    fn what_a_setting_left_behind_still_holds_is_not_counted_as_the_applications() {
        const MIB: f64 = 1048576.0;
        let mut kept = Kept::default();
        // Before neurogc changes anything, all of RSS is the application's.
        assert_eq!(kept.split(400.0 * MIB, 20.0 * MIB), (0.0, 400.0 * MIB));
        kept.changed(400.0 * MIB, true, 0.0);
        // A setting keeping 20 MiB, and RSS grown by as much: the application's is 400 MiB.
        assert_eq!(kept.split(420.0 * MIB, 20.0 * MIB), (20.0 * MIB, 400.0 * MIB));
        // Back at a setting that keeps nothing, RSS stays up: still not the application's, and
        // the budget stays a share of 400 MiB; the setting in force costs nothing.
        kept.changed(420.0 * MIB, true, 0.0);
        assert_eq!(kept.split(420.0 * MIB, 0.0), (0.0, 400.0 * MIB));
        // Growth past what any setting kept is the application's own (a heap warming up).
        assert_eq!(kept.split(450.0 * MIB, 0.0), (0.0, 430.0 * MIB));
    }

    #[test]
    fn the_applications_own_growth_is_credited_at_its_slower_rate_for_as_long_as_measured() {
        const MIB: f64 = 1048576.0;
        let mut own = OwnGrowth::default();
        // A cache filling at 7 MiB/s, then at 3 MiB/s, over eight windows at its own settings.
        for w in 0..8 {
            let rss = if w <= 4 { 200.0 + 7.0 * w as f64 } else { 228.0 + 3.0 * (w - 4) as f64 };
            own.add(w as f64, rss * MIB, true);
        }
        assert!((own.rate() - 3.0 * MIB).abs() < 1.0, "{}", own.rate() / MIB);
        // Credited for no longer than measured: 7 s.
        assert!((own.over(20.0) - 21.0 * MIB).abs() < 1.0);
        let mut kept = Kept::default();
        kept.changed(240.0 * MIB, true, 10.0);
        assert_eq!(kept.grown(246.0 * MIB, 12.0, &own), 0.0, "the application's own 6 MiB");
        assert!((kept.grown(270.0 * MIB, 12.0, &own) - 24.0 * MIB).abs() < 1.0);
        // Windows at neurogc's settings break the run; three own ones after them are too few to
        // read a rate from, and the run before still tells it.
        for w in 20..23 {
            own.add(w as f64, 300.0 * MIB, w > 20);
        }
        assert!((own.rate() - 3.0 * MIB).abs() < 1.0);
        // Four that do not grow: the application's RSS stands still now.
        own.add(23.0, 300.0 * MIB, true);
        assert_eq!(own.rate(), 0.0);
        // A heap that shrank is credited nothing.
        let mut falling = OwnGrowth::default();
        for w in 0..6 {
            falling.add(w as f64, (300.0 - w as f64) * MIB, true);
        }
        assert_eq!(falling.over(10.0), 0.0);
    }

    #[test]
    fn growth_while_the_heap_fills_is_not_a_settings_own() {
        const MIB: f64 = 1048576.0;
        let mut kept = Kept::default();
        kept.warmed(200.0 * MIB, 0.0); // nothing changed yet: nothing to measure from
        assert_eq!(kept.grown(260.0 * MIB, 0.0, &OwnGrowth::default()), 0.0);
        // The first change before the heap is warm: the application's warm-up is its own.
        kept.changed(220.0 * MIB, false, 0.0);
        assert_eq!(kept.grown(280.0 * MIB, 0.0, &OwnGrowth::default()), 0.0);
        kept.warmed(280.0 * MIB, 0.0);
        kept.warmed(290.0 * MIB, 0.0); // the first warm window counts
        assert_eq!(kept.grown(300.0 * MIB, 0.0, &OwnGrowth::default()), 20.0 * MIB);
        // A first change once the heap is warm measures from that change.
        let mut kept = Kept::default();
        kept.changed(220.0 * MIB, true, 0.0);
        kept.warmed(240.0 * MIB, 0.0);
        assert_eq!(kept.grown(250.0 * MIB, 0.0, &OwnGrowth::default()), 30.0 * MIB);
    }

    #[test]
    fn the_gc_share_defaults_to_no_worse_than_at_attach() {
        let mut b = Budgets::new(cfg());
        assert_eq!(b.share(), None);
        b.at_attach(0.10);
        assert!((b.share().unwrap() - 0.112).abs() < 1e-9, "from the first window on");
        for s in [0.20, 0.30] {
            b.at_attach(s);
        }
        assert!((b.share().unwrap() - 0.222).abs() < 1e-9);
        b.at_attach(0.9); // later windows do not move it
        assert!((b.share().unwrap() - 0.222).abs() < 1e-9);
        let user = Budgets::new(GuardConfig { gc_budget: Some(0.02), ..cfg() });
        assert_eq!(user.share(), Some(0.02));
        let off = Budgets::new(GuardConfig { gc_at_attach: false, ..cfg() });
        assert_eq!(off.share(), None);
    }

    #[test]
    fn memory_counts_neurogcs_cost_against_the_applications_rss() {
        let b = Budgets::new(cfg());
        // 15% of a 1 GiB application: 153.6 MiB of room for neurogc's garbage.
        let gib = 1024.0 * 1048576.0;
        assert_eq!(b.misses(&predicted(1.0, 0.0, 150.0), gib).memory, 0.0);
        assert!(b.misses(&predicted(1.0, 0.0, 160.0), gib).memory > 0.0);
        // A small interpreter still gets 16 MiB.
        assert_eq!(b.misses(&predicted(1.0, 0.0, 15.0), 20.0 * 1048576.0).memory, 0.0);
        // An absolute budget is a ceiling: neurogc's part must fit between the app and it.
        let abs = Budgets::new(GuardConfig { memory_limit_bytes: Some(1 << 30), ..cfg() });
        assert!(abs.misses(&predicted(1.0, 0.0, 100.0), 1000.0 * 1048576.0).memory > 0.0);
        assert_eq!(abs.misses(&predicted(1.0, 0.0, 20.0), 1000.0 * 1048576.0).memory, 0.0);
    }

    #[test]
    fn misses_are_ranked_memory_then_pause_then_share() {
        let b = Budgets::new(GuardConfig { gc_budget: Some(0.05), ..cfg() });
        let m = b.misses(&predicted(20.0, 0.10, 0.0), 1e9);
        // A 20 ms full collection every other window: half the windows, twice the budget.
        assert_eq!((m.memory, m.pause, m.share), (0.0, 1.0, 1.0));
        // One a minute misses 1.7% of windows; one in 200 windows holds.
        let mut rare = predicted(20.0, 0.01, 0.0);
        rare.rate[2] = 1.0 / 60.0;
        assert!(b.misses(&rare, 1e9).pause > 0.0);
        rare.rate[2] = 1.0 / 200.0;
        assert!(b.misses(&rare, 1e9).none());
        assert_eq!(m.first(), Some(Budget::Pause));
        assert_eq!(m.names(), "pause, GC share");
        assert!(b.misses(&predicted(5.0, 0.01, 0.0), 1e9).none());
    }

    #[test]
    fn on_a_free_threaded_build_only_rarer_collections_are_moves() {
        let c = free_threaded_guard(&cfg(), [2000, 10, 10]);
        // threshold0 may rise (never below the application's); threshold1/2 stay its own.
        assert_eq!((c.min, c.max), ([2000, 10, 10], [100_000, 10, 10]));
        // An application value above the guard's maximum pins threshold0 to the maximum.
        let c = free_threaded_guard(&cfg(), [500_000, 0, 3]);
        assert_eq!((c.min, c.max), ([100_000, 0, 3], [100_000, 0, 3]));
        // Everything else (budgets, freeze) is the user's.
        assert_eq!((c.pause_budget_ns, c.freeze_after_s), (cfg().pause_budget_ns, cfg().freeze_after_s));
    }
}
