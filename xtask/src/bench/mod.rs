//! `cargo xtask bench …`: one file per benchmark (overhead, policy, fleet, locust, steer,
//! report) and the measuring they share (`measure`). Each prints numbers; none is a timed test.
mod draws;
pub mod fleet;
pub mod locust;
pub mod measure;
mod oracle;
mod overhead;
pub mod plot;
mod policy;
mod pyperformance;
pub mod report;
pub mod steer;

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use crate::workspace_root;

/// A report to stdout; a reader that has gone away (`| head -1`) ends it quietly, the report
/// being on disk.
fn write_stdout(report: &str) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().write_all(report.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[derive(Subcommand)]
pub enum Which {
    /// Overhead on the target, agent CPU and RSS, attach time
    Overhead {
        /// Rounds (each runs every mode once)
        #[arg(long, default_value = "10")]
        rounds: usize,
        /// Workload iterations per run
        #[arg(long, default_value = "1000000")]
        iterations: u64,
        /// threshold0 of the workload (lower: more collections per second)
        #[arg(long, default_value = "300")]
        threshold: u32,
        /// Interpreter with USDT probes (bpftrace needs them too)
        #[arg(long, default_value = "/usr/bin/python3.11")]
        python: PathBuf,
        /// Python frames the workload runs below (the agent copies them on every collection)
        #[arg(long, default_value = "30", value_parser = clap::value_parser!(u32).range(1..=200))]
        depth: u32,
    },
    /// Fleet mode: one agent, many processes collecting ~500 times a second each: agent CPU and
    /// RSS, scrape time, exec→armed latency
    Fleet {
        /// Python processes running at once
        #[arg(long, default_value = "20", value_parser = clap::value_parser!(u32).range(1..=500))]
        processes: u32,
        /// Collections per second each
        #[arg(long, default_value = "500", value_parser = seconds_arg)]
        rate: f64,
        /// Seconds measured
        #[arg(long, default_value = "30", value_parser = seconds_arg)]
        seconds: f64,
        /// New processes started (one at a time) to time their attach
        #[arg(long, default_value = "10", value_parser = clap::value_parser!(u32).range(1..=100))]
        attaches: u32,
        #[arg(long, default_value = "/usr/bin/python3.11")]
        python: PathBuf,
    },
    /// The closed loop: inference and window→decision latency, RSS with the model, hook injection
    Policy {
        /// act-mode sessions per interpreter
        #[arg(long, default_value = "3")]
        sessions: usize,
        /// Seconds per session
        #[arg(long, default_value = "10")]
        seconds: u32,
    },
    /// Steering against defaults, the static recipe, GC off and the agent without its learned
    /// model, on the workloads of bench/ and the held-out families of workloads/heldout/
    Steer {
        /// Workloads to run (all unless given)
        #[arg(long, value_enum, value_delimiter = ',')]
        workload: Vec<crate::bench::steer::Workload>,
        /// Configurations each round runs (all unless given)
        #[arg(long, value_enum, value_delimiter = ',')]
        configs: Vec<crate::bench::steer::Config>,
        /// Interleaved rounds (each runs every configuration once)
        #[arg(long, default_value = "5", value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Seconds of load per run (the batch job: 500 steps per second given)
        #[arg(long, default_value = "10", value_parser = seconds_arg)]
        seconds: f64,
        /// Seconds of the same load before the measured part, in every configuration: the
        /// agent's budgets converge in this time (the "after convergence, ≤ 10 s")
        #[arg(long, default_value = "8", value_parser = seconds_arg)]
        warmup: f64,
        /// Multiplies each workload's request rate (50–70% of capacity under defaults at 1)
        #[arg(long, default_value = "1", value_parser = seconds_arg)]
        load: f64,
        /// Interpreter running the workloads
        #[arg(long, default_value = "/usr/bin/python3.11")]
        python: PathBuf,
        /// Model for act mode (default: the embedded one)
        #[arg(long)]
        model: Option<PathBuf>,
        /// Folder for report.md, the SVG plots and the agent's last records
        #[arg(long, default_value = "target/bench-steer")]
        out: PathBuf,
        /// Run every configuration with a busy loop sharing the workload's CPU (about half speed)
        #[arg(long)]
        half_speed: bool,
    },
    /// The public pyperformance suite's pure-Python benchmarks, each in one process, under the
    /// defaults, observe and act (launched under the agent): time against the defaults
    Pyperformance {
        /// Interleaved rounds of the three arms
        #[arg(long, default_value = "3", value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        #[arg(long, default_value = "/usr/bin/python3.11")]
        python: PathBuf,
        /// Folder for report.md and each run's output
        #[arg(long, default_value = "target/bench-pyperformance")]
        out: PathBuf,
    },
    /// Steering on drawn workloads (workloads/generated/draw.py): each draw's oracle among the
    /// fixed recipes (cached), then interleaved rounds of defaults, act and that recipe;
    /// act / oracle, harm and memory-budget violations over the draws
    Draws {
        /// Seed pool to sample from
        #[arg(long, value_enum, default_value = "evaluation")]
        pool: draws::Pool,
        /// Draws sampled from the pool
        #[arg(long, default_value = "24", value_parser = clap::value_parser!(u32).range(1..=1000))]
        sample: u32,
        /// Which draws the sample takes (any number; printed in the report)
        #[arg(long, default_value = "1")]
        sample_seed: u64,
        /// Run these draws instead of a sample
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
        /// Interleaved rounds of defaults and act per draw
        #[arg(long, default_value = "2", value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Seconds measured per run
        #[arg(long, default_value = "20", value_parser = seconds_arg)]
        seconds: f64,
        /// Seconds between the agent's attach and the measured part
        #[arg(long, default_value = "2", value_parser = seconds_arg)]
        warmup: f64,
        /// Interpreter running the draws
        #[arg(long, default_value = "/usr/bin/python3.11")]
        python: PathBuf,
        /// Folder for report.md and the agent's last records
        #[arg(long, default_value = "target/bench-draws")]
        out: PathBuf,
        /// A busy loop shares the workload's CPU throughout (about half speed)
        #[arg(long)]
        half_speed: bool,
        /// Add a third arm, act on the analytic model alone (`--model none`): what the learned
        /// model earns
        #[arg(long, conflicts_with = "against")]
        ablate: bool,
        /// Add a third arm, act by another build of the agent (the path of its executable,
        /// with its libonnxruntime.so beside it): what this build earns over that one
        #[arg(long, value_name = "AGENT")]
        against: Option<PathBuf>,
        /// Measure and cache the draws' oracles, and stop (no agent runs)
        #[arg(long)]
        oracles_only: bool,
    },
    /// The locust experiment's shape (-u 100 -r 10 --run-time 1m) on the cache service, with
    /// and without the agent: RPS, P95/P99 and GC events
    Locust {
        /// Interleaved rounds (each runs defaults, the static recipe and act once)
        #[arg(long, default_value = "2", value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// locust's --run-time
        #[arg(long, default_value = "1m")]
        run_time: String,
        /// Interpreter running the service
        #[arg(long, default_value = "/usr/bin/python3.11")]
        python: PathBuf,
    },
    /// `report` on a large synthetic trace: wall time and peak RSS
    Report {
        /// Collections in the trace
        #[arg(long, default_value = "10000000")]
        collections: u64,
        /// Interleaved rounds
        #[arg(long, default_value = "3")]
        rounds: usize,
    },
}

/// A positive number of seconds (or a load multiplier), at most a day.
fn seconds_arg(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("{s:?}: expected a number above 0 and at most 86400")),
    }
}

