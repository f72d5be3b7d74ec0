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
//! - **In force once shown.** In act mode a move is entered once a window shows it made
//!   (`Landing`); until then the target runs the setting before, and nothing else is asked.
//! - **A freeze, two ways.** After a full collection of neurogc's own (its pause counts against the
//!   pause budget like any other) or without one (the garbage promoted since the last full
//!   collection is frozen with the heap, counted as memory); the cheaper that holds the budgets.
//!
//! In advise mode nothing is applied: the setting in force stays the application's, and the
//! verdict carries what would be done and its predicted effect, never a measured one.
use std::borrow::Cow;

use neurogc_trace::{Check, CheckMemory, Effect, ModelEffect, ModelMoved, Observed, Predicted};

use super::{
    budgets::{Budget, Budgets, GuardConfig, Misses},
    candidates::{self, Space},
    evidence::{Evidence, Observation, below_young},
    growth::{Kept, OwnGrowth, PaceCaps},
    predict::{
        Candidate, Collector, Correction, FEATURE_COUNT, HORIZON_S, MAX_CORRECTION, Prediction, Reading,
    },
    trust::{Trial, Trust},
};
use crate::{sinks::view::thresholds, steering::actuate::ANSWERS_WITHIN};

mod choose;
mod model_error;
mod score;

use score::Scored;

/// Standard deviations a saving must stand above its uncertainty to count as credible.
const CREDIBLE: f64 = 1.0;
/// A miss told apart from noise: at most this share of the miss of the setting in force.
const HALF: f64 = 0.5;
/// Windows of evidence at a setting before its effect is reported, or a tie is judged there.
const EFFECT_WINDOWS: f64 = 3.0;
/// How much of the pace RSS kept at neurogc's unfrozen settings the application's own windows
/// must show for that pace to be the application's (`Controller::own_credit`): two windows'
/// growth is noisy, and a filling heap slows as it fills.
const OWN_PACE_SHOWN: f64 = 0.75;
/// How many times a freeze the target's main thread did not run is asked for.
const FREEZE_TRIES: u32 = 4;

/// What `freeze_note` says while RSS steps up.
const FREEZE_WAITS_FOR_STEP: &str = "; freezing waits for RSS to stop stepping up";

/// The most windows a deferred freeze waits for the application's full collection: a model
/// that puts it minutes off is no reason to stop deciding for longer.
const MAX_FREEZE_WAIT_WINDOWS: f64 = 120.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub thresholds: [i64; 3],
    /// Something should change now: `thresholds`, and/or `freeze`.
    pub change: bool,
    /// Some(true): `gc.freeze()`; Some(false): undo neurogc's freeze.
    pub freeze: Option<bool>,
    /// The freeze is to follow a full collection: in act mode the application's own next one
    /// (the agent queues it as that collection ends, `Controller::freeze_deferred`); in advice,
    /// one the user runs first. With an undo (for memory), a full collection right after it.
    pub collect: bool,
    /// The freeze is to be followed by a full collection, which walks next to nothing and
    /// starts the old generation's counters again (`Scored::resets`).
    pub reset: bool,
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
    /// The learned model's weight here, and what it moved for the setting weighed (None where
    /// no setting was weighed).
    pub model: Option<ModelEffect>,
}

impl Verdict {
    /// Nothing changes this window: `thresholds` stand, for `reason`.
    fn stay(
        thresholds: [i64; 3],
        reason: String,
        observed: Observed,
        effect: Option<Effect>,
        check: Option<Check>,
    ) -> Verdict {
        Verdict {
            thresholds,
            change: false,
            freeze: None,
            collect: false,
            reset: false,
            reason,
            what: None,
            budget: None,
            given_up: None,
            observed,
            predicted: None,
            effect,
            check,
            unholdable: Vec::new(),
            model: None,
        }
    }
}

/// The learned model: for each candidate's features, its correction of the analytic prediction
/// (one call per window scores every candidate).
pub type Learned<'a> = &'a mut dyn FnMut(&[[f32; FEATURE_COUNT]]) -> Vec<Correction>;

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

/// A freeze decided in act mode, to land as the application's next full collection ends: the
/// move, and until which window it waits.
struct Deferred {
    to: Scored,
    here_row: [f32; FEATURE_COUNT],
    what: String,
    until_window: u64,
    /// That collection has ended and the freeze is queued in the target (`deferred_lands`):
    /// it is no longer the controller's to drop, and waits for the actuator's answer, as a
    /// move asked for does (`Landing`).
    queued: bool,
    /// The memory budget was missed while it was queued: what neurogc set is undone, the
    /// freeze too, once it lands.
    undo_on_landing: bool,
    /// RSS when it was decided (bytes).
    rss_asked: f64,
}

/// A move asked of the actuator in act mode that the target has not shown yet: what `enter`
/// puts in force from the first window whose reading shows it (`Landing::shown`), with what
/// was known when it was decided. Until then the target runs the setting before it, and the
/// controller holds: a second move would queue behind the first. Evaluation draw 1483 (a
/// 479k-object service whose own full collections take 0.6-1 s) was asked for a freeze with
/// 100,000/10/10 at 2.0 s; the main thread ran it at 3.2 s, after its own 1.0 s collection.
/// Entered at once, the window between was read as the frozen setting's (251 young rounds at
/// 700 taken for 100,000's, frozen), and the agent asked for 700/10/10 frozen before the first
/// move had landed: three moves in 3 s, each judged on a window of another setting.
struct Landing {
    r: Reading,
    o: Observation,
    here: Candidate,
    to: Scored,
    what: String,
    /// When it was asked for (ns since the epoch).
    asked_ns: u64,
}

impl Landing {
    /// Whether `r` shows the move made: the thresholds read back, and a freeze (or its undo)
    /// counted by the actuator. A reading without them cannot tell, and does not hold it up.
    fn shown(&self, r: &Reading) -> bool {
        let thresholds = r.thresholds.is_none_or(|t| t == self.to.c.thresholds);
        let freeze = match (self.to.c.frozen != self.here.frozen, r.freeze_count) {
            (false, _) | (true, None) => true,
            (true, Some(n)) => (n > 0) == self.to.c.frozen,
        };
        thresholds && freeze
    }
}

/// The share of the memory allowance RSS may rise by in a window whose full collection tells
/// what an earlier rise was (`Replacement::window`): below it, the rise is over.
const SETTLED_RISE: f64 = 0.25;

/// The most copies of a structure the heap replaces whole that a setting keeps beside the
/// application's own (`Controller::replaced_kept`): the one a freeze made at once finds dead
/// and uncollected, the live one it freezes (kept once replaced), and the next one, which a
/// deferred full collection has not freed yet, or which is built beside the one frozen. A copy
/// under this share of the memory allowance cannot take any setting over it alone, and is not
/// counted as one.
const MAX_COPIES: f64 = 3.0;

/// Windows of rises waiting to be told kept, the largest: an agent frozen at thresholds of its
/// own may wait for hours, and the largest rises are what a copy would be made of.
const WAITING_KEPT: usize = 32;

/// A structure the heap replaces whole (a catalog rebuilt and swapped in): what a setting that
/// puts the application's full collections off (or a freeze) keeps of it is the old copy, until
/// the next full collection finds it, and a freeze for ever. Nothing else tells it before that
/// collection runs: the counters count the old copy as live. Tuning draw 1 (a 422k-object
/// catalog rebuilt every 4.9 s by a builder thread) moved to 5,000/50/10 in the window its RSS
/// rose 65 MiB with the first rebuild; the full collection that would have freed the old copy
/// did not come for 10 s, and the next rebuild held three copies (peak RSS 1.48x the
/// defaults'). Every build so far had gone over its budget there.
#[derive(Debug, Clone, Default)]
struct Replacement {
    /// Windows in which RSS rose past the application's pace by more than a share of the memory
    /// allowance (`MAX_COPIES`), with no full collection of the application's own since to tell
    /// whether what arrived replaced something (`unresolved`).
    waiting: Vec<Rise>,
    /// The most one full collection of the application's own found dead of the old heap, where
    /// past that share: a replacement seen (bytes).
    seen: f64,
    /// A full collection of the application's own has told what it found dead of the old heap.
    checked: bool,
    /// The least one full collection of the application's own freed (bytes), of those that ran
    /// with no rise waiting and none arriving: the garbage each finds anyway, not a copy.
    least_freed: Option<f64>,
    /// RSS stepped up past the application's pace after a window in which it had not, and has
    /// gone on rising since (`stepping`).
    step: bool,
    /// The last window's rise was measured (not the first window's) and was no step.
    flat_before: bool,
    /// RSS rose in the last window by more than a settled window's share of the allowance
    /// (`SETTLED_RISE`): a full collection begun there ran while a copy was still being built.
    rose_before: bool,
    /// The application's pace (bytes a second) in the last window whose rise was measured and
    /// was none, with nothing waiting: what a step from there is told against (`window`).
    flat_pace: Option<f64>,
    /// Windows read.
    windows: u64,
    /// The process ran before the agent's first window (attached, not launched), and its RSS
    /// has not yet stood in a measured window (risen by less than a copy's share of the
    /// allowance): RSS rising until then may be a step begun unseen (`under_way`).
    before_first_stand: bool,
    /// What RSS has risen by in the windows since the first, while `before_first_stand`: a step
    /// whose start the agent did not see, or the application's growth. Which, shows once RSS
    /// stands (`window`).
    under_way: Option<Rise>,
}

/// One window's rise in RSS that waits for a full collection to tell what it was.
#[derive(Debug, Clone, Copy)]
struct Rise {
    /// What RSS rose by (bytes), over the window's `secs` seconds.
    bytes: f64,
    secs: f64,
    /// The least it rose past any pace of the application's known since (bytes).
    past: f64,
    /// The highest pace that may explain it (bytes a second): for a rise in a step from where
    /// RSS stood, the pace there (`Replacement::flat_pace`); for any other, no bound.
    cap: f64,
    /// A full collection other than the application's own at its own settings ran since it
    /// began (`Replacement::collected_elsewhere`): it may have freed what rose, and RSS keeps
    /// the pages freed, so the application's own finding nothing later says nothing of it.
    exposed: bool,
}

