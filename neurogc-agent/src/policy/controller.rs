//! The controller: every window it weighs every candidate setting (`candidates`) by what the
//! process pays per unit of work there — CPU seconds per net allocation (or per object its
//! collections freed, where the free lists hide allocations from the count:
//! `Reading::work_per_s`), the collector and the application's own slowdown together — under
//! the user's budgets, and moves only where the evidence says a setting is credibly better and
//! holds them.
//!
//! - **Evidence first.** A setting that has been in force is judged by what it measured
//!   (`evidence`: cost, pauses over the budget, GC share, RSS, with the work behind them). One not
//!   measured yet is predicted from the setting in force: the analytic model of the collector
//!   (corrected by the learned model) says how its time in collections differs, and the
//!   application's own cost per allocation is carried over, scaled by how it has been seen to grow
//!   with the young generation's size. The prior and the measurement are weighed by their
//!   certainty.
//! - **Budgets, pessimistically.** Pauses: the share of windows over the budget, measured at the
//!   setting and predicted, must stay under 1%. Memory: what neurogc's changes keep (deferred and
//!   frozen garbage), within the budget. The GC share: as the user set it, or no worse than at
//!   attach. Where the setting in force misses one, the controller moves to the cheapest setting
//!   that holds them all, else to one that misses less.
//! - **Credibly better.** Where every budget holds, it moves only to a setting whose cost is lower
//!   by more than the change costs and than the uncertainty of both: it stops on its own once no
//!   setting is credibly better, and measures again a setting whose evidence has faded when the
//!   model says it is worth it. Nothing is banned for the session.
//! - **A freeze, two ways.** After a full collection of neurogc's own (its pause counts against the
//!   pause budget like any other) or without one (the garbage promoted since the last full
//!   collection is frozen with the heap, counted as memory); the cheaper that holds the budgets.
//!
//! In advise mode nothing is applied: the setting in force stays the application's, and the
//! verdict carries what would be done and its predicted effect, never a measured one.
use neurogc_trace::{Check, Effect, Observed, Predicted};

use super::{
    budgets::{Budget, Budgets, GuardConfig, Misses},
    candidates::Space,
    evidence::{Evidence, Observation},
    predict::{Candidate, Collector, Correction, FEATURE_COUNT, HORIZON_S, Prediction, Reading},
    trust::{Trial, Trust},
};
use crate::view::thresholds;

/// How much a change must save (ln cost) to be worth its transition: a window that mixes two
/// settings, and the risk of a prediction that does not hold.
const CHANGE_COST: f64 = 0.01;
/// An unfreeze puts the whole heap back into full collections, and neurogc cannot freeze again.
const UNFREEZE_COST: f64 = 0.05;
/// Standard deviations a saving must stand above its uncertainty to count as credible.
const CREDIBLE: f64 = 1.0;
/// The model's error on how a setting's cost differs from the one in force: a share of the
/// predicted difference, and a floor.
const MODEL_ERROR: f64 = 0.3;
const MODEL_FLOOR: f64 = 0.02;
/// How sure the prior is that the application's own cost per allocation does not grow with
/// ln(threshold0) (one standard deviation): a larger young generation touches more memory
/// between collections, and the process shows by how much once one is tried.
const PRIOR_SLOWDOWN_SD: f64 = 0.15;
/// A miss told apart from noise: at most this share of the miss of the setting in force.
const HALF: f64 = 0.5;
/// Windows of evidence the predicted share of windows over the pause budget counts as.
const PAUSE_PRIOR_WINDOWS: f64 = 10.0;
/// Windows of evidence what the other settings measured counts as, at most.
const POOL_WINDOWS: f64 = 5.0;
/// The weight of pauses and of memory in the cost, among settings that hold every budget
/// (ln-cost units per budget multiple of the windows over it and of the wait at p99, per share
/// of RSS). The wait counts below the budget too: two settings whose pauses all fit it still
/// differ in what a service's requests wait (the cache service's p99: 3.5 ms frozen at 700,
/// 9.9 ms frozen at 20,000), and a wait of a tenth of the budget is worth 5% of the CPU.
const PAUSE_WEIGHT: f64 = 0.5;
const MEMORY_WEIGHT: f64 = 0.02;

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub thresholds: [i64; 3],
    /// Something should change now: `thresholds`, and/or `freeze`.
    pub change: bool,
    /// Some(true): `gc.freeze()`; Some(false): undo neurogc's freeze.
    pub freeze: Option<bool>,
    /// Freeze after a full collection of neurogc's own.
    pub collect: bool,
    pub reason: String,
    /// "700/10/10 -> 2000/10/10 + freeze", when `change`.
    pub what: Option<String>,
    /// The budget that drove the decision.
    pub budget: Option<Budget>,
    /// Budgets no setting can hold, and the estimate behind it (said once).
    pub given_up: Option<String>,
    pub observed: Observed,
    /// The chosen setting's predicted effect.
    pub predicted: Option<Predicted>,
    /// What the last change did, measured (act mode only).
    pub effect: Option<Effect>,
    /// The last window's prediction for the setting in force, checked against this window.
    pub check: Option<Check>,
    /// Budgets no candidate setting was estimated to hold this window.
    pub unholdable: Vec<Budget>,
}

/// A candidate's prediction, with what the learned model added to its GC share.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    p: Prediction,
    analytic_share: f64,
    /// The learned correction of the GC share relative to the setting in force (ln, unweighted;
    /// NaN where the model was not asked: it carries no weight yet).
    learned: f64,
    /// The candidate's features: what the model is asked about it.
    row: [f32; FEATURE_COUNT],
}

/// The learned model: for each candidate's features, its correction of the analytic prediction
/// (one call per window scores every candidate).
pub type Learned<'a> = &'a mut dyn FnMut(&[[f32; FEATURE_COUNT]]) -> Vec<Correction>;

