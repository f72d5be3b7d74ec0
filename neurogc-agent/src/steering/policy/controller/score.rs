//! How each candidate is estimated each window: its prediction (the analytic model's,
//! corrected by the learned model as far as that has come true here), its cost per unit of work
//! with its uncertainty, its pauses over the budget and the wait they add at p99, its memory:
//! the objective that `choose` ranks.
use super::*;
use crate::steering::policy::evidence::Measured;

/// How much a change must save (ln cost) to be worth its transition: a window that mixes two
/// settings, and the risk of a prediction that does not hold.
const CHANGE_COST: f64 = 0.01;
/// An unfreeze puts the whole heap back into full collections, and neurogc cannot freeze again.
const UNFREEZE_COST: f64 = 0.05;
/// The model's error on how a setting's cost differs from the one in force: a share of the
/// predicted difference (before the process shows its own: `ModelError`), and a floor.
pub(super) const MODEL_ERROR: f64 = 0.3;
const MODEL_FLOOR: f64 = 0.02;
/// How sure the prior is that the application's own cost per allocation does not grow with
/// ln(threshold0) (one standard deviation): a larger young generation touches more memory
/// between collections, and the process shows by how much once one is tried.
const PRIOR_SLOWDOWN_SD: f64 = 0.15;
/// Windows of evidence the predicted share of windows over the pause budget counts as.
const PAUSE_PRIOR_WINDOWS: f64 = 10.0;
/// Windows of evidence what the other settings measured counts as, at most.
const POOL_WINDOWS: f64 = 5.0;
/// The weight of pauses and of memory in the cost, among settings that hold every budget
/// (ln-cost units per budget multiple of the windows over it and of the wait at p99, per share
/// of RSS). The wait counts below the budget too: two settings whose pauses all fit it still
/// differ in what a service's requests wait (the cache service's p99: 3.5 ms frozen at 700,
/// 9.9 ms frozen at 20,000), and a wait of a tenth of the budget is worth 5% of the CPU to a
/// process that is idle most of the time (less as it has less idle time: `score_all`).
const PAUSE_WEIGHT: f64 = 0.5;
const MEMORY_WEIGHT: f64 = 0.02;

/// A candidate's prediction, with what the learned model added to its GC share.
#[derive(Debug, Clone, Copy)]
pub(super) struct Estimate {
    pub(super) p: Prediction,
    pub(super) analytic_share: f64,
    /// The learned correction of the GC share relative to the setting in force (ln, unweighted;
    /// NaN where the model was not asked: it carries no weight yet).
    pub(super) learned: f64,
    /// The learned corrections as applied to the prediction: weighed by `Trust`, within the
    /// bound (ln; 0 where the model was not asked). What the decision record says it moved.
    pub(super) applied: Correction,
    /// The candidate's features: what the model is asked about it.
    pub(super) row: [f32; FEATURE_COUNT],
}

/// One candidate, estimated and held against the budgets.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scored {
    pub(super) c: Candidate,
    /// Freeze after a full collection of neurogc's own (freezes only).
    pub(super) collect: bool,
    /// And collect right after the freeze (`Scored::resets`).
    pub(super) reset: bool,
    pub(super) p: Prediction,
    /// ln(CPU ns per allocation): the estimate and its standard deviation.
    pub(super) ln_cost: f64,
    pub(super) sd: f64,
    /// Collections measured at this setting (0: predicted only).
    pub(super) measured: u64,
    /// The model's own chance of a window over the pause budget here (before the evidence).
    pub(super) q_model: f64,
    /// The analytic model's GC share here, and the learned model's correction of it (ln,
    /// before `Trust`'s weight): what a move here will check.
    pub(super) analytic_share: f64,
    pub(super) learned: f64,
    /// The learned corrections applied here (`Estimate::applied`).
    pub(super) applied: Correction,
    pub(super) row: [f32; FEATURE_COUNT],
    pub(super) misses: Misses,
    /// ln cost (weighed by the share of time the process is busy) plus the weight of pauses
    /// over the budget and of the wait at p99, memory and the change itself.
    pub(super) objective: f64,
    /// What a request waits at p99 behind collections, as far as the process is idle (ns).
    pub(super) wait_ns: f64,
    /// The longest pause over the pause budget here (`PauseOdds::longest_ns`; 0 where none is
    /// over it).
    pub(super) longest_ns: f64,
    /// The pause budget's miss by the setting in force's due full collection, where counted
    /// (`Controller::due_miss`): what the decision names it by.
    pub(super) due_miss: f64,
}

impl Scored {
    /// Whether a freeze predicted as `p` is to collect right after itself (the guard's
    /// freeze(reset), python-hook/neurogc_hook.py): where the first full collection after it, a
    /// one-off (`first_ns`, due in `due` s) that walks all that a quarter of the frozen count
    /// takes to be promoted, is over the pause budget within the model's horizon, and the frozen
    /// setting's later full collections, which the collection brings on at once, are within it.
    /// That collection walks next to nothing, starts the old generation's counters again from
    /// the unfrozen heap, and the one-off never comes: the demo service frozen in-process 5 s
    /// in paid 38-98 ms for it, inside the measured part (p99 4.8-15 ms), and 7-10 ms at most
    /// with the collection after (p99 3.5-4.6 ms), 43 full collections against 38-43. Not made
    /// where either condition fails: it would only bring small full collections on earlier
    /// (evaluation draws whose one-off never came ran 21 and 1,263 of them in 20 s where the
    /// recipe ran none).
    /// The memory the freeze is priced at stays the one-off's (garbage waits for that
    /// collection): an upper bound, as the collection after frees what waits sooner.
    pub(super) fn resets(first_ns: f64, p: &Prediction, due: Option<f64>, budget_ns: Option<f64>) -> bool {
        let Some(budget) = budget_ns else { return false };
        first_ns > budget && p.pause_ns[2] <= budget && due.is_some_and(|due| due <= HORIZON_S)
    }
}