impl Rise {
    /// What RSS rose by past growth at `pace` bytes a second, or at its own bound where that is
    /// lower (`cap`; bytes).
    fn beyond(&self, pace: f64) -> f64 {
        self.bytes - pace.min(self.cap) * self.secs
    }
}

impl Replacement {
    /// One window of `secs` seconds: RSS rose by `raw`, the application's own growth is `pace`
    /// bytes a second; `own_full`: the application's own full collections at its own settings,
    /// where one ran. Returns whether that collection came to a rise waiting for one.
    fn window(
        &mut self,
        (raw, secs, pace): (f64, f64, f64),
        own_full: Option<OwnFull>,
        allowance: f64,
    ) -> bool {
        // A pace measured since can explain a rise that waits, never make one a copy. Seed-69
        // draw 1871 (a 624k-dict heap growing 10.8 MiB a second at every setting) rose 11 MiB
        // in each of its first windows, before four had measured that pace at any setting:
        // counted whole as a copy that a freeze made at once would keep dead, the freeze waited
        // 5 s for the application's own 160 ms full collection, which then set the 20 s run's
        // p99 (act / oracle 4.65 in its sample, 4.4 and 5.8 in reruns).
        // Not a pace read over the rise itself, though: a step from where RSS stood is told
        // against the pace there. Tuning draw 1355 (a 400k-instance catalog rebuilt every 2.4 s
        // by a builder thread) stood at 197-200 MiB, then rose 67, 72 and 61 MiB in its own
        // windows as a copy was built; read over those windows, its pace was 61.5 MiB a second
        // and explained every rise, and a freeze made at once kept the copy the new one
        // replaced, dead and uncollected: 785 MiB where the defaults peaked at 484-499.
        for w in &mut self.waiting {
            w.past = w.past.min(w.beyond(pace));
        }
        self.waiting.retain(|w| w.past > allowance / MAX_COPIES);
        // A rise under way when the agent attached ends as a step does, once RSS stands: a
        // structure was being built, to replace one or not, and it waits whole for a full
        // collection to tell which. Read over the rise itself, the pace explained it, and
        // nothing waited: seed-148 draw 1734 at half speed (a 474k-object batch whose heap a
        // builder thread rebuilds whole every 3.9 s) rose 60-65 MiB a window from attach, stood,
        // and was frozen the next window, keeping the copy the rebuild had replaced (peak RSS
        // 582 MiB, 560 allowed). Launched under the agent, the process's first fill is seen from
        // its start, and has nothing before it to replace; a heap still growing is not told
        // apart from a step until it stands, and is frozen on what the pace says, as before.
        if self.before_first_stand && self.windows > 0 {
            if raw > allowance / MAX_COPIES {
                let run = self.under_way.get_or_insert(Rise {
                    bytes: 0.0,
                    secs: 0.0,
                    past: 0.0,
                    cap: 0.0,
                    exposed: false,
                });
                run.bytes += raw;
                run.secs += secs;
            } else {
                self.before_first_stand = false;
                if let Some(run) = self.under_way.take() {
                    self.waiting.push(Rise { past: run.bytes, ..run });
                    // A step from here is told against the pace RSS stood at here, not one
                    // read over the run: seed-151 draw 1633 (a batch rebuilt every 3.7 s),
                    // with its first rise waiting and no pace set where RSS stood, read the
                    // next rebuild's rise at 50,000/10/10 as its pace and stayed there a
                    // window longer than the build before, to 1.79x the RSS it had at its own
                    // settings.
                    self.flat_pace = Some(raw.max(0.0) / secs.max(1e-3));
                }
            }
        }
        let cap = match self.flat_pace {
            Some(p) if self.step || self.flat_before => p,
            _ => f64::INFINITY,
        };
        let new = Rise { bytes: raw, secs, past: 0.0, cap, exposed: false };
        let rise = new.beyond(pace).max(0.0);
        // The first window has no RSS before it: its rise is unknown, not flat. A heap growing
        // from attach has no flat window, and its growth is no step.
        let rising = rise > allowance / MAX_COPIES;
        self.step = rising && (self.step || self.flat_before);
        self.flat_before = !rising && self.windows > 0;
        if self.flat_before && self.unresolved() == 0.0 {
            self.flat_pace = Some(pace);
        }
        self.windows += 1;
        let mut told = false;
        // Nothing waits to be told, and nothing arrived: what such a collection frees is the
        // garbage each one finds, whatever arrives between them.
        let quiet = self.unresolved() == 0.0 && rise <= allowance / MAX_COPIES && self.under_way.is_none();
        let settled = rise <= allowance * SETTLED_RISE;
        if let Some(OwnFull { old, freed, n, carried }) = own_full {
            // The collection that would have freed a replaced copy ran: what it found says
            // whether one was, where it ran once RSS had stopped rising. One in a window in
            // which RSS still rose may have run while the new copy was built and the old one
            // served: an evaluation draw's catalog, rebuilt on its main thread, rose 72 MiB
            // and then 18 more, with full collections in both windows that found nothing
            // dead; read as growth, it was frozen with both copies (1.57x its own RSS).
            // So too one that began in such a window and ended in a settled one: seed-144
            // draw 1751 (a 287k-instance catalog rebuilt every 7.1 s by a builder thread) rose
            // 31 and 96 MiB, and a 549 ms full collection begun in the second window, before
            // the swap, ended in the next (8 MiB) having found nothing dead; read as growth,
            // the freeze 2 s later kept the replaced copy, and the next rebuild took RSS to
            // 1.18x the defaults' peak before the undo.
            if settled && !(carried && self.rose_before) {
                let waited = self.unresolved() > 0.0;
                // What it freed tells what rose only where no other full collection came
                // between (`Rise::exposed`).
                told = waited && !self.waiting.iter().any(|w| w.exposed);
                // Freeing more than the allowance, it says the rise was a copy replacing one,
                // as large as the smaller of the two. What it found of the old heap alone
                // cannot say so: the copy built since the last full collection counts as
                // promoted, and a copy replaced by one as large reads as nothing found. Seed-60
                // draw 1105 (a 277k-dict catalog rebuilt every 3.5 s by a builder thread) rose
                // 69 MiB, and the full collection that freed 260k objects read as no
                // replacement: frozen, it grew 86 MiB in 4 s, and the undo's thawed heap came
                // back as a 947 ms full collection where the defaults' longest was 573 ms.
                // Only past what each of its full collections frees anyway: a service whose
                // requests' garbage is promoted (tuning draw 813, a closed loop) frees 23 MiB in
                // every full collection, every 1.4 s, and its RSS rises and falls by as much
                // between them; the rise before the second one read as a copy replaced, and every
                // freeze was barred for keeping two (+46 MiB), where freeze + 50,000/20/20 took
                // its p99 to 0.43x the defaults' and its RSS to 0.69x.
                let past = freed - n as f64 * self.least_freed.unwrap_or(0.0);
                if waited && past > allowance {
                    self.found(self.untold().min(past), allowance);
                }
                self.waiting.clear();
            }
            self.found(old, allowance);
            if quiet {
                let each = freed / n.max(1) as f64;
                self.least_freed = Some(self.least_freed.map_or(each, |l| l.min(each)));
            }
        }
        self.rose_before = !settled;
        if rise > allowance / MAX_COPIES {
            if self.waiting.len() == WAITING_KEPT
                && let Some((least, _)) =
                    self.waiting.iter().enumerate().min_by(|(_, a), (_, b)| a.past.total_cmp(&b.past))
            {
                self.waiting.swap_remove(least);
            }
            self.waiting.push(Rise { past: rise, ..new });
        }
        told
    }

    /// A full collection ran in the window just read that was not the application's own at its
    /// own settings (neurogc's, or one at thresholds of neurogc's): what RSS rose by so far may
    /// be garbage it freed, which RSS goes on holding as free pages. Read as the application's
    /// new data where its own next full collection found nothing, RSS grown under a freeze was
    /// counted afresh from after the undo's collection (the unit test `what_rss_holds_after_a_
    /// freeze_undone_for_memory_stays_neurogcs`).
    fn collected_elsewhere(&mut self) {
        for w in self.waiting.iter_mut().chain(self.under_way.as_mut()) {
            w.exposed = true;
        }
    }

    /// The most RSS rose within one window, past the application's pace, that waits for a full
    /// collection to tell whether it replaced something (bytes; 0 where none).
    fn unresolved(&self) -> f64 {
        self.waiting.iter().map(|w| w.past).fold(0.0, f64::max)
    }

    /// What the rises that wait add up to (bytes): a copy built over several windows is their
    /// sum. Evaluation draw 1109 at half speed (a 1.17M-dict catalog rebuilt every 7.4 s by a
    /// builder thread) rose 143, 152, 181 and 78 MiB in the windows of one rebuild, and the
    /// application's full collections meanwhile ran while RSS still rose; a deferred freeze
    /// priced at the largest rise (181 MiB, 185 allowed) was made, kept the 598 MiB copy, and
    /// the undo's collection of the thawed heap took 3.95 s against the defaults' longest 3.2 s.
    fn untold(&self) -> f64 {
        self.waiting.iter().map(|w| w.past).sum()
    }

    fn found(&mut self, old: f64, allowance: f64) {
        self.checked = true;
        if old > allowance / MAX_COPIES {
            self.seen = self.seen.max(old);
        }
    }

