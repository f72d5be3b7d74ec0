//! What an interpreter file says about itself (version, build, the offsets `_Py_DebugOffsets`
//! publishes), and through its row in `versions` which function collects and where the GC state
//! lives and how it is shaped. Every layout is validated against the live process before it is
//! trusted (see `layout`).
use std::fmt;

pub use super::versions::{GcLayout, StatsAt};
use super::{
    elf::Elf,
    versions::{self, Build, Gc, Row, StateAt},
};
use crate::memory::{i64_at, u64_at};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyVersion {
    pub minor: u32,
    /// None when only `3.X` could be read (3.8–3.10 builds carry no version number in data).
    pub micro: Option<u32>,
}

impl fmt::Display for PyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.micro {
            Some(m) => write!(f, "3.{}.{m}", self.minor),
            None => write!(f, "3.{}", self.minor),
        }
    }
}

/// What the interpreter file says about itself.
#[derive(Debug, Clone)]
pub struct Interpreter {
    pub version: PyVersion,
    pub free_threaded: bool,
    /// Link-time address of `_PyRuntime` (add the load bias for the live address).
    pub runtime: u64,
    /// Link-time address of `PyCode_Type` (exported, so found in stripped builds too): a
    /// frame's code object must have it as its type.
    pub code_type: Option<u64>,
    /// `_Py_DebugOffsets` fields, 3.13+: (interpreters_head offset in the runtime, gc offset in
    /// the interpreter state).
    pub debug_offsets: Option<(u64, u64)>,
    /// 3.14+: PEP 768's fields: the opt-out flag neurogc honours, and the eval breaker's offset.
    pub remote_debug: Option<RemoteDebugOffsets>,
    /// 3.15+: what `_Py_DebugOffsets.gc` publishes about the GC state.
    pub gc_debug: Option<GcDebugOffsets>,
    /// 3.13+: where frames and code objects keep what a stack needs, as published.
    pub frame_debug: Option<FrameDebugOffsets>,
    /// 3.13+: `interpreter_state.threads_head` as published (the interpreter's thread list).
    pub threads_head: Option<u64>,
}

/// `_Py_DebugOffsets.gc` from 3.15 on: `{size, collecting, frame, generation_stats_size,
/// generation_stats}`, at offset 752 of the debug offsets (offsetof against 3.15.2's
/// pycore_debug_offsets.h). Used only when the values have the shape of a GC state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcDebugOffsets {
    pub size: u64,
    pub generation_stats: u64,
    pub generation_stats_size: u64,
}

const GC_DEBUG_AT: usize = 752;

impl GcDebugOffsets {
    fn read(dbg: &[u8]) -> Option<GcDebugOffsets> {
        let w = |i: usize| u64_at(dbg, GC_DEBUG_AT + i * 8);
        let found = GcDebugOffsets { size: w(0), generation_stats: w(4), generation_stats_size: w(3) };
        let plausible = (64..=4096).contains(&found.size)
            && found.generation_stats.is_multiple_of(8)
            && found.generation_stats + 8 <= found.size
            && w(1) < found.size
            && (64..=1 << 20).contains(&found.generation_stats_size);
        plausible.then_some(found)
    }

    /// The rings' depths (young, old) whose `struct gc_stats` has the published size: 11 and 3 on
    /// GIL builds, 1 and 1 free-threaded (3.15's pycore_interp_structs.h).
    fn ring_slots(&self) -> Option<(u32, u32)> {
        let bytes = |y: u64, o: u64| (64 * y + 8 + 2 * (64 * o + 8) + 4).next_multiple_of(8);
        [(11, 3), (1, 1)]
            .into_iter()
            .find(|&(y, o)| bytes(y, o) == self.generation_stats_size)
            .map(|(y, o)| (y as u32, o as u32))
    }
}

/// From `_Py_DebugOffsets` (3.13+): where a thread's current frame is, a frame's fields and a
/// code object's. Where the blocks sit moved between releases (3.14 and 3.15 added fields before
/// them): each is found by its shape, and only a complete, consistent set is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDebugOffsets {
    pub current_frame: u64,
    pub previous: u64,
    pub executable: u64,
    pub instr_ptr: u64,
    pub owner: u64,
    pub filename: u64,
    pub qualname: u64,
    pub linetable: u64,
    pub firstlineno: u64,
    pub code_adaptive: u64,
}

