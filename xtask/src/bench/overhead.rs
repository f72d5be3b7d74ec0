//! `cargo xtask bench overhead`: what observing costs the target, side by side in one run.
//!
//! A GC-heavy workload (workloads/tests/cycles.py, thousands of collections per second) runs a
//! fixed number of iterations, once per mode per round, the modes rotated every round:
//! no observer; neurogc-agent --json (every event decoded and printed); neurogc-agent record
//! (every event into a zstd recording); bpftrace printing every event; bpftrace aggregating in
//! the kernel. Each observer is attached (and proven armed) before
//! the workload starts. Ratios are taken within a round, then the median over rounds.
use std::{
    io::Write,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::{
    bench::measure::{cpu_ns, lines, median, wait_for, wait_rusage},
    build_release_agent, setup, workspace_root,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Baseline,
    Agent,
    Record,
    BpftracePrint,
    BpftraceHist,
}

const MODES: [Mode; 5] = [Mode::Baseline, Mode::Agent, Mode::Record, Mode::BpftracePrint, Mode::BpftraceHist];

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Baseline => "no observer",
            Mode::Agent => "neurogc-agent observe --json",
            Mode::Record => "neurogc-agent record -o",
            Mode::BpftracePrint => "bpftrace, printf per event",
            Mode::BpftraceHist => "bpftrace, hist() in kernel",
        }
    }
}

struct Sample {
    /// The workload's own wall time for its fixed work.
    elapsed_s: f64,
    /// The target's CPU time (user + system: the kernel runs the probes in its context).
    target_cpu_s: f64,
    collections: u64,
    agent: Option<AgentSample>,
}

struct AgentSample {
    /// CPU while the workload ran (start-up excluded).
    cpu_s: f64,
    peak_rss_kib: i64,
    /// Spawn → "observing" (probes armed), wall.
    attach_ms: f64,
}

fn ensure_bpftrace() -> Result<()> {
    if Command::new("bpftrace").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    crate::run(Command::new("apt-get").args(["update", "-qq"]))?;
    crate::run(Command::new("apt-get").args(["install", "-y", "-qq", "bpftrace"]))
}

fn bpftrace_script(python: &Path, hist: bool) -> String {
    let p = python.display();
    let done = if hist {
        "@pause = hist(nsecs - @start[tid]);"
    } else {
        r#"printf("%d %d %d\n", tid, arg0, nsecs - @start[tid]);"#
    };
    format!(
        "usdt:{p}:python:gc__start {{ @start[tid] = nsecs; }}\n\
         usdt:{p}:python:gc__done /@start[tid]/ {{ {done} delete(@start[tid]); }}\n"
    )
}