    /// RSS is still rising in a step up from a window in which it stood (past the application's
    /// pace, by more than a copy's share of the allowance): a structure may be being built to
    /// replace one, and how large it is shows only once RSS stands again. Evaluation draw 1528
    /// (a 63k-tuple catalog rebuilt every 6.1 s by a builder thread) was frozen in the window
    /// its RSS first rose 10 MiB, after an application's full collection that ran mid-rebuild
    /// and found nothing dead, priced at that 10 MiB; the copy grew 17 MiB more in the next
    /// window, the freeze kept the old one, and by the next rebuild peak RSS was 87 MiB against
    /// the 83 MiB bound, the undo's thawed heap collected in 156 ms against the defaults' 82.
    fn stepping(&self) -> bool {
        self.step
    }

    /// A full collection of the application's own found a replaced copy dead.
    fn seen(&self) -> bool {
        self.seen > 0.0
    }

    /// What a setting that puts full collections off may keep (bytes).
    fn held(&self) -> f64 {
        self.untold().max(self.seen)
    }

    /// The application's full collections found its old heap standing: one looked, and none
    /// found a replaced copy dead. A rise that still waits for one to tell is not counted here:
    /// what it may have replaced is counted as kept by the settings that would keep it
    /// (`held`), against the budget's allowance, and the pace around it stays the
    /// application's. Where such a rise past the allowance ended the credit for that pace,
    /// seed-104 draw 1392 (a 1.5M-object heap growing 17 MiB a second at every setting, the
    /// defaults' arm to the same RSS) rose 55 MiB in one window at 20,000/20/20, 41 past its
    /// pace and 40 allowed of its first RSS: all it had grown since neurogc's first change
    /// (340 MiB) read as the setting's, and it was moved back for memory at the RSS its own
    /// settings had.
    fn old_heap_stands(&self) -> bool {
        self.checked && self.seen == 0.0
    }
}

/// The application's own full collections in a window, at its own settings
/// (`Replacement::window`).
#[derive(Debug, Clone, Copy)]
struct OwnFull {
    /// What they found dead of the old heap (bytes).
    old: f64,
    /// What they freed in all (bytes).
    freed: f64,
    /// How many ran.
    n: u64,
    /// The window's longest began before it, in the window before (`Reading::full_began_before`).
    carried: bool,
}

/// How a freeze can be made in act mode, neurogc running no collection of its own.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Deferral {
    /// After it (due in this many seconds at the setting in force), or at once with the garbage
    /// pending since the last: the cheaper.
    Either(f64),
    /// At once.
    Never,
}

/// The decision, before it is put in a verdict.
struct Choice {
    to: Scored,
    /// The candidate other than the setting in force that scored best (None: there was none).
    best_other: Option<Scored>,
    /// The setting in force's features (what a move's learned correction is relative to).
    here_row: [f32; FEATURE_COUNT],
    /// The setting in force's ln cost (what a move's predicted difference is relative to).
    here_cost: f64,
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
    /// neurogc froze once already, or its freeze failed `FREEZE_TRIES` times: the actuator
    /// freezes once a session.
    freeze_used: bool,
    /// Freezes asked for that did not happen, and the window from which one may be asked again.
    freeze_missed: (u32, u64),
    window: u64,
    first_ts: Option<u64>,
    /// What RSS holds of neurogc's settings since its first change, against the application's.
    kept: Kept,
    /// RSS in the window neurogc froze, and when (s): what the freeze keeps can be no more than
    /// RSS grew since, past the application's own growth.
    rss_at_freeze: Option<(f64, f64)>,
    /// What RSS had grown at neurogc's thresholds when it froze (`grown_at_neurogcs`): garbage
    /// that waited for a full collection there is frozen with the rest, and stays the freeze's.
    grown_before_freeze: f64,
    /// The highest RSS measured while the application's own settings were in force (its
    /// thresholds, nothing frozen by neurogc): what a memory miss is told against.
    own_rss: Option<f64>,
    /// How RSS grows at the application's own settings.
    own_growth: OwnGrowth,
    /// The longest pause in a window that is evidence for the application's own settings, or
    /// of a collection begun before neurogc's first request (`collection_ended`; ns): the most
    /// a collection of neurogc's may pause it (`thaw_collects`, `runs_a_full`).
    own_longest_ns: f64,
    /// When neurogc first asked the target for a change (ns since the epoch): a collection
    /// begun before it ran at the application's own settings, whatever window it ends in
    /// (`collection_ended`).
    first_request_ns: Option<u64>,
    /// When the application's own next full collection was due (s), as the counters read in
    /// its last window at its own settings (`own_credit`).
    own_full_due_s: Option<f64>,
    /// How RSS grows at any setting with nothing frozen by neurogc, its own or the
    /// application's: the pace neurogc's settings' growth is told against (`own_credit`).
    unfrozen_growth: OwnGrowth,
    /// How RSS grows while neurogc's freeze stands: the pace told against where the freeze
    /// came before one was read unfrozen (`own_credit`).
    frozen_growth: OwnGrowth,
    /// What RSS did at neurogc's settings says of the application's own pace (`own_credit`).
    pace_caps: PaceCaps,
    /// RSS in the last window, where the setting in force was in force in it.
    rss_before: Option<f64>,
    /// RSS in the last window, whatever was in force, and how much it rose in this one.
    last_rss: Option<f64>,
    rss_rise: f64,
    /// How much it rose in the window before (`grown_by_next_copy`).
    rss_rise_before: f64,
    /// The most RSS rose in one window at thresholds of neurogc's, unfrozen: what another such
    /// setting entered is taken to add before its own growth is measured.
    rise_at_neurogcs: f64,
    /// The last change, until its effect is reported.
    change: Option<Change>,
    /// A freeze waiting for the application's next full collection to end (`Deferred`).
    deferred: Option<Deferred>,
    /// A move asked for that the target has not shown yet (`Landing`).
    landing: Option<Landing>,
    /// A deferred freeze waited in vain: the next one is made at once.
    deferral_failed: bool,
    /// neurogc undid all it set for memory once (`grown_here`).
    undone_for_memory: bool,
    /// A deferred freeze landed after the memory budget was missed while it was queued
    /// (`Deferred::undo_on_landing`): the next decision undoes all neurogc set.
    undo_landed: bool,
    /// What a setting that puts the application's full collections off may keep of a structure
    /// the heap replaces whole (`Replacement`).
    replacement: Replacement,
    /// A deferred freeze was dropped for what its full collection found dead of the old heap
    /// and the copies the move would keep (bytes; `deferred_lands`): said in the next decision.
    turned_over: Option<(f64, f64)>,
    /// What was last said about budgets no setting can hold (said once).
    said: Option<String>,
    /// The model's chance of a pause over the budget in the next window, at the setting chosen.
    expected_over: f64,
    /// How far the learned model's corrections have come true here, and the last move's check.
    trust: Trust,
    /// How far the model's predicted differences in cost came true in the moves made here.
    model_error: model_error::ModelError,
    trial: Option<Trial<Candidate>>,
    /// The features of the last move's two ends, while the model has not been asked about it.
    trial_rows: Option<[[f32; FEATURE_COUNT]; 2]>,
    /// The advice last given (advise mode): what a new one must beat by the change's cost.
    advised: Option<Candidate>,
    /// Work per net allocation counted, in the last window that did some (`Reading::work_per_s`):
    /// what turns the collector's allocation rate into the work the costs are per.
    work_per_alloc: f64,
}

fn mib(b: f64) -> f64 {
    b / 1048576.0
}

/// A reading's clock in seconds.
fn secs(ts_ns: u64) -> f64 {
    ts_ns as f64 / 1e9
}

fn predicted(p: &Prediction) -> Predicted {
    // The first full collection after a freeze counts: it is the next full pause.
    let first = if p.first_full_ns > 0.0 { (2, p.first_full_ns) } else { (0, 0.0) };
    let (g, pause) = (0..3).fold(first, |b, g| if p.pause_ns[g] > b.1 { (g, p.pause_ns[g]) } else { b });
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
    let from = before.in_force().filter(|f| *f != c).map(|f| (f, before.predict(&f, before.is_frozen())));
    Some(Check {
        features: before.features(&c, before.is_frozen(), &p).to_vec(),
        from: from.map(|(f, q)| before.features(&f, before.is_frozen(), &q).to_vec()),
        predicted: [p.share, p.pause_ns[0], p.pause_ns[1], p.pause_ns[2]],
        measured: [Some(r.gc_share), ran(0), ran(1), ran(2)],
        memory: Some(CheckMemory {
            predicted_mib: mib(p.memory_bytes),
            from_mib: from.map(|(_, q)| mib(q.memory_bytes)),
        }),
    })
}

/// A setting's cost against the setting in force's ("0.80x the cost"), and the wait at p99
/// where the two differ by a tenth of a millisecond or more.
fn ratio_words(s: &Scored, here: &Scored) -> String {
    let cost = format!("{:.2}x the cost", (s.ln_cost - here.ln_cost).exp());
    if (s.wait_ns - here.wait_ns).abs() < 1e5 {
        return cost;
    }
    format!("{cost}, requests' wait at p99 {:.1} -> {:.1} ms", here.wait_ns / 1e6, s.wait_ns / 1e6)
}

