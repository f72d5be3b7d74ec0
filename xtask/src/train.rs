//! `cargo xtask train`: records traces of tests/workloads/profiles.py under every action of the
//! default model, then trains it (training/train.py, numpy + onnx in a private venv) and writes
//! models/default.onnx and models/MODEL_CARD.md.
use std::process::Command;

use anyhow::{Context, Result};

use crate::{build_release_agent, run, workspace_root};

const PROFILES: [&str; 4] = ["cycles", "cache", "acyclic", "bulky"];
/// Must match ACTIONS in training/train.py.
const ACTIONS: [[u32; 3]; 6] =
    [[700, 10, 10], [2000, 10, 10], [5000, 10, 10], [10000, 10, 10], [25000, 20, 10], [60000, 20, 20]];
const PACKAGES: [&str; 3] = ["numpy==2.4.6", "onnx==1.23.2", "zstandard==0.25.0"];

pub fn run_training(python_target: &str, seconds: u32, repeats: u32) -> Result<()> {
    let agent = build_release_agent()?;
    let python = crate::venv::venv("train-venv", &PACKAGES)?;
    let traces = workspace_root().join("target/training-traces");
    let _ = std::fs::remove_dir_all(&traces);
    std::fs::create_dir_all(&traces)?;
    let workload = workspace_root().join("tests/workloads/profiles.py");
    for repeat in 0..repeats {
        for profile in PROFILES {
            for t in ACTIONS {
                let name = format!("{profile}__{}-{}-{}__{repeat}.ngc", t[0], t[1], t[2]);
                eprintln!("xtask: recording {name}");
                let status = Command::new(&agent)
                    .args(["record", "--mode", "observe", "--interval", "1", "-o"])
                    .arg(traces.join(&name))
                    .arg("--")
                    .arg(python_target)
                    .arg(&workload)
                    .arg(profile)
                    .args(["--seconds", &seconds.to_string(), "--threshold"])
                    .args(t.map(|v| v.to_string()))
                    .stdout(std::process::Stdio::null())
                    .status()
                    .context("running the agent")?;
                anyhow::ensure!(status.success(), "recording {name} failed ({status})");
            }
        }
    }
    let root = workspace_root();
    run(Command::new(python)
        .arg(root.join("training/train.py"))
        .arg(&traces)
        .arg(root.join("models/default.onnx"))
        .arg(root.join("models/MODEL_CARD.md")))
}
