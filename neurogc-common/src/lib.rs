//! The contract between the kernel half (`neurogc-ebpf`) and the agent: every struct that crosses
//! the boundary is defined here once, `#[repr(C)]`, so both sides agree on its bytes.
#![no_std]

/// CPython has three generations on every version neurogc supports (3.8–3.14).
pub const NUM_GENERATIONS: usize = 3;

/// One entry of the interpreter's `generation_stats[]` (what `gc.get_stats()` returns):
/// three `Py_ssize_t` counters that CPython bumps at the end of each collection.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GenStats {
    pub collections: i64,
    pub collected: i64,
    pub uncollectable: i64,
}

impl GcEvent {
    /// Every field zero (no stack, no stats, no threads counted).
    pub const EMPTY: GcEvent = GcEvent {
        start_ns: 0,
        end_ns: 0,
        pid: 0,
        tid: 0,
        arg_gen: 0,
        result: 0,
        delta: [GenStats { collections: 0, collected: 0, uncollectable: 0 }; NUM_GENERATIONS],
        after: [GenStats { collections: 0, collected: 0, uncollectable: 0 }; NUM_GENERATIONS],
        flags: 0,
        running: RUNNING_UNKNOWN,
        stack_status: 0,
        stack_depth: 0,
        frames: [RawFrame { code: 0, instr: 0 }; MAX_FRAMES],
        running_tids: [0; MAX_RUNNING_TIDS],
    };
}

/// `GcEvent::flags`: `delta` holds the difference of two successful reads of
/// `generation_stats[]`, taken when the collection began and when it ended, and `after` the
/// second.
pub const EVENT_HAS_STATS: u32 = 1;

/// Python frames the kernel copies per collection (the stack of the thread that triggered it,
/// innermost first). Deeper stacks keep their innermost frames and say they were truncated.
pub const MAX_FRAMES: usize = 64;

/// One Python frame as the kernel copies it: pointers only, resolved to names and lines in user
/// space (the split every mature unwinder uses).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawFrame {
    /// The frame's code object (3.14+: a tagged `_PyStackRef`, the agent masks the tag).
    pub code: u64,
    /// Where in it: the instruction pointer (3.11+), or `f_lasti` (3.8–3.10, the low 32 bits),
    /// with the frame's owner byte above `FRAME_OWNER_SHIFT`.
    pub instr: u64,
}

/// `GcEvent::stack_status`: how the stack copy went. The collection's timing never depends on it.
pub mod stack {
    /// No stack locator for this build (an unknown version, or a free-threaded build probed
    /// where the collector's arguments are not seen).
    pub const UNSUPPORTED: u32 = 0;
    pub const COMPLETE: u32 = 1;
    /// More than `MAX_FRAMES` frames: the innermost ones were kept.
    pub const TRUNCATED: u32 = 2;
    /// No thread state (the interpreter is starting or finalising).
    pub const NO_THREAD: u32 = 3;
    /// A pointer could not be read (the walk stops there; what was read is kept).
    pub const READ_FAILED: u32 = 4;
}

/// How the begin probe finds the triggering thread's frames (`StackLocator::tstate_via`).
pub mod tstate_via {
    pub const NONE: u32 = 0;
    /// 3.8–3.11: `*tstate_ptr` is the current thread state (`_PyRuntime.gilstate.tstate_current`).
    pub const RUNTIME: u32 = 1;
    /// 3.12+: `*tstate_ptr` is the main interpreter; its GIL (`interp + gil_at`, a pointer) holds
    /// `last_holder` at `holder_at`: the collecting thread holds the GIL.
    pub const GIL_HOLDER: u32 = 2;
    /// Free-threaded builds (no GIL holder to ask): the collector's first argument,
    /// `gc_collect_main(PyThreadState *tstate, …)`, is the collecting thread's state.
    pub const COLLECTOR_ARG: u32 = 3;
}