impl Controller {
    pub fn new(cfg: GuardConfig, original: [i64; 3], act: bool) -> Controller {
        let trust = if cfg.model_full_weight { Trust::full() } else { Trust::default() };
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
            freeze_missed: (0, 0),
            window: 0,
            first_ts: None,
            kept: Kept::default(),
            rss_at_freeze: None,
            grown_before_freeze: 0.0,
            own_rss: None,
            own_growth: OwnGrowth::default(),
            own_longest_ns: 0.0,
            first_request_ns: None,
            own_full_due_s: None,
            unfrozen_growth: OwnGrowth::default(),
            frozen_growth: OwnGrowth::default(),
            pace_caps: PaceCaps::default(),
            rss_before: None,
            last_rss: None,
            rss_rise: 0.0,
            rss_rise_before: 0.0,
            rise_at_neurogcs: 0.0,
            change: None,
            deferred: None,
            landing: None,
            deferral_failed: false,
            undone_for_memory: false,
            undo_landed: false,
            replacement: Replacement::default(),
            turned_over: None,
            said: None,
            expected_over: 0.0,
            work_per_alloc: 1.0,
            trust,
            model_error: model_error::ModelError::default(),
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

    /// The thresholds asked of the target: those of a move it has not shown yet, else those in
    /// force as the controller knows them.
    pub fn thresholds(&self) -> [i64; 3] {
        self.landing.as_ref().map_or(self.current, |l| l.to.c.thresholds)
    }

    pub fn frozen(&self) -> bool {
        self.frozen
    }

    /// A freeze is decided and waits for the application's next full collection to end: the
    /// agent queues it then (with the move's thresholds), and while it waits nothing else moves.
    pub fn freeze_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// The application's full collection a deferred freeze waits for has ended, having freed
    /// `collected` objects: whether the freeze lands now. Not where what it found dead of the old
    /// heap says the heap replaces a structure whole (a catalog rebuilt and swapped in), and the
    /// copies the move would keep of it (`replaced_kept`) are more than the memory budget
    /// allows neurogc's changes to keep (a tuning draw's catalog, frozen once, grew 648 MiB in
    /// 16 s). The freeze is then dropped, and the next window decides again with that
    /// collection measured.
    pub fn deferred_lands(&mut self, collected: i64) -> bool {
        let Some(to) = self.deferred.as_ref().map(|d| d.to.c) else { return false };
        let app_rss = self.own_rss.or(self.rss_before).unwrap_or(0.0);
        let old = self.collector.old_found_bytes(collected as f64, 1);
        let allowance = self.budgets.memory_allowance(app_rss);
        if let Some(old) = old {
            self.replacement.found(old, allowance);
        }
        let kept = self.replaced_kept(&to, false);
        if kept > allowance {
            self.deferred = None;
            self.turned_over = Some((old.unwrap_or(0.0), kept));
            return false;
        }
        if let Some(d) = &mut self.deferred {
            d.queued = true;
        }
        true
    }

    /// The actuator changed the target's setting (thresholds written, a freeze or unfreeze
    /// made) at `ts_ns`, `latency_ns` after it was asked to: a window that began before is the
    /// setting's only from there on.
    pub fn wrote(&mut self, ts_ns: u64, latency_ns: u64) {
        self.collector.wrote(ts_ns);
        self.first_request_ns.get_or_insert(ts_ns.saturating_sub(latency_ns));
    }

    /// One of the target's collections, begun at `started_ns`, has ended after `pause_ns`: one
    /// begun before neurogc asked for any change is a pause of the application's own, what a
    /// collection or setting of neurogc's may match (`own_longest_ns`), though the window it
    /// ends in holds a move and is no setting's evidence. Evaluation draw 1349 (a 1.5M-object
    /// service) was asked for a freeze during its own 1.3 s full collection, which the freeze
    /// then followed; counted nowhere, the longest pause of its own read as its young rounds'
    /// 157 ms, and every setting pausing past that was barred, where freeze + 20,000 held its
    /// p99 at 0.05x the defaults'.
    pub fn collection_ended(&mut self, started_ns: u64, pause_ns: u64) {
        if self.first_request_ns.is_none_or(|asked| started_ns < asked) {
            self.own_longest_ns = self.own_longest_ns.max(pause_ns as f64);
        }
    }

    /// The actuator could not freeze (the main thread did not run the call). Nothing changed in
    /// the target, so the freeze stays a move, asked for again after twice as many windows each
    /// time: a main thread that sleeps between requests may be running the next time. Once on
    /// an evaluation draw it was never asked again, and the session ran 137x the p99 of the
    /// freeze it had chosen.
    pub fn freeze_failed(&mut self) {
        // The thresholds sent with it are written all the same: the move stands without it.
        if let Some(l) = self.landing.take() {
            self.enter(&l.r, &l.o, l.here, &l.to, l.what);
        }
        self.deferred = None;
        self.frozen = false;
        // What RSS kept while the freeze was thought to stand was the application's own: no
        // pace of a freeze (`own_credit`) is read from it.
        self.frozen_growth = OwnGrowth::default();
        self.rss_at_freeze = None;
        self.collector.unfroze();
        let tries = self.freeze_missed.0 + 1;
        self.freeze_missed = (tries, self.window + (1u64 << tries));
        self.freeze_used = tries >= FREEZE_TRIES;
    }

    fn cfg(&self) -> &GuardConfig {
        self.budgets.config()
    }

    /// A setting's figures, each said for what it is: measured there (the mean of each window's
    /// longest pause, the GC share over its windows), or predicted (a setting not tried yet).
    /// Advice once quoted a prediction as "longest pause 409.0 ms" where the windows measured
    /// 1.4 ms. A pause over the budget says in how many windows: the budget counts windows, so a
    /// long full collection minutes apart can hold it, and the figure says so rather than
    /// "holds" beside 714.6 ms. `memory_bytes`: what it keeps (for the setting in force, as
    /// measured).
    fn figures(&self, s: &Scored, memory_bytes: f64) -> String {
        let memory = mib(memory_bytes);
        let budget = self.budgets.pause_ns();
        let over = |pause_ns: f64, share: f64, every: Option<f64>| match budget {
            Some(b) if pause_ns > b => {
                let every = every.map_or(String::new(), |e| format!(": a full collection every {e:.0} s"));
                let pct = share * 100.0;
                let pct = if pct > 0.0 && pct < 0.1 { format!("{pct:.2}") } else { format!("{pct:.1}") };
                format!(" (over the {:.0} ms budget in {pct}% of windows{every})", b / 1e6)
            }
            _ => String::new(),
        };
        match self.evidence.get(&s.c).filter(|st| s.measured > 0 && st.windows() > 0.0) {
            Some(st) => {
                let pause = st.pause_max_ms().unwrap_or(0.0);
                let (n, windows) = st.over_budget();
                // What the pause budget is missed by where no window measured shows it.
                let due = match s.p.next_full_s {
                    Some(due)
                        if n == 0.0 && s.misses.pause > 0.0 && s.due_miss > 0.0 && s.c == self.in_force() =>
                    {
                        format!("; its {:.0} ms full collection due in {due:.0} s", s.p.pause_ns[2] / 1e6)
                    }
                    _ => String::new(),
                };
                format!(
                    "measured over {}: longest pause {pause:.1} ms a window (mean){}, GC {:.1}%, \
                     memory +{memory:.0} MiB{due}",
                    crate::text::plural(s.measured, "collection"),
                    over(pause * 1e6, n / windows.max(1e-9), None),
                    st.gc_share().unwrap_or(s.p.share) * 100.0,
                )
            }
            None => {
                let pause = s.p.pause_max_ns();
                let window_s = self.budgets.window_s();
                let full = s.p.rate[2] > 0.0 && s.p.pause_ns[2] >= pause && s.p.rate[2] * window_s < 0.1;
                let share = budget.map_or(0.0, |b| s.p.windows_over(b, window_s).share);
                format!(
                    "predicted: longest pause {:.1} ms{}, GC {:.1}%, memory +{memory:.0} MiB",
                    pause / 1e6,
                    over(pause, share, full.then(|| 1.0 / s.p.rate[2])),
                    s.p.share * 100.0,
                )
            }
        }
    }

    /// A move's cost against the setting in force's, and its figures.
    fn weighed(&self, s: &Scored, here: &Scored) -> String {
        format!("{}, {}", ratio_words(s, here), self.figures(s, s.p.memory_bytes))
    }

    /// Whether a freeze is a move now: the actuator can run it, the application froze nothing
    /// itself, the user allows it, and the heap is warm: seen so (`Collector::heap_warm`), or the
    /// process has been watched (or has run) `--freeze-after`. neurogc freezes once a session,
    /// so a heap still filling would be frozen in part.
    fn may_freeze(&self, r: &Reading) -> bool {
        let Some(after) = self.cfg().freeze_after_s else { return false };
        let watched = r.ts_ns.saturating_sub(self.first_ts.unwrap_or(r.ts_ns)) as f64 / 1e9;
        let warm = self.collector.heap_warm() || r.age_s.unwrap_or(watched).max(watched) >= after;
        self.freeze_allowed
            && !self.freeze_used
            && self.window >= self.freeze_missed.1
            && warm
            && !self.mid_step()
    }

    /// In act mode, a freeze waits while RSS steps up (`Replacement::stepping`): what it would
    /// keep of a structure being replaced cannot be priced before the step ends. Advice is a
    /// freeze for the end of start-up, not for this window, and is not turned over by a step.
    fn mid_step(&self) -> bool {
        self.act && self.replacement.stepping()
    }

    /// How a freeze of neurogc's can be made in act mode (`Deferral`): after the application's
    /// next full collection where the counts put it within half the longest wait at the setting
    /// in force (the count of objects promoted since the last says when it comes), or at once
    /// with the garbage pending since the last, whichever the model prices cheaper: the wait
    /// earns nothing, the freeze at once keeps what of the pending objects is garbage (the
    /// share the application's full collections found dead of them). At once too where one
    /// deferred already waited in vain. Waiting was once the only way where one of the
    /// application's own full collections had been measured: a draw filling a 1.25M-object
    /// cache whose full collections found none of it dead waited 1.6 s for its next, a 221 ms
    /// pause the freeze would have spared; another waited six windows and an 838 ms one.
    /// A full collection measured once is no sign that another comes soon: the test profile of
    /// cyclic young garbage ran one in its first second and none in the next ten (73 objects
    /// promoted of the 1,800 that call one), and a freeze that could only wait for it waited
    /// with the move to 5,000/10/10 it came with, a 0.59x cost.
    /// `here`: the prediction for the setting in force.
    fn deferral(&self, here: &Prediction) -> Deferral {
        if self.deferral_failed {
            return Deferral::Never;
        }
        let window_s = self.budgets.window_s().max(1e-3);
        match here.next_full_s {
            Some(due) if due / window_s <= MAX_FREEZE_WAIT_WINDOWS / 2.0 => Deferral::Either(due),
            _ => Deferral::Never,
        }
    }

    /// This window as evidence for the setting in force.
    fn observation(&self, r: &Reading) -> Observation {
        let rate = r.work_per_s();
        let work = rate * r.secs;
        let counted = r.work_counted();
        let per_alloc =
            |share: f64| (counted && share > 0.0 && work >= 1.0).then(|| (share * 1e9 / rate).ln());
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
            young_pause_max_ns: r.young_pause_max_ns(),
            rss_mib: mib(r.rss as f64),
            grown_bytes: self.grown_here(r),
        }
    }

