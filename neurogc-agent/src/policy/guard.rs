//! Guardrails between the model and the target, always on: bounds, a cooldown and confirmation
//! (hysteresis) against flapping, a memory ceiling that walks back toward the original
//! thresholds, and never 0 (which disables the collector) unless allowed.
use serde::Serialize;

pub use neurogc_trace::GuardConfig;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub thresholds: [i64; 3],
    /// The thresholds should change to `thresholds` now.
    pub change: bool,
    pub reason: String,
}

pub struct Guard {
    cfg: GuardConfig,
    original: [i64; 3],
    baseline_rss: u64,
    current: [i64; 3],
    window: u64,
    last_change: Option<u64>,
    streak: Option<([i64; 3], u32)>,
    /// Set once raised thresholds took RSS over the ceiling: no threshold goes above these again
    /// (memory wins over everything, and without this the model's next proposal would take the
    /// target straight back over: 700 → 2000 → 1183 → 910 → 2000…).
    cap: Option<[i64; 3]>,
}

/// One step from `from` halfway (geometrically) to `to`, arriving when close.
fn step_toward(from: i64, to: i64) -> i64 {
    let mid = ((from.max(1) as f64) * (to.max(1) as f64)).sqrt().round() as i64;
    if (mid - to).abs() * 10 <= to.abs().max(1) { to } else { mid }
}

impl Guard {
    pub fn new(cfg: GuardConfig, original: [i64; 3], baseline_rss: u64) -> Guard {
        Guard {
            cfg,
            original,
            baseline_rss,
            current: original,
            window: 0,
            last_change: None,
            streak: None,
            cap: None,
        }
    }

    fn ceiling(&self) -> u64 {
        (self.baseline_rss as f64 * (1.0 + self.cfg.max_rss_growth)) as u64
    }

    fn change(&mut self, to: [i64; 3], reason: String) -> Verdict {
        self.current = to;
        self.last_change = Some(self.window);
        self.streak = None;
        Verdict { thresholds: to, change: true, reason }
    }

    fn keep(&self, reason: String) -> Verdict {
        Verdict { thresholds: self.current, change: false, reason }
    }

