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
use neurogc_common::{census_values, tstate_via};

// The shapes the rows are made of.

/// Where the cumulative per-generation counters are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsAt {
    /// `generation_stats[3]` inline, at this offset (3.8–3.14).
    Inline(u64),
    /// A pointer at this offset to `struct gc_stats`: a ring of records per generation (3.15+).
    Rings { pointer: u64, young_slots: u32, old_slots: u32 },
}

impl StatsAt {
    /// Rings: per generation, (offset of the ring's index, offset of its first record, records).
    /// `struct gc_stats { young { items[Y]; int8_t index; }, old[2] { items[O]; int8_t index; },
    /// uint32_t update_seq }` (3.15's pycore_interp_structs.h; each buffer padded to 8 bytes).
    pub fn rings(&self) -> Option<[(u64, u64, u32); 3]> {
        let StatsAt::Rings { young_slots, old_slots, .. } = *self else { return None };
        let record = neurogc_common::RING_RECORD_BYTES;
        let young_index = u64::from(young_slots) * record;
        let old0_items = young_index + 8;
        let old0_index = old0_items + u64::from(old_slots) * record;
        let old1_items = old0_index + 8;
        let old1_index = old1_items + u64::from(old_slots) * record;
        Some([
            (young_index, 0, young_slots),
            (old0_index, old0_items, old_slots),
            (old1_index, old1_items, old_slots),
        ])
    }
}

/// Offsets inside `struct _gc_runtime_state` (§4 of the notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcLayout {
    pub stats: StatsAt,
    /// `generation0`, a pointer to `&generations[0].head`: tells where the generations array
    /// starts (gc+24 upstream, gc+20 with Debian's 3.13 alignment patch). None: `generations`.
    pub gen0_ptr: Option<u64>,
    pub generations: u64,
    pub size: u64,
    /// `long_lived_total` (objects in the oldest generation after the last full collection),
    /// `long_lived_pending` 8 bytes after it (promoted since): where a full collection's work
    /// and its next run are predicted from. None where the build keeps no such counters.
    pub long_lived: Option<u64>,
    /// The generations' list heads link the tracked objects (false on free-threaded builds,
    /// which find objects by walking mimalloc's heaps: the heads stay zero).
    pub lists: bool,
    /// The permanent generation's list head (`gc.freeze()` moves every tracked object there):
    /// linked to itself while nothing is frozen. None where not measured, or not a list
    /// (free-threaded builds mark frozen objects instead).
    pub permanent: Option<u64>,
}

/// How to name a code object and place an instruction in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeLayout {
    pub filename: u64,
    /// `co_qualname` (3.11+), else `co_name`.
    pub name: u64,
    pub firstlineno: u64,
    /// `co_lnotab` (3.8–3.9) or `co_linetable` (3.10+).
    pub linetable: u64,
    pub table: LineTable,
    /// Offset of the bytecode in the code object (3.11+: `co_code_adaptive`, where the frame's
    /// instruction pointer points); None: the frame holds `f_lasti` itself.
    pub bytecode: Option<u64>,
    /// `f_lasti` counts code units (3.10), not bytes (3.8–3.9).
    pub lasti_in_units: bool,
    /// Where an ASCII string's characters start (`sizeof(PyASCIIObject)`), and a compact
    /// non-ASCII one's (`sizeof(PyCompactUnicodeObject)`).
    pub ascii_data: u64,
    pub compact_data: u64,
    /// 3.14+: the frame's code is a `_PyStackRef`, its low bits a tag.
    pub tag_mask: u64,
    /// 3.12+: frames whose owner is at least this are shims of the C stack (3; 3.14 numbers the
    /// interpreter's own 3 and the C stack's 4), not Python code.
    pub owner_not_python: Option<u8>,
    /// Bytes every object header adds to the default build's (16 on free-threaded builds:
    /// `ob_type` at 24, not 8): shifts the `str` and `bytes` fields read here.
    pub header_extra: u64,
}

