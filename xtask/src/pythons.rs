//! The real interpreters the tests run against, written to a manifest the tests read
//! (`NEUROGC_PYTHONS`). Kept in a cache outside the checkout so CI's clean clones reuse it.
//!
//! - Debian bookworm's /usr/bin/python3.11: stripped, USDT, non-PIE, interpreter in the executable.
//! - pyenv builds (3.8 … 3.13 on this image): `--enable-shared`, full `.symtab`, no USDT.
//! - Debian trixie 3.13 and sid 3.14, unpacked by xtask/get-pythons.sh: USDT; they need their own
//!   glibc, so they run in a chroot (launch tests) and in a chroot inside new pid+mount
//!   namespaces (attach tests: the container case).
//! - The free-threaded 3.13t, built by the same script from the CPython release tarball in
//!   Debian's python3.13 source package (`--disable-gil`): symbols, no USDT, runs natively.
//! - A copy of pyenv 3.11's libpython stripped of `.symtab` (observable through its exported
//!   `PyGC_Collect`), and a copy of that which does not export `PyGC_Collect` either: the "no
//!   probes" error case.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::workspace_root;

pub fn cache_dir() -> PathBuf {
    std::env::var_os("NEUROGC_CACHE").map_or_else(|| PathBuf::from("/var/cache/neurogc"), PathBuf::from)
}

/// A folder of the cache that `packages` (pinned) are installed in by `python`'s pip, installed
/// when missing or when the pins changed.
pub fn pip_site(name: &str, python: &Path, packages: &[&str]) -> Result<PathBuf> {
    let dir = cache_dir().join(name);
    let stamp = dir.join(".packages");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(&packages.join(" ")) {
        crate::run(
            Command::new(python)
                .args(["-m", "pip", "install", "--quiet", "--upgrade", "--target"])
                .arg(&dir)
                .args(packages),
        )?;
        std::fs::write(&stamp, packages.join(" "))?;
    }
    Ok(dir)
}

/// Builds what is missing and returns the manifest's path.
pub fn ensure() -> Result<PathBuf> {
    let dir = cache_dir().join("pythons");
    std::fs::create_dir_all(&dir)?;
    let mut pythons = Vec::new();

    if Path::new("/usr/bin/python3.11").exists() {
        pythons.push(entry("debian-bookworm-3.11", &["/usr/bin/python3.11"], None, "usdt", true));
    }
    for (name, prefix) in pyenv_versions() {
        let minor = name.rsplit_once('.').map_or(name.as_str(), |(mm, _)| mm).to_owned();
        let exe = prefix.join(format!("bin/python{minor}"));
        let required = name.starts_with("3.11.");
        pythons.push(entry(&format!("pyenv-{name}"), &[exe.to_str().unwrap()], None, "uprobe", required));
    }

    let script = workspace_root().join("xtask/get-pythons.sh");
    let out = Command::new("bash").arg(&script).arg(&dir).output().context("running get-pythons.sh")?;
    if !out.status.success() {
        bail!("{} failed:\n{}", script.display(), String::from_utf8_lossy(&out.stderr));
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let [version, root, path] = line.split('\t').collect::<Vec<_>>()[..] else { continue };
        let minor = version.rsplit_once('.').map_or(version, |(mm, _)| mm);
        if root == "-" {
            // Built from source (free-threaded): runs natively, symbols but no USDT.
            let mut e = entry(&format!("source-{minor}t"), &[path], None, "uprobe", true);
            e["free_threaded"] = json!(true);
            pythons.push(e);
            continue;
        }
        let suite = Path::new(root).file_name().unwrap().to_string_lossy().into_owned();
        pythons.push(entry(
            &format!("debian-{suite}-{minor}"),
            &["chroot", root, path],
            Some(root),
            "usdt",
            true,
        ));
    }

    let manifest = json!({
        "pythons": pythons,
        "stripped": stripped_fixture(&dir)?,
    });
    let path = dir.join("manifest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&manifest)?)?;
    Ok(path)
}

fn entry(name: &str, argv: &[&str], root: Option<&str>, probe: &str, required: bool) -> Value {
    json!({ "name": name, "argv": argv, "root": root, "probe": probe, "required": required })
}

fn pyenv_versions() -> Vec<(String, PathBuf)> {
    let root = std::env::var_os("PYENV_ROOT").map_or_else(
        || PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".pyenv"),
        PathBuf::from,
    );
    let Ok(dir) = std::fs::read_dir(root.join("versions")) else { return Vec::new() };
    let mut found: Vec<(String, PathBuf)> = dir
        .filter_map(|e| e.ok())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, path)| {
            let minor: Option<u32> = name.strip_prefix("3.").and_then(|r| r.split('.').next()?.parse().ok());
            minor.is_some_and(|m| (8..=14).contains(&m))
                && path.join(format!("lib/libpython{}.so.1.0", name.rsplit_once('.').unwrap().0)).exists()
        })
        .collect();
    found.sort_by_key(|(name, _)| name.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>());
    found
}