/// One candidate, estimated and held against the budgets.
#[derive(Debug, Clone, Copy)]
struct Scored {
    c: Candidate,
    /// Freeze after a full collection of neurogc's own (freezes only).
    collect: bool,
    p: Prediction,
    /// ln(CPU ns per allocation): the estimate and its standard deviation.
    ln_cost: f64,
    sd: f64,
    /// Collections measured at this setting (0: predicted only).
    measured: u64,
    /// The model's own chance of a window over the pause budget here (before the evidence).
    q_model: f64,
    /// The analytic model's GC share here, and the learned model's correction of it (ln,
    /// before `Trust`'s weight): what a move here will check.
    analytic_share: f64,
    learned: f64,
    row: [f32; FEATURE_COUNT],
    misses: Misses,
    /// ln cost plus the weight of pauses over the budget, memory and the change itself.
    objective: f64,
}

/// A setting's share of windows over the pause budget, estimated.
#[derive(Debug, Clone, Copy, Default)]
struct PauseOdds {
    /// The share, model and measurements together, and its standard deviation.
    share: f64,
    sd: f64,
    /// The longest pause over the budget, predicted or measured there (ns).
    worst_ns: f64,
    /// The model's own share, before any evidence.
    model_share: f64,
}

/// A change waiting for its effect to be measured.
struct Change {
    ts_ns: u64,
    from: Candidate,
    to: Candidate,
    what: String,
    /// The window before it (longest pause ms, GC share, RSS MiB): what the effect is measured
    /// from where the setting it left has no evidence of its own (it was in force for less than
    /// a window, or only through neurogc's own collection).
    before: [f64; 3],
}

/// The decision, before it is put in a verdict.
struct Choice {
    to: Scored,
    /// The setting in force's features (what a move's learned correction is relative to).
    here_row: [f32; FEATURE_COUNT],
    budget: Option<Budget>,
    reason: String,
    given_up: Option<String>,
}

pub struct Controller {
    budgets: Budgets,
    collector: Collector,
    evidence: Evidence,
    /// Decisions are applied (act mode): what is in force follows them.
    act: bool,
    original: [i64; 3],
    current: [i64; 3],
    frozen: bool,
    /// The actuator can freeze and the application froze nothing itself.
    freeze_allowed: bool,
    /// neurogc froze once already, or the freeze failed: the actuator freezes once a session.
    freeze_used: bool,
    window: u64,
    first_ts: Option<u64>,
    /// RSS in the window neurogc made its first change: what its changes cost since can be no
    /// more than what RSS grew from there.
    rss_at_first_change: Option<f64>,
    /// RSS in the window neurogc froze: what the freeze keeps can be no more than RSS grew since.
    rss_at_freeze: Option<f64>,
    /// The last change, until its effect is reported.
    change: Option<Change>,
    /// What was last said about budgets no setting can hold (said once).
    said: Option<String>,
    /// The model's chance of a pause over the budget in the next window, at the setting chosen.
    expected_over: f64,
    /// How far the learned model's corrections have come true here, and the last move's check.
    trust: Trust,
    trial: Option<Trial<Candidate>>,
    /// The features of the last move's two ends, while the model has not been asked about it.
    trial_rows: Option<[[f32; FEATURE_COUNT]; 2]>,
    /// The advice last given (advise mode): what a new one must beat by the change's cost.
    advised: Option<(Candidate, bool)>,
    /// Work per net allocation counted, in the last window that did some (`Reading::work_per_s`):
    /// what turns the collector's allocation rate into the work the costs are per.
    work_per_alloc: f64,
}

fn mib(b: f64) -> f64 {
    b / 1048576.0
}

fn predicted(p: &Prediction) -> Predicted {
    let (g, pause) = (0..3).fold((0, 0.0), |b, g| if p.pause_ns[g] > b.1 { (g, p.pause_ns[g]) } else { b });
    Predicted {
        pause_max_ms: pause / 1e6,
        pause_gen: g as u8,
        gc_share: p.share,
        memory_mib: mib(p.memory_bytes),
        next_full_s: p.next_full_s,
    }
}

/// The model's prediction a window ago for the setting then in force through this window, against
/// what the window measured (`before`: the model then; `after`: now, having seen the window).
fn check(before: &Collector, after: &Collector, r: &Reading) -> Option<Check> {
    let thresholds = r.thresholds?;
    if r.idle || !before.ready() {
        return None;
    }
    let c = Candidate { thresholds, frozen: after.is_frozen() };
    let p = before.predict(&c, before.is_frozen());
    let ran = |g: usize| (r.collections[g] > 0).then_some(r.pause_max_ns[g]);
    let from = before.in_force().filter(|f| *f != c).map(|f| {
        let q = before.predict(&f, before.is_frozen());
        before.features(&f, before.is_frozen(), &q).to_vec()
    });
    Some(Check {
        features: before.features(&c, before.is_frozen(), &p).to_vec(),
        from,
        predicted: [p.share, p.pause_ns[0], p.pause_ns[1], p.pause_ns[2]],
        measured: [Some(r.gc_share), ran(0), ran(1), ran(2)],
    })
}

/// The setting that misses the budgets least, by their priority; the cheaper among equals.
fn least_missing<'a>(set: impl Iterator<Item = &'a Scored>) -> Option<&'a Scored> {
    set.min_by(|a, b| {
        a.misses
            .key()
            .partial_cmp(&b.misses.key())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.objective.total_cmp(&b.objective))
    })
}

/// "1.00x" of the setting in force, and what stands behind it.
fn evidence_words(s: &Scored, here: &Scored) -> String {
    let ratio = (s.ln_cost - here.ln_cost).exp();
    if s.measured > 0 {
        format!("{ratio:.2}x the cost, measured over {}", crate::text::plural(s.measured, "collection"))
    } else {
        format!("{ratio:.2}x the cost, predicted")
    }
}

fn describe(s: &Scored) -> String {
    format!(
        "longest pause {:.1} ms, GC {:.1}%, memory +{:.0} MiB",
        s.p.pause_max_ns() / 1e6,
        s.p.share * 100.0,
        mib(s.p.memory_bytes)
    )
}

