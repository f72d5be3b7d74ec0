//! Every layout the agent reads from a CPython process, one row per minor version and build
//! kind: the collector's name, where the GC state is and its shape, what the kernel follows to
//! copy a stack and what names a frame, and the main thread's pending-call queue. The code that
//! reads a process looks its row up here; none of it matches on the version itself.
//!
//! How each figure was measured (docs/interpreters.md, docs/act-mode.md): the GC state, the
//! pending-call queue and the thread state with `offsetof` compiled against each version's own
//! internal headers and checked in the pyenv builds' DWARF; the long-lived counters by
//! `xtask/layouts/gc_counters.py`, run by the tests against every test interpreter; frames and
//! code objects by locating the running thread's state and `PyCode_Type`'s member table, and
//! from 3.13 on as `_Py_DebugOffsets` publishes them (which wins where present). Every layout is
//! validated against the live process before it is trusted.
use neurogc_common::tstate_via;

use super::{
    cpython::{GcLayout, StatsAt},
    frames::{CodeLayout, LineTable, Walk},
    pending::{Base, COUNTED, Queue, RING_38, RING_39, RING_312},
};

/// Which build of a minor version a row is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    Default,
    /// `--disable-gil`.
    FreeThreaded,
    /// 3.14.0–3.14.4, which shipped the incremental collector (young/old[2] lists,
    /// `_PyGC_Collect`) that 3.14.5 took back out.
    Incremental,
}

/// Where the GC state is, at link-time addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateAt {
    /// Inside `_PyRuntime`, at this offset (3.8).
    Runtime(u64),
    /// In the main interpreter state: the pointer to it at `main_ptr` in `_PyRuntime`, the GC
    /// state at `gc` in it.
    MainInterp { main_ptr: u64, gc: u64 },
    /// As `_Py_DebugOffsets` publishes it (3.13+).
    Published,
}

/// The GC state's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gc {
    Known(GcLayout),
    /// 3.15+: the generations at `generations`, the statistics as rings whose pointer, the
    /// state's size and the rings' size `_Py_DebugOffsets.gc` publishes; the long-lived counters
    /// at `long_lived.1` where the state is `long_lived.0` bytes (the size they were measured at).
    Published {
        generations: u64,
        long_lived: Option<(u64, u64)>,
    },
}

/// The main thread's pending-call queue, and how its producer wakes the eval loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub queue_at: Base,
    pub queue: Queue,
    pub size: u64,
    pub breaker: Breaker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breaker {
    /// An `int` the producers store 1 into (3.8–3.12).
    Int(Base),
    /// Bit 2 (`_PY_CALLS_TO_DO_BIT`) of the main thread state's `eval_breaker`: the thread
    /// state's pointer at `tstate_ptr` in `_PyRuntime`, the breaker at `eval_breaker` in it,
    /// or as PEP 768's offsets publish it where `published` (3.14+).
    MainThreadBit { tstate_ptr: u64, eval_breaker: u64, published: bool },
}

/// Everything one build's process is read through.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub minor: u32,
    pub build: Build,
    /// The collector function's names in `.symtab`, best first (all `static`).
    pub collector: &'static [&'static str],
    pub state: StateAt,
    /// None: the GC state's shape is not known (probe arguments only).
    pub gc: Option<Gc>,
    /// None: stacks are not read.
    pub walk: Option<Walk>,
    /// Frames are read only where `_Py_DebugOffsets` publishes their offsets (3.13t).
    pub walk_published_only: bool,
    /// Frames are frame objects, read in full (3.8–3.10), not the short interpreter frames.
    pub frame_objects: bool,
    /// How a code object is named (`header_extra` is the interpreter's, set where used).
    pub code: Option<CodeLayout>,
    /// None: act mode's hook refuses the build.
    pub pending: Option<Pending>,
    /// `_Py_DebugOffsets` (3.13+): where the interpreter-state block's `gc` field is, and
    /// whether PEP 768's fields (3.14+) and the GC's (3.15+) follow.
    pub debug_gc_field: u64,
    pub remote_debug: bool,
    pub gc_debug: bool,
}

const NONE: u32 = u32::MAX;

/// 3.8–3.10: `PyFrameObject`s from the thread state the GIL's `tstate_current` names.
const fn frame_objects(tstate_in_runtime: u64, lasti: u32) -> Walk {
    Walk {
        via: tstate_via::RUNTIME,
        tstate_in_runtime,
        gil_at: 0,
        frame_at: 24,
        cframe_at: NONE,
        previous_at: 24,
        code_at: 32,
        instr_at: lasti,
        owner_at: NONE,
    }
}