/// A setting measured, as a candidate's estimate may start from it.
pub(super) struct Anchor {
    c: Candidate,
    /// Its prediction now.
    p: Prediction,
    cost: Measured,
    /// Its GC share, where two windows or more measured it.
    share: Option<f64>,
}

/// A setting's share of windows over the pause budget, estimated.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PauseOdds {
    /// The share, model and measurements together, and its standard deviation.
    pub(super) share: f64,
    pub(super) sd: f64,
    /// The pause a window over the budget holds on average, predicted
    /// (`Prediction::windows_over`), or the longest measured there where that is longer (ns).
    pub(super) over_ns: f64,
    /// The longest pause over the budget, predicted or measured (ns).
    pub(super) longest_ns: f64,
    /// The model's own share, before any evidence.
    pub(super) model_share: f64,
}

/// Whether `a` and `b` have the same young generations (threshold0 and threshold1).
fn same_young(a: &Candidate, b: &Candidate) -> bool {
    a.thresholds[..2] == b.thresholds[..2]
}

/// What `c`'s young generations hold before a gen1 round: threshold0 × (threshold1 + 1).
fn young_size(c: &Candidate) -> i64 {
    c.thresholds[0].max(1) * (c.thresholds[1].max(0) + 1)
}

/// Net allocations between full collections at `c`'s thresholds, past CPython's gate:
/// threshold0 × (threshold1 + 1) × (threshold2 + 1).
pub(super) fn full_cycle(c: &Candidate) -> i64 {
    young_size(c) * (c.thresholds[2].max(0) + 1)
}

impl Controller {
    /// What `c` keeps of a structure the heap replaces whole (`Replacement`), a copy for each
    /// way it keeps one, for they add up: a freeze keeps the copy it froze live once that is
    /// replaced; made at once (`at_once`) while a rise waits for a full collection to tell what
    /// it was, it also keeps the copy that rise may have replaced, dead and not collected yet;
    /// and thresholds that put off the full collection that frees a replaced copy keep that
    /// one until it comes. Counted as one copy for all three, seed-57 draw 1033 (an 11 MiB
    /// catalog rebuilt every 6.9 s by a builder thread, 16 MiB allowed) was frozen at once the
    /// window after a rebuild, at thresholds that put full collections off: by the second
    /// rebuild after it RSS held four copies (57 MiB, 1.61x its own), and the undo paid a
    /// 163 ms collection of the thawed heap against the defaults' longest pause of 87 ms.
    /// Where the application's own full collection was seen to find a replaced copy dead, a
    /// freeze keeps the next copy's worth too, at any thresholds: the application builds each
    /// copy in the space the one before last left, and the copy a freeze keeps holds that
    /// space. Evaluation draw 1553 (a 13 MiB catalog rebuilt every 5.5 s by a builder thread,
    /// 16 MiB allowed), frozen at its own thresholds on a price of one copy, peaked 16-23 MiB
    /// over the defaults' peak at the second rebuild after the freeze in four runs (1.25-1.75
    /// copies); undone at the first for that (`grown_by_next_copy`), the thawed heap's
    /// collection took 66 ms against the defaults' longest 27 ms.
    pub(super) fn replaced_kept(&self, c: &Candidate, at_once: bool) -> f64 {
        let dead_frozen = c.frozen && at_once && self.replacement.unresolved() > 0.0;
        let next = self.puts_full_off(c) || (c.frozen && self.replacement.seen());
        let copies = [c.frozen, dead_frozen, next].into_iter().filter(|k| *k).count();
        copies as f64 * self.replacement.held()
    }

    /// `c` lets more net allocations pass between full collections than the application's
    /// own thresholds do.
    pub(super) fn puts_full_off(&self, c: &Candidate) -> bool {
        full_cycle(c) > full_cycle(&self.own_unfrozen())
    }

    /// Every candidate's prediction: the analytic model's, corrected by the learned model in one
    /// call. The first candidate is the setting in force, which the online correction already
    /// fits to what this process measures: the learned model corrects how each other candidate
    /// differs from it (its output for a candidate, less its output for the setting in force).
    /// The corrections are weighed by how far they have come true for this process (`Trust`);
    /// while that weight is 0 the model is not asked here, and the move's trial asks it after the
    /// decision (`learn_trial`), off the decision's path.
    pub(super) fn predict_all(&self, cands: &[Candidate], learned: Learned) -> Vec<Estimate> {
        let raw: Vec<Prediction> = cands.iter().map(|c| self.collector.predict(c, self.frozen)).collect();
        let rows: Vec<[f32; FEATURE_COUNT]> =
            cands.iter().zip(&raw).map(|(c, p)| self.collector.features(c, self.frozen, p)).collect();
        let w = self.trust.weight();
        let k = if w > 0.0 { learned(&rows) } else { Vec::new() };
        let not_asked = if w > 0.0 { 0.0 } else { f64::NAN };
        let alone = |(p, row): (Prediction, &[f32; FEATURE_COUNT])| Estimate {
            p,
            analytic_share: p.share,
            learned: not_asked,
            applied: [0.0; 4],
            row: *row,
        };
        let Some(here) = k.first().filter(|_| k.len() == raw.len()).copied() else {
            return raw.into_iter().zip(&rows).map(alone).collect();
        };
        raw.into_iter()
            .zip(&k)
            .zip(&rows)
            .map(|((p, k), row)| {
                let applied: Correction = std::array::from_fn(|i| {
                    ((k[i] - here[i]) * w as f32).clamp(-MAX_CORRECTION, MAX_CORRECTION)
                });
                Estimate {
                    p: p.corrected(&applied),
                    analytic_share: p.share,
                    learned: f64::from(k[0] - here[0]),
                    applied,
                    row: *row,
                }
            })
            .collect()
    }