    /// What RSS has grown since neurogc's first change, counted as the setting in force's own
    /// where its thresholds are not the application's and the heap is warm (the application's
    /// own data has stopped growing), or, before, past the pace the application's own windows
    /// grew at (`grown_at_neurogcs`). The model's figure for what a setting keeps is a prior,
    /// and this the measurement: micrograd, moved to 2,000/10/10 frozen on a prediction of
    /// +13 MiB, grew 41 MiB there over seven windows, while the budget counted no more than
    /// the prediction and called the rest the application's. At the application's own
    /// thresholds, frozen or not, growth stays the application's (a service's data growing for
    /// hours is not a reason to unfreeze it), and what they keep is the model's, as before.
    /// Where RSS is still rising, what it will have grown by the next window: the budget is to
    /// hold through it (micrograd's rose 6 MiB a window at 2,000/10/10 frozen). So too in the
    /// first window after a move: growth goes on at a setting that keeps as much, and unread
    /// there, a move for memory to one (20,000/10/10 to 20,000/10/20 in the controller's
    /// tests) let RSS past the bound by a window's growth.
    ///
    /// A freeze of neurogc's is its own setting too, at the application's thresholds as at any
    /// other, warm heap or not: what RSS grows while it stands is counted as the freeze's, for
    /// as long as it stands. Frozen objects that die later are never freed, and the model
    /// cannot see them die: a service that rebuilt and swapped a cyclic catalog every 4 s,
    /// frozen at its own thresholds, reached 2.7x the RSS it had at its own settings while
    /// every decision said "memory +12 MiB"; a draw of the same shape (tuning seed 1), frozen
    /// before its heap was seen warm, grew 648 MiB in 16 s, all of it counted as its own
    /// warm-up. Growth that was the application's own comes back after the undo, at its own
    /// settings, where it is counted as the application's again.
    fn grown_here(&self, r: &Reading) -> f64 {
        if let Some(grown) = self.grown_since_freeze(r) {
            return if grown > 0.0 { grown + self.rss_rise } else { 0.0 };
        }
        // Once neurogc has undone everything for memory, the process has shown that its RSS
        // turns with what is left uncollected: growth at a setting of neurogc's is then the
        // setting's, warm heap or not. An evaluation draw (a 1.3M-dict catalog rebuilt every
        // 4.7 s by a builder thread) had its freeze undone, was moved to 2000/50/100, and grew
        // from 1.4 to 2.8 GiB there, 1.8x the defaults' peak, all of it counted as the heap
        // warming up (a tuning draw of the same shape, 51, had done the same at 5000/50/100).
        let own = self.current == candidates::own(self.cfg(), self.original);
        if own {
            return 0.0;
        }
        let grown = self.grown_at_neurogcs(r);
        if grown <= 0.0 {
            return 0.0;
        }
        // Before the heap is warm, one window's rise is a burst until RSS stands, as after a
        // freeze (`grown_by_next_copy`): the pace around it is credited as it comes, and a step
        // waits for a full collection to tell what it was (seed-104 draw 1392's shape, `a_step_
        // within_the_allowance_of_a_growing_heap_leaves_its_own_pace_its_own`).
        if self.growth_from_warm() {
            grown + self.rss_rise
        } else {
            grown + self.rising_past(self.own_growth.pace() * r.secs)
        }
    }

    /// What RSS rose by past `pace` (bytes a window) in each of the last two windows, the lesser:
    /// a rise that goes on, which the next window adds again.
    fn rising_past(&self, pace: f64) -> f64 {
        (self.rss_rise.min(self.rss_rise_before) - pace).max(0.0)
    }

    /// Whether RSS growth from here on can be a setting's own: the application's heap was seen
    /// warm (`Collector::heap_warm`), or its RSS stood still at its own settings
    /// (`OwnGrowth::stood_still`). An evaluation draw (a 19k-list catalog rebuilt every 3.3 s
    /// by a builder thread) ran one full collection of its own before the agent moved it to
    /// 5000/50/20, too few to be seen warm; each copy kept there was counted as its heap
    /// filling, and its RSS reached 1.46x the defaults' peak, though its own windows had not
    /// grown but for the one step of a rebuild. Standing still is growing too slowly to use
    /// the memory allowance up over the model's horizon (that draw's own windows grew 16 KiB
    /// besides the step).
    fn rss_settled(&self) -> bool {
        let still = self.budgets.memory_allowance(self.own_rss.unwrap_or(0.0)) / HORIZON_S;
        self.collector.heap_warm() || self.own_growth.stood_still(still)
    }

    /// What RSS has grown, past the application's own pace, since growth began to be measured
    /// as the settings' of neurogc (`Kept::grown`: the first change, or the first window after
    /// it that counts): what any threshold setting of neurogc's would be judged to keep, once
    /// in force. Before the heap is warm (`rss_settled`), growth since the first change past
    /// the pace its own windows grew at (`OwnGrowth::pace`, from two): a heap filling at every
    /// setting fills as fast at the application's own, and its fill is credited whole. Counted
    /// as none before the heap was warm, evaluation draw 1580 (a 26k-tuple catalog with 4 KiB
    /// payloads rebuilt every 5.2 s by a builder thread; its own windows grew 0.6 MiB a second)
    /// was moved to 1,000/50/100 on a prediction of +2 MiB and grew from 26 to 42 MiB there in
    /// six windows, each replaced copy waiting for a full collection 70 s off, while every
    /// decision said "memory +5 MiB"; frozen on top of that, it reached 63 MiB against the
    /// defaults' peak of 36.
    fn grown_at_neurogcs(&self, r: &Reading) -> f64 {
        if self.growth_from_warm() {
            let now = secs(r.ts_ns);
            return self.kept.grown(r.rss as f64, now, |s| self.own_credit(s, now).0);
        }
        self.grown_unsettled(r)
    }

    /// Whether growth at neurogc's thresholds is measured from a warm window (`Kept::warmed`):
    /// once it was, or where it is to be from this one.
    fn growth_from_warm(&self) -> bool {
        self.kept.is_warm() || self.rss_settled() || self.undone_for_memory
    }

    /// What RSS has grown since neurogc's first change past the pace the application's own
    /// windows grew at (`grown_at_neurogcs` before the heap is warm).
    fn grown_unsettled(&self, r: &Reading) -> f64 {
        let (now, pace) = (secs(r.ts_ns), self.own_growth.pace());
        let raw = |s: f64, now: f64| self.own_credit_raw(s, now).0.max(pace * s);
        self.kept.grown_unsettled(r.rss as f64, now, |s| self.pace_caps.cap(s, now, raw(s, now), raw))
    }

