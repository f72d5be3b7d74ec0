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
        let over = p.windows_over(budget, self.window_s);
        self.pause_miss(over.share, over.pause_ns)
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