/// pyenv 3.11 with its libpython stripped of `.symtab` (the executable keeps its RUNPATH, so
/// LD_LIBRARY_PATH points it at the stripped copy). `None` where pyenv 3.11 is absent.
fn stripped_fixture(dir: &Path) -> Result<Value> {
    let Some((_, prefix)) = pyenv_versions().into_iter().find(|(n, _)| n.starts_with("3.11.")) else {
        return Ok(Value::Null);
    };
    let lib_dir = dir.join("stripped-3.11");
    let lib = lib_dir.join("libpython3.11.so.1.0");
    if !lib.exists() {
        std::fs::create_dir_all(&lib_dir)?;
        let tmp = lib_dir.join(".libpython.tmp");
        crate::run(
            Command::new("strip")
                .arg("--strip-all")
                .arg("-o")
                .arg(&tmp)
                .arg(prefix.join("lib/libpython3.11.so.1.0")),
        )?;
        std::fs::rename(&tmp, &lib)?;
    }
    let hidden_dir = dir.join("stripped-3.11-unexported");
    let hidden = hidden_dir.join("libpython3.11.so.1.0");
    if !hidden.exists() {
        std::fs::create_dir_all(&hidden_dir)?;
        let tmp = hidden_dir.join(".libpython.tmp");
        std::fs::write(&tmp, hide_export(&std::fs::read(&lib)?, b"PyGC_Collect")?)?;
        std::fs::rename(&tmp, &hidden)?;
    }
    let fixture = |lib_dir: &Path, lib: &Path| {
        json!({
            "argv": [prefix.join("bin/python3.11")],
            "env": { "LD_LIBRARY_PATH": lib_dir, "PYTHONHOME": prefix },
            "library": lib,
        })
    };
    let mut stripped = fixture(&lib_dir, &lib);
    // The same build whose PyGC_Collect is not exported either: nothing leads to the collector,
    // the case neurogc must refuse (exit 2) rather than guess.
    stripped["unobservable"] = fixture(&hidden_dir, &hidden);
    Ok(stripped)
}

/// Renames an exported symbol in `.dynstr` (last letter → `X`), as if the build did not export
/// it. The interpreter itself never looks it up.
fn hide_export(elf: &[u8], name: &[u8]) -> Result<Vec<u8>> {
    let needle: Vec<u8> = [&[0u8][..], name, &[0u8]].concat();
    let found: Vec<usize> =
        elf.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect();
    let [at] = found[..] else {
        bail!("{} occurs {} times in the stripped library", String::from_utf8_lossy(name), found.len())
    };
    let mut out = elf.to_vec();
    out[at + name.len()] = b'X';
    Ok(out)
}

pub fn print(manifest: &Path) {
    let Ok(text) = std::fs::read_to_string(manifest) else { return };
    let Ok(value) = serde_json::from_str::<Value>(&text) else { return };
    eprintln!("xtask: test interpreters ({}):", manifest.display());
    for p in value["pythons"].as_array().into_iter().flatten() {
        eprintln!(
            "  {:<24} {:<7} {}",
            p["name"].as_str().unwrap_or(""),
            p["probe"].as_str().unwrap_or(""),
            p["argv"]
        );
    }
}

/// Runs xtask/layouts/gc_counters.py with every default-build test interpreter (in its root's
/// own /proc where it has one) and prints what it found; the agent's unit test
/// `interp::versions` checks the table against the same runs.
pub fn measure_layouts(manifest: &Path) -> Result<()> {
    let value: Value = serde_json::from_str(&std::fs::read_to_string(manifest)?)?;
    let script = workspace_root().join("xtask/layouts/gc_counters.py");
    for p in value["pythons"].as_array().into_iter().flatten() {
        if p["free_threaded"].as_bool() == Some(true) {
            continue;
        }
        let argv: Vec<&str> = p["argv"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let mut cmd = match p["root"].as_str() {
            Some(root) => {
                let mut c = Command::new("unshare");
                c.args(["--pid", "--fork", "--kill-child", &format!("--mount-proc={root}/proc")]).args(&argv);
                c
            }
            None => {
                let mut c = Command::new(argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        let out = cmd.arg("-").stdin(std::fs::File::open(&script)?).output()?;
        let text = String::from_utf8_lossy(if out.status.success() { &out.stdout } else { &out.stderr });
        println!("{:<22} {}", p["name"].as_str().unwrap_or(""), text.trim());
    }
    Ok(())
}