impl Controller {
    pub fn new(cfg: GuardConfig, original: [i64; 3], act: bool) -> Controller {
        Controller {
            budgets: Budgets::new(cfg),
            collector: Collector::new(original),
            evidence: Evidence::default(),
            act,
            original,
            current: original,
            frozen: false,
            freeze_allowed: false,
            freeze_used: false,
            window: 0,
            first_ts: None,
            rss_at_first_change: None,
            rss_at_freeze: None,
            change: None,
            said: None,
            expected_over: 0.0,
            work_per_alloc: 1.0,
            trust: Trust::default(),
            advised: None,
            trial: None,
            trial_rows: None,
        }
    }

    /// Whether `gc.freeze()` is an available move: the actuator can run it and the application
    /// has frozen nothing itself (neurogc would not be able to tell its freeze from the app's).
    pub fn allow_freeze(&mut self, allowed: bool) {
        self.freeze_allowed = allowed;
    }

    /// The thresholds in force as the controller knows them.
    pub fn thresholds(&self) -> [i64; 3] {
        self.current
    }

    pub fn frozen(&self) -> bool {
        self.frozen
    }

    /// The actuator could not freeze (the main thread did not run the call).
    pub fn freeze_failed(&mut self) {
        self.frozen = false;
        self.collector.unfroze();
        self.freeze_used = true;
    }

    fn cfg(&self) -> &GuardConfig {
        self.budgets.config()
    }

    /// Whether a freeze is a move now: the actuator can run it, the application froze nothing
    /// itself, the user allows it, and the process has been watched (or has run) `--freeze-after`.
    fn may_freeze(&self, r: &Reading) -> bool {
        let Some(after) = self.cfg().freeze_after_s else { return false };
        let watched = r.ts_ns.saturating_sub(self.first_ts.unwrap_or(r.ts_ns)) as f64 / 1e9;
        self.freeze_allowed && !self.freeze_used && r.age_s.unwrap_or(watched).max(watched) >= after
    }

    /// This window as evidence for the setting in force.
    fn observation(&self, r: &Reading) -> Observation {
        let rate = r.work_per_s();
        let work = rate * r.secs;
        let per_alloc = |share: f64| (share > 0.0 && work >= 1.0).then(|| (share * 1e9 / rate).ln());
        let (_, worst) = r.worst();
        Observation {
            ln_cost: per_alloc(r.cpu_share),
            ln_mutator: per_alloc(r.cpu_share - r.gc_share),
            rounds: work / self.original[0].max(1) as f64,
            collections: r.collections,
            over_budget: self.budgets.pause_ns().is_some_and(|b| worst > b),
            expected_over: self.expected_over,
            gc_share: r.gc_share,
            pause_max_ms: worst / 1e6,
            rss_mib: mib(r.rss as f64),
        }
    }

    pub fn decide(&mut self, learned: Learned, r: &Reading) -> Verdict {
        self.window += 1;
        let before = self.collector.clone();
        self.first_ts.get_or_insert(r.ts_ns);
        if !self.act
            && let Some(t) = r.thresholds
        {
            self.current = t;
        }
        self.collector.observe(r);
        let check = check(&before, &self.collector, r);
        let here = Candidate { thresholds: self.current, frozen: self.frozen };
        // Online correction: what the model predicts for the setting in force against what this
        // window measured.
        self.collector.correct(&here, self.frozen, r);
        // The window is evidence for the setting in force where the target had it all through:
        // not one that held neurogc's own collection before a freeze (that pause is the move's,
        // not the setting's), nor one whose thresholds the actuator had not written yet.
        let o = self.observation(r);
        if !r.idle && r.alloc_per_s >= 1.0 {
            self.work_per_alloc = (r.work_per_s() / r.alloc_per_s).clamp(1.0, 10.0);
        }
        let in_force = r.thresholds == Some(self.current);
        let clean = in_force && !r.idle && !self.collector.held_freeze_collection();
        if clean {
            self.evidence.add(here, &o);
        }
        // The first clean window after a move tells how far the learned correction held here.
        match self.trial {
            Some(t) if t.to == here && clean => {
                self.trust.record(&t, r.gc_share);
                self.trial = None;
            }
            Some(t) if t.to != here => self.trial = None,
            _ => {}
        }
        if self.rss_at_first_change.is_none() && !r.idle {
            self.budgets.at_attach(self.long_run_share(r));
        }
        self.budgets.set_window(r.secs);
        // The model's memory figure is what the setting keeps over its horizon; garbage takes
        // that long to pile up, and RSS shows what has so far.
        let grown = self.rss_at_first_change.map_or(0.0, |base| (r.rss as f64 - base).max(0.0));
        let cost_now = self.collector.predict(&here, self.frozen).memory_bytes.min(grown);
        let app_rss = (r.rss as f64 - cost_now).max(0.0);
        let (g, worst) = r.worst();
        let observed = Observed {
            pause_max_ms: worst / 1e6,
            pause_gen: g as u8,
            gc_share: self.evidence.get(&here).and_then(|s| s.gc_share()).unwrap_or(r.gc_share),
            rss_mib: mib(r.rss as f64),
            rss_limit_mib: Some(mib(self.budgets.rss_limit(app_rss))),
            pause_budget_ms: self.budgets.pause_ns().map(|b| b / 1e6),
            gc_budget: self.budgets.share(),
        };
        let effect = self.effect();
        let (choice, unholdable) = match self.choose(learned, r, here, app_rss) {
            Ok(c) => c,
            Err(reason) => {
                return Verdict {
                    thresholds: self.current,
                    change: false,
                    freeze: None,
                    collect: false,
                    reason,
                    what: None,
                    budget: None,
                    given_up: None,
                    observed,
                    predicted: None,
                    effect,
                    check,
                    unholdable: Vec::new(),
                };
            }
        };
        let to = choice.to.c;
        // `choose` left the chance of the setting in force; in act mode the next window is the
        // chosen one's (in advise mode the setting in force stays the application's).
        if self.act {
            self.expected_over = choice.to.q_model;
        }
        let change = to != here;
        if !self.act {
            self.advised = change.then_some((to, choice.to.collect));
        }
        let freeze = (to.frozen != here.frozen).then_some(to.frozen);
        let collect = freeze == Some(true) && choice.to.collect;
        let what = change.then(|| {
            let mut w = if to.thresholds != here.thresholds {
                format!("{} -> {}", thresholds(here.thresholds), thresholds(to.thresholds))
            } else {
                thresholds(to.thresholds)
            };
            match freeze {
                Some(true) if collect => w.push_str(" + collect, freeze"),
                Some(true) => w.push_str(" + freeze"),
                Some(false) => w.push_str(" + unfreeze"),
                None => {}
            }
            w
        });
        if change && self.act {
            self.change = Some(Change {
                ts_ns: r.ts_ns,
                from: here,
                to,
                what: what.clone().unwrap_or_default(),
                before: [o.pause_max_ms, o.gc_share, o.rss_mib],
            });
            self.current = to.thresholds;
            self.trial =
                Some(Trial { to, analytic_share: choice.to.analytic_share, learned: choice.to.learned });
            self.trial_rows = (!choice.to.learned.is_finite()).then_some([choice.here_row, choice.to.row]);
            self.rss_at_first_change.get_or_insert(r.rss as f64);
            match freeze {
                Some(true) => {
                    self.rss_at_freeze = Some(r.rss as f64);
                    self.frozen = true;
                    self.freeze_used = true;
                    self.collector.froze(collect);
                }
                Some(false) => {
                    self.frozen = false;
                    self.collector.unfroze();
                }
                None => {}
            }
        }
        Verdict {
            thresholds: to.thresholds,
            change,
            freeze,
            collect,
            reason: choice.reason,
            what,
            budget: choice.budget,
            given_up: choice.given_up,
            observed,
            predicted: Some(predicted(&choice.to.p)),
            effect,
            check,
            unholdable,
        }
    }

