//! `cargo xtask deploy-check`: the Kubernetes manifests in deploy/ against the API schemas of the
//! oldest and newest Kubernetes versions neurogc targets (kubernetes-validate, from PyPI, in a
//! private venv; its schemas are bundled, so it needs no cluster), strictly: an unknown field is
//! an error, not a silently ignored typo.
use std::process::Command;

use anyhow::Result;

use crate::{run, venv::venv, workspace_root};

const VALIDATOR: &str = "kubernetes-validate==1.37.0";
const KUBERNETES: [&str; 2] = ["1.30.0", "1.37.0"];
const MANIFESTS: [&str; 1] = ["deploy/daemonset.yaml"];

pub fn check() -> Result<()> {
    let python = venv("deploy-venv", &[VALIDATOR])?;
    let validate = python.with_file_name("kubernetes-validate");
    for version in KUBERNETES {
        for manifest in MANIFESTS {
            run(Command::new(&validate)
                .args(["--strict", "--kubernetes-version", version])
                .arg(workspace_root().join(manifest)))?;
        }
    }
    // The dashboard is read by Grafana as JSON: it must at least be JSON (its queries run
    // against a real Prometheus in tests/fleet.rs).
    let dashboard = workspace_root().join("deploy/grafana-dashboard.json");
    serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&dashboard)?)?;
    Ok(())
}
