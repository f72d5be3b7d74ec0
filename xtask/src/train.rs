//! `cargo xtask train`: records the exploration workloads (workloads/training/generator.py: every
//! family, `repeats` seeds each on every interpreter given, randomised thresholds and freezes),
//! replays each recording with the analytic model alone to get its prediction checks, then trains
//! the learned corrector (training/train.py, numpy + onnx in a private venv) and writes
//! models/default.onnx and models/MODEL_CARD.md.
use std::{
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context, Result};

use crate::{build_release_agent, run, workspace_root};

/// Must match FAMILIES in workloads/training/generator.py.
pub const FAMILIES: [&str; 6] = ["service-cyclic", "service-acyclic", "batch", "memory", "phases", "threads"];
const PACKAGES: [&str; 3] = ["numpy==2.4.6", "onnx==1.23.2", "zstandard==0.25.0"];
/// Window length of the recordings (s): many windows, each with collections of every young kind.
const INTERVAL: &str = "0.5";

pub struct Options {
    /// Paths, or minor versions looked up in the test interpreters' manifest.
    pub pythons: Vec<String>,
    pub seconds: u32,
    pub repeats: u32,
    /// Record only these families (replacing their recordings), keep the others'.
    pub families: Vec<String>,
    /// Record nothing: check and train on the recordings there are.
    pub retrain: bool,
    /// Record only the long-hold recordings (`HELD`), replacing them.
    pub held: bool,
}

/// The long-hold recordings: each family once per interpreter, `HELD_SECONDS` long, its actions
/// held `HOLD_S` on average, so a change's RSS is seen over much of the minute the agent's
/// memory prediction is for (training/train.py validates the memory output on them alone).
const HELD: &str = "held";
const HELD_SECONDS: u32 = 90;
const HOLD_S: &str = "12";

pub fn run_training(opts: &Options) -> Result<()> {
    for f in &opts.families {
        anyhow::ensure!(FAMILIES.contains(&f.as_str()), "--family {f}: not one of {}", FAMILIES.join(", "));
    }
    let agent = build_release_agent()?;
    let python = crate::venv::venv("train-venv", &PACKAGES)?;
    let root = workspace_root();
    let traces = root.join("target/training-traces");
    let held = traces.join(HELD);
    if !opts.retrain {
        let interpreters = interpreters(&opts.pythons)?;
        if opts.families.is_empty() && !opts.held {
            let _ = std::fs::remove_dir_all(&traces);
        }
        if opts.held {
            let _ = std::fs::remove_dir_all(&held);
        }
        std::fs::create_dir_all(&held)?;
        let short = if opts.held { 0 } else { opts.repeats };
        for seed in 0..short {
            for (tag, interpreter) in &interpreters {
                for family in FAMILIES
                    .iter()
                    .filter(|f| opts.families.is_empty() || opts.families.iter().any(|g| g == *f))
                {
                    let run = format!("{tag}-{seed}");
                    record(&agent, interpreter, &traces, family, &run, opts.seconds, None)?;
                }
            }
        }
        if opts.families.is_empty() {
            for (tag, interpreter) in &interpreters {
                for family in FAMILIES {
                    record(&agent, interpreter, &held, family, tag, HELD_SECONDS, Some(HOLD_S))?;
                }
            }
        }
    }
    // The checks: what the analytic model predicted each window for the thresholds then in
    // force, against what the next window measured (decision records), from every recording.
    let mut recordings = Vec::new();
    // The long-hold recordings are optional: without them the card says the memory output is
    // not validated (traces recorded before 2026-12-07 have none).
    for dir in std::iter::once(&traces).chain(held.is_dir().then_some(&held)) {
        recordings.extend(
            std::fs::read_dir(dir)
                .with_context(|| format!("{}: run `cargo xtask train` to record", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "ngc")),
        );
    }
    recordings.sort();
    for trace in &recordings {
        let out = Command::new(&agent)
            .args(["replay", "--json", "--model", "none"])
            .arg(trace)
            .stderr(Stdio::inherit())
            .output()
            .context("replaying")?;
        anyhow::ensure!(out.status.success(), "replaying {} failed ({})", trace.display(), out.status);
        std::fs::write(trace.with_extension("checks.jsonl"), out.stdout)?;
    }
    run(Command::new(python)
        .arg(root.join("training/train.py"))
        .arg(&traces)
        .arg(root.join("models/default.onnx"))
        .arg(root.join("models/MODEL_CARD.md"))
        .arg(labels_build()?))
}

/// The commit the replaying agent was built from (with "+changes" where the work tree differs
/// from it): the analytic model whose errors the labels are.
fn labels_build() -> Result<String> {
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(workspace_root()).output();
    let head = git(&["rev-parse", "--short=12", "HEAD"]).context("git rev-parse")?;
    anyhow::ensure!(head.status.success(), "git rev-parse HEAD failed");
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.stdout.is_empty();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    Ok(if dirty { format!("{head}+changes") } else { head })
}

/// Each spec as a name for the recordings and the interpreter's path: a path as it is, a minor
/// version ("3.12") as the test interpreters' manifest's first native default build of it (the
/// manifest made once, where a version is asked for).
fn interpreters(specs: &[String]) -> Result<Vec<(String, String)>> {
    let manifest: serde_json::Value = if specs.iter().all(|s| s.contains('/')) {
        serde_json::Value::Null
    } else {
        serde_json::from_str(&std::fs::read_to_string(crate::pythons::ensure()?)?)?
    };
    specs.iter().map(|spec| interpreter(spec, &manifest)).collect()
}

fn interpreter(spec: &str, manifest: &serde_json::Value) -> Result<(String, String)> {
    if spec.contains('/') {
        let tag = Path::new(spec).file_name().map_or(spec.into(), |n| n.to_string_lossy().into_owned());
        return Ok((tag, spec.to_owned()));
    }
    let native = manifest["pythons"].as_array().into_iter().flatten().find(|p| {
        let name = p["name"].as_str().unwrap_or("");
        let argv = p["argv"].as_array().map_or(0, Vec::len);
        p["root"].is_null()
            && p["free_threaded"].as_bool() != Some(true)
            && argv == 1
            && (name.ends_with(&format!("-{spec}")) || name.contains(&format!("-{spec}.")))
    });
    let argv0 = native.and_then(|p| p["argv"][0].as_str()).with_context(|| {
        format!("--python {spec}: no native default build of CPython {spec} among the test interpreters")
    })?;
    Ok((spec.to_owned(), argv0.to_owned()))
}

/// One recording, `{family}__{run}`: the family's workload under the observing agent.
fn record(
    agent: &Path,
    python: &str,
    traces: &Path,
    family: &str,
    run: &str,
    seconds: u32,
    hold_s: Option<&str>,
) -> Result<()> {
    let name = format!("{family}__{run}");
    eprintln!("xtask: recording {name}");
    let status = Command::new(agent)
        .args(["record", "--mode", "observe", "--interval", INTERVAL, "-o"])
        .arg(traces.join(format!("{name}.ngc")))
        .arg("--")
        .arg(python)
        .arg(workspace_root().join("workloads/training/generator.py"))
        .args([family, "--seed", run, "--seconds", &seconds.to_string()])
        .args(hold_s.map(|h| ["--hold", h]).into_iter().flatten())
        .stdout(Stdio::null())
        .status()
        .context("running the agent")?;
    anyhow::ensure!(status.success(), "recording {name} failed ({status})");
    Ok(())
}