/// The line table formats of CPython 3.8–3.15.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineTable {
    /// 3.8–3.9 `co_lnotab`: (byte offset delta, line delta) pairs.
    Lnotab,
    /// 3.10 `co_linetable`: (byte range, line delta) pairs, −128 for "no line".
    Ranges310,
    /// 3.11+ location table (PEP 657).
    Locations,
}

/// Offsets in the thread state, the interpreter state and frames (the rows: `versions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    pub via: u32,
    /// 3.8–3.11: `gilstate.tstate_current` in `_PyRuntime`; 3.12+: ignored (the main
    /// interpreter's pointer is the GC state's).
    pub tstate_in_runtime: u64,
    pub gil_at: u64,
    pub frame_at: u32,
    pub cframe_at: u32,
    pub previous_at: u32,
    pub code_at: u32,
    pub instr_at: u32,
    pub owner_at: u32,
}

/// Where a structure is: inside `_PyRuntime`, or inside the main interpreter state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Runtime(u64),
    MainInterp(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// 3.8–3.12: a ring of 32 `{func, arg}`, empty when `first == last`; a producer pushes under
    /// a lock, then stores 1 into `calls_to_do` and into the eval breaker.
    Ring {
        /// `finishing` (3.8): set once the interpreter shuts down.
        finishing: Option<u64>,
        /// `busy` (3.12): a thread is running the queued calls right now.
        busy: Option<u64>,
        lock: u64,
        calls_to_do: u64,
        async_exc: u64,
        calls: u64,
        first: u64,
        last: u64,
    },
    /// 3.13+: 300 slots `{func, arg, flags}` (popped slots are zeroed), `npending` of them in
    /// use from `first`; the main thread's queue has `max == 32`, `maxloop == 0`.
    Counted { mutex: u64, npending: u64, max: u64, maxloop: u64, calls: u64, first: u64, next: u64 },
}

/// The ring: 3.8 (`finishing`) and 3.12 (`busy`) have an int before the lock, which moves every
/// other field 8 bytes; 3.9–3.11 start with the lock.
const fn ring_queue(finishing: Option<u64>, busy: Option<u64>) -> Queue {
    let skip = if finishing.is_some() || busy.is_some() { 8 } else { 0 };
    Queue::Ring {
        finishing,
        busy,
        lock: skip,
        calls_to_do: 8 + skip,
        async_exc: 12 + skip,
        calls: 16 + skip,
        first: 528 + skip,
        last: 532 + skip,
    }
}
pub const RING_38: Queue = ring_queue(Some(0), None);
pub const RING_39: Queue = ring_queue(None, None);
pub const RING_312: Queue = ring_queue(None, Some(0));
pub const COUNTED: Queue =
    Queue::Counted { mutex: 8, npending: 12, max: 16, maxloop: 20, calls: 24, first: 7224, next: 7228 };

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
    /// at `long_lived.1` where the state is `long_lived.0` bytes (the size they were measured at);
    /// the permanent generation's head at `permanent`, where measured.
    Published {
        generations: u64,
        long_lived: Option<(u64, u64)>,
        permanent: Option<u64>,
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

/// Where a Python class's instances keep their attributes, for the census's closing edges
/// (`xtask/layouts/instances.py` measured each row on its interpreter; the tests run it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instances {
    /// `ht_cached_keys` in a class: the keys its instances' values are indexed by.
    pub cached_keys: u64,
    /// Where a keys object's entries begin: after `1 << dk_log2_index_bytes` bytes of indices
    /// from 32 (3.11+), else after `dk_size` indices (their width by `dk_size`) from 40.
    pub log2_indices: bool,
    /// An entry's bytes: (hash, key, value) to 3.10, (key, value) for str keys from 3.11.
    pub entry_bytes: u64,
    /// How the values are reached from the object (`neurogc_common::census_values`), and the
    /// offset that mode reads.
    pub values: u32,
    pub values_at: i64,
    /// Where the managed `__dict__` pointer is, from the object, once an instance has one
    /// (3.11+); 0 where `__dict__` is at the type's `tp_dictoffset` (3.8–3.10).
    pub managed_dict: i64,
}

