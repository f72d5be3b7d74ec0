//! `cargo xtask bench locust`: the shape of the experiment that inspired neurogc, so that readers
//! can compare: locust (`-u 100 -r 10 --run-time 1m`, workloads/bench/locustfile.py) against the cache
//! service, with and without the agent steering it: RPS, P95/P99 (locust's own, closed loop)
//! and the collections the service counted itself. The service runs on CPU 0; locust and the
//! agent on CPU 1.
use std::{path::Path, process::Command};

use anyhow::{Context, Result};

use crate::{
    bench::measure::median,
    bench::steer::{Config, Workload, collections, start_agent, start_workload, stats, stop},
    build_release_agent, run, workspace_root,
};

const PACKAGES: [&str; 1] = ["locust==2.47.0"];
const CONFIGS: [Config; 3] = [Config::Defaults, Config::Static, Config::Act];

struct Sample {
    rps: f64,
    p95: f64,
    p99: f64,
    failures: u64,
    collections: [u64; 3],
}

/// The "Aggregated" row of locust's --csv stats: requests/s, 95%, 99%, failures.
fn aggregated(csv: &Path) -> Result<(f64, f64, f64, u64)> {
    let text = std::fs::read_to_string(csv).with_context(|| format!("reading {}", csv.display()))?;
    let mut rows = text.lines().map(|l| l.split(',').map(|f| f.trim_matches('"')).collect::<Vec<_>>());
    let header = rows.next().context("empty locust stats")?;
    let row = rows.find(|r| r.get(1) == Some(&"Aggregated")).context("no Aggregated row")?;
    let col = |name: &str| -> Result<f64> {
        let i = header.iter().position(|h| *h == name).with_context(|| format!("no {name} column"))?;
        Ok(row.get(i).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN))
    };
    Ok((col("Requests/s")?, col("95%")?, col("99%")?, col("Failure Count")? as u64))
}

fn one_run(
    config: Config,
    locust: &Path,
    agent: &Path,
    python: &Path,
    out: &Path,
    run_time: &str,
) -> Result<Sample> {
    let started = start_workload(Workload::Cache, config, python)?;
    let port = started.port.context("the cache service has no port")?;
    let jsonl = out.join(format!("locust-last-{}.jsonl", config.short()));
    let observer = start_agent(agent, started.child.id(), config, &jsonl, None)?;
    let before = collections(&stats(port)?);
    let prefix = out.join(format!("locust-{}", config.short()));
    let status = Command::new("taskset")
        .args(["-c", "1"])
        .arg(locust)
        .args(["-m", "locust", "-f"])
        .arg(workspace_root().join("workloads/bench/locustfile.py"))
        .args(["--headless", "-u", "100", "-r", "10", "--run-time", run_time, "--only-summary", "--host"])
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--csv")
        .arg(&prefix)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    let after = collections(&stats(port)?);
    stop(observer, started.child);
    anyhow::ensure!(status?.code().is_some(), "locust was killed");
    let (rps, p95, p99, failures) =
        aggregated(&prefix.with_file_name(format!("locust-{}_stats.csv", config.short())))?;
    Ok(Sample { rps, p95, p99, failures, collections: [0, 1, 2].map(|g| after[g] - before[g]) })
}

pub fn run_locust(rounds: usize, run_time: &str, python: &Path) -> Result<()> {
    let agent = build_release_agent()?;
    let locust = crate::venv::venv("locust-venv", &PACKAGES)?;
    run(Command::new(&locust).args(["-m", "locust", "--version"]))?;
    let out = workspace_root().join("target/bench-locust");
    std::fs::create_dir_all(&out)?;
    let mut samples = Vec::new();
    for round in 0..rounds {
        for i in 0..CONFIGS.len() {
            let config = CONFIGS[(i + round) % CONFIGS.len()];
            let s = one_run(config, &locust, &agent, python, &out, run_time)
                .with_context(|| format!("round {round}, {}", config.label()))?;
            eprintln!(
                "bench: round {round} {:<38} {:>6.1} RPS  P95 {:>5.0} ms  P99 {:>5.0} ms  gen0/1/2 {:?}",
                config.label(),
                s.rps,
                s.p95,
                s.p99,
                s.collections
            );
            samples.push((config, s));
        }
    }
    let mut md = format!(
        "# locust-shaped run: cache service\n\n`locust --headless -u 100 -r 10 --run-time {run_time}` (workloads/bench/locustfile.py, \
         each user waits 1 s between requests) · {} · {rounds} rounds, interleaved · medians\n\n\
         | configuration | RPS | P95 ms | P99 ms | failures | GC events gen0/gen1/gen2 |\n|---|---|---|---|---|---|\n",
        python.display()
    );
    for c in CONFIGS {
        let of = |f: &dyn Fn(&Sample) -> f64| {
            median(samples.iter().filter(|(k, _)| *k == c).map(|(_, s)| f(s)).collect())
        };
        md += &format!(
            "| {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0}/{:.0}/{:.0} |\n",
            c.label(),
            of(&|s| s.rps),
            of(&|s| s.p95),
            of(&|s| s.p99),
            of(&|s| s.failures as f64),
            of(&|s| s.collections[0] as f64),
            of(&|s| s.collections[1] as f64),
            of(&|s| s.collections[2] as f64),
        );
    }
    let report = out.join("report.md");
    std::fs::write(&report, &md)?;
    println!("\n{md}\n(written to {})", report.display());
    Ok(())
}
