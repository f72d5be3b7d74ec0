//! The command line as clap reads it; `options.rs` converts it into the domain's options, so
//! nothing below `main` sees a clap type. Every number is range-checked here: out-of-range input
//! is exit code 2 with one line, never a panic deeper down (`Duration::from_secs_f64(1e300)`
//! would be one).
use std::{ffi::OsString, net::SocketAddr, path::PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::fleet::discover::{Rule, RuleKey};

const AFTER_HELP: &str = "\
Examples:
  sudo neurogc-agent --pid 1234                  live view and advice
  sudo neurogc-agent --pid 1234 --mode act       steer the thresholds, guarded
  sudo neurogc-agent -- python3 app.py           run app.py, watched from start
  sudo neurogc-agent record --pid 1234 -o t.ngc  record for later study
  neurogc-agent report t.ngc --html t.html       pause forensics of a recording
  sudo neurogc-agent top                         every Python process, live

More examples, what act mode guarantees, and the exit status: --help";

// Wrapped at 78 columns by hand: clap wraps again only what is wider than the terminal.
const AFTER_LONG_HELP: &str = "\
Examples:
  sudo neurogc-agent --pid 1234                  live view and advice
  sudo neurogc-agent --pid 1234 --mode act       steer the thresholds, guarded
  sudo neurogc-agent -- python3 app.py           run app.py, watched from start
  sudo neurogc-agent --pid 1234 --json -d 60     a minute of records, JSON lines
  sudo neurogc-agent record --pid 1234 -o t.ngc  record for later study
  neurogc-agent report t.ngc --html t.html       pause forensics of a recording
  neurogc-agent replay t.ngc --model new.onnx    what a model would have decided
  sudo neurogc-agent fleet --metrics-addr :9464  every process, for Prometheus
  sudo neurogc-agent top                         every Python process, live

Act mode changes nothing that the application did not have once the agent is
gone, however it goes (SIGKILL included): the hook restores every threshold
that still holds neurogc's value, and a custodian process undoes an injection
that never ran. See docs/act-mode.md.

Exit status: 0 when observation ended normally (Ctrl-C, SIGTERM, --duration,
target exit); in launch mode, the command's own status, as time(1) gives it; 2
for input the agent cannot work with (no such PID, not CPython, no probes in
the build, a model or ONNX Runtime it cannot use, injection refused by the
target, a corrupt trace, a value out of range, not root); 1 for any other
failure.";

/// Time every garbage collection of a live CPython process, from outside (eBPF).
///
/// neurogc-agent attaches USDT probes (python:gc__start/gc__done) where the interpreter build
/// has them, else a uprobe/uretprobe pair on the collector function (found in .symtab, or in
/// stripped builds through the exported PyGC_Collect), and times every collection: generation,
/// pause, objects collected and uncollectable, thread. The target needs no code change and is
/// left exactly as it was when the agent detaches or dies.
#[derive(Debug, Parser)]
// Help fits 80 columns, at a wider terminal and into a pipe alike (clap's default is 100).
#[command(name = "neurogc-agent", version, after_help = AFTER_HELP, after_long_help = AFTER_LONG_HELP, max_term_width = 80,
          args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Cli {
    #[command(subcommand)]
    pub sub: Option<Sub>,

    #[command(flatten)]
    pub target: TargetArgs,

    /// JSON lines instead of the live view
    ///
    /// One JSON object per line: an "attach" record, a "gc" record per collection, a "window" record per window, "decision" and "actuation" records
    /// in advise/act mode, a "summary" record at the end (format: docs/records.md). In
    /// launch mode the command's own standard output then goes to standard error
    #[arg(long)]
    pub json: bool,

    /// JSON lines to FILE; the live view stays
    ///
    /// FILE is created or truncated, never followed through a symbolic link; in a directory
    /// other users can write (/tmp), only a new file or this user's own is written. With or
    /// without --json, the live view stays on standard output
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub steer: SteerArgs,
}

impl Cli {
    /// The command line, or clap's error and exit status 2. Where no process was given, clap
    /// names `--pid` alone as required, with a usage that has it mandatory beside a command to
    /// launch: the message says that either one will do.
    pub fn parse_or_exit(args: impl IntoIterator<Item = OsString>) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|err| {
            if err.kind() != clap::error::ErrorKind::MissingRequiredArgument {
                err.exit()
            }
            // Rendered plain: the styled form would carry colour codes into a pipe.
            let text = err
                .render()
                .to_string()
                .replace(
                    "  --pid <PID>\n",
                    "  --pid <PID> (a running process), or -- COMMAND (one to start)\n",
                )
                .replace(" --pid <PID> [-- <COMMAND>...]", " (--pid <PID> | -- <COMMAND>...)");
            crate::stderr::line(text.trim_end());
            std::process::exit(crate::error::EXIT_USER)
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Record a process's collections, windows and decisions to a trace file
    ///
    /// Every collection, window, decision and actuation, in zstd frames of JSON lines
    /// (`zstdcat FILE | jq` reads it), for `report` and `replay`
    Record(RecordArgs),
    /// GC pause forensics of a recording: KPIs, findings, HTML and Perfetto
    ///
    /// Reads a recording or a --json stream: KPIs, findings, and optional HTML, Perfetto and
    /// folded-stack exports
    Report(ReportArgs),
    /// What a model would have decided on a recording, window by window
    ///
    /// Runs a model and the guard over a recording's windows, offline: what it would have
    /// decided at each window, next to what the recorded run had
    Replay(ReplayArgs),
    /// Every CPython process on this host, exported for Prometheus
    ///
    /// Observes every CPython process on this host (containers included), now and as they
    /// start, and exports their GC metrics for Prometheus. Observe-only: steering stays a
    /// per-process choice (`--pid PID --mode act`). `--all` is the same
    Fleet(FleetArgs),
    /// Live view of every CPython process on this host
    ///
    /// GC share, pauses, collections/s and a history of each; keys: s sorts, q quits
    Top(TopArgs),
}

/// Which processes fleet mode and the live view observe.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// Observe only processes matching KEY=PATTERN (repeatable; any may match). KEY is comm,
    /// cgroup (its v2 path) or container (the runtime's 64-hex id); `*` and `?` are wildcards
    #[arg(long, value_name = "KEY=PATTERN", value_parser = rule)]
    pub include: Vec<Rule>,

    /// Never observe processes matching KEY=PATTERN (repeatable; wins over --include)
    #[arg(long, value_name = "KEY=PATTERN", value_parser = rule)]
    pub exclude: Vec<Rule>,

    /// Observe at most this many processes at once (1 to 4096); more are left alone, with one
    /// warning, until some exit
    #[arg(long, value_name = "N", default_value = "256", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_targets: u32,

    /// Length of a window in seconds (0.05 to 3600): GC share and thresholds are refreshed
    /// once per window
    #[arg(short, long, value_name = "SECS", default_value = "1", allow_negative_numbers = true,
          value_parser = secs(0.05, 3600.0))]
    pub interval: f64,

    /// Stop after this many seconds, at most a year
    #[arg(short, long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = secs(0.001, 31_536_000.0))]
    pub duration: Option<f64>,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Serve Prometheus metrics at http://ADDR/metrics (":9464" listens on every address)
    #[arg(long, value_name = "ADDR", value_parser = listen_addr)]
    pub metrics_addr: Option<SocketAddr>,

    /// Also export prometheus_client's names (python_gc_collections_total, …) for existing
    /// dashboards
    #[arg(long, requires = "metrics_addr")]
    pub python_gc_names: bool,

    /// What collections free, in each process about every SECS (1 to 3600, 60 if not given;
    /// off by default)
    ///
    /// A garbage census of one process at a time, each about every SECS seconds (60 if not
    /// given): the types of what one collection frees, exported as
    /// cpython_gc_garbage_objects_total{type}, the first 10 types of a process with a label of
    /// their own and the rest as "other" (docs/census.md)
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "60",
          value_parser = secs(1.0, 3600.0), hide_short_help = true)]
    pub census: Option<f64>,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Initial sort order (s cycles through them)
    #[arg(long, value_enum, default_value_t = CliSort::Share)]
    pub sort: CliSort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliSort {
    /// Share of wall time in GC over the last ten windows
    Share,
    /// Longest pause since the process was first seen
    Longest,
    /// Pause p99 since the process was first seen
    P99,
    /// Collections per second over the last window
    Rate,
}

