//! `cargo xtask bench policy`: the decision's latency and the agent's footprint in act mode.
use std::{
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::Result;
use serde_json::Value;

use crate::{
    bench::measure::{lines, median, wait_for, wait_rusage},
    build_release_agent, setup, workspace_root,
};

/// act-mode sessions with the embedded default model on a GC-heavy workload: the agent's own
/// summary reports inference and window→decision latencies (hdrhistogram) and the injection time;
/// wait4 gives its peak RSS with ONNX Runtime and the model loaded.
pub fn run(sessions: usize, seconds: u32) -> Result<()> {
    setup::run()?;
    let agent = build_release_agent()?;
    let workload = workspace_root().join("workloads/tests/profiles.py");
    let pyenv = std::env::var("HOME").unwrap_or_default() + "/.pyenv/versions";
    let py312 = std::fs::read_dir(&pyenv)
        .ok()
        .and_then(|d| {
            d.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| p.to_string_lossy().contains("/3.12."))
        })
        .map(|p| p.join("bin/python3.12"));
    let sid = crate::pythons::cache_dir().join("pythons/sid");
    let pythons = [
        ("Debian 3.11 (ring queue)", "/usr/bin/python3.11"),
        ("pyenv 3.12 (ring queue)", ""),
        ("Debian 3.14 (counted queue)", "sid"),
    ];
    println!(
        "\nneurogc policy benchmark · {sessions} act sessions × {seconds}s per interpreter, 1 s windows, default model"
    );
    println!(
        "{:<28} {:>10} {:>10} {:>12} {:>12} {:>11} {:>10} {:>9}",
        "interpreter",
        "infer p50",
        "infer p99",
        "decide p50",
        "decide p99",
        "apply p99",
        "inject ms",
        "RSS MiB"
    );
    for (label, path) in pythons {
        // (program, arguments before the workload, the workload's path as the target sees it)
        let (program, prefix, script): (PathBuf, Vec<String>, PathBuf) = match path {
            "" => match &py312 {
                Some(p) => (p.clone(), vec![], workload.clone()),
                None => continue,
            },
            "sid" => {
                if !sid.exists() {
                    continue;
                }
                std::fs::copy(&workload, sid.join("tmp/profiles.py"))?;
                let root = sid.to_string_lossy().into_owned();
                ("chroot".into(), vec![root, "/usr/bin/python3.14".into()], "/tmp/profiles.py".into())
            }
            p => (PathBuf::from(p), vec![], workload.clone()),
        };
        let mut rows = Vec::new();
        for _ in 0..sessions {
            let mut target = Command::new(&program)
                .args(&prefix)
                .arg(&script)
                .args(["cycles", "--seconds", &(seconds + 5).to_string()])
                .stdout(Stdio::null())
                .spawn()?;
            std::thread::sleep(Duration::from_millis(300));
            let mut child = Command::new(&agent)
                .args(["--pid", &target.id().to_string(), "--mode", "act", "--json"])
                .args(["--duration", &seconds.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()?;
            let out = lines(child.stdout.take().unwrap());
            let summary: Value = serde_json::from_str(&wait_for(&out, "\"type\":\"summary\"", "agent")?)?;
            let (_, rss) = wait_rusage(&mut child)?;
            let _ = target.kill();
            let _ = target.wait();
            let p = &summary["policy"];
            let us = |v: &Value| v.as_f64().unwrap_or(f64::NAN) / 1e3;
            rows.push([
                us(&p["inference_ns"]["p50"]),
                us(&p["inference_ns"]["p99"]),
                us(&p["window_to_decision_ns"]["p50"]),
                us(&p["window_to_decision_ns"]["p99"]),
                us(&p["apply_ns"]["p99"]),
                p["injection_ms"].as_f64().unwrap_or(f64::NAN),
                rss as f64 / 1024.0,
            ]);
        }
        let col = |i: usize| median(rows.iter().map(|r| r[i]).collect());
        let worst = |i: usize| rows.iter().map(|r| r[i]).fold(f64::MIN, f64::max);
        println!(
            "{label:<28} {:>8.1}µs {:>8.1}µs {:>10.1}µs {:>10.1}µs {:>9.1}µs {:>10.0} {:>9.1}",
            col(0),
            worst(1),
            col(2),
            worst(3),
            worst(4),
            col(5),
            worst(6)
        );
    }
    println!("(p50 and injection: median over sessions; p99 and RSS: worst session)");
    Ok(())
}
