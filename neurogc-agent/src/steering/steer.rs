//! advise/act: every window, the controller predicts every candidate action (the analytic model,
//! corrected by the learned ONNX model in one call) and chooses within the budgets; in act mode the decision
//! goes to the actuator thread, whose answers come back as [`Event`]s and are reported
//! as "actuation" records. Nothing here waits on the target.
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use neurogc_trace::{Actuation, Collection, Decision, LatencySummary, ModelInfo};

use crate::{
    interp::{AttachPlan, layout::GcState},
    session::features::Window,
    steering::actuate::{self, ActuatorHandle, ActuatorKind, Command, Event, Finish},
    steering::advice::{Advice, Move},
    steering::policy::{
        budgets::{self, GuardConfig},
        controller::Controller,
        model::Model,
        predict::{Correction, FEATURE_COUNT, Reading},
    },
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Observe,
    Advise,
    Act,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Observe => "observe",
            Mode::Advise => "advise",
            Mode::Act => "act",
        }
    }
}

/// Where the actuator stands.
enum Actuator {
    /// Advise mode, or act mode before the target's GC state is known.
    None,
    Starting(ActuatorHandle),
    Ready(ActuatorHandle),
    /// No more changes: the application took over, or the actuator failed.
    Halted(Option<ActuatorHandle>, String),
    Finished(Finish),
}

pub struct Steering {
    pub mode: Mode,
    /// The learned model (None: `--model none`, the analytic model alone).
    model: Option<Model>,
    /// The learned model failed once: said, and the analytic model stands from then on.
    model_failed: bool,
    guard_cfg: GuardConfig,
    /// The target is a free-threaded build: its guard is narrowed (`budgets::free_threaded_guard`).
    free_threaded: bool,
    controller: Option<Controller>,
    /// The target's age (s) at a sample's timestamp (ns), where known: its age at each window
    /// follows from the window's own end, live and in replay alike (a process running for a
    /// while has a warm heap, and one attached to was running before the first window).
    aged: Option<(f64, u64)>,
    pid: Option<i32>,
    actuator_kind: ActuatorKind,
    actuator: Actuator,
    /// The application's thresholds as the actuator found them.
    original: Option<[i64; 3]>,
    pub freeze_count: Option<i64>,
    pub inference_ns: Histogram<u64>,
    /// Window closed → decision made (drain, sample, features, inference, guard).
    pub decision_ns: Histogram<u64>,
    /// Request → the hook's (or memory's) confirmation that the target has the new thresholds.
    pub apply_ns: Histogram<u64>,
    pub changes: u64,
    /// Windows decided (each one a decision record).
    pub decisions: u64,
    pub injected_in: Option<Duration>,
    pub last: Option<Decision>,
    /// The most recent change's measured effect (shown until the next one).
    pub last_effect: Option<neurogc_trace::Effect>,
    /// Act mode could not start (why, and whether it is the user's to fix): the agent ends with it.
    pub failed_to_start: Option<(String, bool)>,
    /// Why act mode waits before its actuator can start, as last said.
    waiting_said: Option<String>,
    /// Advise mode: the advice window by window, for the recommendation at exit.
    pub advice: Advice,
    /// Act mode: a freeze (and the thresholds that go with it) to queue as the application's
    /// next full collection ends (`Controller::freeze_deferred`).
    armed: Option<Armed>,
}

/// A deferred freeze, ready to queue.
#[derive(Debug, Clone, Copy)]
struct Armed {
    thresholds: [i64; 3],
    /// A collection after the freeze (`Verdict::reset`).
    reset: bool,
    objects: Option<i64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram")
}

/// About how many tracked objects a freeze would move now: the old generation after its last
/// full collection, what was promoted into it since, and gen0's count (gen1 is at most a few
/// gen0s). None where the build does not keep the old generation's counters.
fn heap_objects(sample: &neurogc_trace::Sample) -> Option<i64> {
    let [total, pending] = sample.long_lived?;
    Some(total.max(0) + pending.max(0) + sample.count0.unwrap_or(0).max(0))
}