#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Attach to this running CPython process
    ///
    /// Attach to this running CPython process (a host PID)
    #[arg(short, long, value_name = "PID", conflicts_with = "command", required_unless_present = "command",
          allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(1..=4_194_304))]
    pub pid: Option<i32>,

    /// Stop after SECS seconds, at most a year
    ///
    /// Stop after this many seconds, at most a year (the target keeps running)
    #[arg(short, long, value_name = "SECS", allow_negative_numbers = true,
          value_parser = secs(0.001, 31_536_000.0))]
    pub duration: Option<f64>,

    /// Window length, 0.05 to 3600 s
    ///
    /// Length of a feature window in seconds (0.05 to 3600): the live view refreshes, and the
    /// policy decides, once per window
    #[arg(short, long, value_name = "SECS", default_value = "1", allow_negative_numbers = true,
          value_parser = secs(0.05, 3600.0))]
    pub interval: f64,

    /// Which probes to use
    #[arg(long, value_enum, default_value_t = CliProbe::Auto, hide_short_help = true)]
    pub probe: CliProbe,

    /// What collections free, one collection every SECS (1 to 3600, 60 if not given; off by
    /// default)
    ///
    /// A garbage census: every SECS seconds (60 if not given), the types of the objects one
    /// collection frees (4096 at most), their count and bytes, and the attribute that closes
    /// each class's cycle, as a `census` record (3.8-3.15, not free-threaded builds). Each
    /// census adds its walk to one collection's pause (docs/census.md)
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "60",
          value_parser = secs(1.0, 3600.0), hide_short_help = true)]
    pub census: Option<f64>,

    /// Start this command and observe it from its first collection
    ///
    /// A CPython interpreter and its arguments, started by the agent and observed from its
    /// first collection; the agent exits with its status
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct SteerArgs {
    /// observe, advise or act
    ///
    /// observe: no model. advise: decide and print what would change, change nothing, and end
    /// with a recommendation (SIGUSR1 to the agent prints it at any time). act: apply the decisions to the target (the application's own thresholds come back when
    /// the agent leaves, however it leaves)
    #[arg(long, value_enum, default_value_t = CliMode::Advise, hide_possible_values = true)]
    pub mode: CliMode,

    /// How act mode changes thresholds. Either way a custodian process puts the application's
    /// values back if the agent dies
    #[arg(long, value_enum, default_value_t = CliActuator::Hook, hide_short_help = true)]
    pub actuator: CliActuator,

    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// The model and its guardrails: live, recorded or replayed alike.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// ONNX model file, or "none" (default: embedded)
    ///
    /// Learned ONNX model that corrects the analytic model of the collector, a regular file of
    /// at most 64 MiB (default: the one embedded in the agent; contract in docs/controller.md), or "none":
    /// the analytic model alone (no ONNX Runtime needed)
    #[arg(long, value_name = "MODEL")]
    pub model: Option<PathBuf>,

    /// Where to run the model
    #[arg(long, value_enum, default_value_t = CliEp::Cpu, hide_short_help = true)]
    pub ep: CliEp,

    /// How much the learned model's corrections count from the start
    #[arg(long, value_enum, value_name = "WEIGHT", default_value_t = CliModelWeight::Earned,
          hide_short_help = true)]
    pub model_weight: CliModelWeight,

    /// Lowest thresholds the agent may set (t0,t1,t2; each 0 to 2147483647)
    #[arg(long, value_name = "T0,T1,T2", default_value = "100,2,2", value_parser = triple,
          hide_short_help = true)]
    pub threshold_min: [i64; 3],

    /// Highest thresholds the agent may set (t0,t1,t2; each 0 to 2147483647, not below the
    /// minimum)
    #[arg(long, value_name = "T0,T1,T2", default_value = "100000,100,100", value_parser = triple,
          hide_short_help = true)]
    pub threshold_max: [i64; 3],

    /// Memory neurogc's changes may cost
    ///
    /// Memory budget, first of the budgets: what neurogc's changes cost (deferred and frozen
    /// garbage, as predicted) as a share of the application's own RSS ("15%", 1% to 1000%; at
    /// least 16 MiB), or an absolute RSS ("512MiB", "2GiB"; 16MiB to 1TiB). Over it, neurogc
    /// undoes its freeze and steps thresholds back toward the application's. The cost counted
    /// in a window is at most what RSS grew since neurogc's first change
    #[arg(long, value_name = "BUDGET", default_value = "15%", value_parser = memory_budget)]
    pub memory_budget: MemoryBudget,

    /// Longest pause allowed, or "off"
    ///
    /// Pause budget: the longest collection allowed in a window ("10ms"; 100us to 10s, or
    /// "off"). Over it: freeze a warm heap, make full collections rarer, shrink gen0
    #[arg(long, value_name = "TIME", default_value = "10ms", value_parser = pause_budget)]
    pub pause_budget: Budget<u64>,

    /// Share of time in GC allowed
    ///
    /// GC budget: share of wall time spent collecting ("2%"; 0.1% to 50%), "attach" (no worse
    /// than the application's own setting, measured in the first windows with its full
    /// collections at their predicted rate) or "off"
    #[arg(long, value_name = "BUDGET", default_value = "attach", value_parser = gc_budget)]
    pub gc_budget: GcBudget,

    /// Seconds to watch before gc.freeze() may be used, unless the heap is seen warm sooner (a
    /// full collection kept no more than the one before it): neurogc freezes once, and a heap
    /// still filling would be frozen in part; 0 to 86400
    #[arg(long, value_name = "SECONDS", default_value = "5", allow_negative_numbers = true,
          value_parser = secs(0.0, 86_400.0), hide_short_help = true)]
    pub freeze_after: f64,

    /// Never call gc.freeze() in the target
    #[arg(long)]
    pub no_freeze: bool,

    /// Allow a threshold of 0 (which disables that part of the collector)
    #[arg(long, hide_short_help = true)]
    pub allow_disable: bool,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The trace file to write
    ///
    /// Created or truncated, never followed through a symbolic link; in a directory other
    /// users can write (/tmp), only a new file or this user's own is written. Readable up to
    /// its last block even if the recorder is killed
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    #[command(flatten)]
    pub target: TargetArgs,

    #[command(flatten)]
    pub steer: SteerArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A recording (`record -o`) or a `--json` stream
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Print the report as one JSON object instead of text
    #[arg(long)]
    pub json: bool,

    /// Also write a self-contained HTML report with plots to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Also write a Chrome/Perfetto trace-event JSON file, one slice per collection on its
    /// thread's track (open it in ui.perfetto.dev)
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,

    /// Also write the collections' Python stacks as folded stacks (`frame;frame;frame N`), for
    /// flamegraph.pl, inferno or speedscope
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,

    /// What --folded weighs each stack by: collections it started, or nanoseconds of pause
    #[arg(long, value_enum, default_value = "collections", requires = "folded")]
    pub weight: crate::report::Weight,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A recording (`record -o`) or a `--json` stream
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,

    /// Print "window" and "decision" records (JSON lines) instead of a table
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub policy: PolicyArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliMode {
    Observe,
    Advise,
    Act,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CliModelWeight {
    /// None at attach: earned by the moves in which its corrections come true in this process
    Earned,
    /// All of it at attach, fading where its corrections do not come true (a model trained on
    /// this application)
    Full,
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
    /// Only a uprobe/uretprobe pair on the collector function (.symtab, or found from PyGC_Collect)
    Uprobe,
}

/// `comm=gunicorn*`, `cgroup=*kubepods*`, `container=3f2a*`.
fn rule(s: &str) -> Result<Rule, String> {
    let (key, pattern) = s.split_once('=').ok_or("expected KEY=PATTERN, e.g. comm=gunicorn")?;
    let key = match key {
        "comm" => RuleKey::Comm,
        "cgroup" => RuleKey::Cgroup,
        "container" => RuleKey::Container,
        other => return Err(format!("unknown key {other:?}: use comm, cgroup or container")),
    };
    if pattern.is_empty() || pattern.len() > 4096 {
        return Err("the pattern must be 1 to 4096 characters".into());
    }
    Ok(Rule { key, pattern: pattern.to_owned() })
}

/// `:9464` (every address), `127.0.0.1:9464`, `[::1]:9464`.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    let full = if s.starts_with(':') { format!("0.0.0.0{s}") } else { s.to_owned() };
    full.parse().map_err(|_| format!("{s:?} is not HOST:PORT or :PORT (e.g. :9464, 127.0.0.1:9464)"))
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

/// A budget, or "off".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget<T>(pub Option<T>);

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemoryBudget {
    /// A fraction of RSS.
    Growth(f64),
    Bytes(u64),
}

/// "15%" or "15": a fraction within [lo, hi] percent.
fn fraction(s: &str, lo: f64, hi: f64) -> Result<f64, String> {
    let t = s.trim();
    match t.strip_suffix('%').unwrap_or(t).trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (lo..=hi).contains(&v) => Ok(v / 100.0),
        _ => Err(format!("expected a percentage from {lo}% to {hi}%, got {s:?}")),
    }
}