/// Bytes of a frame the probe reads at once: every field it needs lies within them (3.8–3.10's
/// `f_lasti` at 104 is the farthest).
pub const FRAME_READ_BYTES: usize = 112;
/// 3.11+'s `_PyInterpreterFrame`: every field needed is in its first 80 bytes.
pub const FRAME_READ_BYTES_SHORT: usize = 80;

/// `RawFrame::instr` carries the frame's owner byte (3.12+) in its top byte: user-space
/// addresses and 3.8–3.10's `f_lasti` (the low 32 bits) fit below it.
pub const FRAME_OWNER_SHIFT: u32 = 56;
pub const FRAME_INSTR_MASK: u64 = (1 << FRAME_OWNER_SHIFT) - 1;

/// Where the triggering thread's Python frames are, per interpreter build.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackLocator {
    pub tstate_via: u32,
    /// Offset in the thread state of the current frame (or of the `_PyCFrame` pointer).
    pub frame_at: u32,
    pub tstate_ptr: u64,
    pub gil_at: u64,
    pub holder_at: u64,
    /// 3.11/3.12: offset of `current_frame` in the `_PyCFrame` that `frame_at` points to;
    /// `u32::MAX`: `frame_at` holds the frame itself.
    pub cframe_at: u32,
    pub previous_at: u32,
    pub code_at: u32,
    pub instr_at: u32,
    /// Offset of the frame's `owner`; `u32::MAX`: none (3.8–3.11).
    pub owner_at: u32,
    /// Bytes read per frame: `FRAME_READ_BYTES` (3.8–3.10's frame objects), or
    /// `FRAME_READ_BYTES_SHORT` (3.11+: a frame can end soon after its header).
    pub frame_bytes: u32,
    /// Free-threaded builds: where the collecting thread's interpreter lists its threads
    /// (`interp->threads.head`; 0: threads are not counted), and in each thread state the
    /// interpreter (`interp`), the next thread (`next`) and its `state` (1: attached).
    pub threads_at: u32,
    pub interp_at: u32,
    pub next_at: u32,
    pub state_at: u32,
    /// `native_thread_id` in the thread state (published): who each attached thread is.
    pub tid_at: u32,
    pub _pad: u32,
}

/// `GcEvent::running` where the build's threads are not counted.
pub const RUNNING_UNKNOWN: u32 = u32::MAX;
/// Thread states the begin probe walks at most (a longer list gives a lower bound).
pub const MAX_THREADS_WALKED: usize = 256;
/// Threads of the interpreter's list (the newest first) whose ids the begin probe keeps where
/// they are attached (`GcEvent::running_tids`).
pub const MAX_RUNNING_TIDS: usize = 16;

/// One collection as the kernel saw it. The kernel does no interpretation: the agent derives
/// the true generation and the collected/uncollectable counts from `delta` (see the agent's
/// `events` module), falling back to the probe arguments when no stats could be read.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GcEvent {
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) at the begin probe.
    pub start_ns: u64,
    /// `bpf_ktime_get_ns()` at the end probe.
    pub end_ns: u64,
    /// Thread-group id (the process id) in the initial pid namespace.
    pub pid: u32,
    /// Thread id in the initial pid namespace.
    pub tid: u32,
    /// The generation argument as the begin probe saw it (−1 means "auto" on 3.13+).
    pub arg_gen: i64,
    /// The end probe's value: `gc__done`'s argument or the collector's return value (n + m).
    pub result: i64,
    /// `generation_stats[]` at the end minus at the begin.
    pub delta: [GenStats; NUM_GENERATIONS],
    /// `generation_stats[]` at the end: where several threads enter the collector at once, the
    /// agent tells which collections it has already counted by these running totals.
    pub after: [GenStats; NUM_GENERATIONS],
    pub flags: u32,
    /// Free-threaded builds: the other threads attached to the interpreter (running Python) when
    /// the collection began, which its stop-the-world then halted; `RUNNING_UNKNOWN` elsewhere.
    pub running: u32,
    /// The Python stack of the thread that triggered the collection, copied at its start.
    pub stack_status: u32,
    pub stack_depth: u32,
    pub frames: [RawFrame; MAX_FRAMES],
    /// Slot i: the native id of the interpreter's i-th thread if it is one of the `running`
    /// ones, else 0 (the list's first `MAX_RUNNING_TIDS` threads only).
    pub running_tids: [u32; MAX_RUNNING_TIDS],
}