/// 3.12+: `_PyInterpreterFrame`s from the GIL holder's thread state.
const fn interpreter_frames(gil_at: u64, owner_at: u32) -> Walk {
    Walk {
        via: tstate_via::GIL_HOLDER,
        tstate_in_runtime: 0,
        gil_at,
        frame_at: 72,
        cframe_at: NONE,
        previous_at: 8,
        code_at: 0,
        instr_at: 56,
        owner_at,
    }
}

/// 3.11+'s code objects (`co_qualname`, location tables); the strings of the default build.
const CODE_311: CodeLayout = CodeLayout {
    filename: 112,
    name: 128,
    firstlineno: 68,
    linetable: 136,
    table: LineTable::Locations,
    bytecode: None,
    lasti_in_units: false,
    ascii_data: 40,
    compact_data: 56,
    tag_mask: 0,
    owner_not_python: Some(3),
    header_extra: 0,
};

/// 3.8–3.9's code objects: `co_name`, `co_lnotab`, `f_lasti` in bytes.
const CODE_38: CodeLayout = CodeLayout {
    filename: 104,
    name: 112,
    firstlineno: 40,
    linetable: 120,
    table: LineTable::Lnotab,
    ascii_data: 48,
    compact_data: 72,
    owner_not_python: None,
    ..CODE_311
};

/// 3.8–3.13's GC state: `generations[3]` at 24, `generation0` at 96, the statistics inline at
/// 128, `long_lived_total`/`_pending` after `callbacks` (threshold0 + 184; + 188 where Debian's
/// 3.13 puts the generations at 20: the counters stay at 224).
const GC_38: GcLayout = GcLayout {
    stats: StatsAt::Inline(128),
    gen0_ptr: Some(96),
    generations: 24,
    size: 240,
    long_lived: Some(224),
    lists: true,
};

const fn counted(queue: u64, tstate_ptr: u64, eval_breaker: u64, published: bool) -> Pending {
    Pending {
        queue_at: Base::Runtime(queue),
        queue: COUNTED,
        size: 7232,
        breaker: Breaker::MainThreadBit { tstate_ptr, eval_breaker, published },
    }
}

const fn ring(queue_at: Base, queue: Queue, size: u64, breaker: Base) -> Pending {
    Pending { queue_at, queue, size, breaker: Breaker::Int(breaker) }
}

const DEFAULT: Row = Row {
    minor: 0,
    build: Build::Default,
    collector: &["gc_collect_main"],
    state: StateAt::Published,
    gc: Some(Gc::Known(GC_38)),
    walk: None,
    walk_published_only: false,
    frame_objects: false,
    code: None,
    pending: None,
    debug_gc_field: 80,
    remote_debug: false,
    gc_debug: false,
};

