//! The command line, and its conversion into the domain's options. Nothing below `main` sees a
//! clap type. Every number is range-checked here: out-of-range input is exit code 2 with one
//! line, never a panic deeper down (`Duration::from_secs_f64(1e300)` would be one).
use std::{ffi::OsString, path::PathBuf};

use anyhow::Result;
use clap::{Parser, ValueEnum};

use crate::{
    actuate::ActuatorKind, bail_user, policy::guard::GuardConfig, policy::model::ExecutionProvider,
    steer::Mode, target::ProbeChoice,
};

const AFTER_HELP: &str = "\
Examples:
  sudo neurogc-agent --pid 1234                 live view, and what the model would change
  sudo neurogc-agent --pid 1234 --mode act      let the model steer the thresholds (guarded)
  sudo neurogc-agent --pid 1234 --json -d 60    every collection, window and decision as JSON
  sudo neurogc-agent -- python3 app.py          run app.py, observed from its first collection
  neurogc-agent --replay trace.jsonl            recompute the feature windows of a recording

Act mode changes nothing that the application did not have once the agent is gone, however it
goes (SIGKILL included): the hook restores every threshold that still holds neurogc's value,
and a custodian process undoes an injection that never ran. See README, \"Act mode\".

Exit status: 0 when observation ended normally (Ctrl-C, SIGTERM, --duration, target exit);
2 for input the agent cannot work with (no such PID, not CPython, no probes in the build, a
model or ONNX Runtime it cannot use, injection refused by the target, a corrupt trace, a value
out of range, not root); 1 for any other failure.";