    /// Asks the learned model about the last move, where deciding did not (its weight was 0):
    /// what it would have corrected is what the move's first clean window checks. Called after
    /// the decision is out, so the model's call is not on its path.
    pub fn learn_trial(&mut self, learned: Learned) {
        let (Some(rows), Some(trial)) = (self.trial_rows.take(), self.trial.as_mut()) else { return };
        if let [from, to] = learned(&rows)[..] {
            trial.learned = f64::from(to[0] - from[0]);
        }
    }

    /// How the application's own cost per allocation grows with ln(threshold0), as the settings
    /// measured so far show it (weighted least squares, shrunk towards no growth).
    pub(super) fn slowdown(&self) -> f64 {
        let var = self.evidence.round_variance();
        let points: Vec<(f64, f64, f64)> = self
            .evidence
            .all()
            .filter_map(|(c, s)| {
                let (m, rounds) = s.mutator()?;
                Some(((c.thresholds[0].max(1) as f64).ln(), m, rounds / var))
            })
            .collect();
        let w: f64 = points.iter().map(|p| p.2).sum();
        let prior = 1.0 / (PRIOR_SLOWDOWN_SD * PRIOR_SLOWDOWN_SD);
        if w <= 0.0 {
            return 0.0;
        }
        let (mx, my) = points.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 * p.2 / w, y + p.1 * p.2 / w));
        let sxx: f64 = points.iter().map(|p| p.2 * (p.0 - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| p.2 * (p.0 - mx) * (p.1 - my)).sum();
        (sxy / (sxx + prior)).clamp(-0.2, 0.5)
    }

    /// The process's work per second (as `Reading::work_per_s` counts it), from the collector's
    /// smoothed allocation rate.
    pub(super) fn work_per_s(&self) -> f64 {
        (self.collector.alloc_per_s() * self.work_per_alloc).max(1.0)
    }

    /// The settings measured so far, other than the one in force, each with its prediction and
    /// its evidence: where the estimate of a candidate with the same young generations may start
    /// from (`cost`, `share_estimate`).
    pub(super) fn anchors(&self) -> Vec<Anchor> {
        let here = self.in_force();
        self.evidence
            .all()
            .filter(|(k, _)| *k != here)
            .filter_map(|(k, s)| {
                Some(Anchor {
                    c: *k,
                    p: self.collector.predict(k, self.frozen),
                    cost: self.evidence.cost(k)?,
                    share: s.gc_share().filter(|_| s.windows() >= 2.0),
                })
            })
            .collect()
    }

    /// A candidate's ln cost and its standard deviation: the prior carried over from the setting
    /// in force, or from one measured with the candidate's young generations (threshold0 and
    /// threshold1) where that is surer, weighed with what the candidate itself measured.
    ///
    /// Between settings whose young rounds are the same, the model's difference is the full
    /// collections and the freeze, which it reads from the counters; its young rounds are where
    /// it errs. Carried over from the setting in force alone, an evaluation draw (a closed loop at
    /// 45% GC, its young rounds at 700 walking twice what the count sees) stayed frozen at
    /// 10,000/10/10 at 56%: the model counts rounds from the allocations counted in force, put
    /// 700/10/10 frozen's at twice as many as 700/10/10 had measured unfrozen, and no setting
    /// was credibly cheaper. Any measured setting nearest in the model's own terms was tried
    /// and dropped: the model's gap is what it gets wrong, and from the application's own
    /// 700/10/10 it put a slowing application's 5,000/50/10 under it, and tried it.
    pub(super) fn cost(
        &self,
        c: &Candidate,
        p: &Prediction,
        here_p: &Prediction,
        slope: f64,
        anchors: &[Anchor],
    ) -> (f64, f64, u64) {
        let here = self.in_force();
        let measured = self.evidence.cost(c);
        let collections = self.evidence.get(c).map_or(0, |s| s.collections);
        let Some(anchor) = self.evidence.cost(&here) else {
            // Nothing measured in force yet: the predicted GC time alone tells settings apart.
            let work = self.work_per_s();
            return ((p.share * 1e9 / work + 1.0).ln(), 1.0, collections);
        };
        if *c == here {
            return (anchor.ln_cost, anchor.se, collections);
        }
        let work = self.work_per_s();
        let gc = |p: &Prediction| p.share * 1e9 / work;
        // The prior from a setting `k` measured at `m`, predicted `pk`.
        let from = |m: Measured, k: &Candidate, pk: &Prediction| {
            let cost_k = m.ln_cost.exp();
            let mutator_k = (cost_k - gc(pk)).max(0.1 * cost_k);
            let d_t0 = (c.thresholds[0].max(1) as f64 / k.thresholds[0].max(1) as f64).ln();
            // A saving in collections counts as far as the savings predicted here came true.
            let saved = gc(pk) - gc(p);
            let saved = if saved > 0.0 { saved * self.model_error.came_true() } else { saved };
            let prior = (cost_k - saved + mutator_k * ((slope * d_t0).exp() - 1.0)).max(0.05 * cost_k).ln();
            // The slowdown's own uncertainty is not counted against a move: it is what trying a
            // setting teaches (one far setting measured fits the slope for all the others).
            let model = model_sd(self.model_error.share(), prior - m.ln_cost);
            (prior, (m.se.powi(2) + model.powi(2)).sqrt())
        };
        let (prior, prior_sd) = anchors
            .iter()
            .filter(|a| a.c != *c && same_young(&a.c, c))
            .map(|a| from(a.cost, &a.c, &a.p))
            .fold(from(anchor, &here, here_p), |best, alt| if alt.1 < best.1 { alt } else { best });
        match measured {
            Some(m) => {
                let (mean, sd) = weigh((prior, prior_sd), (m.ln_cost, m.se));
                (mean, sd, collections)
            }
            None => (prior, prior_sd, collections),
        }
    }

    /// A GC share not measured at `c`, bounded pessimistically (`pessimistic_share`), or, for
    /// the advice standing (`standing`), optimistically: carried over by the model from the
    /// setting in force, or, where that has other young generations, from one measured with
    /// `c`'s (as its cost, `cost`).
    pub(super) fn share_estimate(
        &self,
        c: &Candidate,
        p: &Prediction,
        here_p: &Prediction,
        anchors: &[Anchor],
        standing: bool,
    ) -> f64 {
        let bound = if standing { optimistic_share } else { pessimistic_share };
        let from_here = same_young(&self.in_force(), c);
        anchors
            .iter()
            .filter(|a| !from_here && same_young(&a.c, c) && a.p.share > 0.0)
            .find_map(|a| Some((a.share?, a.p.share)))
            .map_or_else(|| bound(p.share, here_p.share), |(m, pk)| bound(m * p.share / pk, m))
    }

    /// The share of windows over the pause budget at `c`. The model's chance, scaled by how far
    /// off its chances have been for this process, counts as a few windows of evidence beside
    /// what was measured at `c`.
    pub(super) fn pauses_over(&self, c: &Candidate, p: &Prediction) -> PauseOdds {
        let Some(budget) = self.budgets.pause_ns() else { return PauseOdds::default() };
        let predicted = p.windows_over(budget, self.budgets.window_s());
        let model_share = predicted.share;
        // The model's chance, scaled by how far off its chances have been, shrunk towards what
        // the settings below this one measured.
        let model = (model_share * self.evidence.over_calibration(c.frozen)).min(1.0);
        let (pooled, pooled_windows) = self.evidence.over_below(c);
        let pool = pooled_windows.min(POOL_WINDOWS);
        let q = (model * PAUSE_PRIOR_WINDOWS + pooled * pool) / (PAUSE_PRIOR_WINDOWS + pool);
        let stats = self.evidence.get(c);
        let (over, windows) = stats.map_or((0.0, 0.0), |s| s.over_budget());
        // The longest pause measured counts only where some window went over the budget.
        let measured_worst =
            stats.filter(|_| over > 0.0).and_then(|s| s.pause_max_ms()).map_or(0.0, |ms| ms * 1e6);
        let n = PAUSE_PRIOR_WINDOWS + windows;
        let share = (q * PAUSE_PRIOR_WINDOWS + over) / n;
        PauseOdds {
            share,
            sd: (share * (1.0 - share) / (n + 1.0)).sqrt(),
            over_ns: predicted.pause_ns.max(measured_worst),
            longest_ns: predicted.longest_ns.max(measured_worst),
            model_share,
        }
    }

    /// The pause budget's miss by the full collection of the unfrozen heap that the counts put
    /// within the horizon at the setting in force (`p`, unfrozen): one window in the horizon,
    /// counted as the budgets its pause spans (`Budgets::pause_once_miss`). Counted as a share
    /// of windows, a long one that is rare holds the budget (a 614 ms one every 3 minutes is
    /// 0.6% of windows), and no few windows can show it; yet the counts that say it is coming
    /// are read, not guessed. It is every unfrozen setting's miss (`score_all`): only a freeze
    /// spares the process it. Thresholds put it off only in the model, whose objects promoted
    /// come with gen1 rounds, where a heap's own growth comes whatever their cadence: judged
    /// each on its own counts, evaluation draw 1832 (a 608k-tuple heap still growing, 50
    /// requests a second) moved to 50,000/50/100 to put its 113 ms one past the horizon, and
    /// its young rounds there tripled its p99. Offered only where a freeze is: where none is,
    /// every setting has it coming, and it tells them apart by nothing. Evaluation draw 1193's
    /// cache (1.37M objects) stayed at 5,000/50/100, "budgets hold", until its own 401 ms full
    /// collection came 17 s after attach: its p99.
    pub(super) fn due_miss(&self, p: &Prediction) -> f64 {
        match p.next_full_s {
            Some(due) if due <= HORIZON_S => self.budgets.pause_once_miss(p.pause_ns[2]),
            _ => 0.0,
        }
    }

    /// Whether a move to thresholds predicted `p` would itself run a full collection longer than
    /// the application's own collections paused it (`own_longest_ns`): the counts are already
    /// past them (the next full collection due within a window), where at the setting in force
    /// (`now`) none is. Such a collection is neurogc's, as the one before a freeze is, and
    /// neurogc pauses the application no longer than its own collections do. The one-off is
    /// priced otherwise as one window in the horizon, which a few windows' cheaper young rounds
    /// outweigh: tuning draw 739 (a 1.7M-list heap still growing, frozen with 77 gen1 rounds
    /// counted since its last full collection) moved from 20,000/10/100 to 100,000/50/10 for its
    /// 12 ms gen1 rounds, and paused 162 ms at once (the application's own longest measured
    /// 248 ms, the model's first full collection after the freeze 503); evaluation draw 1609,
    /// moved to threshold2 10 with 21 counted, paused 366 ms at once. A move back to the
    /// application's own thresholds is never barred: what they run is its own.
    pub(super) fn runs_a_full(&self, p: &Prediction, now: &Prediction) -> bool {
        let window = self.budgets.window_s();
        let at_once = |p: &Prediction| p.next_full_s.is_some_and(|due| due <= window);
        let pause = if p.first_full_ns > 0.0 { p.first_full_ns } else { p.pause_ns[2] };
        at_once(p) && !at_once(now) && pause > self.own_longest_ns
    }

    /// How far `c`'s young generations are from the nearest measured (|ln ratio| of
    /// `young_size`; 0 where nothing has been).
    pub(super) fn young_extrapolation(&self, c: &Candidate) -> f64 {
        self.evidence
            .all()
            .map(|(k, _)| (young_size(c) as f64 / young_size(k) as f64).ln().abs())
            .min_by(f64::total_cmp)
            .unwrap_or(0.0)
    }

    /// Whether `c`'s young generations are larger than those of every setting measured (all of
    /// them where none is).
    pub(super) fn young_beyond_measured(&self, c: &Candidate) -> bool {
        self.evidence.all().all(|(k, _)| young_size(c) > young_size(k))
    }

    /// Every candidate, with and without neurogc's collection for a freeze, estimated.
    /// `retained`: what RSS holds of what neurogc's settings kept before, past what the setting
    /// in force keeps (bytes): spent, for any other setting of neurogc's.
    pub(super) fn score_all(
        &self,
        learned: Learned,
        r: &Reading,
        app_rss: f64,
        retained: f64,
    ) -> Vec<Scored> {
        let here = self.in_force();
        let space = Space {
            cfg: self.cfg(),
            original: self.original,
            here,
            may_freeze: self.may_freeze(r),
            may_unfreeze: self.frozen,
        };
        let cands = space.candidates();
        let preds = self.predict_all(&cands, learned);
        let slope = self.slowdown();
        let anchors = self.anchors();
        let budget_ns = self.budgets.pause_ns();
        let idle = self.collector.idle_share();
        // What a saving of CPU is worth: the share of the time the process is busy. One that
        // always has work turns it into throughput; one idle most of the time (a service
        // between requests) gains nothing a user sees from it, and pays for a larger young
        // generation in what its requests wait (`wait` below). Weighed as if always busy, draw
        // 1635 of the generator (50 requests a second, 2% of a CPU) went from 700/10/10 to
        // 5,000/10/100 for 0.80x the cost, its requests' wait at p99 predicted 1.8 -> 4.0 ms,
        // and took 1.47x the defaults' p99; draw 1466 moved between 2,000/50/10 and 700/10/10
        // frozen for the CPU, at 1.14x. Weighed by what they are busy for: 0.95x and 0.48x.
        let busy = (1.0 - idle).clamp(0.0, 1.0);
        let runs_per_s = self.collector.runs_per_s();
        let spread = self.collector.rate_spread_ln();
        let wait_here = idle * preds[0].p.wait_p99_within_ns(runs_per_s, spread);
        let young_now =
            if r.thresholds == Some(self.current) && !r.idle { r.young_pause_max_ns() } else { 0.0 };
        // In act mode neurogc runs no collection of its own: a freeze follows the application's
        // next full collection (`Deferred`), and keeps only what came since. Where none is due
        // soon at the setting in force, it freezes now and keeps the garbage pending since the
        // last one, which the model counts as memory; so too where a deferred freeze waited in
        // vain.
        let deferral = self.deferral(&preds[0].p);
        let own = self.own_unfrozen();
        let own_thresholds = own.thresholds;
        // What RSS has grown at thresholds of neurogc's, and where it grew, what it rose by in
        // a window there, which one entered adds before its own growth is measured (the
        // setting in force is judged likewise, `grown_here`): a setting left as RSS grows
        // towards the allowance is left for the application's own, not for another that keeps
        // as much.
        let grown_now = match self.grown_at_neurogcs(r) {
            g if g > 0.0 => g + self.rise_at_neurogcs,
            _ => 0.0,
        };
        let freeze_offered = !here.frozen && cands.iter().any(|c| c.frozen);
        let due = if freeze_offered { self.due_miss(&preds[0].p) } else { 0.0 };
        let mut out: Vec<Scored> = Vec::new();
        for (c, e) in cands.iter().zip(&preds) {
            let p = &e.p;
            if *c != here && c.thresholds != own_thresholds && self.runs_a_full(p, &preds[0].p) {
                continue;
            }
            // No setting that puts full collections off further is entered while RSS steps up
            // (`mid_step`), as no freeze is: what it keeps of the structure being replaced
            // cannot be priced before the step ends. Seed-103 draw 1528 at half speed (a
            // catalog rebuilt by a builder thread) moved 700/10/10 -> 5,000/50/10 in the window
            // RSS stepped with a rebuilt catalog, a full collection every 128 s priced at that
            // step; the next rebuild took RSS 24 MiB up in one window, 91 MiB against an 83 MiB
            // bound. Moves that bring full collections closer, and undoes, stay open.
            if *c != here && self.mid_step() && full_cycle(c) > full_cycle(&here) {
                continue;
            }
            let (ln_cost, sd, measured) = self.cost(c, p, &preds[0].p, slope, &anchors);
            let freezing = c.frozen && !here.frozen;
            // The advice standing (advise mode): to the advice what the setting in force is to act.
            let advised = !self.act && self.advised == Some(*c);
            // Advice is a freeze the user makes once, at the end of start-up: a collection
            // first costs the service nothing there and keeps no garbage frozen, so advice
            // always collects first. Weighed window by window against freezing without it
            // (whether a full collection is due anyway turns with the sampled pending count),
            // the demo's advice turned over ten times in a minute.
            let collects: &[bool] = match (freezing, self.act, deferral) {
                (false, ..) => &[false],
                (true, true, Deferral::Either(_)) => &[false, true],
                (true, true, Deferral::Never) => &[false],
                (true, false, _) => &[true],
            };
            for collect in collects {
                let mut p = *p;
                // A setting not measured yet is entered on its memory bounded pessimistically,
                // as its cost is: the model's bytes per object are an average over what it has
                // seen (a far jump on the training benchmark kept 24 MiB where 19 were allowed),
                // and the further the young generations' size is from every one measured, the
                // less that average says (micrograd's 50,000/20/10 frozen, predicted +18 MiB
                // from 5,000/20/10, took RSS from 128 to 196 MiB, and RSS stays up after the
                // move back). Beyond every young generation measured, nor below the bound at which
                // rarer rounds promote no less garbage (`Prediction::memory_upper_bytes`); a
                // smaller one's garbage waits no longer than at a setting measured.
                // Its young pauses likewise: the cost per object walked is measured at the
                // young generations tried, and grows with their size by as much as the process
                // keeps alive in them (the demo's gen0 and gen1 rounds, predicted at 7.2 ms
                // frozen at 20,000/10/10 from 700/10/10, measured 15 to 60 ms, and the service
                // paid for each such trial at its p99).
                if measured == 0 && *c != here {
                    let far = self.young_extrapolation(c);
                    p.memory_bytes *= 1.0 + MODEL_ERROR * (1.0 + far);
                    if self.young_beyond_measured(c) {
                        p.memory_bytes = p.memory_bytes.max(p.memory_upper_bytes);
                    }
                    // Beyond every threshold0 measured, no shorter than at the cost per object
                    // real heaps were seen to reach there (`Collector::young_cost_bound`): the
                    // model's error was a factor of 2.5-4 on far steps up, not 1.7-2.5.
                    let bound = self.collector.young_cost_bound(c.thresholds[0] as f64);
                    for g in 0..2 {
                        p.pause_ns[g] *= (1.0 + MODEL_ERROR * far).max(bound);
                    }
                    // And no shorter than a smaller young generation measured, this window's
                    // included (a window that held neurogc's freeze is not evidence, yet its
                    // young rounds are): the demo, frozen at 5,000/10/10 and its gen1 rounds at
                    // 12 ms, moved to 20,000/10/10 predicted at 7.1 ms, and measured 30.
                    let g = if p.rate[1] > 0.0 { 1 } else { 0 };
                    let floor = self.evidence.young_pause_below(c).max(if below_young(&here, c) {
                        young_now
                    } else {
                        0.0
                    });
                    p.pause_ns[g] = p.pause_ns[g].max(floor);
                }
                // A deferred freeze's one-off is the one after the application's collection.
                let reset = self.act
                    && freezing
                    && match (*collect, p.next_full_s) {
                        (false, due) => Scored::resets(p.first_full_ns, &p, due, budget_ns),
                        (true, wait) => self.collector.first_full_after_own(c).is_some_and(|(ns, due)| {
                            Scored::resets(ns, &p, wait.map(|w| w + due), budget_ns)
                        }),
                    };
                if reset {
                    p.first_full_ns = 0.0;
                }
                // The full collection a deferred freeze waits for is the application's own at
                // the setting in force: a pause the freeze pays to land, one window in the
                // horizon (as the first full collection after a freeze is). Where a freeze made at
                // once holds the memory budget, it spares the process that pause: tuning draw 62
                // (4.3M objects) was due a 1.4 s full collection 10 s after attach, and frozen at
                // once paid 21 MiB of pending garbage for never having it.
                if freezing && *collect && self.act {
                    p.first_full_ns = p.first_full_ns.max(preds[0].p.pause_ns[2]);
                }
                let odds = self.pauses_over(c, &p);
                let (share, over_ns, longest_ns) = (odds.share, odds.over_ns, odds.longest_ns);
                // A setting is left only where its pause budget is credibly missed (one standard
                // deviation); another is entered on its estimate. (Ten windows cannot show a 1%
                // share: an upper bound would bar every setting with any chance of a long pause.)
                let over = if *c == here { (share - odds.sd).max(0.0) } else { share };
                if freezing && !collect {
                    p.memory_bytes += self.collector.frozen_pending_bytes();
                }
                // What RSS rose by in this window may be a replacement in the making (a catalog
                // rebuilt while the old one serves): frozen now, what it replaces is kept. A
                // tuning draw, frozen in the window its RSS rose from 190 to 255 MiB, grew to
                // 563 MiB by its next rebuild (1.34x the defaults' peak). A freeze waits for a
                // window in which less arrived than it may keep.
                if freezing {
                    p.memory_bytes = p.memory_bytes.max(self.rss_rise);
                }
                // What RSS measured growing while it, or a setting below it, was in force,
                // where that was more.
                p.memory_bytes = p.memory_bytes.max(self.evidence.grown_below(c));
                // Thresholds of neurogc's are judged, once in force, on what RSS has grown since
                // growth began to be measured as theirs (`grown_here`): what it has grown so far
                // is theirs from the first window. Entered on the model's figure alone, a heap
                // whose RSS had grown past the allowance (the unit test `rss_grown_past_the_
                // allowance_at_neurogcs_thresholds_bars_every_one_of_them`) walked down five
                // settings, each left a window after it was entered. So is a freeze made now:
                // it keeps for ever the old objects that die, of which growth where full
                // collections were put off is made (an evaluation draw's catalog, rebuilt every
                // 3.3 s, left 5000/50/20 for memory at 45 MiB and was frozen at 2000/50/100,
                // predicted to miss less; each copy stayed, to 61 MiB, 2.1x its own RSS).
                if (!c.frozen && c.thresholds != own_thresholds) || freezing {
                    p.memory_bytes = p.memory_bytes.max(grown_now);
                }
                p.memory_bytes = p.memory_bytes.max(self.replaced_kept(c, freezing && !collect));
                // A move is judged on what RSS holds of neurogc's already, on top of what it
                // keeps: the allocator seldom reuses those pages for another setting's garbage.
                // Evaluation draw 1820 at half speed (a closed-loop service, its garbage dicts
                // untracked) left 1000/50/100 frozen for memory at 54 MiB, 19 over its own; RSS
                // stood there, and 2000/10/100, predicted to keep 10 MiB, took it to 62.5 MiB.
                let judged = if *c != here && *c != own {
                    Prediction { memory_bytes: p.memory_bytes + retained, ..p }
                } else {
                    p
                };
                let mut misses = self.budgets.misses(&judged, app_rss);
                misses.pause = self.budgets.pause_miss(over, over_ns);
                if !c.frozen {
                    misses.pause = misses.pause.max(due);
                }
                // The GC share is judged as pauses are, both ways: the setting in force is left
                // only where it credibly misses (one standard error over the windows there; a
                // window holding a full collection can read 100%), another entered only where it
                // credibly holds: measured, one standard error under; predicted, with the
                // model's error on how it differs from the setting in force (as its cost). On
                // its prediction alone, the ETL batch at half speed left 700/10/10 frozen, a
                // hair over a budget read from one window, for whichever setting the model put a
                // hair under, a dozen times a run, each measured worse.
                let stats = self.evidence.get(c).filter(|s| s.windows() >= 2.0);
                if let Some(stats) = stats
                    && let Some(mean) = stats.gc_share()
                {
                    let se = stats.gc_share_se().unwrap_or(0.0);
                    misses.share = self.budgets.share_miss(if *c == here { mean - se } else { mean + se });
                } else if *c == here {
                    // One window is no evidence either way: the estimate it was entered on stands.
                    misses.share = 0.0;
                } else {
                    // The advice standing is to advise mode what the setting in force is to act:
                    // left only where it credibly misses. Nothing measures advice that is not
                    // applied, so each window predicts it afresh: held to the pessimistic bound,
                    // the demo's advice of 700/10/10 frozen read a hair over the GC share budget
                    // in one window of ten, and turned to 1,000/10/10 frozen and back each time
                    // (6-12 changes a minute, where 2 are the target).
                    misses.share =
                        self.budgets.share_miss(self.share_estimate(c, &p, &preds[0].p, &anchors, advised));
                }
                // The wait below the budget is what arrives while the process collects: it
                // counts as far as the process has idle time for work to arrive in. One that
                // always has work (its CPU time and its wait for a CPU fill the wall clock: a
                // batch job, a saturated service) pays its collections in throughput, which its
                // cost counts already. Counted twice, the ETL batch at half speed moved to
                // 2,000/10/10 at 1.13x the cost, for a wait that one window's gen1 rounds swung
                // by 4 ms, and took 1.30x the defaults' time.
                let wait = idle * p.wait_p99_within_ns(runs_per_s, spread);
                let pause_cost = budget_ns.map_or(0.0, |b| PAUSE_WEIGHT * (share * over_ns + wait) / b);
                // Advice stands until another is better by more than a change costs: the
                // application's setting stays in force, so without this every near tie between
                // two candidates would turn the advice over window by window.
                let change = if *c == here || advised {
                    0.0
                } else if here.frozen && !c.frozen {
                    UNFREEZE_COST
                } else {
                    CHANGE_COST
                };
                // The wait is the model's, uncertain as any predicted difference from the
                // setting in force: counted in how credibly one setting is cheaper than another.
                let wait_sd = budget_ns.map_or(0.0, |b| PAUSE_WEIGHT * model_sd_ns(wait - wait_here) / b);
                let sd = ((busy * sd).powi(2) + wait_sd.powi(2)).sqrt();
                let mut objective =
                    busy * ln_cost + pause_cost + MEMORY_WEIGHT * p.memory_bytes / app_rss.max(1.0) + change;
                // A freeze that waits for the application's full collection earns nothing until
                // it lands: over the model's horizon, the setting in force's objective for as
                // long as the wait. Against a freeze made at once, that is what the garbage it
                // would keep must outweigh.
                if let (true, true, Deferral::Either(due_s), Some(now)) =
                    (freezing, *collect, deferral, out.first())
                {
                    let waited = due_s.min(HORIZON_S) / HORIZON_S;
                    objective += waited * (now.objective - objective).max(0.0);
                }
                out.push(Scored {
                    c: *c,
                    collect: *collect,
                    reset,
                    p,
                    ln_cost,
                    sd,
                    measured,
                    q_model: odds.model_share,
                    analytic_share: e.analytic_share,
                    learned: e.learned,
                    applied: e.applied,
                    row: e.row,
                    misses,
                    objective,
                    wait_ns: wait,
                    longest_ns: if share > 0.0 { longest_ns } else { 0.0 },
                    due_miss: if c.frozen { 0.0 } else { due },
                });
            }
        }
        out
    }

    /// The setting in force is judged on its memory as measured, as its GC share is: what it
    /// keeps of RSS grown since neurogc changed something (`cost_now`: at most the model's
    /// figure, unless the growth is the setting's own, `Controller::grown_here`) against the
    /// allowance. Its prediction stood when it was entered; once in force,
    /// a prediction revised by a window's learning is no evidence that RSS grew: micrograd,
    /// moved to 2,000/20/10 frozen on a prediction that held, was predicted one window later
    /// to keep 21 MiB of 18.5 allowed (RSS had not grown at all) and was moved to 700/20/10
    /// frozen at 2.6x the cost. What a setting keeps fills within a few collections of it,
    /// and a frozen heap's slow growth is what lets an unfreeze go (`choose`).
    pub(super) fn measured_memory(&self, now: &mut Scored, cost_now: f64, app_rss: f64) {
        now.misses.memory = self.budgets.memory_miss(cost_now, app_rss);
    }
}

