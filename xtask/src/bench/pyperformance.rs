//! `cargo xtask bench pyperformance`: the public suite's pure-Python benchmarks (PyPI's
//! pyperformance, pinned), each run in one process by pyperf's worker mode, under CPython's
//! defaults, under the agent observing, and under act, launched under the agent
//! (`neurogc-agent --mode … -- python …`). Rounds interleave the three arms, each round starting
//! with the next one. The report gives each benchmark's time under observe and act against the
//! defaults, their geometric means with each round's own as the noise, and the collections each
//! agent arm counted (where act collected as observe did, its difference is noise).
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::{
    bench::measure::{cpu_model, geomean},
    build_release_agent,
};

/// The suite, pinned, with the pyperf it runs on.
const PACKAGES: [&str; 2] = ["pyperformance==1.11.0", "pyperf==2.11.0"];

/// Pure-Python benchmarks that need nothing beyond the standard library: the seven, and
/// five more of the same kind.
pub const BENCHMARKS: [&str; 12] = [
    "deltablue",
    "go",
    "raytrace",
    "chaos",
    "deepcopy",
    "xml_etree",
    "hexiom",
    "richards",
    "float",
    "nqueens",
    "pyflate",
    "json_dumps",
];

/// Seconds each value aims at (loops are calibrated to it under the defaults).
const VALUE_S: f64 = 0.2;
const VALUES: u32 = 8;
const WARMUPS: u32 = 2;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Defaults,
    Observe,
    Act,
}

impl Arm {
    fn name(self) -> &'static str {
        match self {
            Arm::Defaults => "defaults",
            Arm::Observe => "observe",
            Arm::Act => "act",
        }
    }
}

const ARMS: [Arm; 3] = [Arm::Defaults, Arm::Observe, Arm::Act];

pub struct Options {
    pub rounds: usize,
    pub python: PathBuf,
    pub out: PathBuf,
}

/// The folder the suite is installed in (installed when missing), by pip for the interpreter
/// that runs it.
fn site(python: &Path) -> Result<PathBuf> {
    crate::pythons::pip_site("pyperformance-site", python, &PACKAGES)
}

/// One run: the mean of its values (s; summed over the benchmarks its script runs), and the
/// collections the agent counted (agent arms).
struct Run {
    mean_s: f64,
    collections: Option<u64>,
}

fn run_once(opts: &Options, agent: &Path, site: &Path, bench: &str, arm: Arm, loops: u64) -> Result<Run> {
    let script = site.join(format!("pyperformance/data-files/benchmarks/bm_{bench}/run_benchmark.py"));
    // Each run's own files, kept locally for reading (not committed: .gitignore).
    let output = opts.out.join("raw").join(format!("{bench}-{}.json", arm.name()));
    let jsonl = opts.out.join("raw").join(format!("{bench}-{}.jsonl", arm.name()));
    let _ = std::fs::remove_file(&output);
    let worker = |cmd: &mut Command| {
        cmd.args(["-c", "0"]).arg(&opts.python).arg(&script).args([
            "--worker",
            "-l",
            &loops.to_string(),
            "-n",
            &VALUES.to_string(),
            "-w",
            &WARMUPS.to_string(),
            "--output",
        ]);
        cmd.arg(&output);
    };
    // The benchmark on CPU 0, the agent on CPU 1 (as the other benchmarks run them).
    let mut cmd = match arm {
        Arm::Defaults => {
            let mut c = Command::new("taskset");
            worker(&mut c);
            c
        }
        Arm::Observe | Arm::Act => {
            let mut c = Command::new("taskset");
            c.args(["-c", "1"]).arg(agent).args(["--mode", arm.name(), "--json", "-o"]).arg(&jsonl);
            c.args(["--", "taskset"]);
            worker(&mut c);
            c
        }
    };
    let status = cmd
        .env("PYTHONPATH", site)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {bench} ({})", arm.name()))?;
    anyhow::ensure!(
        status.status.success(),
        "{bench} ({}) failed: {}",
        arm.name(),
        String::from_utf8_lossy(&status.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&output)?)?;
    // A script may run several benchmarks one after another (xml_etree: parse, iterparse,
    // generate, process): the run's figure is the sum of their mean values, so each counts
    // whatever part of the process's life it ran in.
    let means: Vec<f64> = v["benchmarks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            let values: Vec<f64> = b["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
                .filter_map(|x| x.as_f64())
                .collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        })
        .collect();
    anyhow::ensure!(!means.is_empty(), "{bench} ({}) gave no values", arm.name());
    let collections = (arm != Arm::Defaults)
        .then(|| {
            std::fs::read_to_string(&jsonl).ok()?.lines().rev().find_map(|l| {
                let r: Value = serde_json::from_str(l).ok()?;
                (r["type"] == "summary").then(|| r["collections"].as_u64()).flatten()
            })
        })
        .flatten();
    Ok(Run { mean_s: means.iter().sum(), collections })
}