pub const TABLE: [Row; 10] = [
    Row {
        minor: 8,
        collector: &["collect"],
        state: StateAt::Runtime(344),
        walk: Some(frame_objects(1368, 104)),
        frame_objects: true,
        code: Some(CODE_38),
        pending: Some(ring(Base::Runtime(600), RING_38, 544, Base::Runtime(592))),
        ..DEFAULT
    },
    Row {
        minor: 9,
        collector: &["collect"],
        state: StateAt::MainInterp { main_ptr: 40, gc: 616 },
        walk: Some(frame_objects(568, 104)),
        frame_objects: true,
        code: Some(CODE_38),
        pending: Some(ring(Base::MainInterp(80), RING_39, 536, Base::MainInterp(72))),
        ..DEFAULT
    },
    Row {
        minor: 10,
        state: StateAt::MainInterp { main_ptr: 40, gc: 616 },
        walk: Some(frame_objects(568, 96)),
        frame_objects: true,
        code: Some(CodeLayout { table: LineTable::Ranges310, lasti_in_units: true, ..CODE_38 }),
        pending: Some(ring(Base::MainInterp(80), RING_39, 536, Base::MainInterp(68))),
        ..DEFAULT
    },
    Row {
        minor: 11,
        state: StateAt::MainInterp { main_ptr: 48, gc: 648 },
        // `_PyInterpreterFrame`s behind `tstate->cframe->current_frame`; no owner byte yet.
        walk: Some(Walk {
            via: tstate_via::RUNTIME,
            tstate_in_runtime: 576,
            gil_at: 0,
            frame_at: 56,
            cframe_at: 8,
            previous_at: 48,
            code_at: 32,
            instr_at: 56,
            owner_at: NONE,
        }),
        code: Some(CodeLayout {
            firstlineno: 72,
            bytecode: Some(184),
            ascii_data: 48,
            compact_data: 72,
            owner_not_python: None,
            ..CODE_311
        }),
        pending: Some(ring(Base::MainInterp(112), RING_39, 536, Base::MainInterp(100))),
        ..DEFAULT
    },
    Row {
        minor: 12,
        state: StateAt::MainInterp { main_ptr: 48, gc: 112 },
        walk: Some(Walk { frame_at: 56, cframe_at: 0, ..interpreter_frames(384, 70) }),
        code: Some(CodeLayout { bytecode: Some(192), ..CODE_311 }),
        pending: Some(ring(Base::Runtime(2016), RING_312, 544, Base::MainInterp(368))),
        ..DEFAULT
    },
    Row {
        minor: 13,
        walk: Some(interpreter_frames(16, 70)),
        code: Some(CodeLayout { bytecode: Some(200), ..CODE_311 }),
        pending: Some(counted(2640, 664, 24, false)),
        ..DEFAULT
    },
    // 3.13t keeps the GIL build's GC state plus `immortalize` (offsetof against 3.13.5t's own
    // headers), but never links objects into the generations: no list heads. Its runtime, queue
    // and thread state match 3.13's; its objects' headers are 16 bytes longer, which moves the
    // strings' data; frames and code objects only as published, the collecting thread from the
    // collector's own argument.
    Row {
        minor: 13,
        build: Build::FreeThreaded,
        gc: Some(Gc::Known(GcLayout { gen0_ptr: None, size: 248, lists: false, ..GC_38 })),
        walk: Some(Walk { via: tstate_via::COLLECTOR_ARG, ..interpreter_frames(16, 70) }),
        walk_published_only: true,
        code: Some(CodeLayout { bytecode: Some(200), ascii_data: 56, compact_data: 72, ..CODE_311 }),
        pending: Some(counted(2640, 664, 24, false)),
        ..DEFAULT
    },
    // Not available to test: no pending-call layout (act mode refuses rather than guess), no
    // long-lived counters (a full collection is predicted from those seen).
    Row {
        minor: 14,
        build: Build::Incremental,
        collector: &["_PyGC_Collect"],
        gc: Some(Gc::Known(GcLayout {
            stats: StatsAt::Inline(120),
            gen0_ptr: None,
            long_lived: None,
            ..GC_38
        })),
        walk: Some(interpreter_frames(16, 74)),
        code: Some(CodeLayout { bytecode: Some(208), tag_mask: 7, ..CODE_311 }),
        debug_gc_field: 88,
        remote_debug: true,
        ..DEFAULT
    },
    // 3.14.5+ went back to 3.13's collector; its counters moved behind the statistics
    // (gc_counters.py on 3.14.10: threshold0 + 200).
    Row {
        minor: 14,
        gc: Some(Gc::Known(GcLayout {
            stats: StatsAt::Inline(120),
            gen0_ptr: Some(256),
            size: 264,
            long_lived: Some(240),
            ..GC_38
        })),
        walk: Some(interpreter_frames(16, 74)),
        code: Some(CodeLayout { bytecode: Some(208), tag_mask: 7, ..CODE_311 }),
        pending: Some(counted(2848, 840, 24, true)),
        debug_gc_field: 88,
        remote_debug: true,
        ..DEFAULT
    },
    // 3.15: generations[3] and the permanent generation from 8 (after `enabled`, `debug`); the
    // long-lived counters where gc_counters.py found them on 3.15.2 (threshold0 + 128), trusted
    // only where the state is 3.15.2's size (176).
    Row {
        minor: 15,
        gc: Some(Gc::Published { generations: 8, long_lived: Some((176, 152)) }),
        walk: Some(interpreter_frames(16, 74)),
        code: Some(CodeLayout { bytecode: Some(208), tag_mask: 7, ..CODE_311 }),
        pending: Some(counted(2976, 968, 24, true)),
        debug_gc_field: 88,
        remote_debug: true,
        gc_debug: true,
        ..DEFAULT
    },
];

/// The build kind of an interpreter.
pub fn build(minor: u32, micro: Option<u32>, free_threaded: bool) -> Build {
    match () {
        _ if free_threaded => Build::FreeThreaded,
        _ if TABLE.iter().any(|r| r.minor == minor && r.build == Build::Incremental)
            && micro.is_some_and(|m| m < 5) =>
        {
            Build::Incremental
        }
        _ => Build::Default,
    }
}

