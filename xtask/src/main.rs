//! `cargo xtask …`: neurogc's developer tasks. Each step is idempotent, so CI and a fresh clone
//! run the same commands as a developer's warm machine.
mod bench;
mod deploy;
mod pythons;
mod setup;
mod train;
mod venv;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "neurogc developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what building the eBPF half needs (rust-src, bpf-linker on rustc's own LLVM)
    Setup,
    /// Set up, build the agent, and run a demo service under CPython's defaults and then under
    /// act mode with the embedded model; ends with a before/after line (the README's first command)
    Demo {
        /// Seconds measured in each run (after 6 s of warm-up)
        #[arg(long, default_value = "10", value_parser = clap::value_parser!(u32).range(2..=600))]
        seconds: u32,
    },
    /// Fetch and list the real CPython builds the tests run against
    Pythons,
    /// Measure where each test interpreter keeps its GC state's counters
    /// (xtask/layouts/gc_counters.py), to check against interp/versions.rs
    Layouts,
    /// Validate deploy/ (the DaemonSet against the Kubernetes API schemas, the dashboard as JSON)
    DeployCheck,
    /// Set up, fetch the test interpreters, check formatting and lints, run every test
    Test {
        /// Extra arguments for `cargo test` (after --)
        #[arg(last = true)]
        cargo_args: Vec<String>,
    },
    /// Record the exploration workloads and train the default model (models/default.onnx,
    /// models/MODEL_CARD.md)
    Train {
        /// Interpreters the workloads run on: paths, or minor versions ("3.12") looked up in the
        /// test interpreters' manifest (its first native default build of that version)
        #[arg(long, value_delimiter = ',', default_value = "3.11,3.12,3.13")]
        python: Vec<String>,
        /// Seconds per recording
        #[arg(long, default_value = "20")]
        seconds: u32,
        /// Seeds per family
        #[arg(long, default_value = "8")]
        repeats: u32,
        /// Record only these families (replacing their recordings), keep the others'
        #[arg(long, value_delimiter = ',')]
        family: Vec<String>,
        /// Record nothing: train again on the recordings in target/training-traces
        #[arg(long, conflicts_with = "held")]
        retrain: bool,
        /// Record only the long-hold recordings (target/training-traces/held/: each family once
        /// per interpreter, actions held about 12 s, the memory outcomes), keep the others'
        #[arg(long, conflicts_with = "family")]
        held: bool,
    },
    /// The torture job: act mode against real targets in every state, the agent killed at random
    /// and at aimed moments; prints counts (target deaths, settings, files and other leftovers)
    Torture {
        /// Trials per injection path (3.8–3.12 ring, 3.13+ counted queue, free-threaded 3.13t)
        #[arg(long, default_value = "200", value_parser = clap::value_parser!(u32).range(1..=100_000))]
        trials: u32,
        /// Seed of the random choices (printed by every run, to reproduce one)
        #[arg(long)]
        seed: Option<u64>,
        /// Only this injection path
        #[arg(long, value_parser = ["ring", "counted", "free-threaded"])]
        path: Option<String>,
    },
    /// The bench job's fuzzing of the trace reader (cargo-fuzz, nightly; not part of CI)
    Fuzz {
        /// Seconds to fuzz
        #[arg(long, default_value = "300", value_parser = clap::value_parser!(u32).range(1..=86_400))]
        seconds: u32,
    },
    /// Benchmarks that print numbers
    Bench {
        #[command(subcommand)]
        which: bench::Which,
    },
}

fn main() -> Result<()> {
    match Cli::parse().task {
        Task::Setup => setup::run(),
        Task::Demo { seconds } => demo(seconds),
        Task::Pythons => pythons::ensure().map(|m| pythons::print(&m)),
        Task::Layouts => pythons::ensure().and_then(|m| pythons::measure_layouts(&m)),
        Task::DeployCheck => deploy::check(),
        Task::Test { cargo_args } => test(&cargo_args),
        Task::Train { python, seconds, repeats, family, retrain, held } => {
            train::run_training(&train::Options {
                pythons: python,
                seconds,
                repeats,
                families: family,
                retrain,
                held,
            })
        }
        Task::Torture { trials, seed, path } => torture(trials, seed, path.as_deref()),
        Task::Fuzz { seconds } => fuzz(seconds),
        Task::Bench { which } => bench::run(which),
    }
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace").to_path_buf()
}

/// Runs a command in the workspace root, failing with its command line when it fails.
pub fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {}", format_command(cmd));
    let status = cmd.current_dir(workspace_root()).status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{} failed ({status})", format_command(cmd));
    }
    Ok(())
}

fn format_command(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fuzzes neurogc-trace's reader from a seed corpus of real-shaped traces (one recording, one
/// --json stream), with cargo-fuzz on the nightly toolchain.
fn fuzz(seconds: u32) -> Result<()> {
    let have = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        run(Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]))?;
        run(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]))?;
    }
    let dir = workspace_root().join("neurogc-trace/fuzz");
    let corpus = workspace_root().join("target/fuzz-corpus/read_trace");
    std::fs::create_dir_all(&corpus)?;
    bench::report::seed_corpus(&corpus)?;
    let status = Command::new("cargo")
        .args(["+nightly", "fuzz", "run", "read_trace"])
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg("-rss_limit_mb=1024")
        .current_dir(&dir)
        .status()
        .context("running cargo fuzz")?;
    anyhow::ensure!(status.success(), "the fuzzer found a crash (see {}/artifacts)", dir.display());
    Ok(())
}