impl FrameDebugOffsets {
    fn find(block: &[u8]) -> Option<FrameDebugOffsets> {
        let w: Vec<u64> = block.chunks_exact(8).map(|c| u64_at(c, 0)).collect();
        // thread_state: {size, prev 0, next 8, interp 16, current_frame, ...}.
        let t = (3..w.len().checked_sub(5)?)
            .find(|&i| (100..1 << 14).contains(&w[i]) && w[i + 1..i + 4] == [0, 8, 16] && w[i + 4] < w[i])?;
        // interpreter_frame: {size, previous, executable, instr_ptr, localsplus, owner, ...}.
        let f = (t + 5..w.len().checked_sub(6)?).find(|&i| {
            (48..512).contains(&w[i])
                && w[i + 1] < w[i]
                && w[i + 2] < w[i]
                && w[i + 3] < w[i]
                && w[i + 5] < w[i]
                && w[i + 1] != w[i + 2]
                && w[i + 3] >= 16
        })?;
        // code_object: {size, filename, name, qualname, linetable, firstlineno, argcount,
        // localsplusnames, localspluskinds, co_code_adaptive, ...}: four names in a row.
        let c = (f + 6..w.len().checked_sub(10)?).find(|&i| {
            (64..4096).contains(&w[i])
                && (1..4).all(|k| w[i + 1 + k] == w[i + k] + 8)
                && w[i + 5] < w[i]
                && w[i + 9] <= w[i]
                && w[i + 9] >= 64
        })?;
        Some(FrameDebugOffsets {
            current_frame: w[t + 4],
            previous: w[f + 1],
            executable: w[f + 2],
            instr_ptr: w[f + 3],
            owner: w[f + 5],
            filename: w[c + 1],
            qualname: w[c + 3],
            linetable: w[c + 4],
            firstlineno: w[c + 5],
            code_adaptive: w[c + 9],
        })
    }
}

/// From `_Py_DebugOffsets.debugger_support` (3.14+): `eval_breaker` in the thread state, and
/// `remote_debugging_enabled` in the interpreter state (0 when the application opted out of
/// remote code execution).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteDebugOffsets {
    pub eval_breaker: u64,
    pub remote_debugging_enabled: u64,
}

/// CPython's `MAX_SCRIPT_PATH_SIZE`.
const MAX_SCRIPT_PATH_SIZE: u64 = 512;

impl RemoteDebugOffsets {
    /// The `debugger_support` block is the last of `_Py_DebugOffsets`, but how many blocks come
    /// before it moved between 3.14 pre-releases and patch releases: find it by its shape
    /// (pending-call flag at 0, the path right after it, the path size 512).
    fn find(block: &[u8]) -> Option<RemoteDebugOffsets> {
        let words: Vec<u64> = block.chunks_exact(8).map(|c| u64_at(c, 0)).collect();
        (12..words.len().saturating_sub(5)).find_map(|i| {
            let w = &words[i..i + 6];
            (w[3] == 0
                && w[4] == 4
                && w[5] == MAX_SCRIPT_PATH_SIZE
                && w[0] < 4096
                && w[1] < 1 << 16
                && w[2] < 1 << 20)
                .then_some(RemoteDebugOffsets { eval_breaker: w[0], remote_debugging_enabled: w[2] })
        })
    }
}

/// `tstate->interp`'s offset in `PyThreadState`, the same in every build 3.8–3.15 (free-threaded
/// ones too): checks a thread state against its interpreter, and tells a function that takes one.
pub const TSTATE_INTERP: u64 = 16;

/// Oldest and newest minor version this build of neurogc was tested on. Newer ones that publish
/// `_Py_DebugOffsets` are observed too: every layout is validated in the live process first.
pub const SUPPORTED: (u32, u32) = (8, 15);

