//! Guardrails and budgets between the model and the target. The model proposes thresholds; the
//! guard holds the user's budgets first and lets a proposal through only where they leave room:
//! - memory (RSS over its value when neurogc first changed anything, or an absolute limit): undo
//!   neurogc's freeze, then walk thresholds back toward the application's, and never above that
//!   point again;
//! - pauses (the longest collection in a window): freeze a warm heap when a full collection is too
//!   long, make full collections rarer, shrink the young generation when gen0 is too long;
//! - GC share (of wall time, over the last 10 windows): make collections rarer.
//!
//! Where budgets conflict, memory wins, then pauses, then GC share, and the verdict says which
//! budget was given up. Bounds, confirmation and a cooldown keep proposals from flapping, and a
//! threshold of 0 (which disables that part of the collector) needs explicit permission.
use std::collections::VecDeque;

pub use neurogc_trace::GuardConfig;
use neurogc_trace::{Effect, Observed};

use crate::view::thresholds;

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub thresholds: [i64; 3],
    /// Something should change now: `thresholds`, and/or `freeze`.
    pub change: bool,
    /// Some(true): `gc.freeze()`; Some(false): undo neurogc's freeze.
    pub freeze: Option<bool>,
    pub reason: String,
    /// "700/10/10 -> 2000/10/10 + freeze", when `change`.
    pub what: Option<String>,
    pub budget: Option<&'static str>,
    pub given_up: Option<String>,
    pub observed: Observed,
    pub effect: Option<Effect>,
}

/// One window as the budgets see it (see `features::reading`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub ts_ns: u64,
    /// The longest pause in the window and its generation.
    pub pause_max_ns: u64,
    pub pause_gen: u8,
    /// Share of this window's wall time spent in collections.
    pub gc_share: f64,
    pub rss: u64,
    /// Neither collected nor ran (see `features::idle`): an idle process gets no change.
    pub idle: bool,
}

/// The least growth a relative memory budget allows: a few MiB either way is the allocator's
/// noise, and 15% of a 20 MiB interpreter would forbid any change at all.
const MIN_HEADROOM: u64 = 16 << 20;

/// Windows the GC share is averaged over, and after which a change's effect is reported.
const SHARE_WINDOWS: usize = 10;
const EFFECT_WINDOWS: u64 = 4;

/// A change waiting for its effect to be measured.
struct Pending {
    ts_ns: u64,
    window: u64,
    what: String,
    before: [f64; 3],
}

pub struct Guard {
    cfg: GuardConfig,
    original: [i64; 3],
    current: [i64; 3],
    window: u64,
    /// The first window's end: how long the agent has watched.
    first_ts: Option<u64>,
    last_change: Option<u64>,
    streak: Option<([i64; 3], u32)>,
    /// RSS when neurogc first changed anything: what the relative memory budget is measured from
    /// (growth before that was the application's own).
    baseline_rss: Option<u64>,
    /// Limits the budgets set on the model's proposals: `cap` from memory (and gen0 pauses),
    /// `floor` from pauses and GC share. Memory's cap wins over any floor.
    cap: [i64; 3],
    floor: [i64; 3],
    /// Each window's (longest pause ms, GC share, RSS MiB), newest last.
    history: VecDeque<[f64; 3]>,
    /// The actuator can freeze and the application froze nothing itself.
    freeze_allowed: bool,
    frozen: bool,
    /// Unfrozen for memory: not frozen again.
    freeze_spent: bool,
    pending: Option<Pending>,
}

/// One step from `from` halfway (geometrically) to `to`, arriving when close.
fn step_toward(from: i64, to: i64) -> i64 {
    let mid = ((from.max(1) as f64) * (to.max(1) as f64)).sqrt().round() as i64;
    if (mid - to).abs() * 10 <= to.abs().max(1) { to } else { mid }
}

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// What a verdict decided, before the guard adds its observations.
struct Move {
    /// None: keep what is in force.
    to: Option<[i64; 3]>,
    freeze: Option<bool>,
    reason: String,
    budget: Option<&'static str>,
    given_up: Option<String>,
}