    /// The GC share the application's own setting costs over its run, from a window of it: the
    /// window's, with its full collections (if any) put at their long-run rate. Full collections
    /// come seconds to minutes apart, so the first windows hold one or none: the cache service
    /// read 1.6% at attach and paid 3.3% over its run, and a default GC budget taken from the
    /// first windows alone was missed by the application's own setting.
    fn long_run_share(&self, r: &Reading) -> f64 {
        let own = self.collector.predict(&Candidate { thresholds: self.original, frozen: false }, false);
        let full_here = r.collections[2] as f64 * r.pause_p50_ns[2] / 1e9 / r.secs.max(1e-3);
        let full_run = own.rate[2] * own.pause_ns[2] / 1e9;
        ((r.gc_share - full_here).max(0.0) + full_run).min(1.0)
    }

    /// The last change's effect, once the setting it made has been measured over a few windows:
    /// the means measured at the setting before it and at the one after.
    fn effect(&mut self) -> Option<Effect> {
        let c = self.change.as_ref()?;
        let after = self.evidence.get(&c.to).filter(|s| s.windows() >= 3.0)?;
        let before = self.evidence.get(&c.from);
        let pair = |f: &dyn Fn(&super::evidence::Stats) -> Option<f64>, i: usize| {
            let after = f(after).unwrap_or(c.before[i]);
            [before.and_then(f).unwrap_or(c.before[i]), after]
        };
        // What a larger young generation holds, measured: RSS across a change of threshold0.
        if let (Some(b), Some(a)) = (before.and_then(|s| s.rss_mib()), after.rss_mib()) {
            let delta_t0 = (c.to.thresholds[0] - c.from.thresholds[0]) as f64;
            self.collector.learn_young_bytes((a - b) * 1048576.0, delta_t0);
        }
        let effect = Effect {
            of_ts_ns: c.ts_ns,
            change: c.what.clone(),
            pause_max_ms: pair(&|s| s.pause_max_ms(), 0),
            gc_share: pair(&|s| s.gc_share(), 1),
            rss_mib: pair(&|s| s.rss_mib(), 2),
        };
        self.change = None;
        Some(effect)
    }