const fn instances(cached_keys: u64, values: u32, values_at: i64, managed_dict: i64) -> Option<Instances> {
    let old = values == census_values::DICT;
    Some(Instances {
        cached_keys,
        log2_indices: !old,
        entry_bytes: if old { 24 } else { 16 },
        values,
        values_at,
        managed_dict,
    })
}

/// How a collection holds its garbage while it clears it, for the census's walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Garbage {
    /// A list of `PyGC_Head`s whose objects keep `_PyGC_PREV_MASK_COLLECTING` while they are
    /// cleared, the list's head having none (3.9+: `handle_resurrected_objects` leaves it).
    FlaggedList,
    /// A list whose objects lost the collecting bit first (3.8's `check_garbage`): its head is
    /// told by its place on the stack.
    StackList,
    /// The free-threaded collector's worklist, linked through `ob_tid`, each object popped as
    /// it is cleared; its head is word `head` of `struct collection_state`, the argument of
    /// `delete_garbage` (CPython's `Python/gc_free_threading.c`).
    Worklist { head: u32 },
    /// Not known: no census.
    Unknown,
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
    /// None: the census names no closing edges.
    pub instances: Option<Instances>,
    /// How a collection holds its garbage while it clears it (the census walks it).
    pub garbage: Garbage,
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