impl Move {
    fn keep(reason: String) -> Move {
        Move { to: None, freeze: None, reason, budget: None, given_up: None }
    }

    fn to(to: [i64; 3], budget: Option<&'static str>, reason: String) -> Move {
        Move { to: Some(to), freeze: None, reason, budget, given_up: None }
    }

    fn giving_up(mut self, what: Option<String>) -> Move {
        self.given_up = what;
        self
    }
}

impl Guard {
    pub fn new(cfg: GuardConfig, original: [i64; 3]) -> Guard {
        Guard {
            cfg,
            original,
            current: original,
            window: 0,
            first_ts: None,
            last_change: None,
            streak: None,
            baseline_rss: None,
            cap: [i64::MAX; 3],
            floor: [0; 3],
            history: VecDeque::new(),
            freeze_allowed: false,
            frozen: false,
            freeze_spent: false,
            pending: None,
        }
    }

    /// Whether `gc.freeze()` is an available move: the actuator can run it and the application
    /// has frozen nothing itself (neurogc would not be able to tell its freeze from the app's).
    pub fn allow_freeze(&mut self, allowed: bool) {
        self.freeze_allowed = allowed;
    }

    /// The thresholds neurogc has in force (the application's until the first change).
    pub fn thresholds(&self) -> [i64; 3] {
        self.current
    }

    pub fn frozen(&self) -> bool {
        self.frozen
    }

    /// The actuator could not freeze (the main thread did not run the call): not tried again.
    pub fn freeze_failed(&mut self) {
        self.frozen = false;
        self.freeze_spent = true;
    }

    fn rss_limit(&self) -> Option<u64> {
        match self.cfg.memory_limit_bytes {
            Some(limit) => Some(limit),
            None => {
                self.baseline_rss.map(|b| b + ((b as f64 * self.cfg.memory_budget) as u64).max(MIN_HEADROOM))
            }
        }
    }

    fn cooling(&self) -> Option<u64> {
        let last = self.last_change?;
        (self.window - last < self.cfg.cooldown).then(|| self.window - last)
    }

    fn share(&self) -> f64 {
        mean(self.history.iter().map(|h| h[1]))
    }

    fn observed(&self, r: &Reading) -> Observed {
        Observed {
            pause_max_ms: r.pause_max_ns as f64 / 1e6,
            pause_gen: r.pause_gen,
            gc_share: self.share(),
            rss_mib: mib(r.rss),
            rss_limit_mib: self.rss_limit().map(mib),
        }
    }

    /// Budgets the current window misses (for "given up" notes when memory comes first).
    fn missed(&self, r: &Reading) -> Option<String> {
        let mut missed = Vec::new();
        if let Some(b) = self.cfg.pause_budget_ns
            && r.pause_max_ns > b
        {
            missed.push(format!(
                "pause ({:.1} ms over {:.1} ms)",
                r.pause_max_ns as f64 / 1e6,
                b as f64 / 1e6
            ));
        }
        if let Some(b) = self.cfg.gc_budget
            && self.share() > b
        {
            missed.push(format!("GC share ({:.1}% over {:.1}%)", self.share() * 100.0, b * 100.0));
        }
        (!missed.is_empty()).then(|| format!("{}: memory comes first", missed.join(", ")))
    }