/// The model's error (one standard deviation, ln) on a quantity it predicts `ln_gap` away from
/// the setting in force's: a share of the gap (`error`: the prior, or `ModelError::share`),
/// and a floor.
fn model_sd(error: f64, ln_gap: f64) -> f64 {
    error * ln_gap.abs() + MODEL_FLOOR
}

/// The model's error on a wait it predicts `gap_ns` away from the setting in force's: a share of
/// the gap.
fn model_sd_ns(gap_ns: f64) -> f64 {
    MODEL_ERROR * gap_ns.abs()
}

/// A predicted GC share bounded pessimistically: raised by the model's error on how it differs
/// from the share predicted for the setting in force.
pub(super) fn pessimistic_share(share: f64, here: f64) -> f64 {
    (share * model_sd(MODEL_ERROR, share_gap(share, here)).exp()).min(1.0)
}

/// A predicted GC share bounded optimistically: lowered by the model's error, as
/// `pessimistic_share` raises it.
fn optimistic_share(share: f64, here: f64) -> f64 {
    share * (-model_sd(MODEL_ERROR, share_gap(share, here))).exp()
}

/// How far (ln) a predicted GC share is from the setting in force's.
fn share_gap(share: f64, here: f64) -> f64 {
    if share > 0.0 && here > 0.0 { (share / here).ln() } else { 0.0 }
}