/// p50, p99 and max of a latency histogram (zeros when empty).
pub fn latency(h: &Histogram<u64>) -> LatencySummary {
    let empty = h.is_empty();
    let q = |q| if empty { 0 } else { h.value_at_quantile(q) };
    LatencySummary { p50: q(0.5), p99: q(0.99), max: h.max() }
}

/// The actuator's events, for the observation loop to select on.
pub type Events = tokio::sync::mpsc::UnboundedReceiver<Event>;

/// How long the agent waits for the actuator to give the application its settings back.
const FINISH_TIMEOUT: Duration = Duration::from_secs(5);

impl Steering {
    pub fn new(
        mode: Mode,
        model: Option<Model>,
        guard_cfg: GuardConfig,
        actuator_kind: ActuatorKind,
    ) -> Steering {
        Steering {
            mode,
            model,
            model_failed: false,
            guard_cfg,
            controller: None,
            aged: None,
            pid: None,
            actuator_kind,
            actuator: Actuator::None,
            original: None,
            freeze_count: None,
            inference_ns: histogram(),
            decision_ns: histogram(),
            apply_ns: histogram(),
            changes: 0,
            decisions: 0,
            injected_in: None,
            last: None,
            last_effect: None,
            failed_to_start: None,
            waiting_said: None,
            advice: Advice::default(),
            free_threaded: false,
            armed: None,
        }
    }

    /// The target: its pid, and what the controller reads of it (`process`).
    pub fn target(&mut self, pid: i32, age_s: Option<f64>, ts_ns: u64, free_threaded: bool) {
        self.pid = Some(pid);
        self.process(age_s, ts_ns, free_threaded);
    }

    /// What the controller reads of the target besides its windows: its age at the sample
    /// taken at `ts_ns` (from /proc live, from the attach record in replay), and whether its
    /// build is free-threaded.
    pub fn process(&mut self, age_s: Option<f64>, ts_ns: u64, free_threaded: bool) {
        self.free_threaded = free_threaded;
        self.aged = age_s.map(|a| (a, ts_ns));
    }

