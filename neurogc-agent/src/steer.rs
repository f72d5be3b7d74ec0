//! advise/act: every window, the model scores the actions, the guard decides, and in act mode
//! the actuator applies. Latencies are kept for the summary (inference; window close → decision).
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::{
    actuate::{Actuator, ActuatorKind},
    cli::Mode,
    features::Window,
    policy::{
        guard::{Guard, GuardConfig},
        model::Model,
    },
    target::{AttachPlan, layout::GcState},
};

#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub ts_ns: u64,
    /// The model's choice, after the guard.
    pub thresholds: [i64; 3],
    pub applied: bool,
    pub reason: String,
    /// The thresholds the target reported after applying (act mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_thresholds: Option<[i64; 3]>,
}

pub struct Steering {
    pub mode: Mode,
    model: Model,
    guard_cfg: GuardConfig,
    guard: Option<Guard>,
    actuator_kind: ActuatorKind,
    pub actuator: Option<Actuator>,
    pub freeze_count: Option<i64>,
    pub inference_ns: Histogram<u64>,
    /// Window closed → decision made (drain, sample, features, inference, guard).
    pub decision_ns: Histogram<u64>,
    /// Decision → the hook's (or memory's) confirmation that the target has the new thresholds.
    pub apply_ns: Histogram<u64>,
    pub changes: u64,
    pub last: Option<Decision>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram")
}

#[derive(Serialize)]
pub struct LatencySummary {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        let empty = h.is_empty();
        let q = |q| if empty { 0 } else { h.value_at_quantile(q) };
        LatencySummary { p50: q(0.5), p99: q(0.99), max: h.max() }
    }
}

impl Steering {
    pub fn new(mode: Mode, model: Model, guard_cfg: GuardConfig, actuator_kind: ActuatorKind) -> Steering {
        Steering {
            mode,
            model,
            guard_cfg,
            guard: None,
            actuator_kind,
            actuator: None,
            freeze_count: None,
            inference_ns: histogram(),
            decision_ns: histogram(),
            apply_ns: histogram(),
            changes: 0,
            last: None,
        }
    }

    pub fn provider(&self) -> &'static str {
        self.model.provider
    }

    /// Act mode: inject the hook (or prepare memory writes). Needs a running interpreter.
    pub fn connect(&mut self, plan: &AttachPlan, state: Option<GcState>) -> Result<()> {
        if self.mode == Mode::Act && self.actuator.is_none() {
            let actuator = Actuator::connect(plan, self.actuator_kind, state)?;
            if let Some(t) = actuator.injected_in() {
                tracing::info!("hook injected and connected in {:.0} ms", t.as_secs_f64() * 1e3);
            }
            self.freeze_count = actuator.freeze_count();
            self.actuator = Some(actuator);
        }
        Ok(())
    }

    /// One window. `opened` is when the window's processing began (for the latency figure).
    pub fn decide(&mut self, window: &Window, opened: Instant) -> Result<Decision> {
        let started = Instant::now();
        let scores = self.model.score(&window.features)?;
        self.inference_ns.saturating_record(started.elapsed().as_nanos().max(1) as u64);
        let best = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
        let proposed = self.model.actions[best];
        let original = match (&self.actuator, window.sample.thresholds) {
            (Some(a), _) => Some(a.original()),
            (None, t) => t,
        };
        let guard = match (&mut self.guard, original) {
            (Some(g), _) => g,
            (None, Some(original)) => {
                self.guard.insert(Guard::new(self.guard_cfg.clone(), original, window.sample.rss_bytes))
            }
            (None, None) => {
                let d = Decision {
                    kind: "decision",
                    ts_ns: window.end_ns,
                    thresholds: proposed,
                    applied: false,
                    reason:
                        "the target's thresholds are unknown (GC state not located): nothing to compare with"
                            .to_owned(),
                    target_thresholds: None,
                };
                return Ok(d);
            }
        };
        let verdict = guard.decide(proposed, window.sample.rss_bytes);
        let mut decision = Decision {
            kind: "decision",
            ts_ns: window.end_ns,
            thresholds: verdict.thresholds,
            applied: false,
            reason: verdict.reason,
            target_thresholds: None,
        };
        self.decision_ns.saturating_record(opened.elapsed().as_nanos().max(1) as u64);
        if verdict.change {
            let applying = Instant::now();
            match self.actuator.as_mut() {
                Some(actuator) => match actuator.apply(verdict.thresholds) {
                    Ok(applied) => {
                        decision.applied = true;
                        decision.target_thresholds = Some(applied.new);
                        self.freeze_count = applied.freeze_count.or(self.freeze_count);
                        self.changes += 1;
                        self.apply_ns.saturating_record(applying.elapsed().as_nanos().max(1) as u64);
                    }
                    Err(err) => decision.reason = format!("{}; applying failed: {err:#}", decision.reason),
                },
                None => decision.reason = format!("would change: {}", decision.reason),
            }
        }
        self.last = Some(decision.clone());
        Ok(decision)
    }

    /// Puts the original thresholds back (act mode). The hook would also do it on its own when
    /// the socket closes; doing it here first makes it synchronous and reported.
    pub fn restore(&mut self) -> Option<Result<()>> {
        let actuator = self.actuator.as_mut()?;
        let result = actuator.restore();
        Some(result)
    }

    pub fn injection(&self) -> Option<Duration> {
        self.actuator.as_ref().and_then(Actuator::injected_in)
    }
}