/// 3.8–3.13's GC state: `generations[3]` at 24, `generation0` at 96, the permanent generation
/// at 104, the statistics inline at 128, `long_lived_total`/`_pending` after `callbacks`
/// (threshold0 + 184; + 188 where Debian's 3.13 puts the generations at 20: the counters and the
/// permanent generation stay put).
const GC_38: GcLayout = GcLayout {
    stats: StatsAt::Inline(128),
    gen0_ptr: Some(96),
    generations: 24,
    size: 240,
    long_lived: Some(224),
    lists: true,
    permanent: Some(104),
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
    instances: None,
    garbage: Garbage::FlaggedList,
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
        instances: instances(872, census_values::DICT, 0, 0),
        garbage: Garbage::StackList,
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
        instances: instances(864, census_values::DICT, 0, 0),
        ..DEFAULT
    },
    Row {
        minor: 10,
        state: StateAt::MainInterp { main_ptr: 40, gc: 616 },
        walk: Some(frame_objects(568, 96)),
        frame_objects: true,
        code: Some(CodeLayout { table: LineTable::Ranges310, lasti_in_units: true, ..CODE_38 }),
        pending: Some(ring(Base::MainInterp(80), RING_39, 536, Base::MainInterp(68))),
        instances: instances(872, census_values::DICT, 0, 0),
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
        instances: instances(872, census_values::POINTER, -32, -24),
        ..DEFAULT
    },
    // 3.12's collector moves the immortal objects it meets into the permanent generation
    // (375 of them by the first prompt, back after a gc.unfreeze()): there it says nothing of a
    // freeze.
    Row {
        minor: 12,
        state: StateAt::MainInterp { main_ptr: 48, gc: 112 },
        gc: Some(Gc::Known(GcLayout { permanent: None, ..GC_38 })),
        walk: Some(Walk { frame_at: 56, cframe_at: 0, ..interpreter_frames(384, 70) }),
        code: Some(CodeLayout { bytecode: Some(192), ..CODE_311 }),
        pending: Some(ring(Base::Runtime(2016), RING_312, 544, Base::MainInterp(368))),
        instances: instances(880, census_values::TAGGED, -24, -24),
        ..DEFAULT
    },
    Row {
        minor: 13,
        walk: Some(interpreter_frames(16, 70)),
        code: Some(CodeLayout { bytecode: Some(200), ..CODE_311 }),
        pending: Some(counted(2640, 664, 24, false)),
        instances: instances(880, census_values::INLINE, 24, -24),
        ..DEFAULT
    },
    // 3.13t keeps the GIL build's GC state plus `immortalize` (offsetof against 3.13.5t's own
    // headers), but never links objects into the generations: no list heads. Its garbage is a
    // worklist whose head follows `struct collection_state`'s `base`, `interp`, `gcstate`,
    // `collected`, `uncollectable` and `long_lived_total` (3.13.5's source; `delete_garbage`
    // reads it at 0x30 in its code). Its runtime, queue
    // and thread state match 3.13's; its objects' headers are 16 bytes longer, which moves the
    // strings' data; frames and code objects only as published, the collecting thread from the
    // collector's own argument.
    Row {
        minor: 13,
        build: Build::FreeThreaded,
        gc: Some(Gc::Known(GcLayout { gen0_ptr: None, size: 248, lists: false, permanent: None, ..GC_38 })),
        walk: Some(Walk { via: tstate_via::COLLECTOR_ARG, ..interpreter_frames(16, 70) }),
        walk_published_only: true,
        code: Some(CodeLayout { bytecode: Some(200), ascii_data: 56, compact_data: 72, ..CODE_311 }),
        pending: Some(counted(2640, 664, 24, false)),
        instances: instances(896, census_values::INLINE, 40, -8),
        garbage: Garbage::Worklist { head: 6 },
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
            permanent: None,
            ..GC_38
        })),
        walk: Some(interpreter_frames(16, 74)),
        code: Some(CodeLayout { bytecode: Some(208), tag_mask: 7, ..CODE_311 }),
        debug_gc_field: 88,
        remote_debug: true,
        ..DEFAULT
    },
    // 3.14.5+ went back to 3.13's collector; its counters moved behind the statistics
    // (gc_counters.py on 3.14.10: threshold0 + 200), `generation0` behind them, and the
    // permanent generation to right after the generations (threshold0 + 56).
    Row {
        minor: 14,
        gc: Some(Gc::Known(GcLayout {
            stats: StatsAt::Inline(120),
            gen0_ptr: Some(256),
            size: 264,
            long_lived: Some(240),
            permanent: Some(96),
            ..GC_38
        })),
        walk: Some(interpreter_frames(16, 74)),
        code: Some(CodeLayout { bytecode: Some(208), tag_mask: 7, ..CODE_311 }),
        pending: Some(counted(2848, 840, 24, true)),
        debug_gc_field: 88,
        remote_debug: true,
        instances: instances(880, census_values::INLINE, 24, -24),
        ..DEFAULT
    },
    // 3.15: generations[3] and the permanent generation from 8 (after `enabled`, `debug`); the
    // long-lived counters where gc_counters.py found them on 3.15.2 (threshold0 + 128), trusted
    // only where the state is 3.15.2's size (176); the permanent generation right after the
    // generations (threshold0 + 56).
    Row {
        minor: 15,
        gc: Some(Gc::Published { generations: 8, long_lived: Some((176, 152)), permanent: Some(80) }),
        walk: Some(interpreter_frames(16, 74)),
        code: Some(CodeLayout { bytecode: Some(208), tag_mask: 7, ..CODE_311 }),
        pending: Some(counted(2976, 968, 24, true)),
        debug_gc_field: 88,
        remote_debug: true,
        gc_debug: true,
        instances: instances(888, census_values::INLINE, 24, -24),
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
            instances: None,
            garbage: Garbage::Unknown,
            ..row(minor.min(newest), Build::Default)?
        }),
        // Newer than any measured: the GC state as published, nothing guessed.
        Build::Default if minor > newest => {
            let n = row(newest, build)?;
            let gc = match n.gc {
                Some(Gc::Published { generations, .. }) => {
                    Some(Gc::Published { generations, long_lived: None, permanent: None })
                }
                _ => None,
            };
            Some(Row { minor, gc, walk: None, code: None, pending: None, instances: None, ..n })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