pub fn run(opts: &Options) -> Result<()> {
    let agent = build_release_agent()?;
    let site = site(&opts.python)?;
    std::fs::create_dir_all(opts.out.join("raw"))?;
    // runs[bench][arm]: one Run per round.
    let mut runs: Vec<[Vec<Run>; 3]> = Vec::new();
    let mut loops = Vec::new();
    for bench in BENCHMARKS {
        // Loops for a value of about VALUE_S under the defaults.
        let once = run_once(opts, &agent, &site, bench, Arm::Defaults, 1)?;
        loops.push(((VALUE_S / once.mean_s.max(1e-6)).ceil() as u64).clamp(1, 1_000_000));
        runs.push([Vec::new(), Vec::new(), Vec::new()]);
    }
    for round in 0..opts.rounds {
        for (b, bench) in BENCHMARKS.iter().enumerate() {
            let mut order = ARMS;
            order.rotate_left(round % ARMS.len());
            for arm in order {
                let r = run_once(opts, &agent, &site, bench, arm, loops[b])?;
                eprintln!(
                    "pyperformance: round {round} {bench:<11} {:<8} {:>9.2} ms{}",
                    arm.name(),
                    r.mean_s * 1e3,
                    r.collections.map_or(String::new(), |c| format!("  {c} collections"))
                );
                runs[b][arm as usize].push(r);
            }
        }
    }
    let report = report(opts, &loops, &runs);
    std::fs::write(opts.out.join("report.md"), &report)?;
    let raw: Vec<Value> = BENCHMARKS
        .iter()
        .zip(&runs)
        .zip(&loops)
        .map(|((bench, arms), loops)| {
            let arm = |a: Arm| {
                arms[a as usize]
                    .iter()
                    .map(|r| json!({"mean_s": r.mean_s, "collections": r.collections}))
                    .collect::<Vec<_>>()
            };
            json!({"benchmark": bench, "loops": loops, "defaults": arm(Arm::Defaults),
                   "observe": arm(Arm::Observe), "act": arm(Arm::Act)})
        })
        .collect();
    std::fs::write(opts.out.join("results.json"), serde_json::to_string_pretty(&raw)?)?;
    crate::bench::write_stdout(&report)
}

fn report(opts: &Options, loops: &[u64], runs: &[[Vec<Run>; 3]]) -> String {
    let mut out = format!(
        "# pyperformance under the agent\n\npyperformance 1.11.0, {} benchmarks in pyperf's worker \
         mode ({VALUES} values after {WARMUPS} warm-ups, loops for about {VALUE_S} s a value; a \
         script that runs several, xml_etree's four, by the sum of their means); \
         {} interleaved rounds of the defaults, observe and act, each launched under the agent; \
         {}; python {}.\n\n| benchmark | loops | defaults ms | observe / defaults | act / \
         defaults | collections observe / act |\n|---|---|---|---|---|---|\n",
        BENCHMARKS.len(),
        opts.rounds,
        cpu_model(),
        opts.python.display()
    );
    let med = |v: &[Run]| crate::bench::measure::median(v.iter().map(|r| r.mean_s).collect());
    let count = |v: &[Run]| {
        crate::bench::measure::median(v.iter().filter_map(|r| r.collections).map(|c| c as f64).collect())
    };
    let (mut observe, mut act, mut noise) = (Vec::new(), Vec::new(), Vec::new());
    for ((bench, arms), loops) in BENCHMARKS.iter().zip(runs).zip(loops) {
        let d = med(&arms[0]);
        let (o, a) = (med(&arms[1]) / d, med(&arms[2]) / d);
        observe.push(o);
        act.push(a);
        let (co, ca) = (count(&arms[1]), count(&arms[2]));
        let same = (co - ca).abs() <= (co * 0.01).max(1.0);
        if same {
            noise.push(*bench);
        }
        out.push_str(&format!(
            "| {bench}{} | {loops} | {:.1} | {o:.3}x | {a:.3}x | {co:.0} / {ca:.0} |\n",
            if same { " (noise)" } else { "" },
            d * 1e3
        ));
    }
    // Each round's geometric mean, from that round's own ratios: how far rounds alone move it.
    let per_round = |arm: usize| -> Vec<f64> {
        (0..opts.rounds)
            .map(|r| {
                geomean(
                    &runs
                        .iter()
                        .filter_map(|arms| Some(arms[arm].get(r)?.mean_s / arms[0].get(r)?.mean_s))
                        .collect::<Vec<_>>(),
                )
            })
            .collect()
    };
    let range = |v: Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("rounds {lo:.3}-{hi:.3}")
    };
    out.push_str(&format!(
        "\nGeometric mean: observe {:.3}x ({}), act {:.3}x ({}). (noise): act collected as \
         observe did (within 1%), so its difference is not the collector's: {}.\n",
        geomean(&observe),
        range(per_round(1)),
        geomean(&act),
        range(per_round(2)),
        if noise.is_empty() { "none".to_owned() } else { noise.join(", ") }
    ));
    out
}