    pub fn decide(&mut self, learned: Learned, r: &Reading) -> Verdict {
        self.window += 1;
        self.land(r);
        let before = self.collector.clone();
        if self.first_ts.is_none() {
            // The process's age at the end of the agent's first window, past that window and
            // one more (the agent arming itself after a launch): it ran unseen before it.
            self.replacement.before_first_stand = r.age_s.is_some_and(|a| a > 2.0 * r.secs);
        }
        self.first_ts.get_or_insert(r.ts_ns);
        if !self.act
            && let Some(t) = r.thresholds
        {
            self.current = t;
        }
        // A deferred freeze has landed once the hook counts frozen objects; the model hears of
        // it before it reads the window, which holds the full collection it followed.
        let landed = self.deferred.is_some() && r.freeze_count.is_some_and(|n| n > 0);
        if let (true, Some(d)) = (landed, &self.deferred) {
            self.collector.froze(true, d.to.reset);
        } else if self.deferred.as_ref().is_some_and(|d| !d.queued && self.window > d.until_window) {
            // No full collection came when the model said one would: the freeze is dropped
            // (the agent disarms it) and decided afresh, as one made at once.
            self.deferred = None;
            self.deferral_failed = true;
        }
        let found_old = self.collector.old_found_bytes(r.collected_per[2], r.collections[2]);
        self.collector.observe(r);
        self.rss_rise_before = self.rss_rise;
        self.rss_rise = self.last_rss.map_or(0.0, |b| (r.rss as f64 - b).max(0.0));
        self.last_rss = Some(r.rss as f64);
        // Growth is a setting's own from the first warm window, or, once neurogc has undone all
        // it set for memory, from the first window at thresholds of its own again, warm heap or
        // not (`grown_here`): measured only from a warm window, an evaluation draw's catalog,
        // never seen warm, grew from 1.2 to 2.7 GiB across three moves after its undo while
        // every decision said "memory +4 MiB".
        let own = self.current == candidates::own(self.cfg(), self.original);
        if !self.kept.is_warm() && (self.rss_settled() || (self.undone_for_memory && !own)) {
            // What had grown as the settings' before stays theirs (`grown_at_neurogcs`).
            let carried = self.grown_unsettled(r);
            self.kept.warmed(r.rss as f64, secs(r.ts_ns), carried);
        }
        let check = check(&before, &self.collector, r);
        let mut here = self.in_force();
        // Online correction: what the model predicts for the setting in force against what this
        // window measured.
        self.collector.correct(&here, self.frozen, r);
        // The window is evidence for the setting in force where the target had it all through:
        // not one that held neurogc's own collection before a freeze, a collection begun before
        // the move or the thawed heap's after an unfreeze (those pauses are the move's, not the
        // setting's), nor one whose thresholds the actuator had not written yet, or wrote late
        // (`held_two_settings`).
        let o = self.observation(r);
        if !r.idle && r.work_counted() && r.alloc_per_s >= 1.0 {
            self.work_per_alloc = (r.work_per_s() / r.alloc_per_s).clamp(1.0, 10.0);
        }
        let in_force = r.thresholds == Some(self.current);
        // Not the window a deferred freeze landed in: what RSS grew in it may be the move's.
        if in_force && here == self.own_unfrozen() && !landed {
            self.own_rss = Some(self.own_rss.map_or(r.rss as f64, |o| o.max(r.rss as f64)));
            self.own_growth.add(self.window, secs(r.ts_ns), r.rss as f64);
            let due = self.collector.predict(&here, false).next_full_s;
            self.own_full_due_s = due.map(|d| secs(r.ts_ns) + d);
            if self.own_growth.measured_now() {
                self.pace_caps.clear();
            }
        }
        // A window at neurogc's settings (the one a deferred freeze landed in too: the freeze
        // keeps more, never less) bounds the application's pace (`PaceCaps`).
        if in_force && (here != self.own_unfrozen() || landed) {
            let now = secs(r.ts_ns);
            let since = self.kept.first_change_s().map_or(0.0, |t| now - t);
            let pace = self.own_credit_raw(since, now).1;
            self.pace_caps.add(self.window, now, r.rss as f64, pace, OWN_PACE_SHOWN);
        }
        if in_force && !self.frozen {
            self.unfrozen_growth.add(self.window, secs(r.ts_ns), r.rss as f64);
            if here != self.own_unfrozen() {
                self.rise_at_neurogcs = self.rise_at_neurogcs.max(self.rss_rise);
            }
        } else if in_force {
            self.frozen_growth.add(self.window, secs(r.ts_ns), r.rss as f64);
        }
        // Nor one that held the first full collection after a freeze: a one-off of the freeze's
        // (`Prediction::first_full_ns`), priced when it was made. Counted as the frozen setting's,
        // the demo service's (82-116 ms with another process busy on a CPU) read as
        // "700/10/10 frozen: over the 10 ms budget in 100% of windows", where its later full
        // collections took 2-5 ms, and the agent moved three more times in 4 s.
        let clean = in_force
            && !r.idle
            && !self.collector.held_freeze_collection()
            && !self.collector.held_carried_pause()
            && !self.collector.held_two_settings()
            && !self.collector.held_first_full_after_freeze();
        if clean {
            self.evidence.add(here, &o);
            self.model_error.check(&self.evidence, here);
            if here == self.own_unfrozen() {
                self.own_longest_ns = self.own_longest_ns.max(r.worst().1);
            }
        }
        // The first clean window after a move tells how far the learned correction held here.
        match self.trial {
            Some(t) if t.to == here && clean => {
                self.trust.record(&t, r.gc_share);
                self.trial = None;
            }
            // Kept while the move it is of has not landed.
            Some(t) if t.to != here && self.landing.is_none() => self.trial = None,
            _ => {}
        }
        if !self.kept.any() && !r.idle {
            self.budgets.at_attach(self.long_run_share(r));
        }
        self.budgets.set_window(r.secs);
        // What the setting in force keeps: the model's figure, or what RSS has grown where that
        // is more and the growth is its own (`grown_here`).
        self.rss_before = Some(r.rss as f64);
        if landed && let Some(d) = self.deferred.take() {
            // It landed within the window: what RSS grew in it may be the move's, and the
            // budget counts it so, from the RSS the window began with. Counted from its end,
            // evaluation draw 1401's freeze with 100,000/10/10 (a young generation filling with
            // 4 KiB payloads, 1 MiB of them in that window) was read 1 MiB short of what it
            // kept, and RSS went 1 MiB past the bound before the budget saw it.
            let began = Reading { rss: r.rss.saturating_sub(self.rss_rise as u64), ..*r };
            self.start_trial(&d.to, d.here_row);
            self.enter(&began, &o, here, &d.to, d.what);
            here = self.in_force();
            self.undo_landed = d.undo_on_landing;
        }
        let keeps = self.collector.predict(&here, self.frozen).memory_bytes.max(o.grown_bytes);
        let now = secs(r.ts_ns);
        let own = self.kept.first_change_s().map_or(0.0, |t| self.own_credit(now - t, now).0);
        let (mut cost_now, mut app_rss) = self.kept.split(r.rss as f64, keeps, own);
        let own_full = clean && here == self.own_unfrozen() && r.collections[2] > 0;
        let allowance = self.budgets.memory_allowance(app_rss);
        // What RSS rose by at the pace the application keeps at every unfrozen setting, its own
        // included, is its growth, not a copy arriving: only the rise past that pace waits for a
        // full collection to tell. Seed-60 draw 1931 (a heap of new data growing 6.4 MiB a second
        // at every setting, its full collections finding nothing dead) rose 17 MiB in the window
        // it was frozen, past the 16 MiB allowed: read whole as a copy waiting, it ended the
        // credit for that growth, and the freeze was undone 4 s later for the application's own
        // growth (act / oracle 79.9).
        let pace = self.own_growth.pace().min(self.unfrozen_growth.rate());
        let freed = self.collector.objects_bytes(r.collected(2));
        let told = self.replacement.window(
            (self.rss_rise, r.secs, pace),
            own_full.then_some(OwnFull {
                old: found_old.unwrap_or(0.0),
                freed,
                n: r.collections[2],
                carried: r.full_began_before(),
            }),
            allowance,
        );
        // Where that collection freed next to nothing (the allowance's worth at most), what RSS
        // rose by is the application's new data: growth from here on is measured afresh. What
        // it found of the old heap alone is no proof: a copy rebuilt since the last full
        // collection counts as promoted, and one that replaced another as large reads as
        // nothing found (an evaluation draw's 1.04M objects freed, a catalog replaced, read so).
        if told && freed <= allowance {
            self.kept.rebase(r.rss as f64, secs(r.ts_ns));
        }
        if r.collections[2] > 0 && !own_full {
            self.replacement.collected_elsewhere();
        }
        // What a structure replaced whole leaves is kept by thresholds in force that put the
        // full collection freeing it off, from the window RSS rose by it, as it is by any such
        // setting entered (`replaced_kept`): an evaluation draw (a 319k-object catalog rebuilt
        // every 2.9 s by a builder thread) rose from 168 to 301 MiB in its first window at
        // 5000/50/100, was told "memory +0 MiB" for three more, and reached 1.28x the
        // defaults' peak before its growth was counted as the setting's.
        let held = if self.frozen { 0.0 } else { self.replaced_kept(&here, false) };
        if held > keeps {
            (cost_now, app_rss) = self.kept.split(r.rss as f64, held, own);
        }
        // `split` caps the cost at what RSS has grown; the next window's rise is on top of it.
        // Frozen, what RSS grew since the freeze shows the copy of a replaced structure the
        // freeze keeps; thresholds in force that put full collections off keep the next copy
        // replaced as well, until theirs comes, and RSS cannot show that one before it is
        // replaced (`replaced_kept`). Seed-57 draw 1239 (a 12 MiB catalog rebuilt every 3.6 s,
        // 16 MiB allowed), frozen at 700/10/20, showed one copy kept (+12 MiB) and stayed; the
        // next rebuild took it to 59 MiB (1.85x its own), and the undo paid a 133 ms collection
        // of the thawed heap, where the defaults' longest pause was 77-102 ms.
        let next_copy = if self.frozen && self.puts_full_off(&here) { self.replacement.held() } else { 0.0 };
        let cost_now = cost_now.max(o.grown_bytes + next_copy);
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
        if let Some(l) = &self.landing {
            // The window ran the setting before the move, and is read as that setting's.
            let reason = format!(
                "waiting for {} to take effect: asked {:.1} s ago, the target has not run it yet",
                l.what,
                r.ts_ns.saturating_sub(l.asked_ns) as f64 / 1e9
            );
            return Verdict::stay(l.to.c.thresholds, reason, observed, effect, check);
        }
        let dropped = self.turned_over.take().map(|(found, kept)| {
            format!(
                "freeze dropped: the full collection it waited for found {:.0} MiB of the old heap \
                 dead (the heap turns over; frozen, it would keep {:.0} MiB of replaced copies); ",
                mib(found),
                mib(kept)
            )
        });
        let chosen = self.choose(learned, r, here, app_rss, cost_now);
        let chosen = match (dropped, chosen) {
            (Some(d), Ok((mut c, u))) => {
                c.reason.insert_str(0, &d);
                Ok((c, u))
            }
            (Some(d), Err(e)) => Err(d + &e),
            (None, chosen) => chosen,
        };
        let (choice, unholdable) = match chosen {
            Ok(c) => c,
            Err(reason) => return Verdict::stay(self.current, reason, observed, effect, check),
        };
        let to = choice.to.c;
        // `choose` left the chance of the setting in force; in act mode the next window is the
        // chosen one's (in advise mode the setting in force stays the application's).
        if self.act {
            self.expected_over = choice.to.q_model;
        }
        let change = to != here;
        if !self.act {
            self.advised = change.then_some(to);
        }
        let freeze = (to.frozen != here.frozen).then_some(to.frozen);
        // An undo for memory runs the thawed heap's first full collection at once where that
        // pauses the application no longer than its own collections measured did
        // (`thaw_collects`); else the application's own next full collection frees what the
        // freeze kept, when its own settings would have freed it.
        let undo_for_memory = freeze == Some(false) && choice.budget == Some(Budget::Memory);
        let thaw = undo_for_memory && self.thaw_collects();
        let mut reason = choice.reason;
        if undo_for_memory && !thaw {
            reason.push_str(&self.thaw_words());
        }
        let collect_first = freeze == Some(true) && choice.to.collect;
        let collect = collect_first || thaw;
        let reset = freeze == Some(true) && choice.to.reset;
        let what = change.then(|| {
            let mut w = if to.thresholds != here.thresholds {
                format!("{} -> {}", thresholds(here.thresholds), thresholds(to.thresholds))
            } else {
                thresholds(to.thresholds)
            };
            match freeze {
                Some(true) if collect_first && self.act => {
                    w.push_str(" + freeze after the next full collection")
                }
                Some(true) if collect_first => w.push_str(" + collect, freeze"),
                Some(true) => w.push_str(" + freeze"),
                Some(false) if thaw => w.push_str(" + unfreeze, collect"),
                Some(false) => w.push_str(" + unfreeze"),
                None => {}
            }
            if reset {
                w.push_str(", then collect");
            }
            w
        });
        if change && self.act {
            let what = what.clone().unwrap_or_default();
            if collect_first {
                // The freeze follows the application's own next full collection: no pause of
                // neurogc's, and only what came since is frozen with the heap (the cache
                // service's collection of neurogc's own, 459 ms, was its run's p99; a draw of the
                // generator's evaluation pool paid 161 ms for one). It waits about as long as
                // the model puts that collection off, twice over.
                let due = self.collector.predict(&here, false).next_full_s.unwrap_or(f64::INFINITY);
                let wait =
                    (2.0 * due / self.budgets.window_s().max(1e-3)).clamp(2.0, MAX_FREEZE_WAIT_WINDOWS);
                self.deferred = Some(Deferred {
                    to: choice.to,
                    here_row: choice.here_row,
                    what,
                    until_window: self.window + wait.ceil() as u64,
                    queued: false,
                    undo_on_landing: false,
                    rss_asked: r.rss as f64,
                });
            } else {
                self.start_trial(&choice.to, choice.here_row);
                // Only a move to a setting not measured is the model's prediction alone.
                if choice.to.measured == 0 {
                    let predicted = choice.to.ln_cost - choice.here_cost;
                    self.model_error.moved(&self.evidence, here, choice.to.c, predicted);
                }
                self.landing = Some(Landing { r: *r, o, here, to: choice.to, what, asked_ns: r.ts_ns });
            }
        }
        Verdict {
            thresholds: to.thresholds,
            change,
            freeze,
            collect,
            reset,
            reason,
            what,
            budget: choice.budget,
            given_up: choice.given_up,
            observed,
            predicted: Some(predicted(&choice.to.p)),
            effect,
            check,
            unholdable,
            model: Some(self.model_effect(if change {
                Some(&choice.to)
            } else {
                choice.best_other.as_ref()
            })),
        }
    }

