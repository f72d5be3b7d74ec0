use std::{ffi::OsString, path::PathBuf};

use clap::Parser;

use crate::{actuate::ActuatorKind, policy::model::ExecutionProvider, target::ProbeChoice};

const AFTER_HELP: &str = "\
Examples:
  sudo neurogc-agent --pid 1234                 live view, and what the model would change
  sudo neurogc-agent --pid 1234 --mode act      let the model steer the thresholds (guarded)
  sudo neurogc-agent --pid 1234 --json -d 60    every collection, window and decision as JSON
  sudo neurogc-agent -- python3 app.py          run app.py, observed from its first collection
  neurogc-agent --replay trace.jsonl            recompute the feature windows of a recording

Exit status: 0 when observation ended normally (Ctrl-C, SIGTERM, --duration, target exit);
2 for input the agent cannot work with (no such PID, not CPython, no probes in the build, a
model or ONNX Runtime it cannot use, injection disabled in the target, a corrupt trace, not
root); 1 for any other failure.";

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
    #[arg(short, long, value_name = "PID", conflicts_with = "command", required_unless_present_any = ["command", "replay"])]
    pub pid: Option<i32>,

    /// Print one JSON object per line: a "gc" line per collection, a "summary" line at the end
    #[arg(long)]
    pub json: bool,

    /// Stop after this many seconds (the target keeps running)
    #[arg(short, long, value_name = "SECS", value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// Length of a feature window in seconds: the live view refreshes, and the policy decides,
    /// once per window
    #[arg(short, long, value_name = "SECS", default_value = "1", value_parser = positive_secs)]
    pub interval: f64,

    /// observe: no model. advise: decide and print what would change, change nothing.
    /// act: apply the decisions to the target (original thresholds restored on exit)
    #[arg(long, value_enum, default_value_t = Mode::Advise)]
    pub mode: Mode,

    /// ONNX model to decide with (default: the model embedded in the agent; contract in README)
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,

    /// Where to run the model
    #[arg(long, value_enum, default_value_t = ExecutionProvider::Cpu)]
    pub ep: ExecutionProvider,

    /// How act mode changes thresholds
    #[arg(long, value_enum, default_value_t = ActuatorKind::Hook)]
    pub actuator: ActuatorKind,

    /// Lowest thresholds the agent may set (t0,t1,t2)
    #[arg(long, value_name = "T0,T1,T2", default_value = "100,2,2", value_parser = triple)]
    pub threshold_min: [i64; 3],

    /// Highest thresholds the agent may set (t0,t1,t2)
    #[arg(long, value_name = "T0,T1,T2", default_value = "100000,100,100", value_parser = triple)]
    pub threshold_max: [i64; 3],

    /// Windows to wait after a change before making another
    #[arg(long, value_name = "WINDOWS", default_value = "5")]
    pub cooldown: u64,

    /// Consecutive windows the model must propose the same change before it is made
    #[arg(long, value_name = "WINDOWS", default_value = "2")]
    pub confirm: u32,

    /// Percent the target's RSS may grow over its value at attach before the agent steps the
    /// thresholds back toward the original ones
    #[arg(long, value_name = "PCT", default_value = "25")]
    pub max_rss_growth: f64,

    /// Allow a threshold of 0 (which disables that part of the collector)
    #[arg(long)]
    pub allow_disable: bool,

    /// Recompute the feature windows of a recorded `--json` stream and print them (no target)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pid", "command"])]
    pub replay: Option<PathBuf>,

    /// Which probes to use
    #[arg(long, value_enum, default_value_t = ProbeChoice::Auto)]
    pub probe: ProbeChoice,

    /// Start this command (a CPython interpreter and its arguments) and observe it from its
    /// first collection
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Observe,
    Advise,
    Act,
}

fn triple(s: &str) -> Result<[i64; 3], String> {
    let v: Vec<i64> =
        s.split(',').map(|x| x.trim().parse::<i64>()).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    <[i64; 3]>::try_from(v).map_err(|_| format!("expected three comma-separated integers, got {s:?}"))
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a positive number of seconds, got {s:?}")),
    }
}