/// Builds the release agent and puts ONNX Runtime beside it (where the agent looks for it).
pub fn build_release_agent() -> Result<PathBuf> {
    run(Command::new("cargo").args(["build", "--release", "--package", "neurogc-agent"]))?;
    let agent = workspace_root().join("target/release/neurogc-agent");
    setup::install_onnxruntime_beside(&agent)?;
    Ok(agent)
}

/// The README's first command: the demo service (workloads/tuning/demo_service.py) under CPython's
/// defaults, then under `neurogc-agent --mode act` with the embedded model and default budgets,
/// the same load in both; ends with one before/after line measured in this run.
fn demo(seconds: u32) -> Result<()> {
    setup::run()?;
    let agent = build_release_agent()?;
    let python = ["/usr/bin/python3", "/usr/bin/python3.11"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .context("no /usr/bin/python3 to observe")?;
    let dir = workspace_root().join("target/demo");
    std::fs::create_dir_all(&dir)?;
    let service = |result: &Path| {
        let mut args: Vec<String> = vec![python.to_owned()];
        args.push(workspace_root().join("workloads/tuning/demo_service.py").display().to_string());
        args.extend(["--seconds".to_owned(), seconds.to_string(), "--result".to_owned()]);
        args.push(result.display().to_string());
        args
    };
    let before = dir.join("defaults.json");
    let after = dir.join("act.json");
    for f in [&before, &after] {
        let _ = std::fs::remove_file(f);
    }
    eprintln!("xtask: the demo service under CPython's defaults ({seconds} s measured after 6 s of warm-up)");
    let args = service(&before);
    run(Command::new(&args[0]).args(&args[1..]))?;
    eprintln!("xtask: the same service under neurogc-agent --mode act (launch mode)");
    let args = service(&after);
    run(Command::new(&agent).args(["--mode", "act", "--"]).args(&args))?;
    let read = |f: &Path| -> Result<serde_json::Value> {
        Ok(serde_json::from_str(
            &std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        )?)
    };
    let (b, a) = (read(&before)?, read(&after)?);
    let num = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    println!(
        // One line within 80 columns: p99 latency, GC share, peak RSS (defaults -> act).
        "before/after: p99 {:.1} -> {:.1} ms ({:.2}x) · GC {:.1}% -> {:.1}% · RSS {:.0} -> {:.0} MiB",
        num(&b, "p99_ms"),
        num(&a, "p99_ms"),
        num(&a, "p99_ms") / num(&b, "p99_ms"),
        num(&b, "gc_share") * 100.0,
        num(&a, "gc_share") * 100.0,
        num(&b, "peak_rss_mib"),
        num(&a, "peak_rss_mib"),
    );
    Ok(())
}

fn test(cargo_args: &[String]) -> Result<()> {
    setup::run()?;
    let manifest = pythons::ensure()?;
    pythons::print(&manifest);
    run(Command::new("cargo").args(["fmt", "--all", "--check"]))?;
    // Lints do not need the eBPF object: skip its (slow) build for the clippy profile.
    run(Command::new("cargo")
        .args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])
        .env("AYA_BUILD_SKIP", "1"))?;
    deploy::check()?;
    let mut cargo = Command::new("cargo");
    cargo
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(cargo_args)
        .env("NEUROGC_PYTHONS", &manifest)
        .env("ORT_DYLIB_PATH", setup::onnxruntime()?)
        // Third-party code among the recordings the forensics tests read (pip, from PyPI).
        .env("NEUROGC_HELDOUT_SITE", bench::steer::held_out_site()?);
    let (passed, failed) = run_counting_tests(&mut cargo)?;
    // One closing line for the whole run: cargo's own last line is the (empty) doc-test batch.
    println!("tests: {passed} passed, {failed} failed");
    if failed > 0 {
        bail!("{failed} tests failed");
    }
    Ok(())
}

fn torture(trials: u32, seed: Option<u64>, path: Option<&str>) -> Result<()> {
    setup::run()?;
    let manifest = pythons::ensure()?;
    let mut cargo = Command::new("cargo");
    cargo
        .args(["test", "--package", "neurogc-agent", "--test", "torture", "--", "--nocapture"])
        .env("NEUROGC_PYTHONS", &manifest)
        .env("ORT_DYLIB_PATH", setup::onnxruntime()?)
        .env("NEUROGC_TORTURE_TRIALS", trials.to_string());
    if let Some(seed) = seed {
        cargo.env("NEUROGC_TORTURE_SEED", seed.to_string());
    }
    if let Some(path) = path {
        cargo.env("NEUROGC_TORTURE_PATHS", path);
    }
    run(&mut cargo)
}

/// Runs `cargo test`, echoing its output, and adds up its "test result:" lines.
fn run_counting_tests(cmd: &mut Command) -> Result<(u64, u64)> {
    use std::io::{BufRead, BufReader};
    eprintln!("xtask: {}", format_command(cmd));
    let mut child = cmd.current_dir(workspace_root()).stdout(std::process::Stdio::piped()).spawn()?;
    let (mut passed, mut failed) = (0, 0);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |word: &str| -> u64 {
                rest.split(['.', ';'])
                    .find_map(|part| part.trim().strip_suffix(word)?.trim().parse().ok())
                    .unwrap_or(0)
            };
            passed += count("passed");
            failed += count("failed");
        }
    }
    let status = child.wait()?;
    if !status.success() && failed == 0 {
        bail!("{} failed ({status})", format_command(cmd));
    }
    Ok((passed, failed))
}
