//! What the agent is asked to do, in the domain's terms, converted from the command line
//! (`cli.rs` holds clap's side alone). Checks that span fields are made here: out-of-range
//! input is exit code 2 with one line, before anything is touched.
use std::{ffi::OsString, net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::Result;

use crate::{
    cli::{
        Cli, CliActuator, CliEp, CliMode, CliModelWeight, CliProbe, CliSort, GcBudget, MemoryBudget,
        PolicyArgs, SelectArgs, SteerArgs, Sub, TargetArgs,
    },
    error::bail_user,
    fleet::discover::Filter,
    interp::ProbeChoice,
    steering::{
        actuate::ActuatorKind,
        policy::{ModelChoice, Policy, budgets::GuardConfig, model::ExecutionProvider},
        steer::Mode,
    },
};

/// What to do, in the domain's terms.
pub enum Task {
    Observe(Options),
    Fleet(crate::fleet::Options, FleetOutput),
    Report(crate::report::Options),
    Replay(ReplayOptions),
}

/// Where fleet mode's numbers go.
pub enum FleetOutput {
    Metrics { addr: Option<SocketAddr>, python_names: bool },
    Top(crate::sinks::top::Sort),
}

/// Where the records of a live run go.
pub enum Output {
    /// The live view only.
    View,
    /// JSON lines, to standard output (None) or a file.
    Json(Option<PathBuf>),
    /// A `.ngc` recording.
    Recording(PathBuf),
}

pub struct Options {
    pub pid: Option<i32>,
    pub command: Vec<OsString>,
    pub output: Output,
    pub duration: Option<f64>,
    pub interval: f64,
    /// The garbage census's period (`--census`).
    pub census: Option<Duration>,
    pub mode: Mode,
    pub actuator: ActuatorKind,
    pub policy: Policy,
    pub probe: ProbeChoice,
}

impl Task {
    /// Checks what clap cannot check field by field, and converts.
    pub fn from_cli(cli: Cli) -> Result<Task> {
        match cli.sub {
            None => {
                // `-o FILE` alone is `--json -o FILE`: the stream to its file, the live view on
                // standard output (as its help says).
                let output = match (cli.json, cli.output) {
                    (false, None) => Output::View,
                    (_, Some(file)) => Output::Json(Some(file)),
                    (true, None) => Output::Json(None),
                };
                observe(cli.target, output, cli.steer)
            }
            Some(Sub::Record(r)) => observe(r.target, Output::Recording(r.output), r.steer),
            Some(Sub::Report(r)) => Ok(Task::Report(crate::report::Options {
                trace: r.trace,
                json: r.json,
                html: r.html,
                perfetto: r.perfetto,
                folded: r.folded.map(|f| (f, r.weight)),
            })),
            Some(Sub::Fleet(f)) => Ok(Task::Fleet(
                crate::fleet::Options { census: f.census.map(Duration::from_secs_f64), ..f.select.convert() },
                FleetOutput::Metrics { addr: f.metrics_addr, python_names: f.python_gc_names },
            )),
            Some(Sub::Top(t)) => Ok(Task::Fleet(
                t.select.convert(),
                FleetOutput::Top(match t.sort {
                    CliSort::Share => crate::sinks::top::Sort::Share,
                    CliSort::Longest => crate::sinks::top::Sort::Longest,
                    CliSort::P99 => crate::sinks::top::Sort::P99,
                    CliSort::Rate => crate::sinks::top::Sort::Rate,
                }),
            )),
            Some(Sub::Replay(r)) => {
                Ok(Task::Replay(ReplayOptions { trace: r.trace, json: r.json, policy: r.policy.convert()? }))
            }
        }
    }
}

impl SelectArgs {
    fn convert(self) -> crate::fleet::Options {
        crate::fleet::Options {
            filter: Filter { include: self.include, exclude: self.exclude },
            max_targets: self.max_targets as usize,
            duration: self.duration.map(Duration::from_secs_f64),
            interval: Duration::from_secs_f64(self.interval),
            census: None,
        }
    }
}

fn observe(target: TargetArgs, output: Output, steer: SteerArgs) -> Result<Task> {
    Ok(Task::Observe(Options {
        pid: target.pid,
        command: target.command,
        output,
        duration: target.duration,
        interval: target.interval,
        census: target.census.map(Duration::from_secs_f64),
        mode: match steer.mode {
            CliMode::Observe => Mode::Observe,
            CliMode::Advise => Mode::Advise,
            CliMode::Act => Mode::Act,
        },
        actuator: match steer.actuator {
            CliActuator::Hook => ActuatorKind::Hook,
            CliActuator::Memory => ActuatorKind::Memory,
        },
        policy: steer.policy.convert()?,
        probe: match target.probe {
            CliProbe::Auto => ProbeChoice::Auto,
            CliProbe::Usdt => ProbeChoice::Usdt,
            CliProbe::Uprobe => ProbeChoice::Uprobe,
        },
    }))
}

impl PolicyArgs {
    fn convert(self) -> Result<Policy> {
        for g in 0..3 {
            if self.threshold_min[g] > self.threshold_max[g] {
                bail_user!(
                    "--threshold-min {} is above --threshold-max {} for generation {g}: the minimum must not exceed the maximum",
                    fmt(self.threshold_min),
                    fmt(self.threshold_max)
                );
            }
        }
        Ok(Policy {
            model: match self.model {
                None => ModelChoice::Embedded,
                Some(p) if p.as_os_str() == "none" => ModelChoice::Analytic,
                Some(p) => ModelChoice::File(p),
            },
            ep: match self.ep {
                CliEp::Cpu => ExecutionProvider::Cpu,
                CliEp::Cuda => ExecutionProvider::Cuda,
            },
            guard: GuardConfig {
                min: self.threshold_min,
                max: self.threshold_max,
                memory_budget: match self.memory_budget {
                    MemoryBudget::Growth(f) => f,
                    MemoryBudget::Bytes(_) => 0.0,
                },
                memory_limit_bytes: match self.memory_budget {
                    MemoryBudget::Bytes(b) => Some(b),
                    MemoryBudget::Growth(_) => None,
                },
                pause_budget_ns: self.pause_budget.0,
                gc_budget: match self.gc_budget {
                    GcBudget::Share(f) => Some(f),
                    _ => None,
                },
                gc_at_attach: self.gc_budget == GcBudget::AtAttach,
                freeze_after_s: (!self.no_freeze).then_some(self.freeze_after),
                allow_disable: self.allow_disable,
                model_full_weight: self.model_weight == CliModelWeight::Full,
            },
        })
    }
}

fn fmt(t: [i64; 3]) -> String {
    format!("{},{},{}", t[0], t[1], t[2])
}

/// `replay`: the trace, and the model and budgets to replay it with.
pub struct ReplayOptions {
    pub trace: PathBuf,
    pub json: bool,
    pub policy: Policy,
}