/// The prior and a measurement of a setting's ln cost (each a mean and a standard deviation),
/// weighed by their certainty. A prior the measurement contradicts by more than both their
/// uncertainties is a model wrong about this process: it is widened by the excess, so the
/// measurement decides at once (a heavy-tailed prior). Held at its own width, the ETL batch's
/// 2,000/50/10 frozen, predicted at 0.83x the cost and measured at 1.4x, outweighed six windows
/// of measurement and was left only after nine.
pub(super) fn weigh(prior: (f64, f64), measured: (f64, f64)) -> (f64, f64) {
    let ((p, p_sd), (m, m_se)) = (prior, measured);
    let m_se = m_se.max(1e-6);
    let excess = ((p - m).abs() - (p_sd.powi(2) + m_se.powi(2)).sqrt()).max(0.0);
    let p_sd = (p_sd.powi(2) + excess.powi(2)).sqrt();
    let (wp, wm) = (1.0 / p_sd.powi(2), 1.0 / m_se.powi(2));
    ((p * wp + m * wm) / (wp + wm), (1.0 / (wp + wm)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::{pessimistic_share, weigh};

    #[test]
    fn a_predicted_gc_share_is_held_against_the_budget_with_the_model_error() {
        // The setting in force's own prediction: only the floor.
        assert!((pessimistic_share(0.2, 0.2) - 0.2 * 0.02f64.exp()).abs() < 1e-12);
        // A hair under a budget of 18.7% from 21.5% in force is not under it once bounded.
        assert!(pessimistic_share(0.183, 0.215) > 0.187);
        // A far saving still holds a budget well above it (2% predicted from 20%, a 5% budget).
        assert!(pessimistic_share(0.02, 0.20) < 0.05);
        assert_eq!(pessimistic_share(0.9, 0.01), 1.0);
    }

    #[test]
    fn a_measurement_the_prior_agrees_with_is_weighed_by_certainty() {
        // Within both uncertainties: the usual precision-weighted mean.
        let (mean, sd) = weigh((0.0, 0.1), (0.1, 0.1));
        assert!((mean - 0.05).abs() < 1e-9, "{mean}");
        assert!((sd - 0.1 / 2f64.sqrt()).abs() < 1e-9, "{sd}");
    }

    #[test]
    fn a_measurement_that_contradicts_the_prior_decides() {
        // Predicted 0.83x the cost (ln -0.19, sd 0.08), measured 1.4x (ln +0.34, se 0.1): held
        // at its own width the prior pulled the estimate below the setting it had left.
        let (mean, _) = weigh(((0.83f64).ln(), 0.08), ((1.4f64).ln(), 0.1));
        assert!(mean > 0.25, "the measurement decides: {mean}");
        // The same measurement after more windows lands closer still.
        let (later, _) = weigh(((0.83f64).ln(), 0.08), ((1.4f64).ln(), 0.03));
        assert!(later > mean && later > 0.32, "{later}");
    }
}
