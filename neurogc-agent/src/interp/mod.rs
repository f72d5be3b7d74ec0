//! The interpreter inside a target process, read from outside: from a PID to the interpreter
//! file (elf, process), its CPython version and layouts (cpython, layout), the probe source to
//! use (USDT notes, else the collector's `.symtab` symbol or its disassembly), the GC state's
//! location and the pending-call queue act mode writes to (pending).
pub mod cpython;
pub mod disasm;
pub mod elf;
pub mod frames;
pub mod layout;
pub mod lines;
pub mod pending;
pub mod process;
pub mod usdt_args;
pub mod versions;

use std::{fmt, path::PathBuf};

use anyhow::Result;
use neurogc_common::ArgSpec;

use self::{
    cpython::Interpreter,
    elf::{Elf, UsdtNote},
    layout::GcLocator,
    process::MappedFile,
};
use crate::error::bail_user;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeChoice {
    /// USDT when the build has python:gc__* notes, else the collector symbol.
    Auto,
    /// Only USDT python:gc__start/gc__done.
    Usdt,
    /// Only a uprobe/uretprobe pair on the collector function from .symtab.
    Uprobe,
}

#[derive(Debug, Clone)]
pub enum ProbeSource {
    Usdt { start: Vec<UsdtNote>, done: Vec<UsdtNote> },
    Symbol { functions: Vec<(String, u64)> },
}

impl fmt::Display for ProbeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeSource::Usdt { .. } => write!(f, "USDT python:gc__start/gc__done"),
            ProbeSource::Symbol { functions } => {
                let names: Vec<&str> = functions.iter().map(|(n, _)| n.as_str()).collect();
                write!(f, "uprobe {}", names.join(", "))
            }
        }
    }
}

/// Where one eBPF program goes: (file offset, semaphore file offset or 0) per site.
pub struct Sites {
    pub program: &'static str,
    pub retprobe: bool,
    pub points: Vec<(u64, u64)>,
}

impl ProbeSource {
    /// The end sites and the begin sites.
    pub fn sites(&self) -> (Sites, Sites) {
        match self {
            ProbeSource::Usdt { start, done } => {
                let points =
                    |notes: &[UsdtNote]| notes.iter().map(|n| (n.file_offset, n.semaphore_offset)).collect();
                (
                    Sites { program: "gc_end", retprobe: false, points: points(done) },
                    Sites { program: "gc_begin", retprobe: false, points: points(start) },
                )
            }
            ProbeSource::Symbol { functions } => {
                let points: Vec<(u64, u64)> = functions.iter().map(|&(_, offset)| (offset, 0)).collect();
                (
                    Sites { program: "gc_return", retprobe: true, points: points.clone() },
                    Sites { program: "gc_begin", retprobe: false, points },
                )
            }
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            ProbeSource::Usdt { .. } => "usdt",
            ProbeSource::Symbol { .. } => "uprobe",
        }
    }
}

/// Everything needed to arm the probes on one process.
#[derive(Debug, Clone)]
pub struct AttachPlan {
    pub pid: i32,
    pub interpreter: Interpreter,
    /// The interpreter file as the target names it.
    pub file: PathBuf,
    /// Where the agent opens it (same inode).
    pub open_path: PathBuf,
    pub source: ProbeSource,
    pub begin_arg: ArgSpec,
    pub end_arg: ArgSpec,
    pub gc: Option<GcLocator>,
    /// Where the kernel finds the collecting thread's frames (None: stacks are not read).
    pub stack: Option<neurogc_common::StackLocator>,
    /// How to name those frames, and `PyCode_Type`'s run-time address.
    pub code: Option<(frames::CodeLayout, u64)>,
    /// Run-time address minus link-time address of the interpreter file.
    pub bias: u64,
}

