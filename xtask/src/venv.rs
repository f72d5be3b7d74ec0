//! Private virtual environments under the cache directory for the tools written in Python
//! (training, locust), rebuilt when their pinned package list changes.
use std::{path::PathBuf, process::Command};

use anyhow::Result;

use crate::{pythons::cache_dir, run};

/// The python of the venv `name`, with exactly `packages` installed by pip.
pub fn venv(name: &str, packages: &[&str]) -> Result<PathBuf> {
    let dir = cache_dir().join(name);
    let python = dir.join("bin/python");
    let stamp = dir.join(".packages");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(&packages.join(" ")) {
        run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
        run(Command::new(&python).args(["-m", "pip", "install", "--quiet"]).args(packages))?;
        std::fs::write(&stamp, packages.join(" "))?;
    }
    Ok(python)
}