/// The row for a build; None for versions never measured. Free-threaded builds other than
/// 3.13t get a row of their own with nothing known but the collector's name (probe arguments
/// only); versions after the newest row are read as the newest, through what they publish.
pub fn row(minor: u32, build: Build) -> Option<Row> {
    if let Some(r) = TABLE.iter().find(|r| r.minor == minor && r.build == build) {
        return Some(*r);
    }
    let newest = TABLE.iter().filter(|r| r.build == Build::Default).map(|r| r.minor).max()?;
    match build {
        Build::FreeThreaded if minor > 13 => Some(Row {
            minor,
            build,
            gc: None,
            walk: None,
            code: None,
            pending: None,
            ..row(minor.min(newest), Build::Default)?
        }),
        // Newer than any measured: the GC state as published, nothing guessed.
        Build::Default if minor > newest => {
            let n = row(newest, build)?;
            let gc = match n.gc {
                Some(Gc::Published { generations, .. }) => {
                    Some(Gc::Published { generations, long_lived: None })
                }
                _ => None,
            };
            Some(Row { minor, gc, walk: None, code: None, pending: None, ..n })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `xtask/layouts/gc_counters.py` run by every default-build test interpreter: where it finds
    /// threshold0 from the interpreter state and the long-lived counters from threshold0 is where
    /// the table puts them (the free-threaded build links nothing into the generations, so the
    /// script cannot find its counters there: its row comes from `offsetof` and DWARF).
    #[test]
    fn the_table_is_where_gc_counters_py_finds_the_gc_state_on_every_test_build() {
        let manifest = std::env::var("NEUROGC_PYTHONS")
            .expect("NEUROGC_PYTHONS names the test interpreters' manifest (cargo xtask test sets it)");
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../xtask/layouts/gc_counters.py");
        let mut checked = Vec::new();
        for python in manifest["pythons"].as_array().unwrap() {
            if python["free_threaded"].as_bool() == Some(true) {
                continue;
            }
            let out = measure(python, script);
            let (version, threshold0, long_lived) = parse(&out).unwrap_or_else(|| panic!("{out}"));
            let mut parts = version.split('.').skip(1).map(|p| p.parse::<u32>().unwrap());
            let (minor, micro) = (parts.next().unwrap(), parts.next());
            let row = row(minor, super::build(minor, micro, false)).unwrap();
            let Some(Gc::Known(gc)) = row.gc else {
                // 3.15: the state's shape is published; the counters were measured at its size.
                let Some(Gc::Published { generations, long_lived: Some((_, at)) }) = row.gc else {
                    panic!("{version}: no counters in the table");
                };
                assert_eq!(long_lived, at - (generations + 16), "{version}: {out}");
                checked.push(version);
                continue;
            };
            // Debian's 3.13 aligns the generations at 20, not 24; the counters stay put.
            let from = [gc.generations + 16, gc.generations + 12];
            let at = gc.long_lived.unwrap();
            assert!(from.iter().any(|t| at - t == long_lived), "{version}: {out}, table {gc:?}");
            let known = match row.state {
                StateAt::Runtime(at) | StateAt::MainInterp { gc: at, .. } => Some(at),
                StateAt::Published => None,
            };
            if let Some(state) = known {
                assert_eq!(threshold0, state + gc.generations + 16, "{version}: {out}");
            }
            checked.push(version);
        }
        assert!(checked.len() >= 5, "too few test interpreters measured: {checked:?}");
    }

    /// Runs the script with `python` (in its root's own /proc where it has one), its output.
    fn measure(python: &serde_json::Value, script: &str) -> String {
        let argv: Vec<&str> =
            python["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let mut cmd = match python["root"].as_str() {
            Some(root) => {
                let mut c = std::process::Command::new("unshare");
                c.args(["--pid", "--fork", "--kill-child", &format!("--mount-proc={root}/proc")]).args(&argv);
                c
            }
            None => {
                let mut c = std::process::Command::new(argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        let out = cmd
            .arg("-")
            .stdin(std::fs::File::open(script).unwrap())
            .output()
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{argv:?}: {text}");
        text
    }

    /// "3.11.2: threshold0 at state+688; long_lived_total at threshold0+184, …".
    fn parse(out: &str) -> Option<(String, u64, u64)> {
        let (version, rest) = out.trim().split_once(": threshold0 at state+")?;
        let (t0, rest) = rest.split_once(';')?;
        let ll = rest.split_once("long_lived_total at threshold0+")?.1.split(',').next()?;
        Some((version.to_owned(), t0.parse().ok()?, ll.parse().ok()?))
    }
}