    /// One window: the budgets first, then the model's proposal within what they leave.
    pub fn decide(&mut self, proposed: [i64; 3], r: &Reading) -> Verdict {
        self.window += 1;
        self.first_ts.get_or_insert(r.ts_ns);
        self.history.push_back([r.pause_max_ns as f64 / 1e6, r.gc_share, mib(r.rss)]);
        while self.history.len() > SHARE_WINDOWS {
            self.history.pop_front();
        }
        let observed = self.observed(r);
        let effect = self.effect();
        let m = self.choose(proposed, r);
        let to = m.to.unwrap_or(self.current);
        let change = to != self.current || m.freeze.is_some();
        let what = change.then(|| {
            let mut w = if to != self.current {
                format!("{} -> {}", thresholds(self.current), thresholds(to))
            } else {
                thresholds(to)
            };
            match m.freeze {
                Some(true) => w.push_str(" + freeze"),
                Some(false) => w.push_str(" + unfreeze"),
                None => {}
            }
            w
        });
        if change {
            self.baseline_rss.get_or_insert(r.rss);
            let before = self.before();
            self.pending = Some(Pending {
                ts_ns: r.ts_ns,
                window: self.window,
                what: what.clone().unwrap_or_default(),
                before,
            });
            self.current = to;
            self.last_change = Some(self.window);
            self.streak = None;
            match m.freeze {
                Some(true) => self.frozen = true,
                Some(false) => {
                    self.frozen = false;
                    self.freeze_spent = true;
                }
                None => {}
            }
        }
        Verdict {
            thresholds: to,
            change,
            freeze: m.freeze,
            reason: m.reason,
            what,
            budget: m.budget,
            given_up: m.given_up,
            observed,
            effect,
        }
    }

    /// The averages a change's effect is measured with, over the last `EFFECT_WINDOWS` windows.
    fn before(&self) -> [f64; 3] {
        let n = self.history.len().min(EFFECT_WINDOWS as usize);
        let last = || self.history.iter().skip(self.history.len() - n);
        [mean(last().map(|h| h[0])), mean(last().map(|h| h[1])), mean(last().map(|h| h[2]))]
    }

    fn effect(&mut self) -> Option<Effect> {
        let due = self.pending.as_ref().is_some_and(|p| self.window >= p.window + EFFECT_WINDOWS);
        if !due {
            return None;
        }
        let p = self.pending.take()?;
        let after = self.before();
        Some(Effect {
            of_ts_ns: p.ts_ns,
            change: p.what,
            pause_max_ms: [p.before[0], after[0]],
            gc_share: [p.before[1], after[1]],
            rss_mib: [p.before[2], after[2]],
        })
    }

    fn choose(&mut self, proposed: [i64; 3], r: &Reading) -> Move {
        if let Some(limit) = self.rss_limit()
            && r.rss > limit
        {
            return self.over_memory(r, limit);
        }
        if r.idle {
            self.streak = None;
            return Move::keep(
                "idle: no collection and no CPU in this window, nothing to improve".to_owned(),
            );
        }
        if let Some(budget) = self.cfg.pause_budget_ns
            && r.pause_max_ns > budget
        {
            return self.over_pause(r, budget);
        }
        if let Some(budget) = self.cfg.gc_budget
            && self.history.len() >= 4
            && self.share() > budget
        {
            return self.over_share(proposed, budget);
        }
        self.model(proposed)
    }

    fn over_memory(&mut self, r: &Reading, limit: u64) -> Move {
        let over = format!("RSS {:.1} MiB over the memory budget {:.1} MiB", mib(r.rss), mib(limit));
        if self.frozen {
            let mut m = Move::to(
                self.current,
                Some("memory"),
                format!(
                    "{over} with the heap frozen by neurogc: unfreezing (frozen garbage is never collected)"
                ),
            );
            m.freeze = Some(false);
            return m.giving_up(self.missed(r));
        }
        // Only ever lower: a step "toward the original" from below it would raise thresholds,
        // and memory the application grows at its own settings is not neurogc's to chase.
        let back = [0, 1, 2].map(|g| step_toward(self.current[g], self.original[g]).min(self.current[g]));
        if back == self.current {
            return Move::keep(format!(
                "{over} at or below the application's own thresholds: the growth is not neurogc's, nothing to step back"
            ));
        }
        // No threshold goes above these again: without the cap the model's next proposal would
        // take the target straight back over (700 -> 2000 -> 1183 -> 910 -> 2000 ...).
        self.cap = [0, 1, 2].map(|g| self.cap[g].min(back[g]));
        let reason = format!("{over}: stepping back toward the application's thresholds");
        Move::to(back, Some("memory"), reason).giving_up(self.missed(r))
    }