/// Where a probe argument lives, decoded in user space from a USDT argument spec such as
/// `-4@112(%rsp)` or from the calling convention of the probed function.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArgSpec {
    pub kind: u32,
    /// Size in bytes (1, 2, 4 or 8); negative when the value is signed.
    pub size: i32,
    /// Index of the register in the kernel's `struct pt_regs`, as an array of u64.
    pub reg: u32,
    pub _pad: u32,
    /// Displacement for `ARG_MEM`, the value for `ARG_CONST`.
    pub disp: i64,
}

pub const ARG_NONE: u32 = 0;
pub const ARG_REG: u32 = 1;
pub const ARG_MEM: u32 = 2;
pub const ARG_CONST: u32 = 3;

/// Where the target keeps its cumulative per-generation counters. The interpreter may not exist
/// yet when the probes are armed (launch mode), so the kernel follows a pointer on every read
/// instead of being told a fixed address: `*(base_ptr) + offset`, or `offset` alone when
/// `base_ptr` is 0. Up to 3.14 three `GenStats` sit inline there (`generation_stats[]`); from
/// 3.15 (`ring` = 1) there is a pointer to one ring of records per generation, each record
/// holding the cumulative counters after one collection, the ring's `index` naming the newest.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsLocator {
    pub base_ptr: u64,
    pub offset: u64,
    /// 0: no stats are read (unknown layout).
    pub enabled: u32,
    /// 0: inline `generation_stats[3]`; 1: per-generation rings (3.15+).
    pub ring: u32,
    /// Rings only, per generation, from the rings' start: offset of the ring's index (an int8_t),
    /// offset of its first record, and its number of records.
    pub ring_index: [u32; NUM_GENERATIONS],
    pub ring_items: [u32; NUM_GENERATIONS],
    pub ring_slots: [u32; NUM_GENERATIONS],
    pub _pad: u32,
}

/// A ring record: `ts_start, ts_stop`, then the three cumulative `GenStats` counters, then
/// candidates, duration and heap size (3.15's `struct gc_generation_stats`).
pub const RING_RECORD_BYTES: u64 = 64;
pub const RING_COUNTERS_AT: u64 = 16;

/// How the programs handle one traced process: an entry of the kernel's `TARGETS` map, keyed by
/// the process's host tgid. One loaded object serves every target; a process without an entry is
/// ignored (uprobes are per inode, so every process running the same binary may hit them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TargetConfig {
    pub stats: StatsLocator,
    pub begin_arg: ArgSpec,
    pub end_arg: ArgSpec,
    pub stack: StackLocator,
}

/// What is the same for every target, written into the programs' `.rodata` at load time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobalConfig {
    /// Wake the agent up only when at least this many bytes wait in the ring buffer; the agent
    /// drains it on a timer otherwise. Batching wake-ups is what keeps per-event cost low.
    pub wakeup_bytes: u32,
    pub _pad: u32,
}

/// Processes the agent can trace at once (entries of `TARGETS`).
pub const MAX_TARGETS: u32 = 4096;

/// A process called execve (fleet mode's discovery): its host tgid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecEvent {
    pub pid: u32,
    pub _pad: u32,
}

/// Size of the ring that carries exec events: 8 bytes each, drained every 100 ms.
pub const EXEC_RING_BYTES: u32 = 1 << 16;

/// Indices of the kernel's per-CPU `COUNTERS` array.
pub mod counter {
    /// Events dropped because the ring buffer was full.
    pub const LOST: u32 = 0;
    /// End probes with no matching begin (the probe was armed mid-collection).
    pub const UNPAIRED: u32 = 1;
    pub const COUNT: u32 = 2;
}