pub fn run(which: Which) -> Result<()> {
    match which {
        Which::Overhead { rounds, iterations, threshold, python, depth } => {
            overhead::run(rounds, iterations, threshold, depth, &python)
        }
        Which::Policy { sessions, seconds } => policy::run(sessions, seconds),
        Which::Fleet { processes, rate, seconds, attaches, python } => {
            crate::bench::fleet::run(crate::bench::fleet::Options {
                processes: processes as usize,
                rate,
                seconds,
                attaches: attaches as usize,
                python,
            })
        }
        Which::Locust { rounds, run_time, python } => {
            crate::bench::locust::run_locust(rounds as usize, &run_time, &python)
        }
        Which::Steer { workload, configs, rounds, seconds, warmup, load, python, model, out, half_speed } => {
            let opts = crate::bench::steer::Options {
                workloads: if workload.is_empty() {
                    crate::bench::steer::WORKLOADS.to_vec()
                } else {
                    workload
                },
                configs: if configs.is_empty() { crate::bench::steer::CONFIGS.to_vec() } else { configs },
                rounds: rounds as usize,
                seconds,
                warmup,
                load,
                python,
                model,
                out: workspace_root().join(out),
                half_speed,
            };
            let results = crate::bench::steer::run(&opts)?;
            crate::bench::steer::report::write(&opts, &results)
        }
        Which::Draws {
            pool,
            sample,
            sample_seed,
            seeds,
            rounds,
            seconds,
            warmup,
            python,
            out,
            half_speed,
            ablate,
            against,
            oracles_only,
        } => draws::run(&draws::Options {
            pool,
            sample: sample as usize,
            sample_seed,
            seeds,
            rounds: rounds as usize,
            seconds,
            warmup,
            python,
            out: workspace_root().join(out),
            half_speed,
            ablate,
            against,
            oracles_only,
        }),
        Which::Pyperformance { rounds, python, out } => pyperformance::run(&pyperformance::Options {
            rounds: rounds as usize,
            python,
            out: workspace_root().join(out),
        }),
        Which::Report { collections, rounds } => crate::bench::report::run(collections, rounds),
    }
}