    /// One window: the model proposes, the guard disposes. `idle`: the target neither collected
    /// nor ran in this window (see `features::idle`): an idle process gets no change.
    pub fn decide(&mut self, proposed: [i64; 3], rss: u64, idle: bool) -> Verdict {
        self.window += 1;
        let mib = |b: u64| b as f64 / 1048576.0;
        if self.baseline_rss > 0 && rss > self.ceiling() {
            // Only ever lower: a step "toward the original" from below it would raise thresholds,
            // and memory the application grows at its own settings is not neurogc's to chase.
            let back = [0, 1, 2].map(|g| step_toward(self.current[g], self.original[g]).min(self.current[g]));
            if back == self.current {
                return self.keep(format!(
                    "RSS {:.1} MiB over the ceiling {:.1} MiB at or below the application's own thresholds: \
                     the growth is not neurogc's, nothing to step back",
                    mib(rss),
                    mib(self.ceiling())
                ));
            }
            self.cap = Some(back);
            return self.change(
                back,
                format!(
                    "RSS {:.1} MiB over the ceiling {:.1} MiB: stepping back toward the original thresholds",
                    mib(rss),
                    mib(self.ceiling())
                ),
            );
        }
        if idle {
            self.streak = None;
            return self.keep("idle: no collection and no CPU in this window, nothing to improve".to_owned());
        }
        let floor = if self.cfg.allow_disable { 0 } else { 1 };
        let mut target =
            [0, 1, 2].map(|g| proposed[g].clamp(self.cfg.min[g].max(floor), self.cfg.max[g].max(floor)));
        if let Some(cap) = self.cap {
            let capped = [0, 1, 2].map(|g| target[g].min(cap[g].max(self.current[g])));
            if capped == self.current && target != self.current {
                self.streak = None;
                return self.keep(format!(
                    "held at {:?}: higher thresholds took RSS over the ceiling earlier (memory comes first)",
                    self.current
                ));
            }
            target = capped;
        }
        if target == self.current {
            self.streak = None;
            return self.keep("the model proposes the same thresholds again".to_owned());
        }
        let streak = match self.streak {
            Some((t, n)) if t == target => n + 1,
            _ => 1,
        };
        self.streak = Some((target, streak));
        if streak < self.cfg.confirm {
            return self.keep(format!("proposal {target:?} seen {streak}/{} windows", self.cfg.confirm));
        }
        if let Some(last) = self.last_change
            && self.window - last < self.cfg.cooldown
        {
            return self.keep(format!("cooldown: last change {} windows ago", self.window - last));
        }
        self.change(target, format!("model proposes {target:?}"))
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
            max_rss_growth: 0.25,
            allow_disable: false,
        }
    }

    #[test]
    fn changes_need_confirmation_and_respect_the_cooldown() {
        let mut g = Guard::new(cfg(), [700, 10, 10], 100 << 20);
        assert!(!g.decide([5000, 10, 10], 100 << 20, false).change);
        assert!(g.decide([5000, 10, 10], 100 << 20, false).change);
        assert!(!g.decide([2000, 10, 10], 100 << 20, false).change);
        // Confirmed, but within the cooldown.
        let v = g.decide([2000, 10, 10], 100 << 20, false);
        assert!(!v.change && v.reason.starts_with("cooldown"), "{v:?}");
        let v = g.decide([2000, 10, 10], 100 << 20, false);
        assert_eq!((v.change, v.thresholds), (true, [2000, 10, 10]));
    }

    #[test]
    fn bounds_and_zero() {
        let mut g = Guard::new(GuardConfig { min: [0, 0, 0], confirm: 1, ..cfg() }, [700, 10, 10], 0);
        assert_eq!(g.decide([0, 0, 10_000], 0, false).thresholds, [1, 1, 100]);
        let mut g = Guard::new(
            GuardConfig { min: [0, 0, 0], confirm: 1, allow_disable: true, ..cfg() },
            [700, 10, 10],
            0,
        );
        assert_eq!(g.decide([0, 10, 10], 0, false).thresholds, [0, 10, 10]);
    }

    #[test]
    fn memory_ceiling_walks_back_to_the_original() {
        let mut g = Guard::new(GuardConfig { confirm: 1, ..cfg() }, [700, 10, 10], 100 << 20);
        assert!(g.decide([50_000, 10, 10], 100 << 20, false).change);
        let mut steps = Vec::new();
        for _ in 0..10 {
            let v = g.decide([50_000, 10, 10], 200 << 20, false);
            steps.push(v.thresholds[0]);
            if v.thresholds == [700, 10, 10] {
                break;
            }
        }
        assert_eq!(steps, [5916, 2035, 1194, 914, 800, 700]);
        assert!(!g.decide([50_000, 10, 10], 200 << 20, false).change, "no increase while over the ceiling");
        // Back under the ceiling, the model asks again: the thresholds that broke the budget
        // are not tried again.
        for _ in 0..10 {
            let v = g.decide([50_000, 10, 10], 100 << 20, false);
            assert_eq!(v.thresholds, [700, 10, 10], "{v:?}");
        }
    }

    #[test]
    fn the_applications_own_growth_never_raises_thresholds() {
        let mut g = Guard::new(GuardConfig { confirm: 1, cooldown: 0, ..cfg() }, [700, 10, 10], 100 << 20);
        assert!(g.decide([300, 10, 10], 100 << 20, false).change);
        // A leak: RSS over the ceiling with thresholds below the application's.
        for _ in 0..5 {
            let v = g.decide([300, 10, 10], 300 << 20, false);
            assert_eq!((v.change, v.thresholds), (false, [300, 10, 10]), "{v:?}");
            assert!(v.reason.contains("not neurogc's"), "{v:?}");
        }
    }

    #[test]
    fn an_idle_process_gets_no_change() {
        let mut g = Guard::new(GuardConfig { confirm: 1, cooldown: 0, ..cfg() }, [700, 10, 10], 100 << 20);
        for _ in 0..5 {
            let v = g.decide([50_000, 10, 10], 100 << 20, true);
            assert_eq!((v.change, v.thresholds), (false, [700, 10, 10]), "{v:?}");
        }
        assert!(g.decide([50_000, 10, 10], 100 << 20, false).change);
    }
}