/// Ring buffer size: an event is 1.2 KiB with its stack, so at 20k collections/s and the agent's
/// 100 ms drain period this is 3× headroom.
pub const RING_BYTES: u32 = 1 << 23;

/// Garbage census: objects one census walks at most (its time budget, `CensusArm::
/// walk_budget_ns`, stops it sooner where the process's own pauses are short).
pub const CENSUS_MAX_WALK: u32 = 1 << 20;
/// The first objects of a census's walk kept in `CENSUS_OBJECTS`, where user space looks for
/// what its samples' words point to.
pub const CENSUS_MAX_OBJECTS: u32 = 4096;
/// Distinct (process, type) pairs tallied at once.
pub const CENSUS_MAX_TYPES: u32 = 4096;
/// The census ring: one small record per census.
pub const CENSUS_RING_BYTES: u32 = 1 << 12;

/// Instances of Python classes whose attributes a census copies (`CensusSample`), at most, and
/// of one class.
pub const CENSUS_MAX_SAMPLES: u32 = 64;
pub const CENSUS_SAMPLES_PER_TYPE: u64 = 16;
/// Words copied of an instance's slots (from 16 bytes in) and of its attribute values.
pub const CENSUS_SAMPLE_WORDS: usize = 8;

/// How a census reaches an instance's attribute values (`CensusArm::values`), per version.
pub mod census_values {
    /// Not read.
    pub const NONE: u32 = 0;
    /// The `__dict__` at the type's `tp_dictoffset`, its `ma_values` (3.8–3.10).
    pub const DICT: u32 = 1;
    /// A pointer at `values_at` to the array, else the managed dict 24 bytes before (3.11).
    pub const POINTER: u32 = 2;
    /// The word at `values_at`: the array minus one where its low bit is set, else the
    /// managed dict (3.12).
    pub const TAGGED: u32 = 3;
    /// The array inline at `values_at` where the type keeps them inline and byte 3 of their
    /// header (`valid`) is set, else the managed dict 24 bytes before (3.13+).
    pub const INLINE: u32 = 4;
}

/// How a census walks a collection's garbage (`CensusArm::garbage`), per build.
pub mod census_garbage {
    /// A `PyGC_Head` list whose objects keep `_PyGC_PREV_MASK_COLLECTING`, its head none
    /// (3.9+).
    pub const FLAGGED_LIST: u32 = 0;
    /// A `PyGC_Head` list whose head is told by lying on the stack near the clear (3.8).
    pub const STACK_LIST: u32 = 1;
    /// The free-threaded worklist through `ob_tid`, its head in the collector's state
    /// (`CensusArm::delete_garbage`).
    pub const WORKLIST: u32 = 2;
}

/// A census the agent armed for one of a process's collections: the next to begin after
/// `armed_ns` (`bpf_ktime_get_ns`) that frees anything with a probed `tp_clear`; how its
/// garbage is walked (`census_garbage`) and its instances' attribute values are reached
/// (`census_values`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CensusArm {
    pub armed_ns: u64,
    pub values: u32,
    pub garbage: u32,
    /// Offset from the object of the values array, or of the word that locates it.
    pub values_at: i64,
    /// Offset from the object of its managed `__dict__` pointer (3.11+).
    pub managed_dict: i64,
    /// How long the walk may hold the collecting thread (ns): past it, the census is of the
    /// objects walked so far (`complete` 0).
    pub walk_budget_ns: u64,
    /// An object header's bytes: 16, or 32 in a free-threaded build, where every field of a
    /// type object is 16 bytes later too. An instance's slots follow its header.
    pub header: u32,
    /// `WORKLIST`: where the collector's `delete_garbage(state)` begins (run-time address), the
    /// one place its census is taken: the worklist whole, the state its argument, whose word
    /// `head_word` is the worklist's head.
    pub delete_garbage: u64,
    pub head_word: u32,
    pub _pad: u32,
}

/// One object a census walked (`CENSUS_OBJECTS`, in list order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CensusObject {
    pub op: u64,
    pub ty: u64,
}

