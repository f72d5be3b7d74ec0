use std::ffi::OsString;

use clap::Parser;

use crate::target::ProbeChoice;

const AFTER_HELP: &str = "\
Examples:
  sudo neurogc-agent --pid 1234                 live view of a running process
  sudo neurogc-agent --pid 1234 --json -d 60    every collection as JSON for a minute
  sudo neurogc-agent -- python3 app.py          run app.py, observed from its first collection

Exit status: 0 when observation ended normally (Ctrl-C, SIGTERM, --duration, target exit);
2 for input the agent cannot work with (no such PID, not CPython, no probes in the build,
not root); 1 for any other failure.";

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
    #[arg(short, long, value_name = "PID", conflicts_with = "command", required_unless_present = "command")]
    pub pid: Option<i32>,

    /// Print one JSON object per line: a "gc" line per collection, a "summary" line at the end
    #[arg(long)]
    pub json: bool,

    /// Stop after this many seconds (the target keeps running)
    #[arg(short, long, value_name = "SECS", value_parser = positive_secs)]
    pub duration: Option<f64>,

    /// Seconds between two refreshes of the live view
    #[arg(short, long, value_name = "SECS", default_value = "1", value_parser = positive_secs)]
    pub interval: f64,

    /// Which probes to use
    #[arg(long, value_enum, default_value_t = ProbeChoice::Auto)]
    pub probe: ProbeChoice,

    /// Start this command (a CPython interpreter and its arguments) and observe it from its
    /// first collection
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("expected a positive number of seconds, got {s:?}")),
    }
}