    fn over_pause(&mut self, r: &Reading, budget: u64) -> Move {
        let g = usize::from(r.pause_gen.min(2));
        let over = format!(
            "a gen{g} pause of {:.1} ms is over the pause budget {:.1} ms",
            r.pause_max_ns as f64 / 1e6,
            budget as f64 / 1e6
        );
        if let Some(ago) = self.cooling() {
            return Move::keep(format!("{over}; cooldown: last change {ago} windows ago"));
        }
        let first = self.first_ts.unwrap_or(r.ts_ns);
        let warm =
            self.cfg.freeze_after_s.is_some_and(|after| r.ts_ns.saturating_sub(first) as f64 / 1e9 >= after);
        if g >= 1 && warm && self.freeze_allowed && !self.frozen && !self.freeze_spent {
            let mut m = Move::to(
                self.current,
                Some("pause"),
                format!("{over}: freezing the warm heap so full collections stop walking it"),
            );
            m.freeze = Some(true);
            return m;
        }
        let mut to = self.current;
        if g == 0 {
            // A gen0 pause scales with the young generation: shrink it.
            to[0] = (self.current[0] / 2).max(self.cfg.min[0]).max(1);
            if to[0] < self.current[0] {
                self.cap[0] = to[0];
                self.floor[0] = self.floor[0].min(to[0]);
                return Move::to(to, Some("pause"), format!("{over}: a smaller young generation"));
            }
        } else {
            // The pause of a full collection does not shrink with thresholds; rarer ones miss
            // the budget in fewer windows.
            to[g] = self.current[g].saturating_mul(2).min(self.cfg.max[g]).min(self.cap[g]);
            if to[g] > self.current[g] {
                self.floor[g] = to[g];
                let why = format!("{over}: gen{g} collections made rarer ({})", self.freeze_note(g));
                return Move::to(to, Some("pause"), why);
            }
        }
        let limit = if self.cap[g] < self.cfg.max[g] { "memory's cap" } else { "its bound" };
        Move::keep(format!("{over}; threshold {g} is at {limit}"))
            .giving_up(Some(format!("pause: threshold {g} at {limit}, {}", self.freeze_note(g))))
    }