    /// The learned model's part in a decision about `weighed` (the setting moved to, or the best
    /// other where nothing changes): its weight, and what its corrections moved there (scoring
    /// leaves the corrected GC share as `Prediction::corrected` made it).
    fn model_effect(&self, weighed: Option<&Scored>) -> ModelEffect {
        let weight = self.trust.weight();
        let moved = weighed.filter(|_| weight > 0.0).map(|s| ModelMoved {
            setting: s.c.to_string(),
            gc_share: [s.analytic_share, s.p.share],
            pause_ln: std::array::from_fn(|g| f64::from(s.applied[g + 1])),
        });
        ModelEffect { weight, moved }
    }

    /// A move asked for is put in force once `r` shows it made (`Landing`), or once the
    /// actuator has had as long as it takes to answer (`ANSWERS_WITHIN`) and a window more: it
    /// is then taken as asked, as before the move was waited for.
    fn land(&mut self, r: &Reading) {
        let Some(l) = &self.landing else { return };
        let waited = r.ts_ns.saturating_sub(l.asked_ns) as f64 / 1e9;
        if l.shown(r) || waited > ANSWERS_WITHIN.as_secs_f64() + r.secs {
            let l = self.landing.take().expect("a landing");
            self.enter(&l.r, &l.o, l.here, &l.to, l.what);
        }
    }

    /// The move to `to` is the learned model's trial: the first clean window there tells how far
    /// its correction held (asked after deciding where deciding did not need it).
    fn start_trial(&mut self, to: &Scored, here_row: [f32; FEATURE_COUNT]) {
        self.trial = Some(Trial { to: to.c, analytic_share: to.analytic_share, learned: to.learned });
        self.trial_rows = (!to.learned.is_finite()).then_some([here_row, to.row]);
    }