/// Files that may hold the interpreter, best first: the executable (static builds such as
/// Debian's have `_PyRuntime` in it), then any mapped `libpython3.X.so`.
pub fn candidates(pid: i32) -> Result<Vec<MappedFile>> {
    let process = process::open(pid)?;
    let files = process::mapped_files(&process)?;
    let exe = process::exe_inode(pid);
    let (mut out, rest): (Vec<MappedFile>, Vec<MappedFile>) =
        files.into_iter().partition(|m| Some(m.inode) == exe);
    out.extend(
        rest.into_iter()
            .filter(|m| m.path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libpython3"))),
    );
    Ok(out)
}

/// The interpreter among the process's mappings.
pub fn find_interpreter(pid: i32) -> Result<Option<(MappedFile, Elf, Interpreter)>> {
    for file in candidates(pid)? {
        let Ok(elf) = Elf::open(&file.open_path) else { continue };
        if let Some(interp) = Interpreter::identify(&elf, &file.path.to_string_lossy()) {
            return Ok(Some((file, elf, interp)));
        }
    }
    Ok(None)
}

impl AttachPlan {
    /// The interpreter file as mapped now. In launch mode the mapping seen at attach time was the
    /// dynamic loader's first, before it split it: its /proc/PID/map_files name is gone since.
    pub fn reopen(&self) -> Result<Elf> {
        match find_interpreter(self.pid)? {
            Some((_, elf, _)) => Ok(elf),
            None => anyhow::bail!("process {} no longer maps its interpreter", self.pid),
        }
    }

    /// The plan for `pid`, which maps `build` at `file`.
    pub fn new(pid: i32, file: MappedFile, build: &Build) -> AttachPlan {
        let bias = file.base.wrapping_sub(build.first_load_address & !0xfff);
        AttachPlan {
            pid,
            gc: GcLocator::new(&build.interpreter, bias),
            stack: frames::stack_locator(&build.interpreter, bias, build.tstate_arg),
            code: frames::code_layout(&build.interpreter)
                .zip(build.interpreter.code_type.map(|t| t.wrapping_add(bias))),
            interpreter: build.interpreter.clone(),
            file: file.path,
            open_path: file.open_path,
            source: build.source.clone(),
            begin_arg: build.begin_arg,
            end_arg: build.end_arg,
            bias,
        }
    }
}

/// What an interpreter file offers to any process that maps it: fleet mode keeps one per inode.
#[derive(Debug, Clone)]
pub struct Build {
    pub interpreter: Interpreter,
    pub source: ProbeSource,
    pub begin_arg: ArgSpec,
    pub end_arg: ArgSpec,
    /// Every probed entry takes the collecting thread's state as its first argument (checked in
    /// its code): where a free-threaded build's stacks start.
    pub tstate_arg: bool,
    first_load_address: u64,
}

pub fn resolve(pid: i32, choice: ProbeChoice) -> Result<AttachPlan> {
    let Some((file, elf, interp)) = find_interpreter(pid)? else {
        bail_user!(
            "process {} is not a CPython interpreter: neither its executable nor a mapped libpython3.X defines _PyRuntime",
            process::describe(pid)
        );
    };
    let build = inspect(&elf, interp, &file.path.display().to_string(), choice)?;
    Ok(AttachPlan::new(pid, file, &build))
}

/// How `elf` (CPython `interp`, known to the user as `name`) can be probed.
pub fn inspect(elf: &Elf, interp: Interpreter, name: &str, choice: ProbeChoice) -> Result<Build> {
    let what = format!("{name} (CPython {})", interp.version);
    if !interp.is_supported() {
        bail_user!(
            "{what} is not supported: neurogc knows CPython 3.{}–3.{}",
            cpython::SUPPORTED.0,
            cpython::SUPPORTED.1
        );
    }
    if interp.is_newer_than_tested() {
        tracing::warn!(
            "{what} is newer than any CPython neurogc was tested on (3.{}): its layouts are taken from \
             _Py_DebugOffsets where they have 3.{}'s shape and validated in the process before use",
            cpython::SUPPORTED.1,
            cpython::SUPPORTED.1
        );
    }
    let usdt = usdt_source(elf)?;
    // Stripped of .symtab: the exported PyGC_Collect still leads to the collector.
    let (symbol, why) = match symbol_source(elf, &interp).map(Ok).unwrap_or_else(|| export_source(elf)) {
        Ok(s) => (Some(s), String::new()),
        Err(why) => (None, why),
    };
    let (source, begin_arg, end_arg, tstate_arg) = match (choice, usdt, symbol) {
        (ProbeChoice::Auto | ProbeChoice::Usdt, Some(s), _) => s,
        (ProbeChoice::Auto | ProbeChoice::Uprobe, _, Some(s)) => s,
        (ProbeChoice::Usdt, None, _) => bail_user!(
            "{what} has no USDT probes python:gc__start/gc__done (built without --with-dtrace); try --probe auto"
        ),
        (ProbeChoice::Uprobe, _, None) => bail_user!(
            "{what} has no .symtab entry for {} (the file is stripped), and {why}; try --probe auto",
            interp.collector_names().join("/")
        ),
        (ProbeChoice::Auto, None, None) => bail_user!(
            "{what} has neither USDT probes (python:gc__start/gc__done) nor a .symtab entry for {}{}, \
             and {why}: use a build configured --with-dtrace, or one whose symbols were not stripped",
            interp.collector_names().join("/"),
            if elf.has_symtab() { "" } else { " (it has no .symtab at all: stripped)" }
        ),
    };
    Ok(Build {
        interpreter: interp,
        source,
        begin_arg,
        end_arg,
        tstate_arg,
        first_load_address: elf.first_load_address(),
    })
}

/// The probes, the begin and end arguments, and whether the collector's first argument is the
/// thread state (symbol probes whose code shows it).
type Source = (ProbeSource, ArgSpec, ArgSpec, bool);

fn usdt_source(elf: &Elf) -> Result<Option<Source>> {
    let notes = elf.usdt_notes().unwrap_or_default();
    let pick = |name: &str| -> Vec<UsdtNote> {
        notes.iter().filter(|n| n.provider == "python" && n.name == name).cloned().collect()
    };
    let (start, done) = (pick("gc__start"), pick("gc__done"));
    if start.is_empty() || done.is_empty() {
        return Ok(None);
    }
    let begin = usdt_args::parse_arg(&start[0].args, 0)?;
    let end = usdt_args::parse_arg(&done[0].args, 0)?;
    Ok(Some((ProbeSource::Usdt { start, done }, begin, end, false)))
}

/// gcc may clone a static function (`collect.constprop.0`): every clone is an entry point and
/// must be probed. `.cold`/`.part` pieces are not entry points.
fn is_collector(name: &str, base: &str) -> bool {
    let Some(rest) = name.strip_prefix(base) else { return false };
    rest.is_empty() || (rest.starts_with('.') && !rest.contains(".cold") && !rest.contains(".part"))
}

fn symbol_source(elf: &Elf, interp: &Interpreter) -> Option<Source> {
    let functions = elf.functions();
    let has_file_symbols = functions.iter().any(|f| f.source_file.is_some());
    for base in interp.collector_names() {
        let mut found: Vec<(String, u64, u64)> = functions
            .iter()
            .filter(|f| is_collector(&f.name, base))
            .filter(|f| {
                !has_file_symbols
                    || f.source_file
                        .as_deref()
                        .is_some_and(|s| interp.collector_sources().iter().any(|c| s.ends_with(c)))
                    || base.starts_with('_') // global symbols are unique anyway
            })
            .filter_map(|f| {
                warn_if_single_stepped(elf, f);
                Some((f.name.clone(), elf.file_offset(f.address)?, f.address))
            })
            .collect();
        found.sort_by_key(|(_, off, _)| *off);
        found.dedup_by_key(|(_, off, _)| *off);
        if found.is_empty() {
            continue;
        }
        // A clone may have a different calling convention: only trust the argument of the original.
        let begin = if found.iter().all(|(n, _, _)| n == base) {
            usdt_args::call_arg(1, -4)
        } else {
            ArgSpec::default()
        };
        let tstate_arg = found.iter().all(|&(_, _, addr)| takes_tstate(elf, addr));
        let functions = found.into_iter().map(|(name, off, _)| (name, off)).collect();
        return Some((ProbeSource::Symbol { functions }, begin, usdt_args::return_value(), tstate_arg));
    }
    None
}

/// The collector of a build without `.symtab`, found by decoding the exported `PyGC_Collect`.
fn export_source(elf: &Elf) -> Result<Source, String> {
    let found = disasm::collector(elf)
        .map_err(|why| format!("the collector cannot be found from its dynamic symbols: {why}"))?;
    let offset = elf.file_offset(found.address).ok_or("the collector's address is outside the file")?;
    let name = format!("collector at {:#x} (called by {})", found.address, disasm::ENTRY);
    let begin = if found.documented_args { usdt_args::call_arg(1, -4) } else { ArgSpec::default() };
    let tstate_arg = takes_tstate(elf, found.address);
    Ok((
        ProbeSource::Symbol { functions: vec![(name, offset)] },
        begin,
        usdt_args::return_value(),
        tstate_arg,
    ))
}

fn takes_tstate(elf: &Elf, address: u64) -> bool {
    elf.read_at(address, 128).is_some_and(|code| disasm::loads_interp_from_first_arg(code, address))
}

/// The kernel emulates a uprobe'd `push`/`nop` (≈ 2 µs a hit here) but single-steps most other
/// instructions out of line (≈ 25 µs): worth a warning, since it is paid twice per collection.
fn warn_if_single_stepped(elf: &Elf, f: &elf::FuncSymbol) {
    let Some(code) = elf.read_at(f.address, 2) else { return };
    let emulated =
        matches!(code[0], 0x50..=0x57 | 0x90) || (code[0] == 0x41 && matches!(code[1], 0x50..=0x57));
    if !emulated {
        tracing::warn!(
            "{} starts with byte {:#04x}, which uprobes may single-step: expect ≈ 25 µs extra per collection",
            f.name,
            code[0]
        );
    }
}

/// The test interpreters' manifest entries (`cargo xtask test` names the manifest): the unit
/// tests that check this module against every build the suite has.
#[cfg(test)]
pub fn test_pythons() -> Vec<serde_json::Value> {
    let manifest = std::env::var("NEUROGC_PYTHONS")
        .expect("NEUROGC_PYTHONS names the test interpreters' manifest (cargo xtask test sets it)");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    manifest["pythons"].as_array().unwrap().clone()
}

#[cfg(test)]
mod tests {
    use super::is_collector;

    #[test]
    fn collector_clones_are_entry_points_cold_parts_are_not() {
        assert!(is_collector("gc_collect_main", "gc_collect_main"));
        assert!(is_collector("collect.constprop.0", "collect"));
        assert!(is_collector("collect.isra.0", "collect"));
        assert!(!is_collector("collect.cold", "collect"));
        assert!(!is_collector("gc_collect_main.part.0", "gc_collect_main"));
        assert!(!is_collector("collect_generations", "collect"));
    }
}