    /// Every candidate's prediction: the analytic model's, corrected by the learned model in one
    /// call. The first candidate is the setting in force, which the online correction already
    /// fits to what this process measures: the learned model corrects how each other candidate
    /// differs from it (its output for a candidate, less its output for the setting in force).
    /// The corrections are weighed by how far they have come true for this process (`Trust`);
    /// while that weight is 0 the model is not asked here, and the move's trial asks it after the
    /// decision (`learn_trial`), off the decision's path.
    fn predict_all(&self, cands: &[Candidate], learned: Learned) -> Vec<Estimate> {
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
            row: *row,
        };
        let Some(here) = k.first().filter(|_| k.len() == raw.len()).copied() else {
            return raw.into_iter().zip(&rows).map(alone).collect();
        };
        raw.into_iter()
            .zip(&k)
            .zip(&rows)
            .map(|((p, k), row)| Estimate {
                p: p.corrected(&std::array::from_fn(|i| (k[i] - here[i]) * w as f32)),
                analytic_share: p.share,
                learned: f64::from(k[0] - here[0]),
                row: *row,
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
    fn slowdown(&self) -> f64 {
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
    fn work_per_s(&self) -> f64 {
        (self.collector.alloc_per_s() * self.work_per_alloc).max(1.0)
    }

    /// A candidate's ln cost and its standard deviation: the prior carried over from the setting
    /// in force, weighed with what the candidate itself measured.
    fn cost(&self, c: &Candidate, p: &Prediction, here_p: &Prediction, slope: f64) -> (f64, f64, u64) {
        let here = Candidate { thresholds: self.current, frozen: self.frozen };
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
        let cost_here = anchor.ln_cost.exp();
        let gc = |p: &Prediction| p.share * 1e9 / work;
        let mutator_here = (cost_here - gc(here_p)).max(0.1 * cost_here);
        let d_t0 = (c.thresholds[0].max(1) as f64 / self.current[0].max(1) as f64).ln();
        let prior = (cost_here + gc(p) - gc(here_p) + mutator_here * ((slope * d_t0).exp() - 1.0))
            .max(0.05 * cost_here)
            .ln();
        // The slowdown's own uncertainty is not counted against a move: it is what trying a
        // setting teaches (one far setting measured fits the slope for all the others).
        let model_sd = MODEL_ERROR * (prior - anchor.ln_cost).abs() + MODEL_FLOOR;
        let prior_sd = (anchor.se.powi(2) + model_sd.powi(2)).sqrt();
        match measured {
            Some(m) => {
                let (wp, wm) = (1.0 / prior_sd.powi(2), 1.0 / m.se.powi(2).max(1e-12));
                ((prior * wp + m.ln_cost * wm) / (wp + wm), (1.0 / (wp + wm)).sqrt(), collections)
            }
            None => (prior, prior_sd, collections),
        }
    }

    /// The share of windows over the pause budget at `c`. The model's chance, scaled by how far
    /// off its chances have been for this process, counts as a few windows of evidence beside
    /// what was measured at `c`.
    fn pauses_over(&self, c: &Candidate, p: &Prediction) -> PauseOdds {
        let Some(budget) = self.budgets.pause_ns() else { return PauseOdds::default() };
        let (model_share, worst) = p.windows_over(budget, self.budgets.window_s());
        // The model's chance, scaled by how far off its chances have been, shrunk towards what
        // the settings below this one measured.
        let model = (model_share * self.evidence.over_calibration(c.frozen)).min(1.0);
        let (pooled, pooled_windows) = self.evidence.over_below(c);
        let pool = pooled_windows.min(POOL_WINDOWS);
        let q = (model * PAUSE_PRIOR_WINDOWS + pooled * pool) / (PAUSE_PRIOR_WINDOWS + pool);
        let stats = self.evidence.get(c);
        let (over, windows) = stats.map_or((0.0, 0.0), |s| s.over_budget());
        let measured_worst = stats.and_then(|s| s.pause_max_ms()).unwrap_or(0.0) * 1e6;
        let n = PAUSE_PRIOR_WINDOWS + windows;
        let share = (q * PAUSE_PRIOR_WINDOWS + over) / n;
        PauseOdds {
            share,
            sd: (share * (1.0 - share) / (n + 1.0)).sqrt(),
            worst_ns: worst.max(if over > 0.0 { measured_worst } else { 0.0 }),
            model_share,
        }
    }

    /// Every candidate, with and without neurogc's collection for a freeze, estimated.
    fn score_all(&self, learned: Learned, r: &Reading, app_rss: f64) -> Vec<Scored> {
        let here = Candidate { thresholds: self.current, frozen: self.frozen };
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
        let window_s = self.budgets.window_s();
        let budget_ns = self.budgets.pause_ns();
        let mut out = Vec::new();
        for (c, e) in cands.iter().zip(&preds) {
            let p = &e.p;
            let (ln_cost, sd, measured) = self.cost(c, p, &preds[0].p, slope);
            let freezing = c.frozen && !here.frozen;
            for collect in if freezing { &[false, true][..] } else { &[false][..] } {
                let mut p = *p;
                // A setting not measured yet is entered on its memory bounded pessimistically,
                // as its cost is: the model's bytes per object are an average over what it has
                // seen (a far jump on the training benchmark kept 24 MiB where 19 were allowed).
                if measured == 0 && *c != here {
                    p.memory_bytes *= 1.0 + MODEL_ERROR;
                }
                let odds = self.pauses_over(c, &p);
                let (share, mut worst) = (odds.share, odds.worst_ns);
                // A setting is left only where its pause budget is credibly missed (one standard
                // deviation); another is entered on its estimate. (Ten windows cannot show a 1%
                // share: an upper bound would bar every setting with any chance of a long pause.)
                let mut over = if *c == here { (share - odds.sd).max(0.0) } else { share };
                if freezing && !collect {
                    p.memory_bytes += self.collector.frozen_pending_bytes();
                }
                // neurogc's own collection is a pause like any other: one window in the model's
                // horizon.
                if *collect && !self.collector.full_due_anyway(p.next_full_s) {
                    let pause = self.collector.freeze_collection_ns();
                    if budget_ns.is_some_and(|b| pause > b) {
                        over += window_s / HORIZON_S;
                        worst = worst.max(pause);
                    }
                }
                let mut misses = self.budgets.misses(&p, app_rss);
                misses.pause = self.budgets.pause_miss(over, worst);
                // Measured, the GC share is judged as pauses are: the setting in force is left
                // only where it credibly misses (one standard error over the windows there; a
                // window holding a full collection can read 100%), another entered on its mean.
                let stats = self.evidence.get(c).filter(|s| s.windows() >= 2.0);
                if let Some(stats) = stats
                    && let Some(mean) = stats.gc_share()
                {
                    let se = if *c == here { stats.gc_share_se().unwrap_or(0.0) } else { 0.0 };
                    misses.share = self.budgets.share().map_or(0.0, |b| ((mean - se - b) / b).max(0.0));
                } else if *c == here {
                    // One window is no evidence either way: the estimate it was entered on stands.
                    misses.share = 0.0;
                }
                let pause_cost =
                    budget_ns.map_or(0.0, |b| PAUSE_WEIGHT * (share * worst + p.wait_p99_ns()) / b);
                // Advice stands until another is better by more than a change costs: the
                // application's setting stays in force, so without this every near tie between
                // two candidates would turn the advice over window by window.
                let advised = !self.act && self.advised == Some((*c, *collect));
                let change = if *c == here || advised {
                    0.0
                } else if here.frozen && !c.frozen {
                    UNFREEZE_COST
                } else {
                    CHANGE_COST
                };
                let objective =
                    ln_cost + pause_cost + MEMORY_WEIGHT * p.memory_bytes / app_rss.max(1.0) + change;
                out.push(Scored {
                    c: *c,
                    collect: *collect,
                    p,
                    ln_cost,
                    sd,
                    measured,
                    q_model: odds.model_share,
                    analytic_share: e.analytic_share,
                    learned: e.learned,
                    row: e.row,
                    misses,
                    objective,
                });
            }
        }
        out
    }

    /// Memory measured, not only predicted: RSS past the limit after neurogc changed something
    /// (pauses measured are in every estimate already).
    fn measured_memory(&self, now: &mut Scored, r: &Reading, app_rss: f64) {
        let limit = self.budgets.rss_limit(app_rss);
        if r.rss as f64 > limit && self.rss_at_first_change.is_some() {
            now.misses.memory = now.misses.memory.max(r.rss as f64 / limit - 1.0);
        }
    }

    fn choose(
        &mut self,
        learned: Learned,
        r: &Reading,
        here: Candidate,
        app_rss: f64,
    ) -> Result<(Choice, Vec<Budget>), String> {
        if r.thresholds.is_none() {
            return Err("the target's thresholds are unknown: nothing to predict from".into());
        }
        if r.idle {
            return Err("idle: no collection and no CPU in this window, nothing to improve".into());
        }
        if !self.collector.ready() {
            return Err(format!("learning the process (window {} of 2)", self.collector.windows()));
        }
        let mut scored = self.score_all(learned, r, app_rss);
        let mut now = scored.remove(0);
        debug_assert_eq!(now.c, here);
        self.expected_over = now.q_model;
        self.measured_memory(&mut now, r, app_rss);
        // An unfreeze is a move for memory alone: it puts the whole heap back into full
        // collections, the longest pauses there are, and neurogc cannot freeze again. So it
        // waits for the memory to be measured: RSS grown since the freeze past the allowance
        // (the model's figure is what a freeze keeps over ten minutes, and predicted a miss on
        // the benchmark's training loop whose RSS a freeze lowered).
        let allowance = self.budgets.memory_allowance(app_rss);
        let frozen_grown = self.rss_at_freeze.map_or(0.0, |at| r.rss as f64 - at);
        if here.frozen && (now.misses.memory == 0.0 || frozen_grown <= allowance) {
            scored.retain(|s| s.c.frozen);
        }
        let unholdable: Vec<Budget> = Budget::ALL
            .into_iter()
            .enumerate()
            .filter(|(i, _)| std::iter::once(&now).chain(&scored).all(|s| s.misses.key()[*i] > 0.0))
            .map(|(_, b)| b)
            .collect();
        // A budget no setting is estimated to hold is said once, and set aside: what every
        // setting misses tells them apart by noise alone (chasing it moved the training loop
        // of the benchmark every window). The other budgets and the objective decide, whose
        // weight on pauses over the budget still prefers fewer and shorter ones.
        // Unless some setting misses it by half as much or less (a freeze that cuts the longest
        // pause from 200 to 40 ms): that is a miss told apart by more than noise.
        let given_up = self.give_up(&unholdable, &now, &scored);
        let aside: Vec<Budget> = Budget::ALL
            .into_iter()
            .enumerate()
            .filter(|(_, b)| unholdable.contains(b))
            .filter(|(i, _)| !scored.iter().any(|s| s.misses.key()[*i] <= HALF * now.misses.key()[*i]))
            .map(|(_, b)| b)
            .collect();
        for s in std::iter::once(&mut now).chain(scored.iter_mut()) {
            s.misses = aside.iter().fold(s.misses, |m, b| m.except(*b));
        }
        let held = if aside.is_empty() {
            "budgets hold".to_owned()
        } else {
            format!("budgets hold but {} (none can)", Budget::list(aside.iter().copied()))
        };
        let cheapest = |set: &mut dyn Iterator<Item = &Scored>| -> Option<Scored> {
            set.min_by(|a, b| a.objective.total_cmp(&b.objective)).copied()
        };
        let here_row = now.row;
        let choice = |to: Scored, budget: Option<Budget>, reason: String| Choice {
            to,
            here_row,
            budget,
            reason,
            given_up,
        };
        if now.misses.none() {
            // Credibly cheaper, holding every budget: the saving stands above the change's cost
            // and the uncertainty of both estimates.
            let credible = |s: &&Scored| {
                s.misses.none()
                    && s.objective < now.objective - CREDIBLE * (s.sd.powi(2) + now.sd.powi(2)).sqrt()
            };
            return Ok(match cheapest(&mut scored.iter().filter(credible)) {
                Some(best) => {
                    let why =
                        format!("{held} either way; {}: {}", evidence_words(&best, &now), describe(&best));
                    (choice(best, None, why), unholdable)
                }
                None => {
                    let why = format!(
                        "{held}; no setting credibly cheaper than {} ({}): {}{}",
                        here,
                        if now.measured > 0 {
                            format!("measured over {}", crate::text::plural(now.measured, "collection"))
                        } else {
                            "not measured yet".to_owned()
                        },
                        describe(&now),
                        if aside.contains(&Budget::Pause) { self.freeze_note(r) } else { "" }
                    );
                    (choice(now, None, why), unholdable)
                }
            });
        }
        let missed = now.misses.first();
        if let Some(best) = cheapest(&mut scored.iter().filter(|s| s.misses.none())) {
            let why = format!(
                "{} budget missed at {here} ({}); {} holds {}, {}: {}",
                now.misses.names(),
                describe(&now),
                best.c,
                if aside.is_empty() { "every budget" } else { "the others" },
                evidence_words(&best, &now),
                describe(&best)
            );
            return Ok((choice(best, missed, why), unholdable));
        }
        // Each budget is held somewhere but no setting holds them all: the one that misses
        // least, by priority, where it misses clearly less than staying (the evidence at the
        // setting decides once it has been tried).
        let key = |s: &Scored| s.misses.key();
        let least = least_missing(scored.iter()).copied();
        let clearly_better = |s: &Scored| {
            let (ks, kn) = (key(s), key(&now));
            (0..3).find(|&i| (ks[i] - kn[i]).abs() > 1e-9).is_some_and(|i| ks[i] <= kn[i] * HALF)
        };
        Ok(match least.filter(clearly_better) {
            Some(best) => {
                let why = format!(
                    "{} budget missed at {here} ({}); {} misses less, {}",
                    now.misses.names(),
                    describe(&now),
                    best.c,
                    evidence_words(&best, &now)
                );
                (choice(best, missed, why), unholdable)
            }
            None => {
                let why = format!(
                    "{} budget missed ({}); no setting does better: staying{}",
                    now.misses.names(),
                    describe(&now),
                    self.freeze_note(r)
                );
                (choice(now, None, why), unholdable)
            }
        })
    }

    /// What to say of the budgets no setting holds: once, when they change.
    fn give_up(&mut self, unholdable: &[Budget], now: &Scored, scored: &[Scored]) -> Option<String> {
        if unholdable.is_empty() {
            self.said = None;
            return None;
        }
        let names = Budget::list(unholdable.iter().copied());
        if self.said.as_ref() == Some(&names) {
            return None;
        }
        self.said = Some(names.clone());
        let least = least_missing(std::iter::once(now).chain(scored))?;
        Some(format!("no setting holds the {names} budget: the best estimate is {}", describe(least)))
    }

    /// Where a pause budget is missed and a freeze is not a move, why.
    fn freeze_note(&self, r: &Reading) -> &'static str {
        match () {
            _ if self.frozen => "",
            _ if self.cfg().freeze_after_s.is_none() => "; freezing is off (--no-freeze)",
            _ if !self.freeze_allowed => {
                "; freezing is not available (objects were frozen before neurogc, or no hook)"
            }
            _ if self.freeze_used => "; neurogc freezes once a session, and has",
            _ if !self.may_freeze(r) => "; freezing waits for --freeze-after",
            _ => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::policy::budgets::test_config as cfg;

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
    }

    const SERVICE: Process = Process {
        alloc: 300_000.0,
        mutator_ns: 200.0,
        slowdown: 0.0,
        recycled: 0.0,
        garbage: 0.5,
        promoted: 3_000.0,
    };

    impl Process {
        fn reading(&self, t: [i64; 3], window: i64) -> Reading {
            let [t0, t1] = [t[0] as f64, t[1] as f64];
            let young = t0 * 40.0;
            let gen1 = (t0 + t1 * 1_000.0) * 40.0;
            let r0 = self.alloc / (t0 + self.recycled);
            let r1 = r0 / (t1 + 1.0);
            let gc_share = ((r0 - r1) * young + r1 * gen1) / 1e9;
            let mutator = self.alloc * self.mutator_ns * (t0 / 700.0).powf(self.slowdown) / 1e9;
            Reading {
                ts_ns: window as u64 * 1_000_000_000,
                secs: 1.0,
                collections: [(r0 - r1) as u64, r1 as u64, 0],
                pause_p50_ns: [young, gen1, 0.0],
                pause_max_ns: [young * 1.2, gen1 * 1.2, 0.0],
                // Where every round is garbage, a gen1 round frees its young round's too.
                collected_per: [
                    (t0 + self.recycled) * self.garbage,
                    if self.garbage >= 1.0 { t0 + self.recycled } else { 50.0 },
                    0.0,
                ],
                gc_share,
                alloc_per_s: r0 * t0,
                cpu_share: mutator + gc_share,
                rss: 400 << 20,
                thresholds: Some(t),
                older_counts: Some([3, 5]),
                long_lived: Some([1_000_000, 100_000 + window * self.promoted as i64]),
                freeze_count: Some(0),
                idle: false,
                age_s: Some(600.0 + window as f64),
            }
        }
    }

    /// Budgets that cannot be missed: the cost alone decides.
    fn cost_only() -> GuardConfig {
        GuardConfig {
            pause_budget_ns: None,
            freeze_after_s: None,
            gc_budget: None,
            gc_at_attach: false,
            ..cfg()
        }
    }

    /// No learned model: the analytic predictions stand.
    fn analytic(_: &[[f32; FEATURE_COUNT]]) -> Vec<Correction> {
        Vec::new()
    }

    /// Acts on `p` for `windows` windows: the settings in force, window by window, and the verdicts.
    fn act(p: Process, gc: GuardConfig, windows: i64) -> (Vec<[i64; 3]>, Vec<Verdict>) {
        let mut c = Controller::new(gc, [700, 10, 10], true);
        let mut settings = Vec::new();
        let verdicts: Vec<Verdict> = (1..=windows)
            .map(|w| {
                settings.push(c.thresholds());
                c.decide(&mut analytic, &p.reading(c.thresholds(), w))
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
        // against 0.22 ms at 5,000, for 8% of the CPU.
        let busy = Process { alloc: 3_000_000.0, mutator_ns: 20.0, promoted: 0.0, ..SERVICE };
        let (cheapest, _) = act(busy, cost_only(), 40);
        assert_eq!(cheapest.last().unwrap()[0], 20_000, "{cheapest:?}");
        let budget = GuardConfig { pause_budget_ns: Some(2_000_000), ..cost_only() };
        let (waited, verdicts) = act(busy, budget, 40);
        let last = waited.last().unwrap()[0];
        assert!((2_000..=5_000).contains(&last), "{waited:?}");
        assert!(verdicts[30..].iter().all(|v| !v.change), "{verdicts:?}");
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
    fn a_change_from_a_setting_with_no_evidence_of_its_own_is_measured_from_the_window_before() {
        // The setting left was in force for no window that counted (only neurogc's own
        // collection, or the actuator had not written it yet): the effect starts from the last
        // window before the change, never from nothing (a record cannot carry NaN).
        let mut c = Controller::new(cost_only(), [700, 10, 10], true);
        let mut effect = None;
        for w in 1..=12 {
            let v = c.decide(&mut analytic, &SERVICE.reading(c.thresholds(), w));
            if v.change {
                let ch = c.change.as_mut().expect("the change is pending");
                ch.from = Candidate { thresholds: [1_234, 10, 10], frozen: false };
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
            let v = c.decide(&mut analytic, &SERVICE.reading(c.thresholds(), w));
            (v.freeze == Some(true)).then_some(v)
        });
        // The next full collection is far off: one of neurogc's own now would stop the process
        // for 250 ms, where freezing the pending objects with the heap costs a few MiB.
        let v = froze.expect("frozen");
        assert!(!v.collect && v.what.as_deref().is_some_and(|w| w.ends_with(" + freeze")), "{v:?}");
        // A memory budget too small for the pending garbage: the collection, its pause counted.
        let tight = GuardConfig { memory_limit_bytes: Some((400 << 20) + (1 << 20)), ..gc };
        let mut c = Controller::new(tight, [700, 10, 10], true);
        c.allow_freeze(true);
        let verdicts: Vec<Verdict> =
            (1..=6).map(|w| c.decide(&mut analytic, &SERVICE.reading(c.thresholds(), w))).collect();
        assert!(verdicts.iter().all(|v| v.freeze != Some(true) || v.collect), "{verdicts:?}");
    }

    #[test]
    fn the_learned_model_corrects_every_candidate_in_one_call_once_it_has_come_true_here() {
        let d_ln_t0 = crate::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
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
    fn a_move_made_without_the_model_asks_it_afterwards_what_the_move_will_check() {
        let d_ln_t0 = crate::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
        let asked = std::cell::RefCell::new(Vec::new());
        let mut learned = |rows: &[[f32; FEATURE_COUNT]]| -> Vec<Correction> {
            asked.borrow_mut().push(rows.len());
            rows.iter().map(|f| [0.5 * f[d_ln_t0], 0.0, 0.0, 0.0]).collect()
        };
        let mut c = Controller::new(cost_only(), [700, 10, 10], true);
        let moved = (1..=4)
            .find_map(|w| {
                let v = c.decide(&mut analytic, &SERVICE.reading(c.thresholds(), w));
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
        let d_ln_t0 = crate::policy::predict::FEATURES.iter().position(|f| *f == "d_ln_t0").unwrap();
        let mut promise = |rows: &[[f32; FEATURE_COUNT]]| -> Vec<Correction> {
            rows.iter().map(|f| [-1.5 * f[d_ln_t0].max(0.0), 0.0, 0.0, 0.0]).collect()
        };
        let slow = Process { slowdown: 0.3, ..SERVICE };
        let mut c = Controller::new(cost_only(), [700, 10, 10], true);
        let mut settings = Vec::new();
        for w in 1..=40 {
            settings.push(c.thresholds());
            c.decide(&mut promise, &slow.reading(c.thresholds(), w));
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
        let checks: Vec<Check> = (1..=4)
            .filter_map(|w| c.decide(&mut analytic, &SERVICE.reading([700, 10, 10], w)).check)
            .collect();
        assert_eq!(checks.len(), 2, "from the third window: {checks:?}");
        let k = &checks[1];
        assert_eq!(k.features.len(), FEATURE_COUNT);
        let (p, m) = (k.predicted[1], k.measured[1].unwrap());
        assert!(m / p > 0.5 && m / p < 2.0, "{k:?}");
        assert_eq!(k.measured[3], None, "no full collection ran");
    }

    #[test]
    fn advise_mode_says_what_it_would_do_and_never_measures_an_effect_it_did_not_cause() {
        let mut c = Controller::new(cfg(), [700, 10, 10], false);
        c.allow_freeze(true);
        let mut advice = Vec::new();
        for w in 1..=12 {
            let v = c.decide(&mut analytic, &SERVICE.reading([700, 10, 10], w));
            assert!(v.effect.is_none(), "{v:?}");
            if w >= 3 {
                assert!(v.change, "the advice stands every window: {v:?}");
                assert!(v.what.as_deref().is_some_and(|w| w.starts_with("700/10/10 -> ")), "{v:?}");
                advice.push((v.thresholds, v.freeze));
            }
        }
        advice.dedup();
        assert_eq!(advice.len(), 1, "{advice:?}");
        assert!(!c.frozen());
        assert_eq!(c.thresholds(), [700, 10, 10]);
    }

    #[test]
    fn where_no_setting_holds_a_budget_it_says_so_once_and_stays() {
        let pinned = GuardConfig {
            pause_budget_ns: Some(100_000),
            freeze_after_s: None,
            min: [700, 10, 10],
            max: [700, 10, 10],
            ..cfg()
        };
        let mut c = Controller::new(pinned, [700, 10, 10], true);
        let mut said = 0;
        for w in 1..=10 {
            let v = c.decide(&mut analytic, &SERVICE.reading([700, 10, 10], w));
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
        let pinned = GuardConfig {
            pause_budget_ns: None,
            freeze_after_s: None,
            min: [700, 10, 10],
            max: [700, 10, 10],
            ..cfg()
        };
        let mut c = Controller::new(pinned, [700, 10, 10], true);
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
            let v = c.decide(&mut analytic, &r);
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
        // Every gen1 round walks over 100 µs at any setting: the pause budget cannot be held.
        let gc = GuardConfig { pause_budget_ns: Some(100_000), freeze_after_s: None, ..cost_only() };
        let (settings, verdicts) = act(SERVICE, gc, 40);
        assert!(verdicts[2..].iter().all(|v| v.unholdable == [Budget::Pause]), "{verdicts:?}");
        assert_eq!(verdicts.iter().filter(|v| v.given_up.is_some()).count(), 1);
        // As where no budget binds: cheaper settings, then it stops.
        assert!(settings.last().unwrap()[0] >= 5_000, "{settings:?}");
        assert!(verdicts[30..].iter().all(|v| !v.change), "{verdicts:?}");
        assert!(
            verdicts[39].reason.starts_with("budgets hold but pause (none can)"),
            "{}",
            verdicts[39].reason
        );
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
            c.decide(&mut analytic, &r);
        }
        // Tried, measured, left: not a window in three spent there.
        assert!(over.len() <= 10, "{over:?}");
        assert!(c.thresholds()[1] <= 10, "{:?}", c.thresholds());
    }
}