fn memory_budget(s: &str) -> Result<MemoryBudget, String> {
    let t = s.trim();
    let units = [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40)];
    if let Some((number, unit)) = units.iter().find_map(|(u, m)| t.strip_suffix(u).map(|n| (n, *m))) {
        return match number.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => {
                let bytes = v * unit as f64;
                if (16.0 * 1048576.0..=1099511627776.0).contains(&bytes) {
                    Ok(MemoryBudget::Bytes(bytes as u64))
                } else {
                    Err(format!("{s:?}: an absolute memory budget must be from 16MiB to 1TiB"))
                }
            }
            _ => Err(format!("expected a size such as 512MiB or 2GiB, got {s:?}")),
        };
    }
    fraction(s, 1.0, 1000.0).map(MemoryBudget::Growth).map_err(|e| format!("{e} (or a size such as 512MiB)"))
}

fn pause_budget(s: &str) -> Result<Budget<u64>, String> {
    let t = s.trim();
    if t == "off" {
        return Ok(Budget(None));
    }
    let bad = || {
        format!("expected a duration from 100us to 10s (\"10ms\", \"500us\", \"0.2s\") or \"off\", got {s:?}")
    };
    let (number, scale) = [("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(u, k)| t.strip_suffix(u).map(|n| (n, *k)))
        .ok_or_else(bad)?;
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (100e3..=10e9).contains(&(v * scale)) => {
            Ok(Budget(Some((v * scale) as u64)))
        }
        _ => Err(bad()),
    }
}

/// The GC budget as given: a share, relative to attach, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GcBudget {
    Share(f64),
    AtAttach,
    Off,
}

