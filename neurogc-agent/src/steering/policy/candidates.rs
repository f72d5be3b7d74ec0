//! The settings the controller weighs each window: the one in force, the application's own,
//! the known-good recipes (freeze alone, freeze with a few threshold0 levels) and the grid's steps
//! around what is in force. Every one is within the user's bounds; a far one is a single jump when
//! the evidence says it is the best.
use super::{budgets::GuardConfig, predict::Candidate};

/// How far a grid step may move each threshold (a factor either way).
const STEP: [f64; 3] = [8.0, 5.0, 10.0];

/// Threshold values the grid steps through, beside the ones in force and the application's.
const GRID: [&[i64]; 3] =
    [&[700, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000], &[10, 20, 50], &[10, 20, 100]];

/// The threshold0 levels of the production recipe (`gc.freeze()` then a larger young
/// generation: Close.com's 50,000, Instagram's disabled collector at the far end), each with
/// the other two thresholds in force.
const RECIPE_T0: [i64; 4] = [5_000, 20_000, 50_000, 100_000];

/// What the controller may choose from.
pub struct Space<'a> {
    pub cfg: &'a GuardConfig,
    pub original: [i64; 3],
    pub here: Candidate,
    /// `gc.freeze()` can still be run (the actuator can, the application froze nothing, the user
    /// allows it and the heap has been watched long enough).
    pub may_freeze: bool,
    /// neurogc's freeze can be undone.
    pub may_unfreeze: bool,
}

/// Threshold `t` of generation `g`, within the user's bounds.
fn clamp(cfg: &GuardConfig, g: usize, t: i64) -> i64 {
    let least = if cfg.allow_disable { 0 } else { 1 };
    t.clamp(cfg.min[g].max(least), cfg.max[g].max(cfg.min[g]).max(least))
}

/// Thresholds `t`, each within the user's bounds.
fn within(cfg: &GuardConfig, t: [i64; 3]) -> [i64; 3] {
    std::array::from_fn(|g| clamp(cfg, g, t[g]))
}

/// The application's own thresholds, within the user's bounds: the candidate a tie goes to.
pub fn own(cfg: &GuardConfig, original: [i64; 3]) -> [i64; 3] {
    within(cfg, original)
}

impl Space<'_> {
    fn clamp(&self, g: usize, t: i64) -> i64 {
        clamp(self.cfg, g, t)
    }

    fn within(&self, t: [i64; 3]) -> [i64; 3] {
        within(self.cfg, t)
    }

    /// The freeze states a candidate may have.
    fn freezes(&self) -> Vec<bool> {
        let mut f = vec![self.here.frozen];
        if self.here.frozen && self.may_unfreeze {
            f.push(false);
        }
        if !self.here.frozen && self.may_freeze {
            f.push(true);
        }
        f
    }

    /// Every candidate, the one in force first, no two alike.
    pub fn candidates(&self) -> Vec<Candidate> {
        let here = self.here;
        let mut out = vec![here];
        let mut push = |c: Candidate| {
            if !out.contains(&c) {
                out.push(c);
            }
        };
        let freezes = self.freezes();
        for &frozen in &freezes {
            push(Candidate { thresholds: own(self.cfg, self.original), frozen });
            push(Candidate { thresholds: here.thresholds, frozen });
            for t0 in RECIPE_T0 {
                let t = [t0, here.thresholds[1], here.thresholds[2]];
                push(Candidate { thresholds: self.within(t), frozen });
            }
        }
        let values = |g: usize| {
            let mut v: Vec<i64> = GRID[g]
                .iter()
                .copied()
                .chain([here.thresholds[g], self.original[g]])
                .map(|t| self.clamp(g, t))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (v0, v1, v2) = (values(0), values(1), values(2));
        for &t0 in &v0 {
            for &t1 in &v1 {
                for &t2 in &v2 {
                    let t = [t0, t1, t2];
                    let near = (0..3).all(|g| {
                        let (t, now) = (t[g] as f64, here.thresholds[g].max(1) as f64);
                        t <= now * STEP[g] && t >= now / STEP[g]
                    });
                    if near {
                        for &frozen in &freezes {
                            push(Candidate { thresholds: t, frozen });
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::policy::budgets::test_config;

    fn space(cfg: &GuardConfig, here: [i64; 3], may_freeze: bool) -> Vec<Candidate> {
        Space {
            cfg,
            original: [700, 10, 10],
            here: Candidate { thresholds: here, frozen: false },
            may_freeze,
            may_unfreeze: false,
        }
        .candidates()
    }

    #[test]
    fn the_recipes_are_always_among_the_candidates_however_far() {
        let cfg = test_config();
        let c = space(&cfg, [700, 10, 10], true);
        assert_eq!(c[0], Candidate { thresholds: [700, 10, 10], frozen: false });
        for t0 in RECIPE_T0 {
            assert!(c.contains(&Candidate { thresholds: [t0, 10, 10], frozen: true }), "{t0}");
        }
        assert!(c.contains(&Candidate { thresholds: [700, 10, 10], frozen: true }), "freeze alone");
        // A grid step is one step: 100,000 is reached by the recipe, not the grid's 20,000/10.
        assert!(!c.contains(&Candidate { thresholds: [20_000, 20, 10], frozen: false }));
        let mut seen = c.clone();
        seen.dedup();
        assert_eq!(seen.len(), c.len());
    }

    #[test]
    fn every_candidate_keeps_the_users_bounds_and_the_freeze_it_may() {
        let cfg = GuardConfig { min: [1_000, 10, 10], max: [20_000, 20, 20], ..test_config() };
        let c = space(&cfg, [700, 10, 10], false);
        assert!(c.iter().skip(1).all(|c| !c.frozen), "no freeze allowed");
        for k in c.iter().skip(1) {
            for g in 0..3 {
                assert!((cfg.min[g]..=cfg.max[g]).contains(&k.thresholds[g]), "{k}");
            }
        }
    }
}