/// An instance of a Python class among the garbage, its attributes as copied: user space
/// names the words that point into the same garbage (a closing edge).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CensusSample {
    pub op: u64,
    pub ty: u64,
    /// The keys of its `__dict__` where it has one (0: the class's cached keys).
    pub keys: u64,
    /// The words from 16 bytes into the object (`__slots__` members are there).
    pub slots: [u64; CENSUS_SAMPLE_WORDS],
    /// Its attribute values array (0s where it has none the census can read).
    pub values: [u64; CENSUS_SAMPLE_WORDS],
    /// For each word of `slots` and of `values`, the type of the object it points to where
    /// that object is of the same garbage and the kernel can tell (a free-threaded build's
    /// objects carry a flag); else 0, and user space looks the word up in `CENSUS_OBJECTS`.
    pub slots_to: [u64; CENSUS_SAMPLE_WORDS],
    pub values_to: [u64; CENSUS_SAMPLE_WORDS],
}

/// A type among a census's garbage, per process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CensusKey {
    pub pid: u32,
    pub _pad: u32,
    /// The type object's address.
    pub ty: u64,
}

/// How many of a type's objects the census walked, and their `ob_size` summed (items, for
/// types whose objects have them: the agent multiplies by the type's item size).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CensusCount {
    pub objects: u64,
    pub items: u64,
}

/// A census done: its types are in `CENSUS_TYPES` under `pid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CensusDone {
    /// `bpf_ktime_get_ns()` when the collection walked began.
    pub start_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub arg_gen: i64,
    /// Objects walked (the first `CENSUS_MAX_OBJECTS` in `CENSUS_OBJECTS`), at most
    /// `CENSUS_MAX_WALK`.
    pub walked: u32,
    /// 1: the walk ran from the first object of the garbage to its end; 0: it began further in
    /// (a clear the census does not probe came first), or stopped at `CENSUS_MAX_WALK`, at
    /// its time budget, or at a link it could not read.
    pub complete: u32,
    /// Instances copied into `CENSUS_SAMPLES`.
    pub samples: u32,
    pub _pad: u32,
    /// How long the walk held the collecting thread (ns): what the census added to the pause.
    pub walk_ns: u64,
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY: plain #[repr(C)] integers with explicit padding fields: every bit pattern is valid.
    unsafe impl aya::Pod for GcEvent {}
    unsafe impl aya::Pod for TargetConfig {}
    unsafe impl aya::Pod for GlobalConfig {}
    unsafe impl aya::Pod for ExecEvent {}
    unsafe impl aya::Pod for CensusArm {}
    unsafe impl aya::Pod for CensusKey {}
    unsafe impl aya::Pod for CensusCount {}
    unsafe impl aya::Pod for CensusDone {}
    unsafe impl aya::Pod for CensusObject {}
    unsafe impl aya::Pod for CensusSample {}
}

#[cfg(test)]
mod tests {
    use core::mem::{offset_of, size_of};

    use super::*;

    /// The agent reads events by this layout; a reordered field would silently shift every value.
    #[test]
    fn event_layout_is_the_documented_abi() {
        assert_eq!(size_of::<GcEvent>(), 200 + 16 * MAX_FRAMES + 4 * MAX_RUNNING_TIDS);
        assert_eq!(offset_of!(GcEvent, pid), 16);
        assert_eq!(offset_of!(GcEvent, arg_gen), 24);
        assert_eq!(offset_of!(GcEvent, delta), 40);
        assert_eq!(offset_of!(GcEvent, after), 112);
        assert_eq!(offset_of!(GcEvent, flags), 184);
        assert_eq!(offset_of!(GcEvent, running), 188);
        assert_eq!(offset_of!(GcEvent, frames), 200);
        assert_eq!(size_of::<StackLocator>(), 80);
        assert_eq!(offset_of!(GcEvent, running_tids), 200 + 16 * MAX_FRAMES);
        assert_eq!(size_of::<ArgSpec>(), 24);
    }
}