fn one_run(
    mode: Mode,
    agent: &Path,
    python: &Path,
    iterations: u64,
    threshold: u32,
    depth: u32,
) -> Result<Sample> {
    let workload = workspace_root().join("workloads/tests/cycles.py");
    let mut target = Command::new(python)
        .arg(&workload)
        .args(["--wait", "--iterations", &iterations.to_string(), "--threshold", &threshold.to_string()])
        .args(["--depth", &depth.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the workload")?;
    let pid = target.id().to_string();
    let out = lines(target.stdout.take().unwrap());
    wait_for(&out, "ready", "workload")?;

    let spawned = Instant::now();
    let mut observer = match mode {
        Mode::Baseline => None,
        Mode::Agent | Mode::Record => {
            let trace = workspace_root().join("target/bench-overhead.ngc");
            let mut cmd = Command::new(agent);
            if mode == Mode::Record {
                cmd.args(["record", "-o"]).arg(&trace);
            } else {
                cmd.arg("--json");
            }
            let mut child = cmd
                .args(["--pid", &pid, "--mode", "observe"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            let _stdout = lines(child.stdout.take().unwrap());
            let err = lines(child.stderr.take().unwrap());
            wait_for(&err, "observing", "neurogc-agent")?;
            Some((child, Some(spawned.elapsed().as_secs_f64() * 1e3), _stdout))
        }
        Mode::BpftracePrint | Mode::BpftraceHist => {
            let mut child = Command::new("bpftrace")
                .args(["-p", &pid, "-e", &bpftrace_script(python, mode == Mode::BpftraceHist)])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?;
            let stdout = lines(child.stdout.take().unwrap());
            wait_for(&stdout, "Attaching", "bpftrace")?;
            // bpftrace prints "Attaching" just before it attaches.
            std::thread::sleep(Duration::from_millis(500));
            Some((child, None, stdout))
        }
    };

    let observer_cpu_before = observer.as_ref().map_or(0, |(child, _, _)| cpu_ns(child.id()));
    target.stdin.as_mut().unwrap().write_all(b"go\n")?;
    let report: Value = serde_json::from_str(&wait_for(&out, "elapsed_s", "workload")?)?;
    let observer_cpu = observer.as_ref().map_or(0, |(child, _, _)| cpu_ns(child.id())) - observer_cpu_before;
    let (target_cpu_s, _) = wait_rusage(&mut target)?;
    let agent = match observer.as_mut() {
        Some((child, attach_ms, _)) => {
            if attach_ms.is_none() {
                // bpftrace: stop it the way a user would.
                let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
            }
            let (_, peak_rss_kib) = wait_rusage(child)?;
            attach_ms.map(|attach_ms| AgentSample {
                cpu_s: observer_cpu as f64 / 1e9,
                peak_rss_kib,
                attach_ms,
            })
        }
        None => None,
    };
    let collections: u64 = report["collections"].as_array().unwrap().iter().filter_map(Value::as_u64).sum();
    Ok(Sample { elapsed_s: report["elapsed_s"].as_f64().unwrap(), target_cpu_s, collections, agent })
}

pub fn run(rounds: usize, iterations: u64, threshold: u32, depth: u32, python: &Path) -> Result<()> {
    setup::run()?;
    ensure_bpftrace()?;
    let agent = build_release_agent()?;
    let mut samples: Vec<(usize, Mode, Sample)> = Vec::new();
    for round in 0..rounds {
        for i in 0..MODES.len() {
            let mode = MODES[(i + round) % MODES.len()];
            let s = one_run(mode, &agent, python, iterations, threshold, depth)
                .with_context(|| format!("round {round}, {}", mode.label()))?;
            eprintln!(
                "bench: round {round} {:<28} {:.3}s {} collections",
                mode.label(),
                s.elapsed_s,
                s.collections
            );
            samples.push((round, mode, s));
        }
    }
    let of = |mode: Mode| samples.iter().filter(move |(_, m, _)| *m == mode);
    let base: Vec<f64> = of(Mode::Baseline).map(|(_, _, s)| s.elapsed_s).collect();
    let base_rate = median(of(Mode::Baseline).map(|(_, _, s)| s.collections as f64 / s.elapsed_s).collect());
    println!(
        "\nneurogc overhead benchmark · {} · {rounds} rounds × {iterations} iterations, threshold0 {threshold}, \
         {depth} frames deep (the agent copies every collection's stack)",
        python.display()
    );
    println!(
        "workload without observer: {:.3}s median, {:.0} collections/s\n",
        median(base.clone()),
        base_rate
    );
    println!(
        "{:<30} {:>9} {:>14} {:>12} {:>18} {:>16}",
        "mode", "wall s", "wall ratio", "target CPU s", "target CPU ratio", "best-run ratio"
    );
    // The machine's noise only ever adds time: the fastest run of each mode is the cleanest view.
    let best = |mode: Mode| of(mode).map(|(_, _, s)| s.elapsed_s).fold(f64::MAX, f64::min);
    // Ratios within a round (same machine state), then the median over rounds.
    let ratio = |mode: Mode, metric: fn(&Sample) -> f64| -> f64 {
        median(
            of(mode)
                .map(|(round, _, s)| {
                    let b = &of(Mode::Baseline).find(|(r, _, _)| r == round).unwrap().2;
                    metric(s) / metric(b)
                })
                .collect(),
        )
    };
    for mode in MODES {
        println!(
            "{:<30} {:>9.3} {:>13.3}× {:>12.3} {:>17.3}× {:>15.3}×",
            mode.label(),
            median(of(mode).map(|(_, _, s)| s.elapsed_s).collect()),
            ratio(mode, |s| s.elapsed_s),
            median(of(mode).map(|(_, _, s)| s.target_cpu_s).collect()),
            ratio(mode, |s| s.target_cpu_s),
            best(mode) / best(Mode::Baseline),
        );
    }
    for mode in [Mode::Agent, Mode::Record] {
        let runs: Vec<&AgentSample> = of(mode).filter_map(|(_, _, s)| s.agent.as_ref()).collect();
        let cpu_per_1000 = median(
            of(mode)
                .map(|(_, _, s)| s.agent.as_ref().unwrap().cpu_s * 1e3 / (s.collections as f64 / 1000.0))
                .collect(),
        );
        let rss = runs.iter().map(|a| a.peak_rss_kib).max().unwrap_or(0);
        let attach = median(runs.iter().map(|a| a.attach_ms).collect());
        println!(
            "\n{}: agent CPU {cpu_per_1000:.3} ms per 1000 collections (= {:.3}% of a core at 1000 collections/s)",
            mode.label(),
            cpu_per_1000 / 10.0
        );
        println!(
            "  peak RSS {:.1} MiB · attach (spawn → probes armed, wall) {attach:.0} ms median",
            rss as f64 / 1024.0
        );
    }
    Ok(())
}