fn parse_minor(name: &str) -> Option<(u32, bool)> {
    let rest = &name[name.find("python3.")? + "python3.".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let free_threaded = rest[digits.len()..].starts_with('t');
    Some((digits.parse().ok()?, free_threaded))
}

impl Interpreter {
    /// None when `elf` is not a CPython interpreter (no `_PyRuntime`).
    pub fn identify(elf: &Elf, file_name: &str) -> Option<Interpreter> {
        let runtime = elf.symbol_address("_PyRuntime")?;
        let code_type = elf.symbol_address("PyCode_Type");
        // 3.13+: the runtime begins with _Py_DebugOffsets, statically initialised in the file.
        if let Some(dbg) = elf.read_at(runtime, 1024)
            && &dbg[..8] == b"xdebugpy"
        {
            let hex = u64_at(dbg, 8);
            let minor = ((hex >> 16) & 0xff) as u32;
            let micro = ((hex >> 8) & 0xff) as u32;
            let free_threaded = i64_at(dbg, 16) != 0;
            let row = versions::row(minor, versions::build(minor, Some(micro), free_threaded));
            // The interpreter-state block grew a field (threads_main) in 3.14.
            let gc_field = row.map_or(80, |r| r.debug_gc_field) as usize;
            return Some(Interpreter {
                version: PyVersion { minor, micro: Some(micro) },
                free_threaded,
                runtime,
                code_type,
                debug_offsets: Some((u64_at(dbg, 40), u64_at(dbg, gc_field))),
                remote_debug: row.filter(|r| r.remote_debug).and_then(|_| RemoteDebugOffsets::find(dbg)),
                gc_debug: row.filter(|r| r.gc_debug).and_then(|_| GcDebugOffsets::read(dbg)),
                frame_debug: FrameDebugOffsets::find(dbg),
                // `interpreter_state {size, id, next, threads_head, …}` from byte 48.
                threads_head: Some(u64_at(dbg, 72)).filter(|&v| (64..1 << 20).contains(&v)),
            });
        }
        let named = elf.soname().as_deref().and_then(parse_minor).or_else(|| parse_minor(file_name));
        // 3.11+: `const unsigned long Py_Version = PY_VERSION_HEX`.
        if let Some(addr) = elf.symbol_address("Py_Version")
            && let Some(bytes) = elf.read_at(addr, 8)
        {
            let hex = u64_at(bytes, 0);
            return Some(Interpreter {
                version: PyVersion {
                    minor: ((hex >> 16) & 0xff) as u32,
                    micro: Some(((hex >> 8) & 0xff) as u32),
                },
                free_threaded: named.is_some_and(|(_, t)| t),
                runtime,
                code_type,
                debug_offsets: None,
                remote_debug: None,
                gc_debug: None,
                frame_debug: None,
                threads_head: None,
            });
        }
        let (minor, free_threaded) = named?;
        Some(Interpreter {
            version: PyVersion { minor, micro: None },
            free_threaded,
            runtime,
            code_type,
            debug_offsets: None,
            remote_debug: None,
            gc_debug: None,
            frame_debug: None,
            threads_head: None,
        })
    }

    pub fn is_supported(&self) -> bool {
        self.version.minor >= SUPPORTED.0
            && (self.version.minor <= SUPPORTED.1 || self.debug_offsets.is_some())
    }

    /// Newer than any version neurogc was tested on.
    pub fn is_newer_than_tested(&self) -> bool {
        self.version.minor > SUPPORTED.1
    }

    /// Bytes every object header has beyond the default build's 16: a free-threaded `PyObject`
    /// is 32 (`ob_tid`, `ob_mutex`, `ob_gc_bits`, `ob_ref_local`, `ob_ref_shared`, `ob_type` at
    /// 24; `sizeof` against 3.13.5t's own headers), so every field after it moves by 16.
    pub fn header_extra(&self) -> u64 {
        if self.free_threaded { 16 } else { 0 }
    }

    /// Which build of its minor version this is (3.14.0–3.14.4 shipped the incremental
    /// collector: a build of its own).
    pub fn build(&self) -> Build {
        versions::build(self.version.minor, self.version.micro, self.free_threaded)
    }

    /// Every layout this build is read through (`versions`); None for versions never measured.
    pub fn row(&self) -> Option<Row> {
        versions::row(self.version.minor, self.build())
    }

    /// Names of the collector function, best first. All are `static`: `.symtab` only.
    pub fn collector_names(&self) -> &'static [&'static str] {
        self.row().map_or(&["gc_collect_main"], |r| r.collector)
    }

    /// Translation units the collector lives in (to tell CPython's `collect` from any other).
    pub fn collector_sources(&self) -> &'static [&'static str] {
        &["gcmodule.c", "gc.c", "gc_free_threading.c"]
    }

    /// Where the GC state is: `(pointer to the main interpreter, offset of the GC state in it)`,
    /// or `(0, absolute link-time address)` when the state is inside `_PyRuntime` itself (3.8).
    /// Both are link-time addresses; the caller adds the load bias to the pointer address.
    pub fn gc_state_location(&self) -> Option<GcStateLocation> {
        let rt = self.runtime;
        Some(match (self.row()?.state, self.debug_offsets) {
            (StateAt::Runtime(at), _) => GcStateLocation::Static { address: rt + at },
            (StateAt::MainInterp { main_ptr, gc }, _) => {
                GcStateLocation::MainInterpreter { main_ptr: rt + main_ptr, gc_offset: gc }
            }
            (StateAt::Published, Some((interpreters_head, gc))) => {
                GcStateLocation::MainInterpreter { main_ptr: rt + interpreters_head + 8, gc_offset: gc }
            }
            (StateAt::Published, None) => return None,
        })
    }

    /// None: the GC state's shape is not known for this build (3.15+ without a usable
    /// `_Py_DebugOffsets.gc`, free-threaded builds other than 3.13t): probe arguments only.
    pub fn gc_layout(&self) -> Option<GcLayout> {
        Some(match self.row()?.gc? {
            Gc::Known(layout) => layout,
            Gc::Published { generations, long_lived, permanent } => {
                let dbg = self.gc_debug?;
                let (young_slots, old_slots) = dbg.ring_slots()?;
                GcLayout {
                    stats: StatsAt::Rings { pointer: dbg.generation_stats, young_slots, old_slots },
                    gen0_ptr: None,
                    generations,
                    size: dbg.size,
                    long_lived: long_lived.and_then(|(size, at)| (dbg.size == size).then_some(at)),
                    lists: true,
                    permanent,
                }
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcStateLocation {
    Static { address: u64 },
    MainInterpreter { main_ptr: u64, gc_offset: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_debug_block_is_found_by_its_shape() {
        // 3.14.10's tail: gc {264, 192}, gen_object {160, 24, 72, 67}, llist_node {0, 8},
        // debugger_support {24, 304, 8076, 0, 4, 512}.
        let mut words = vec![0u64; 10];
        words.push(7360); // interpreter_state.threads_main (word 10)
        words.extend([1u64; 70]);
        words.extend([264, 192, 160, 24, 72, 67, 0, 8, 24, 304, 8076, 0, 4, 512]);
        let block: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let found = RemoteDebugOffsets::find(&block).unwrap();
        assert_eq!((found.eval_breaker, found.remote_debugging_enabled), (24, 8076));
    }

    #[test]
    fn published_gc_offsets_give_3_15s_layout() {
        // 3.15.2's _Py_DebugOffsets.gc: size 176, collecting 112, frame 120, stats size 1120,
        // stats pointer at 104 (read from the sid build).
        let mut dbg = vec![0u8; 1024];
        for (i, v) in [176u64, 112, 120, 1120, 104].into_iter().enumerate() {
            dbg[GC_DEBUG_AT + i * 8..GC_DEBUG_AT + i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        let gc = GcDebugOffsets::read(&dbg).unwrap();
        assert_eq!(gc.ring_slots(), Some((11, 3)));
        let interp = Interpreter {
            version: PyVersion { minor: 15, micro: Some(2) },
            free_threaded: false,
            runtime: 0,
            code_type: None,
            debug_offsets: Some((936, 7400)),
            remote_debug: None,
            gc_debug: Some(gc),
            frame_debug: None,
            threads_head: None,
        };
        let layout = interp.gc_layout().unwrap();
        assert_eq!(layout.stats, StatsAt::Rings { pointer: 104, young_slots: 11, old_slots: 3 });
        assert_eq!((layout.size, layout.generations), (176, 8));
        // The rings' index and first record per generation, as measured in the live process.
        assert_eq!(layout.stats.rings().unwrap(), [(704, 0, 11), (904, 712, 3), (1104, 912, 3)]);
        // Something else where the block should be: no layout, probe arguments only.
        dbg[GC_DEBUG_AT..GC_DEBUG_AT + 8].copy_from_slice(&7u64.to_le_bytes());
        assert_eq!(GcDebugOffsets::read(&dbg), None);
    }

    #[test]
    fn the_free_threaded_3_13_state_has_no_list_heads_and_later_ones_are_not_guessed() {
        let ft = |minor| Interpreter {
            version: PyVersion { minor, micro: Some(5) },
            free_threaded: true,
            runtime: 0,
            code_type: None,
            debug_offsets: Some((632, 7400)),
            remote_debug: None,
            gc_debug: None,
            frame_debug: None,
            threads_head: None,
        };
        // offsetof against 3.13.5t's headers: stats +128, long_lived_total +224, size 248.
        let layout = ft(13).gc_layout().unwrap();
        assert_eq!(layout.stats, StatsAt::Inline(128));
        assert_eq!(
            (layout.generations, layout.size, layout.long_lived, layout.lists),
            (24, 248, Some(224), false)
        );
        assert_eq!(ft(13).header_extra(), 16);
        assert_eq!(ft(14).gc_layout(), None);
        assert_eq!(ft(15).gc_layout(), None);
    }

    /// Words 3.. of `_Py_DebugOffsets` as the tested 3.13.0, 3.14.10 and 3.15.2 builds hold them
    /// (read from the live interpreters).
    const DBG_3_13: [u64; 41] = [
        283320, 608, 632, 194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768, 7760, 304, 0,
        8, 16, 72, 152, 160, 232, 32, 80, 8, 0, 56, 72, 70, 208, 112, 120, 128, 136, 68, 52, 96, 104, 200,
    ];
    const DBG_3_14: [u64; 46] = [
        316616, 784, 808, 225864, 7280, 7272, 7344, 7360, 7408, 7688, 7672, 7680, 16, 7784, 0, 7800, 7792,
        7992, 0, 832, 0, 8, 16, 72, 152, 160, 232, 32, 88, 8, 0, 56, 80, 74, 64, 0, 216, 112, 120, 128, 136,
        68, 52, 96, 104, 208,
    ];
    const DBG_3_15: [u64; 54] = [
        346568, 912, 936, 226240, 7272, 7264, 7336, 7352, 7400, 7592, 7576, 7584, 16, 7736, 0, 7752, 7744,
        7944, 0, 888, 0, 8, 16, 72, 80, 88, 96, 176, 184, 256, 32, 36, 40, 136, 288, 0, 88, 8, 0, 56, 80, 74,
        64, 0, 216, 112, 120, 128, 136, 68, 52, 96, 104, 208,
    ];

    fn block(words: &[u64]) -> Vec<u8> {
        [0u64, 0, 0].iter().chain(words).chain([0u64; 8].iter()).flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn frame_offsets_are_found_in_each_releases_debug_offsets() {
        let at = |words: &[u64]| {
            let f = FrameDebugOffsets::find(&block(words)).unwrap();
            (f.current_frame, f.previous, f.executable, f.instr_ptr, f.owner)
        };
        assert_eq!(at(&DBG_3_13), (72, 8, 0, 56, 70));
        assert_eq!(at(&DBG_3_14), (72, 8, 0, 56, 74));
        assert_eq!(at(&DBG_3_15), (72, 8, 0, 56, 74));
        let code = |words: &[u64]| {
            let f = FrameDebugOffsets::find(&block(words)).unwrap();
            (f.filename, f.qualname, f.linetable, f.firstlineno, f.code_adaptive)
        };
        assert_eq!(code(&DBG_3_13), (112, 128, 136, 68, 200));
        assert_eq!(code(&DBG_3_15), (112, 128, 136, 68, 208));
        // Nothing shaped like the blocks: no offsets.
        assert_eq!(FrameDebugOffsets::find(&block(&[7; 60])), None);
    }

    #[test]
    fn minor_version_from_file_names() {
        assert_eq!(parse_minor("libpython3.11.so.1.0"), Some((11, false)));
        assert_eq!(parse_minor("/usr/bin/python3.9"), Some((9, false)));
        assert_eq!(parse_minor("libpython3.13t.so.1.0"), Some((13, true)));
        assert_eq!(parse_minor("/bin/bash"), None);
    }
}
