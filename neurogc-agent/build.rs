//! Builds the kernel half (neurogc-ebpf) for bpfel-unknown-none and leaves the object in OUT_DIR.
//!
//! The machines this is built on have only the stable toolchain; `-Z build-std=core` (needed
//! because bpfel has no prebuilt core) is allowed by RUSTC_BOOTSTRAP, set here for the inner
//! cargo run only. AYA_BUILD_SKIP=1 skips it (clippy, docs): the agent then refuses to load probes.
use std::{fs, path::PathBuf};

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("neurogc-probes");
    // SAFETY: build scripts are single-threaded; the variable is inherited by aya-build's child.
    unsafe { std::env::set_var("RUSTC_BOOTSTRAP", "1") };
    let ebpf = aya_build::Package {
        name: "neurogc-ebpf",
        root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../neurogc-ebpf"),
        ..Default::default()
    };
    aya_build::build_ebpf([ebpf], aya_build::Toolchain::Custom("stable"))?;
    if !out.exists() {
        fs::write(&out, b"")?;
    }
    Ok(())
}