fn gc_budget(s: &str) -> Result<GcBudget, String> {
    match s.trim() {
        "off" => Ok(GcBudget::Off),
        "attach" => Ok(GcBudget::AtAttach),
        _ => fraction(s, 0.1, 50.0).map(GcBudget::Share).map_err(|e| format!("{e} (or \"attach\", \"off\")")),
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
        for bad in ["0", "0%", "-5%", "1e9", "nan", "inf%", "5MB", "8MiB", "2TiB", "%", "x%"] {
            assert!(memory_budget(bad).is_err(), "{bad}");
        }
        assert_eq!(memory_budget("15%"), Ok(MemoryBudget::Growth(0.15)));
        assert_eq!(memory_budget(" 512MiB "), Ok(MemoryBudget::Bytes(512 << 20)));
        for bad in ["0ms", "10", "50us", "11s", "nan ms", "-1ms", "ms", "on"] {
            assert!(pause_budget(bad).is_err(), "{bad}");
        }
        assert_eq!(pause_budget("10ms"), Ok(Budget(Some(10_000_000))));
        assert_eq!(pause_budget("off"), Ok(Budget(None)));
        for bad in ["0%", "0.01%", "51%", "nan", ""] {
            assert!(gc_budget(bad).is_err(), "{bad}");
        }
        assert_eq!(gc_budget("2%"), Ok(GcBudget::Share(0.02)));
        assert_eq!(gc_budget("attach"), Ok(GcBudget::AtAttach));
        assert_eq!(gc_budget("off"), Ok(GcBudget::Off));
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
