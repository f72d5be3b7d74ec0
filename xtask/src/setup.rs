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
    onnxruntime()?;
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

/// ONNX Runtime has no Debian package and its CDN is out of reach: the shared library comes from
/// the pinned PyPI wheel (the agent loads it at run time, `ort`'s load-dynamic).
pub const ONNXRUNTIME: &str = "1.31.1";

/// Fetches libonnxruntime into the cache once; returns the library's path.
pub fn onnxruntime() -> Result<PathBuf> {
    let dir = crate::pythons::cache_dir().join(format!("onnxruntime-{ONNXRUNTIME}"));
    let lib = dir.join("libonnxruntime.so");
    if lib.exists() {
        return Ok(lib);
    }
    let tmp = dir.with_file_name(format!(".onnxruntime-{ONNXRUNTIME}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    crate::run(
        Command::new("python3")
            .args(["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"])
            .args(["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"])
            .arg(format!("onnxruntime=={ONNXRUNTIME}"))
            .arg("-d")
            .arg(&tmp),
    )?;
    // Unzip the two libraries with Python's zipfile (unzip may not be installed).
    let script = "import sys, zipfile, glob, os\n\
        wheel = glob.glob(os.path.join(sys.argv[1], '*.whl'))[0]\n\
        z = zipfile.ZipFile(wheel)\n\
        for n in z.namelist():\n\
        \x20   if n.startswith('onnxruntime/capi/libonnxruntime'):\n\
        \x20       open(os.path.join(sys.argv[1], os.path.basename(n)), 'wb').write(z.read(n))\n";
    crate::run(Command::new("python3").arg("-c").arg(script).arg(&tmp))?;
    std::os::unix::fs::symlink(format!("libonnxruntime.so.{ONNXRUNTIME}"), tmp.join("libonnxruntime.so"))?;
    for wheel in std::fs::read_dir(&tmp)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "whl"))
    {
        std::fs::remove_file(wheel.path())?;
    }
    std::fs::rename(&tmp, &dir)?;
    Ok(lib)
}

/// Puts the library next to an agent binary, where the agent looks for it.
pub fn install_onnxruntime_beside(binary: &std::path::Path) -> Result<()> {
    let lib = onnxruntime()?;
    let dir = binary.parent().context("binary without a folder")?;
    let real = std::fs::canonicalize(&lib)?;
    for name in [format!("libonnxruntime.so.{ONNXRUNTIME}"), "libonnxruntime.so".to_owned()] {
        let dst = dir.join(&name);
        let _ = std::fs::remove_file(&dst);
        std::fs::copy(&real, &dst)?;
    }
    Ok(())
}