/// Observe every garbage collection of a live CPython process, from outside, with eBPF.
///
/// neurogc-agent attaches USDT probes (python:gc__start/gc__done) where the interpreter build has
/// them, else a uprobe/uretprobe pair on the collector function found in .symtab, and times every
/// collection: generation, pause, objects collected and uncollectable, thread. The target needs
/// no code change and is left exactly as it was when the agent detaches or dies.
#[derive(Debug, Parser)]
#[command(name = "neurogc-agent", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Attach to this running CPython process (a host PID)
    #[arg(short, long, value_name = "PID", conflicts_with = "command", required_unless_present_any = ["command", "replay"],
          value_parser = clap::value_parser!(i32).range(1..=4_194_304))]
    pub pid: Option<i32>,

    /// Print one JSON object per line: a "gc" line per collection, a "window" line per window,
    /// "decision" and "actuation" lines in advise/act mode, a "summary" line at the end. In
    /// launch mode the command's own standard output then goes to standard error
    #[arg(long)]
    pub json: bool,

    /// Stop after this many seconds, at most a year (the target keeps running)
    #[arg(short, long, value_name = "SECS", value_parser = secs(0.001, 31_536_000.0))]
    pub duration: Option<f64>,

    /// Length of a feature window in seconds (0.05 to 3600): the live view refreshes, and the
    /// policy decides, once per window
    #[arg(short, long, value_name = "SECS", default_value = "1", value_parser = secs(0.05, 3600.0))]
    pub interval: f64,

    /// observe: no model. advise: decide and print what would change, change nothing.
    /// act: apply the decisions to the target (the application's own thresholds come back when
    /// the agent leaves, however it leaves)
    #[arg(long, value_enum, default_value_t = CliMode::Advise)]
    pub mode: CliMode,

    /// ONNX model to decide with, a regular file of at most 64 MiB (default: the model embedded
    /// in the agent; contract in README)
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,

    /// Where to run the model
    #[arg(long, value_enum, default_value_t = CliEp::Cpu)]
    pub ep: CliEp,

    /// How act mode changes thresholds. Either way a custodian process puts the application's
    /// values back if the agent dies
    #[arg(long, value_enum, default_value_t = CliActuator::Hook)]
    pub actuator: CliActuator,

    /// Lowest thresholds the agent may set (t0,t1,t2; each 0 to 2147483647)
    #[arg(long, value_name = "T0,T1,T2", default_value = "100,2,2", value_parser = triple)]
    pub threshold_min: [i64; 3],

    /// Highest thresholds the agent may set (t0,t1,t2; each 0 to 2147483647, not below the minimum)
    #[arg(long, value_name = "T0,T1,T2", default_value = "100000,100,100", value_parser = triple)]
    pub threshold_max: [i64; 3],

    /// Windows to wait after a change before making another (0 to 100000)
    #[arg(long, value_name = "WINDOWS", default_value = "5", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub cooldown: u64,

    /// Consecutive windows the model must propose the same change before it is made (1 to 1000)
    #[arg(long, value_name = "WINDOWS", default_value = "2", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub confirm: u32,

    /// Percent the target's RSS may grow over its value at attach before the agent steps the
    /// thresholds back toward the original ones (more than 0, at most 10000)
    #[arg(long, value_name = "PCT", default_value = "25", value_parser = percent)]
    pub max_rss_growth: f64,

    /// Allow a threshold of 0 (which disables that part of the collector)
    #[arg(long)]
    pub allow_disable: bool,

    /// Recompute the feature windows of a recorded `--json` stream and print them (no target)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "command"])]
    pub replay: Option<PathBuf>,

    /// Which probes to use
    #[arg(long, value_enum, default_value_t = CliProbe::Auto)]
    pub probe: CliProbe,

    /// Start this command (a CPython interpreter and its arguments) and observe it from its
    /// first collection
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliMode {
    Observe,
    Advise,
    Act,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliEp {
    Cpu,
    /// CUDA, falling back to the CPU (with the reason logged) when it cannot be used
    Cuda,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliActuator {
    /// Write the thresholds in memory and inject a fork guard, so that children forked while
    /// steered get the application's settings at once
    Hook,
    /// Write the thresholds in memory only, no injection (for targets that opted out of remote
    /// code execution)
    Memory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliProbe {
    /// USDT when the build has python:gc__* notes, else the collector symbol
    Auto,
    /// Only USDT python:gc__start/gc__done
    Usdt,
    /// Only a uprobe/uretprobe pair on the collector function from .symtab
    Uprobe,
}

/// What to do, in the domain's terms.
pub enum Task {
    Replay(PathBuf),
    Observe(Options),
}

pub struct Options {
    pub pid: Option<i32>,
    pub command: Vec<OsString>,
    pub json: bool,
    pub duration: Option<f64>,
    pub interval: f64,
    pub mode: Mode,
    pub model: Option<PathBuf>,
    pub ep: ExecutionProvider,
    pub actuator: ActuatorKind,
    pub guard: GuardConfig,
    pub probe: ProbeChoice,
}

impl Cli {
    /// Checks what clap cannot check field by field, and converts.
    pub fn task(self) -> Result<Task> {
        if let Some(trace) = self.replay {
            return Ok(Task::Replay(trace));
        }
        for g in 0..3 {
            if self.threshold_min[g] > self.threshold_max[g] {
                bail_user!(
                    "--threshold-min {} is above --threshold-max {} for generation {g}: the minimum must not exceed the maximum",
                    fmt(self.threshold_min),
                    fmt(self.threshold_max)
                );
            }
        }
        Ok(Task::Observe(Options {
            pid: self.pid,
            command: self.command,
            json: self.json,
            duration: self.duration,
            interval: self.interval,
            mode: match self.mode {
                CliMode::Observe => Mode::Observe,
                CliMode::Advise => Mode::Advise,
                CliMode::Act => Mode::Act,
            },
            model: self.model,
            ep: match self.ep {
                CliEp::Cpu => ExecutionProvider::Cpu,
                CliEp::Cuda => ExecutionProvider::Cuda,
            },
            actuator: match self.actuator {
                CliActuator::Hook => ActuatorKind::Hook,
                CliActuator::Memory => ActuatorKind::Memory,
            },
            guard: GuardConfig {
                min: self.threshold_min,
                max: self.threshold_max,
                cooldown: self.cooldown,
                confirm: self.confirm,
                max_rss_growth: self.max_rss_growth / 100.0,
                allow_disable: self.allow_disable,
            },
            probe: match self.probe {
                CliProbe::Auto => ProbeChoice::Auto,
                CliProbe::Usdt => ProbeChoice::Usdt,
                CliProbe::Uprobe => ProbeChoice::Uprobe,
            },
        }))
    }
}

fn fmt(t: [i64; 3]) -> String {
    format!("{},{},{}", t[0], t[1], t[2])
}

fn triple(s: &str) -> Result<[i64; 3], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let [a, b, c] = parts[..] else {
        return Err(format!("expected three comma-separated integers (t0,t1,t2), got {s:?}"));
    };
    let one = |x: &str| match x.parse::<i64>() {
        Ok(v) if (0..=i64::from(i32::MAX)).contains(&v) => Ok(v),
        _ => Err(format!("{x:?} is not an integer from 0 to {}", i32::MAX)),
    };
    Ok([one(a)?, one(b)?, one(c)?])
}

/// A number of seconds within [lo, hi].
fn secs(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("expected a number of seconds from {lo} to {hi}, got {s:?}")),
    }
}

fn percent(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 10_000.0 => Ok(v),
        _ => Err(format!("expected a percentage above 0 and at most 10000, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_are_refused_not_clamped() {
        for bad in ["1e300", "1e-10", "0", "-1", "nan", "inf", "", "x"] {
            assert!(secs(0.05, 3600.0)(bad).is_err(), "{bad}");
        }
        assert_eq!(secs(0.05, 3600.0)("0.5"), Ok(0.5));
        assert!(triple("1,2").is_err());
        assert!(triple("1,2,3,4").is_err());
        assert!(triple("1,2,2147483648").is_err());
        assert!(triple("-1,2,3").is_err());
        assert_eq!(triple(" 700, 10 ,10"), Ok([700, 10, 10]));
        for bad in ["0", "-5", "1e9", "nan"] {
            assert!(percent(bad).is_err(), "{bad}");
        }
    }
}