    fn freeze_note(&self, g: usize) -> &'static str {
        match () {
            _ if g == 0 => "gen0 pauses cannot be shortened further",
            _ if self.frozen => "the heap is frozen already",
            _ if self.freeze_spent => "freezing was undone for memory",
            _ if !self.freeze_allowed => "freezing is not available",
            _ => "waiting for the heap to warm before freezing",
        }
    }

    fn over_share(&mut self, proposed: [i64; 3], budget: f64) -> Move {
        let over =
            format!("GC share {:.1}% is over the GC budget {:.1}%", self.share() * 100.0, budget * 100.0);
        if let Some(ago) = self.cooling() {
            return Move::keep(format!("{over}; cooldown: last change {ago} windows ago"));
        }
        let mut to = self.current;
        to[0] = proposed[0].max(self.current[0].saturating_mul(2)).min(self.cfg.max[0]).min(self.cap[0]);
        if to[0] > self.current[0] {
            self.floor[0] = to[0];
            return Move::to(to, Some("gc"), format!("{over}: fewer young collections"));
        }
        let why = if self.cap[0] < self.cfg.max[0] {
            "memory or pauses come first"
        } else {
            "threshold 0 at its bound"
        };
        Move::keep(format!("{over}; {why}")).giving_up(Some(format!("GC share: {why}")))
    }

    /// The model's proposal, within the bounds and what the budgets set.
    fn model(&mut self, proposed: [i64; 3]) -> Move {
        let least = if self.cfg.allow_disable { 0 } else { 1 };
        let target = [0, 1, 2].map(|g| {
            let lo = self.cfg.min[g].max(least).max(self.floor[g]);
            let hi = self.cfg.max[g].max(least).min(self.cap[g]).max(self.cfg.min[g].max(least));
            proposed[g].clamp(lo.min(hi), hi)
        });
        if target == self.current {
            self.streak = None;
            let held = target != proposed && self.cap.iter().any(|&c| c < i64::MAX);
            return Move::keep(if held {
                format!(
                    "held at {}: the budgets limit the model's {}",
                    thresholds(self.current),
                    thresholds(proposed)
                )
            } else {
                "the model proposes the same thresholds again".to_owned()
            });
        }
        let streak = match self.streak {
            Some((t, n)) if t == target => n + 1,
            _ => 1,
        };
        self.streak = Some((target, streak));
        if streak < self.cfg.confirm {
            return Move::keep(format!(
                "proposal {} seen {streak}/{} windows",
                thresholds(target),
                self.cfg.confirm
            ));
        }
        if let Some(ago) = self.cooling() {
            return Move::keep(format!("cooldown: last change {ago} windows ago"));
        }
        Move::to(target, None, format!("model proposes {}", thresholds(target)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> GuardConfig {
        GuardConfig {
            min: [100, 2, 2],
            max: [50_000, 100, 100],
            cooldown: 3,
            confirm: 2,
            memory_budget: 0.25,
            memory_limit_bytes: None,
            pause_budget_ns: None,
            gc_budget: None,
            freeze_after_s: None,
            allow_disable: false,
        }
    }

    /// One window, half a second after the last.
    fn d(g: &mut Guard, proposed: [i64; 3], r: Reading) -> Verdict {
        let ts_ns = (g.window + 1) * 500_000_000;
        g.decide(proposed, &Reading { ts_ns, ..r })
    }

    fn at(rss_mib: u64) -> Reading {
        Reading {
            ts_ns: 1,
            pause_max_ns: 50_000,
            pause_gen: 0,
            gc_share: 0.001,
            rss: rss_mib << 20,
            idle: false,
        }
    }

    #[test]
    fn changes_need_confirmation_and_respect_the_cooldown() {
        let mut g = Guard::new(cfg(), [700, 10, 10]);
        assert!(!d(&mut g, [5000, 10, 10], at(100)).change);
        let v = d(&mut g, [5000, 10, 10], at(100));
        assert!(v.change);
        assert_eq!(v.what.as_deref(), Some("700/10/10 -> 5000/10/10"));
        assert!(!d(&mut g, [2000, 10, 10], at(100)).change);
        // Confirmed, but within the cooldown.
        let v = d(&mut g, [2000, 10, 10], at(100));
        assert!(!v.change && v.reason.starts_with("cooldown"), "{v:?}");
        let v = d(&mut g, [2000, 10, 10], at(100));
        assert_eq!((v.change, v.thresholds), (true, [2000, 10, 10]));
    }

    #[test]
    fn bounds_and_zero() {
        let mut g = Guard::new(GuardConfig { min: [0, 0, 0], confirm: 1, ..cfg() }, [700, 10, 10]);
        assert_eq!(d(&mut g, [0, 0, 10_000], at(0)).thresholds, [1, 1, 100]);
        let mut g = Guard::new(
            GuardConfig { min: [0, 0, 0], confirm: 1, allow_disable: true, ..cfg() },
            [700, 10, 10],
        );
        assert_eq!(d(&mut g, [0, 10, 10], at(0)).thresholds, [0, 10, 10]);
    }

    #[test]
    fn memory_budget_walks_back_to_the_original() {
        let mut g = Guard::new(GuardConfig { confirm: 1, ..cfg() }, [700, 10, 10]);
        assert!(d(&mut g, [50_000, 10, 10], at(100)).change);
        let mut steps = Vec::new();
        for _ in 0..10 {
            let v = d(&mut g, [50_000, 10, 10], at(200));
            assert_eq!(v.budget, Some("memory"));
            steps.push(v.thresholds[0]);
            if v.thresholds == [700, 10, 10] {
                break;
            }
        }
        assert_eq!(steps, [5916, 2035, 1194, 914, 800, 700]);
        assert!(!d(&mut g, [50_000, 10, 10], at(200)).change, "no increase while over the budget");
        // Back under the budget, the model asks again: the thresholds that broke it are not
        // tried again.
        for _ in 0..10 {
            let v = d(&mut g, [50_000, 10, 10], at(100));
            assert_eq!(v.thresholds, [700, 10, 10], "{v:?}");
        }
    }

    #[test]
    fn the_applications_own_growth_never_raises_thresholds() {
        let mut g = Guard::new(GuardConfig { confirm: 1, cooldown: 0, ..cfg() }, [700, 10, 10]);
        assert!(d(&mut g, [300, 10, 10], at(100)).change);
        // A leak: RSS over the budget with thresholds below the application's.
        for _ in 0..5 {
            let v = d(&mut g, [300, 10, 10], at(300));
            assert_eq!((v.change, v.thresholds), (false, [300, 10, 10]), "{v:?}");
            assert!(v.reason.contains("not neurogc's"), "{v:?}");
        }
    }

    #[test]
    fn growth_before_the_first_change_is_the_applications() {
        let mut g = Guard::new(GuardConfig { confirm: 1, cooldown: 0, ..cfg() }, [700, 10, 10]);
        // Launch mode: a 10 MiB interpreter grows to 300 MiB at its own settings.
        assert!(!d(&mut g, [700, 10, 10], at(10)).change);
        let v = d(&mut g, [2000, 10, 10], at(300));
        assert!(v.change && v.budget.is_none(), "{v:?}");
        assert_eq!(v.observed.rss_limit_mib, None);
        assert_eq!(d(&mut g, [2000, 10, 10], at(300)).observed.rss_limit_mib, Some(375.0));
    }

    #[test]
    fn an_idle_process_gets_no_change() {
        let mut g = Guard::new(GuardConfig { confirm: 1, cooldown: 0, ..cfg() }, [700, 10, 10]);
        for _ in 0..5 {
            let v = d(&mut g, [50_000, 10, 10], Reading { idle: true, ..at(100) });
            assert_eq!((v.change, v.thresholds), (false, [700, 10, 10]), "{v:?}");
        }
        assert!(d(&mut g, [50_000, 10, 10], at(100)).change);
    }

    fn gen2_pause(ms: u64, rss_mib: u64) -> Reading {
        Reading { pause_max_ns: ms * 1_000_000, pause_gen: 2, ..at(rss_mib) }
    }

    #[test]
    fn a_long_full_collection_freezes_a_warm_heap_once() {
        let c = GuardConfig {
            pause_budget_ns: Some(10_000_000),
            freeze_after_s: Some(1.5),
            cooldown: 2,
            ..cfg()
        };
        let mut g = Guard::new(c, [700, 10, 10]);
        g.allow_freeze(true);
        // Not warm yet: gen2 made rarer instead.
        let v = d(&mut g, [700, 10, 10], gen2_pause(150, 100));
        assert_eq!((v.thresholds, v.freeze, v.budget), ([700, 10, 20], None, Some("pause")), "{v:?}");
        for _ in 0..2 {
            assert!(!d(&mut g, [700, 10, 10], at(100)).change);
        }
        let v = d(&mut g, [700, 10, 10], gen2_pause(150, 100));
        assert_eq!((v.change, v.freeze, v.budget), (true, Some(true), Some("pause")), "{v:?}");
        assert_eq!(v.what.as_deref(), Some("700/10/20 + freeze"));
        assert!(g.frozen());
        // Effect reported four windows later, once.
        let effects: Vec<_> = (0..6).filter_map(|_| d(&mut g, [700, 10, 10], at(100)).effect).collect();
        assert_eq!(effects.len(), 1);
        assert_eq!(effects[0].change, "700/10/20 + freeze");
        assert!(effects[0].pause_max_ms[0] > 30.0 && effects[0].pause_max_ms[1] < 1.0, "{effects:?}");
        // The model cannot lower gen2's threshold below what the pause budget set.
        let v = d(&mut g, [700, 10, 10], gen2_pause(150, 100));
        assert!(!v.freeze.is_some_and(|f| f), "frozen once: {v:?}");
    }

    #[test]
    fn memory_undoes_the_freeze_and_says_what_it_gave_up() {
        let c = GuardConfig {
            pause_budget_ns: Some(10_000_000),
            freeze_after_s: Some(0.0),
            cooldown: 0,
            ..cfg()
        };
        let mut g = Guard::new(c, [700, 10, 10]);
        g.allow_freeze(true);
        assert_eq!(d(&mut g, [700, 10, 10], gen2_pause(150, 100)).freeze, Some(true));
        let v = d(&mut g, [700, 10, 10], gen2_pause(150, 200));
        assert_eq!((v.freeze, v.budget), (Some(false), Some("memory")), "{v:?}");
        assert!(v.given_up.as_deref().is_some_and(|w| w.starts_with("pause")), "{v:?}");
        // Never frozen again; pauses are then held by rarer full collections.
        let v = d(&mut g, [700, 10, 10], gen2_pause(150, 100));
        assert_eq!((v.freeze, v.thresholds), (None, [700, 10, 20]), "{v:?}");
    }

    #[test]
    fn no_freeze_where_it_is_not_allowed_and_a_long_gen0_shrinks_the_young_generation() {
        let c =
            GuardConfig { pause_budget_ns: Some(1_000_000), freeze_after_s: Some(0.0), cooldown: 0, ..cfg() };
        let mut g = Guard::new(c, [700, 10, 10]);
        let v = d(&mut g, [700, 10, 10], gen2_pause(150, 100));
        assert_eq!((v.freeze, v.thresholds), (None, [700, 10, 20]));
        let v = d(&mut g, [5000, 10, 10], Reading { pause_max_ns: 3_000_000, pause_gen: 0, ..at(100) });
        assert_eq!(v.thresholds, [350, 10, 20]);
        // The model's 5000 is now capped by the pause budget.
        let v = d(&mut g, [5000, 10, 10], at(100));
        assert_eq!(v.thresholds, [350, 10, 20], "{v:?}");
    }

    #[test]
    fn gc_share_over_budget_makes_young_collections_rarer_unless_pauses_forbid() {
        let c = GuardConfig { gc_budget: Some(0.02), cooldown: 0, ..cfg() };
        let mut g = Guard::new(c, [700, 10, 10]);
        let busy = Reading { gc_share: 0.10, ..at(100) };
        for _ in 0..3 {
            assert!(!d(&mut g, [700, 10, 10], busy).change);
        }
        let v = d(&mut g, [700, 10, 10], busy);
        assert_eq!((v.thresholds, v.budget), ([1400, 10, 10], Some("gc")), "{v:?}");
        let v = d(&mut g, [5000, 10, 10], busy);
        assert_eq!(v.thresholds, [5000, 10, 10], "the model's higher proposal is taken");
        // With a pause cap on gen0 the GC share is given up.
        let c = GuardConfig { gc_budget: Some(0.02), pause_budget_ns: Some(1_000_000), cooldown: 0, ..cfg() };
        let mut g = Guard::new(c, [700, 10, 10]);
        d(&mut g, [700, 10, 10], Reading { pause_max_ns: 3_000_000, ..busy });
        for _ in 0..3 {
            d(&mut g, [700, 10, 10], busy);
        }
        let v = d(&mut g, [700, 10, 10], busy);
        assert!(v.given_up.as_deref().is_some_and(|w| w.starts_with("GC share")), "{v:?}");
    }
}