    /// Where the learned model runs ("none" without one).
    pub fn provider(&self) -> &'static str {
        self.model.as_ref().map_or("none", |m| m.provider)
    }

    /// The model and guard, as the attach record names them.
    pub fn describe(&self) -> (ModelInfo, GuardConfig) {
        let model = match &self.model {
            Some(m) => ModelInfo {
                source: m.source.clone(),
                digest: m.digest.clone(),
                provider: m.provider.to_owned(),
                actions: Vec::new(),
                class: Some(m.class.clone()),
            },
            None => ModelInfo {
                source: "none".to_owned(),
                digest: String::new(),
                provider: "none".to_owned(),
                actions: Vec::new(),
                class: Some("none (the analytic model alone)".to_owned()),
            },
        };
        (model, self.guard_cfg.clone())
    }

    /// Act mode needs an actuator that has not been started yet.
    pub fn wants_actuator(&self) -> bool {
        self.mode == Mode::Act && matches!(self.actuator, Actuator::None)
    }

    /// Refusals known before the target is touched (attach mode checks them up front).
    pub fn precheck(&self, plan: &AttachPlan) -> Result<()> {
        match self.mode {
            Mode::Act => actuate::precheck(plan, self.actuator_kind),
            _ => Ok(()),
        }
    }

    /// Act mode: starts the actuator thread (injection happens there); the caller's loop owns
    /// the receiver of its events and hands them to [`Steering::on_event`].
    pub fn start_actuator(&mut self, plan: &AttachPlan, state: Option<GcState>) -> Result<Events> {
        let (handle, events) = actuate::start(plan, self.actuator_kind, state)?;
        self.actuator = Actuator::Starting(handle);
        Ok(events)
    }

    /// Act mode whose actuator cannot start yet: the target's GC state is not proven (it was
    /// collecting each time it was read, or it is stopped inside a collection). Says `why` once
    /// per reason, and returns the record to report then.
    pub fn waiting_for_state(&mut self, why: String, ts_ns: u64) -> Option<Actuation> {
        if self.waiting_said.as_ref() == Some(&why) {
            return None;
        }
        tracing::warn!("act mode: {why}");
        self.waiting_said = Some(why.clone());
        Some(Actuation { ts_ns, event: "waiting".to_owned(), detail: Some(why), ..Actuation::default() })
    }

    /// Folds an actuator event into the state; returns the record to report.
    pub fn on_event(&mut self, ev: Event, ts_ns: u64) -> Actuation {
        let mut rec = Actuation { ts_ns, ..Actuation::default() };
        let handle = match std::mem::replace(&mut self.actuator, Actuator::None) {
            Actuator::Starting(h) | Actuator::Ready(h) | Actuator::Halted(Some(h), _) => Some(h),
            _ => None,
        };
        self.actuator = match (ev, handle) {
            (Event::Waiting(why), Some(h)) => {
                tracing::warn!("act mode: {why}");
                rec.event = "waiting".to_owned();
                rec.detail = Some(why);
                Actuator::Starting(h)
            }
            (Event::Ready { original, injected_in, freeze_count }, Some(h)) => {
                if let Some(t) = injected_in {
                    tracing::info!("hook injected and connected in {:.0} ms", t.as_secs_f64() * 1e3);
                }
                self.injected_in = injected_in;
                self.freeze_count = freeze_count.or(self.freeze_count);
                rec.event = "ready".to_owned();
                rec.thresholds = Some(original);
                self.original = Some(original);
                Actuator::Ready(h)
            }
            (Event::Applied { requested, now, latency }, Some(h)) => {
                self.changes += 1;
                if let Some(c) = &mut self.controller {
                    c.wrote(ts_ns, latency.as_nanos() as u64);
                }
                self.apply_ns.saturating_record(latency.as_nanos().max(1) as u64);
                rec.event = "applied".to_owned();
                rec.thresholds = Some(now);
                rec.requested = Some(requested);
                rec.latency_ns = Some(latency.as_nanos() as u64);
                Actuator::Ready(h)
            }
            (Event::Freeze { outcome, count, latency, detail }, Some(h)) => {
                rec.event = outcome.to_owned();
                if let (Some(c), "frozen" | "unfrozen") = (&mut self.controller, outcome) {
                    c.wrote(ts_ns, latency.as_nanos() as u64);
                }
                if outcome == "not-frozen" {
                    tracing::warn!("act mode: {detail}");
                    if let Some(c) = &mut self.controller {
                        c.freeze_failed();
                    }
                }
                rec.freeze_count = count;
                // What the model needs to tell frozen objects from walked ones.
                if count.is_some() {
                    self.freeze_count = count;
                }
                rec.latency_ns = Some(latency.as_nanos() as u64);
                rec.detail = Some(detail);
                Actuator::Ready(h)
            }
            (Event::AppChanged { now }, h) => {
                let why = format!(
                    "the application set its own thresholds ({}): neurogc stops steering and leaves them",
                    crate::sinks::view::thresholds(now)
                );
                tracing::warn!("{why}");
                rec.event = "app-changed".to_owned();
                rec.thresholds = Some(now);
                rec.detail = Some(why.clone());
                Actuator::Halted(h, why)
            }
            (Event::Failed { why, user }, h) => {
                rec.event = "failed".to_owned();
                rec.detail = Some(why.clone());
                if self.original.is_none() {
                    // Act mode never started: the agent has nothing to do and says why on exit.
                    self.failed_to_start = Some((why.clone(), user));
                } else if self.pid.is_some_and(crate::interp::process::exists) {
                    tracing::error!("act mode: {why}");
                } else {
                    // The target ended: nothing is left to steer or to restore in it.
                    tracing::debug!("act mode: {why}");
                }
                Actuator::Halted(h, why)
            }
            (Event::Finished(finish), _) => {
                rec.event = "finished".to_owned();
                rec.restored = Some(finish.restored);
                rec.detail = Some(finish.detail.clone());
                Actuator::Finished(finish)
            }
            (_, None) => Actuator::None,
        };
        rec
    }

    /// One window. `opened` is when the window's processing began (for the latency figure).
    pub fn decide(&mut self, window: &Window, opened: Instant) -> Result<Decision> {
        self.decisions += 1;
        let mut decision = Decision {
            ts_ns: window.end_ns,
            thresholds: window.sample.thresholds.unwrap_or_default(),
            change: false,
            requested: false,
            reason: String::new(),
            what: None,
            freeze: None,
            budget: None,
            given_up: None,
            observed: None,
            scores: Vec::new(),
            effect: None,
            predicted: None,
            check: None,
            unholdable: Vec::new(),
            model: None,
        };
        // The controller starts from the thresholds the application had: the hook's (or
        // memory's) reading in act mode, the sample otherwise.
        let original = match self.mode {
            Mode::Act => self.original,
            _ => window.sample.thresholds,
        };
        let act = self.mode == Mode::Act;
        let controller =
            match (&mut self.controller, original) {
                (Some(c), _) => c,
                (None, Some(original)) => {
                    let cfg = if self.free_threaded {
                        budgets::free_threaded_guard(&self.guard_cfg, original)
                    } else {
                        self.guard_cfg.clone()
                    };
                    self.controller.insert(Controller::new(cfg, original, act))
                }
                (None, None) => {
                    decision.reason = match (&self.actuator, self.mode) {
                    (Actuator::Halted(_, why), _) => format!("not steering: {why}"),
                    (_, Mode::Act) => "waiting for the actuator (the hook is not connected yet)".to_owned(),
                    _ => "the target's thresholds are unknown (GC state not located): nothing to compare with"
                        .to_owned(),
                };
                    self.last = Some(decision.clone());
                    return Ok(decision);
                }
            };
        let age = self.aged.map(|(a, ts)| a + window.end_ns.saturating_sub(ts) as f64 / 1e9);
        let reading = Reading::from_window(window, age);
        // Freezing needs code run in the target (the hook actuator) and an empty permanent
        // generation: gc.unfreeze() releases all of it, so neurogc could not undo only its own
        // freeze (CPython 3.12's collector moves immortal objects there: no freeze on 3.12).
        // Act mode has the hook's gc.get_freeze_count(); advise mode the permanent generation's
        // head, read from memory with every sample.
        if !controller.frozen() {
            let app_froze = match self.mode {
                Mode::Act => {
                    self.actuator_kind != ActuatorKind::Hook || self.freeze_count.is_none_or(|n| n > 0)
                }
                _ => reading.frozen_now() == Some(true),
            };
            // On a free-threaded build frozen objects leave `long_lived_total`, so the trigger
            // max(threshold0, long_lived_total / 4) collapses and collections come far more
            // often (workloads/bench/free_threaded_freeze.py): no freeze there.
            controller.allow_freeze(!app_froze && !self.free_threaded);
        }
        let before = controller.thresholds();
        // One call of the learned model scores every candidate; a model that fails is said once
        // and the analytic model stands.
        let (model, failed, inference_ns) = (&mut self.model, &mut self.model_failed, &mut self.inference_ns);
        let mut learned = |rows: &[[f32; FEATURE_COUNT]]| -> Vec<Correction> {
            let Some(m) = model.as_mut().filter(|_| !*failed) else { return Vec::new() };
            let started = Instant::now();
            let k = m.correct(rows);
            inference_ns.saturating_record(started.elapsed().as_nanos().max(1) as u64);
            k.unwrap_or_else(|err| {
                tracing::warn!("the learned model failed, steering on the analytic model alone: {err:#}");
                *failed = true;
                Vec::new()
            })
        };
        let verdict = controller.decide(&mut learned, &reading);
        if !act {
            let advised = verdict.change.then_some(Move {
                thresholds: verdict.thresholds,
                from: before,
                freeze: verdict.freeze == Some(true),
                collect: verdict.collect,
            });
            self.advice.record(advised, &verdict.reason);
        }
        decision.thresholds = verdict.thresholds;
        decision.change = verdict.change;
        decision.reason = verdict.reason;
        decision.what = verdict.what;
        decision.freeze = verdict.freeze;
        decision.budget = verdict.budget.map(|b| b.name().to_owned());
        decision.given_up = verdict.given_up;
        decision.observed = Some(verdict.observed);
        decision.predicted = verdict.predicted;
        decision.effect = verdict.effect;
        decision.check = verdict.check.map(Box::new);
        decision.unholdable = verdict.unholdable.iter().map(|b| b.name().to_owned()).collect();
        if decision.effect.is_some() {
            self.last_effect = decision.effect.clone();
        }
        self.decision_ns.saturating_record(opened.elapsed().as_nanos().max(1) as u64);
        let deferred = controller.freeze_deferred();
        if !deferred {
            self.armed = None;
        }
        if verdict.change {
            match &self.actuator {
                Actuator::Ready(_) if deferred => {
                    self.armed = Some(Armed {
                        thresholds: verdict.thresholds,
                        reset: verdict.reset,
                        objects: heap_objects(&window.sample),
                    });
                    decision.requested = true;
                }
                Actuator::Ready(h) => {
                    match verdict.freeze {
                        Some(true) => h.send(Command::Freeze {
                            collect: verdict.collect,
                            reset: verdict.reset,
                            objects: heap_objects(&window.sample),
                        }),
                        Some(false) => h.send(Command::Unfreeze { collect: verdict.collect }),
                        None => {}
                    }
                    if verdict.thresholds != before {
                        h.send(Command::Apply(verdict.thresholds));
                    }
                    decision.requested = true;
                }
                Actuator::Halted(_, why) => decision.reason = format!("not steering: {why}"),
                _ if act => decision.reason = format!("would change: {}", decision.reason),
                _ => {}
            }
        }
        // The model's part in the move just made, where deciding did not need to ask it.
        controller.learn_trial(&mut learned);
        // Where a learned model corrects the analytic one (`--model none`: none to tell).
        decision.model = verdict.model.filter(|_| self.model.is_some() && !self.model_failed);
        self.last = Some(decision.clone());
        Ok(decision)
    }

    /// One of the target's collections has just ended: the controller hears its pause
    /// (`Controller::collection_ended`). After a full collection, a deferred freeze is queued
    /// now, when the least garbage waits in the heap it moves, with its thresholds, unless what
    /// the collection found dead of the old heap says a freeze would keep it turning over
    /// (`Controller::deferred_lands`).
    pub fn collection_ended(&mut self, collection: &Collection) {
        if let Some(c) = &mut self.controller {
            c.collection_ended(collection.ts_ns, collection.duration_ns);
        }
        if collection.r#gen != 2 {
            return;
        }
        let collected = collection.collected;
        let (Some(armed), Actuator::Ready(h)) = (self.armed.take(), &self.actuator) else { return };
        if !self.controller.as_mut().is_some_and(|c| c.deferred_lands(collected)) {
            return;
        }
        h.send(Command::Freeze { collect: false, reset: armed.reset, objects: armed.objects });
        if self.controller.as_ref().is_some_and(|c| c.thresholds() != armed.thresholds) {
            h.send(Command::Apply(armed.thresholds));
        }
    }

    /// Asks the actuator to give the application its settings back and waits (bounded) for it;
    /// returns the records of what happened meanwhile, the last one its "finished".
    pub async fn finish(&mut self, events: &mut Events, clock_ns: impl Fn() -> u64) -> Vec<Actuation> {
        let mut records = Vec::new();
        match &self.actuator {
            Actuator::Starting(h) | Actuator::Ready(h) | Actuator::Halted(Some(h), _) => {
                h.send(Command::Stop)
            }
            _ => return records,
        }
        let deadline = tokio::time::Instant::now() + FINISH_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(ev)) => {
                    let rec = self.on_event(ev, clock_ns());
                    let done = rec.event == "finished";
                    records.push(rec);
                    if done {
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(
                        "the actuator did not finish within {FINISH_TIMEOUT:?}; the custodian and the hook restore on their own"
                    );
                    break;
                }
            }
        }
        records
    }

    /// Act mode: whether nothing neurogc set is left in the target, once finished.
    pub fn restored(&self) -> Option<(bool, String)> {
        match &self.actuator {
            Actuator::Finished(f) => Some((f.restored, f.detail.clone())),
            Actuator::None if self.mode == Mode::Act => {
                Some((true, "the actuator never started: nothing changed".to_owned()))
            }
            _ if self.mode == Mode::Act => Some((false, "the actuator did not report back".to_owned())),
            _ => None,
        }
    }
}
