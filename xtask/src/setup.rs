//! The eBPF half needs `rust-src` (bpfel has no prebuilt core) and bpf-linker built against an
//! LLVM of rustc's own major version. Debian's LLVM is too old; rustc's libLLVM exports the C API
//! and the BPF target, so bpf-linker links against it through a folder of two symlinks.
use std::{path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};

const BPF_LINKER: &str = "0.13.0";

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn run() -> Result<()> {
    let sysroot = PathBuf::from(output(Command::new("rustc").args(["--print", "sysroot"]))?.trim());
    if !sysroot.join("lib/rustlib/src/rust/library/core").exists() {
        crate::run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "stable"]))?;
    }
    let version = output(Command::new("rustc").arg("-vV"))?;
    let llvm_major = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("rustc -vV does not say its LLVM version")?
        .to_owned();
    let lib = sysroot.join("lib");
    let so = std::fs::read_dir(&lib)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("libLLVM.so") || n.starts_with("libLLVM-"))
        .context("rustc's sysroot has no libLLVM shared library")?;
    let home = std::env::var("HOME").context("HOME not set")?;
    let prefix = PathBuf::from(home).join(".local/llvm-rustc");
    let prefix_lib = prefix.join("lib");
    let current = output(Command::new("bpf-linker").arg("--version")).unwrap_or_default();
    // bpf-linker's rpath points at the symlink named after rustc's library: it must still resolve.
    if current.contains(BPF_LINKER) && prefix_lib.join(&so).exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&prefix_lib)?;
    for name in ["libLLVM.so", so.as_str()] {
        let link = prefix_lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(lib.join(&so), &link)?;
    }
    crate::run(
        Command::new("cargo")
            .args(["install", &format!("bpf-linker@{BPF_LINKER}"), "--locked", "--no-default-features"])
            .args(["--features", &format!("llvm-{llvm_major}")])
            .env("LLVM_PREFIX", &prefix),
    )
}