    /// Puts a move in force: what the controller knows of the target from now on, and the
    /// change whose effect is to be measured, what it keeps counted from `r`'s RSS. A deferred
    /// freeze enters as it lands.
    fn enter(&mut self, r: &Reading, o: &Observation, here: Candidate, to: &Scored, what: String) {
        let (c, freeze) = (to.c, (to.c.frozen != here.frozen).then_some(to.c.frozen));
        self.change = Some(Change {
            ts_ns: r.ts_ns,
            from: here,
            to: c,
            what,
            before: [o.pause_max_ms, o.gc_share, o.rss_mib],
        });
        self.current = c.thresholds;
        if freeze == Some(true) {
            self.froze_at(r);
        }
        self.kept.changed(r.rss as f64, self.rss_settled(), secs(r.ts_ns));
        self.rss_before = None;
        match freeze {
            Some(true) => {
                self.frozen = true;
                self.freeze_used = true;
                // A deferred freeze's landing was told to the model before the window was read.
                if !self.collector.is_frozen() {
                    self.collector.froze(to.collect, to.reset);
                }
            }
            Some(false) => {
                // After an unfreeze a later move is judged on what RSS grows from here; what
                // it grew before stays neurogc's (`Kept::thawed`).
                self.frozen = false;
                self.frozen_growth = OwnGrowth::default();
                self.collector.thaw();
                self.kept.thawed(r.rss as f64, self.rss_settled(), secs(r.ts_ns));
            }
            None => {}
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
        let after = self.evidence.get(&c.to).filter(|s| s.windows() >= EFFECT_WINDOWS)?;
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

    /// The setting in force, as the controller counts it.
    fn in_force(&self) -> Candidate {
        Candidate { thresholds: self.current, frozen: self.frozen }
    }

    /// The application's own settings: its thresholds (within the user's bounds), unfrozen.
    fn own_unfrozen(&self) -> Candidate {
        Candidate { thresholds: candidates::own(self.cfg(), self.original), frozen: false }
    }

    /// RSS as measured, against the application's own: "RSS 336 MiB, 1.77x the 190 MiB it
    /// had at its own settings; 146 MiB more since the freeze". What a memory miss of the
    /// setting in force is said with.
    fn rss_words(&self, r: &Reading) -> String {
        let rss = r.rss as f64;
        let mut w = format!("RSS {:.0} MiB", mib(rss));
        if let Some(own) = self.own_rss.filter(|o| *o > 0.0) {
            w.push_str(&format!(", {:.2}x the {:.0} MiB it had at its own settings", rss / own, mib(own)));
        }
        if let Some(grown) = self.grown_since_freeze(r) {
            w.push_str(&format!("; {:+.0} MiB since the freeze", mib(grown)));
            let before = mib(self.grown_before_freeze);
            if before >= 1.0 {
                w.push_str(&format!(", counting {before:.0} grown at neurogc's thresholds before it"));
            }
            let next = self.grown_by_next_copy(r).unwrap_or(grown);
            if next > grown {
                let by = if self.replacement.seen() {
                    "once the next copy is built"
                } else {
                    "by the next window"
                };
                w.push_str(&format!(", {:+.0} MiB {by}", mib(next)));
            }
            let (own, rate) = self.own_since_freeze(r);
            if own > 0.0 {
                w.push_str(&format!(
                    " past the application's own growth ({:.0} MiB at {:.1} MiB/s)",
                    mib(own),
                    mib(rate)
                ));
            }
        }
        w
    }

    /// neurogc's freeze stands from `r`'s window: what it keeps is measured from there
    /// (`grown_since_freeze`), on top of what had grown at neurogc's thresholds before it.
    fn froze_at(&mut self, r: &Reading) {
        self.grown_before_freeze = self.grown_at_neurogcs(r);
        self.rss_at_freeze = Some((r.rss as f64, secs(r.ts_ns)));
    }

    /// What RSS has grown since neurogc's freeze, while it stands (None where none does), over
    /// the most it had at the application's own settings where that was more: the budget is a
    /// bound on RSS against the application's own, and RSS that swings with the garbage
    /// waiting between collections is the application's up to its own peak (an evaluation draw
    /// frozen at a low point of the swing read +30 MiB "since the freeze" at 0.7x the RSS it
    /// had at its own settings, and the undo cost a 111 ms full collection).
    /// Growth at the application's own pace (`OwnGrowth`) is its own, not the freeze's. What
    /// had grown at neurogc's thresholds before the freeze (`grown_before_freeze`) is counted
    /// too: the freeze keeps it, and the budget is on RSS against the application's own.
    /// Counted from the RSS it froze at, evaluation draw 1580, frozen at 42 MiB after 16 had
    /// grown at 1,000/50/100 (26 MiB at its own settings), read +10 MiB at the next rebuild
    /// (2.0x its own RSS, 16 MiB allowed) and was undone only at the one after, at 2.4x.
    fn grown_since_freeze(&self, r: &Reading) -> Option<f64> {
        let own = self.own_rss.unwrap_or(0.0);
        let from = |at: f64| (at - self.grown_before_freeze).max(own);
        self.rss_at_freeze
            .filter(|_| self.frozen)
            .map(|(at, _)| r.rss as f64 - from(at) - self.own_since_freeze(r).0)
    }

    /// What RSS will have grown since neurogc's freeze by the next rebuild of a structure the
    /// heap replaces whole (None where no freeze stands), what undoes the freeze: grown so far,
    /// and, where a full collection of the application's own found a replaced copy dead, as
    /// much again as RSS rose in the last window past the application's own pace. Each rebuild
    /// steps RSS up by a copy, and the one the freeze kept is still there when the next is
    /// built. Evaluation draw 1553 (a 13 MiB catalog rebuilt every 5.5 s by a builder thread,
    /// 16 MiB allowed), frozen at its own thresholds, rose 12.6 MiB at the next rebuild, which
    /// the budget read as +24 MiB and gave up on; undone only past 16 MiB grown, it stayed, and
    /// the rebuild after took its peak RSS to 56.2-62.6 MiB against the defaults' 39.8 (bound
    /// 55.8), in each of four runs. Where no replacement was seen, one window's rise is a burst
    /// of the application's growth until it stands (seed-60 draw 1931: `a_rise_at_the_
    /// applications_own_pace_is_not_read_as_a_copy_waiting`), and a rise in two windows running
    /// a pace (`what_a_deferred_freeze_keeps_is_counted_from_the_window_it_landed_in`).
    fn grown_by_next_copy(&self, r: &Reading) -> Option<f64> {
        let grown = self.grown_since_freeze(r)?;
        let pace = self.own_since_freeze(r).1 * r.secs;
        let rise = (self.rss_rise - pace).max(0.0);
        let again = grown > 0.0 && self.replacement.seen();
        // Else RSS rising past that pace in two windows running goes on rising by the next, by
        // the lesser of the two: the budget is to hold through it, and a freeze at the
        // application's own thresholds, undone only once RSS had grown past the allowance,
        // let RSS past the bound by a window's growth.
        let going_on = self.rising_past(pace);
        let ahead = if again { rise } else { going_on };
        Some(if grown > 0.0 { grown + ahead } else { grown })
    }

    /// What RSS grows at the application's own pace since neurogc's freeze, and the pace
    /// (`own_credit`; 0 where none stands).
    fn own_since_freeze(&self, r: &Reading) -> (f64, f64) {
        match self.rss_at_freeze.filter(|_| self.frozen) {
            Some((_, t)) => self.own_credit(secs(r.ts_ns) - t, secs(r.ts_ns)),
            None => (0.0, 0.0),
        }
    }

    /// What of RSS's growth over `secs` at neurogc's settings is the application's own (bytes),
    /// and at what pace (bytes/s). Its pace at its own settings, for as long as that was
    /// measured (`OwnGrowth::over`); or the pace RSS kept at every unfrozen setting (or, while
    /// neurogc's freeze stands, frozen), for as long as neurogc's setting stands, where that
    /// is the application's: it grew as fast in its own windows (two are enough to tell that,
    /// `OwnGrowth::pace`), and its full collections found its old heap standing
    /// (`Replacement::old_heap_stands`). What a freeze keeps is frozen objects that die, and
    /// what thresholds that put full collections off keep is old objects that die: a full
    /// collection that found none of the old heap dead says the growth is new data, which
    /// neither holds. What a larger young generation keeps is a
    /// step as it fills, which a pace read window by window does not count (`OwnGrowth::rate`).
    /// An evaluation draw (a 1.25M-object cache filling at 16 MiB/s at every setting) was
    /// frozen after two windows of its own settings, too few to read a rate from: its fill
    /// read as the freeze's ("+49 MiB since the freeze") 3 s later, and the undo cost a 289 ms
    /// collection and the 337 ms full collections the freeze had ended. Growth past the pace
    /// stays neurogc's, and so does all growth where the application's own windows did not
    /// show it (RSS that grows only at neurogc's thresholds is theirs).
    /// Until the application's own next full collection would have come (`own_full_due_s`; now
    /// `now_s`), its pace counts for all of `secs`, however briefly it was measured: its own
    /// settings would have freed none of the old heap by then either, and a freeze or a
    /// deferral keeps nothing the young collections would have freed. Counted only as long as
    /// measured, evaluation draw 1006 (a 170k-object heap growing 4 MiB/s, its own full
    /// collection due 81 s on) was frozen at 120 MiB and undone for memory 12 s later, "+26 MiB
    /// past the application's own growth (16 MiB)", with a 116 ms collection of the thawed
    /// heap; the defaults' own run grew to 185 MiB with no full collection at all.
    /// Held, past where RSS at neurogc's settings grew slower, to the pace it grew at there
    /// (`PaceCaps`).
    fn own_credit(&self, secs: f64, now_s: f64) -> (f64, f64) {
        let (credit, pace) = self.own_credit_raw(secs, now_s);
        let raw = |s: f64, now: f64| self.own_credit_raw(s, now).0;
        (self.pace_caps.cap(secs, now_s, credit, raw), pace)
    }

    /// `own_credit` before any cap.
    fn own_credit_raw(&self, secs: f64, now_s: f64) -> (f64, f64) {
        let rate = self.own_growth.rate();
        let own = match self.own_full_due_s {
            Some(due) if now_s <= due => (rate * secs.max(0.0), rate),
            _ => (self.own_growth.over(secs), rate),
        };
        if !self.replacement.old_heap_stands() {
            return own;
        }
        // The pace kept unfrozen, or, while neurogc's freeze stands, frozen: where the freeze
        // came before any was read unfrozen, the pace it keeps is the one to tell, as long as
        // the application's own windows showed it too. Evaluation draw 1816 (a 574k-tuple heap
        // still growing 1.8 MiB a second, its own full collections finding nothing dead) was
        // frozen after its two windows of learning; its growth read as the freeze's ("+16 MiB
        // since the freeze", 1.18x the RSS it had at its own settings), and the undo put back
        // the full collections that set its p99 (0.74x the defaults', where freeze + 50,000/
        // 20/20 held 0.08x). At its own settings RSS went on growing as fast after the undo.
        let frozen = if self.frozen { self.frozen_growth.rate() } else { 0.0 };
        let shown = |pace: &f64| self.own_growth.pace() >= OWN_PACE_SHOWN * pace;
        let pace = [self.unfrozen_growth.rate(), frozen].into_iter().filter(shown).fold(0.0, f64::max);
        let credited = pace * secs.max(0.0);
        if credited <= own.0 {
            return own;
        }
        (credited, pace)
    }

    /// What the first full collection of the heap thawed now would pause the application (ns):
    /// the whole heap, frozen objects and all, as the model puts it; and when the application's
    /// own would come, left to it (s, None where nothing puts one within reach).
    fn thaw_collection(&self) -> (f64, Option<f64>) {
        let p = self.collector.predict(&self.own_unfrozen(), true);
        let first = if p.first_full_ns > 0.0 { p.first_full_ns } else { p.pause_ns[2] };
        (first, p.next_full_s.filter(|d| d.is_finite()))
    }

    /// Whether an undo for memory runs the thawed heap's first full collection at once: where
    /// it pauses the application no longer than the longest pause measured at its own settings
    /// (`own_longest_ns`), or where the application's own full collection would come soon after
    /// the undo anyway (within a deferred freeze's wait), walking the thawed heap and all that
    /// has died into it by then: at once, it pauses no request more than that one would.
    /// Evaluation draw 1896 (a catalog rebuilt every 7 s), undone at the first rebuild with the
    /// collection left to it, had it 9.5 s later, after the next rebuild, freeing 3.9M objects in
    /// 4.3 s where its own full collections took 2.4 s. Where the application's own is far off,
    /// a collection of neurogc's is a pause it would not have had: seed-59 draw 1050 (a
    /// 4M-object heap growing by itself, its own full collection due in 378 s) paid 558 ms for
    /// the thaw, where the defaults' longest pause in the run was 1.4 ms.
    fn thaw_collects(&self) -> bool {
        let soon = MAX_FREEZE_WAIT_WINDOWS / 2.0 * self.budgets.window_s();
        self.thaw_fits() || self.thaw_collection().1.is_some_and(|d| d <= soon)
    }

    /// Whether the thawed heap's first full collection, as the model puts it, pauses the
    /// application no longer than the longest pause measured at its own settings
    /// (`own_longest_ns`): the most a collection of neurogc's may pause it.
    fn thaw_fits(&self) -> bool {
        self.thaw_collection().0 <= self.own_longest_ns
    }

    /// Why an undo for memory leaves the thawed heap to the application's own collections.
    fn thaw_words(&self) -> String {
        let (pause, due) = self.thaw_collection();
        format!(
            "; what the freeze kept is freed by the application's own next full collection{}: \
             one of neurogc's now would pause it about {:.0} ms, its own longest measured {:.1} ms",
            due.map_or(String::new(), |d| format!(" (due in {d:.0} s)")),
            pause / 1e6,
            self.own_longest_ns / 1e6
        )
    }

    /// `freeze` (`freeze_note`), and after it, while RSS steps up, that a move putting full
    /// collections off waits too (`score_all`): a decision to stay says what it did not weigh,
    /// in one clause where the freeze waits for the same step.
    fn with_step_note(&self, freeze: &'static str) -> Cow<'static, str> {
        const SETTINGS: &str = "settings that put full collections off";
        match () {
            _ if !self.mid_step() => freeze.into(),
            _ if freeze == FREEZE_WAITS_FOR_STEP => {
                format!("; freezing and {SETTINGS} wait for RSS to stop stepping up").into()
            }
            _ => format!("{freeze}; {SETTINGS} wait for RSS to stop stepping up").into(),
        }
    }

    /// Where a pause budget is missed and a freeze is not a move, why.
    fn freeze_note(&self, r: &Reading) -> &'static str {
        match () {
            _ if self.frozen => "",
            _ if self.cfg().freeze_after_s.is_none() => "; freezing is off (--no-freeze)",
            _ if !self.freeze_allowed => {
                "; freezing is not available (objects were frozen before neurogc, or no hook)"
            }
            _ if self.freeze_used && self.freeze_missed.0 >= FREEZE_TRIES => {
                "; the target's main thread did not run neurogc's freeze, asked again and again"
            }
            _ if self.freeze_used => "; neurogc freezes once a session, and has",
            _ if self.window < self.freeze_missed.1 => "; a freeze is asked for again shortly",
            _ if self.mid_step() => FREEZE_WAITS_FOR_STEP,
            _ if !self.may_freeze(r) => "; freezing waits for a warm heap (--freeze-after)",
            _ => "",
        }
    }
}

#[cfg(test)]
mod tests;
