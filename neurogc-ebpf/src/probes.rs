use aya_ebpf::{
    bindings::{BPF_ANY, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, pt_regs},
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user,
        bpf_probe_read_user_buf,
    },
    macros::{map, perf_event, raw_tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::{PerfEventContext, ProbeContext, RawTracePointContext, RetProbeContext},
};
use neurogc_common::{
    ARG_CONST, ARG_MEM, ARG_REG, ArgSpec, CENSUS_MAX_OBJECTS, CENSUS_MAX_SAMPLES, CENSUS_MAX_TYPES,
    CENSUS_MAX_WALK, CENSUS_RING_BYTES, CENSUS_SAMPLE_WORDS, CENSUS_SAMPLES_PER_TYPE, CensusArm, CensusCount,
    CensusDone, CensusKey, CensusObject, CensusSample, EVENT_HAS_STATS, EXEC_RING_BYTES, ExecEvent,
    FRAME_INSTR_MASK, FRAME_OWNER_SHIFT, FRAME_READ_BYTES, GcEvent, GenStats, GlobalConfig, MAX_FRAMES,
    MAX_RUNNING_TIDS, MAX_TARGETS, MAX_THREADS_WALKED, NUM_GENERATIONS, RING_BYTES, RING_COUNTERS_AT,
    RING_RECORD_BYTES, RUNNING_UNKNOWN, RawFrame, StackLocator, StatsLocator, TargetConfig, census_garbage,
    census_values, counter, stack, tstate_via,
};

/// What the kernel is told the programs' license is. It must be GPL-compatible for the helpers
/// the programs call (bpf_probe_read_user is GPL-only); this crate is MIT or GPL-2.0 (its
/// Cargo.toml and LICENSE-GPL-2.0). Without the section aya would declare plain "GPL".
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

/// Filled in by the agent at load time (`EbpfLoader::override_global`).
#[unsafe(no_mangle)]
static CONFIG: GlobalConfig = GlobalConfig { wakeup_bytes: 0, _pad: 0 };

/// The processes being traced, by host tgid, and how (written by the agent as it attaches).
#[map]
static TARGETS: HashMap<u32, TargetConfig> = HashMap::with_max_entries(MAX_TARGETS, 0);

/// Processes that just called execve (fleet mode's discovery).
#[map]
static EXECS: RingBuf = RingBuf::with_byte_size(EXEC_RING_BYTES, 0);

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(RING_BYTES, 0);

/// Collections in progress, by thread id. LRU so that a thread that vanished mid-collection
/// can never fill the map.
#[map]
static INFLIGHT: LruHashMap<u32, Inflight> = LruHashMap::with_max_entries(4096, 0);

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Where `begin` builds a collection's state: it is too large for the 512-byte BPF stack.
#[map]
static SCRATCH: PerCpuArray<Inflight> = PerCpuArray::with_max_entries(1, 0);

/// One frame's bytes, read at once (one helper call per frame instead of one per field).
#[map]
static FRAME_BYTES: PerCpuArray<[u8; FRAME_READ_BYTES]> = PerCpuArray::with_max_entries(1, 0);

#[repr(C)]
#[derive(Clone, Copy)]
struct Inflight {
    start_ns: u64,
    arg_gen: i64,
    /// Re-entries of the collector while this collection runs (3.13+ enters it from finalizers
    /// and returns at once): only the outermost return ends the collection.
    depth: u32,
    flags: u32,
    running: u32,
    _pad: u32,
    stats: [GenStats; NUM_GENERATIONS],
    stack_status: u32,
    stack_depth: u32,
    frames: [RawFrame; MAX_FRAMES],
    running_tids: [u32; MAX_RUNNING_TIDS],
}

#[inline(always)]
fn wakeup_bytes() -> u32 {
    // SAFETY: a plain read of our own .rodata; volatile so the compiler cannot fold the zeros.
    unsafe { core::ptr::read_volatile(&CONFIG.wakeup_bytes) }
}

/// `sched_process_exec` (a raw tracepoint: no tracefs needed): a new program image. A traced process that execs is no longer
/// what its configuration describes (other addresses, maybe another interpreter): its entry goes
/// here, atomically with the exec, so no stale layout is ever followed. The agent re-resolves it.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn process_exec(_ctx: RawTracePointContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let _ = TARGETS.remove(&tgid);
    let _ = EXECS.output::<ExecEvent>(&ExecEvent { pid: tgid, _pad: 0 }, 0);
    0
}

#[uprobe]
pub fn gc_begin(ctx: ProbeContext) -> u32 {
    begin(ctx.regs);
    0
}

/// USDT `gc__done`: a plain uprobe at the note's address.
#[uprobe]
pub fn gc_end(ctx: ProbeContext) -> u32 {
    end(ctx.regs);
    0
}

/// Return of the collector function (symbol mode).
#[uretprobe]
pub fn gc_return(ctx: RetProbeContext) -> u32 {
    end(ctx.regs);
    0
}

/// The current thread's (tgid, tid) and its process's configuration, when it is traced.
#[inline(always)]
fn traced() -> Option<(u32, u32, &'static TargetConfig)> {
    let id = bpf_get_current_pid_tgid();
    let tgid = (id >> 32) as u32;
    // SAFETY: the value stays valid for this program run (RCU); it is only read.
    let cfg = unsafe { TARGETS.get(&tgid) }?;
    Some((tgid, id as u32, cfg))
}

#[inline(always)]
fn begin(regs: *mut pt_regs) {
    let now = unsafe { bpf_ktime_get_ns() };
    let Some((_, tid, cfg)) = traced() else { return };
    if let Some(inflight) = INFLIGHT.get_ptr_mut(&tid) {
        // SAFETY: pointer from the map lookup, valid for this program run.
        unsafe { (*inflight).depth += 1 };
        return;
    }
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's scratch slot, used by nothing else while this program runs.
    let inflight = unsafe { &mut *scratch };
    inflight.start_ns = now;
    inflight.arg_gen = read_arg(regs, &cfg.begin_arg);
    inflight.depth = 0;
    inflight.flags = 0;
    if let Some(stats) = read_stats(&cfg.stats) {
        inflight.stats = stats;
        inflight.flags = EVENT_HAS_STATS;
    }
    copy_stack(&cfg.stack, inflight, regs);
    inflight.running = count_running(&cfg.stack, regs, &mut inflight.running_tids);
    let _ = INFLIGHT.insert(&tid, inflight, BPF_ANY as u64);
}

/// The thread state of the thread running now: on a GIL build the GIL's holder, on a
/// free-threaded one the collector's first argument.
#[inline(always)]
fn thread_state(loc: &StackLocator, regs: *mut pt_regs) -> Option<u64> {
    if loc.tstate_via == tstate_via::COLLECTOR_ARG {
        // %rdi at the collector's entry (user space sets this only for symbol probes).
        return Some(read_reg(regs, REG_RDI));
    }
    // SAFETY (every read below): bpf_probe_read_user faults safely on a bad address.
    let first = unsafe { bpf_probe_read_user(loc.tstate_ptr as *const u64) }.ok()?;
    let tstate = match loc.tstate_via {
        tstate_via::RUNTIME => first,
        tstate_via::GIL_HOLDER if first != 0 => {
            let gil = unsafe { bpf_probe_read_user(first.wrapping_add(loc.gil_at) as *const u64) }.ok()?;
            if gil == 0 {
                return Some(0);
            }
            unsafe { bpf_probe_read_user(gil.wrapping_add(loc.holder_at) as *const u64) }.ok()?
        }
        _ => 0,
    };
    Some(tstate)
}

/// Free-threaded builds: the other thread states attached to the collecting thread's
/// interpreter (running Python, or C code that has not detached) as the collection begins; its
/// stop-the-world halts each of them. The native ids of those among the list's first
/// `MAX_RUNNING_TIDS` go into `tids` (at their place in the list; 0 elsewhere). Pointers and
/// two ints per thread: no interpretation.
#[inline(always)]
fn count_running(loc: &StackLocator, regs: *mut pt_regs, tids: &mut [u32; MAX_RUNNING_TIDS]) -> u32 {
    *tids = [0; MAX_RUNNING_TIDS];
    if loc.tstate_via != tstate_via::COLLECTOR_ARG || loc.threads_at == 0 {
        return RUNNING_UNKNOWN;
    }
    let Some(tstate) = thread_state(loc, regs) else { return RUNNING_UNKNOWN };
    // SAFETY (every read below): bpf_probe_read_user faults safely on a bad address.
    let read = |addr: u64| unsafe { bpf_probe_read_user(addr as *const u64) }.ok();
    let Some(interp) = read(tstate.wrapping_add(u64::from(loc.interp_at))) else { return RUNNING_UNKNOWN };
    let Some(mut t) = read(interp.wrapping_add(u64::from(loc.threads_at))) else { return RUNNING_UNKNOWN };
    let mut running: u32 = 0;
    let mut walked = 0;
    while walked < MAX_THREADS_WALKED && t != 0 {
        if t != tstate {
            let state = unsafe { bpf_probe_read_user(t.wrapping_add(u64::from(loc.state_at)) as *const i32) };
            if state == Ok(1) {
                // Indexed by the walk's step, not by the count: the verifier tracks the step
                // anyway, while an index that depends on the count multiplies its states.
                if let Some(slot) = tids.get_mut(walked) {
                    let tid =
                        unsafe { bpf_probe_read_user(t.wrapping_add(u64::from(loc.tid_at)) as *const u64) };
                    *slot = tid.unwrap_or(0) as u32;
                }
                running += 1;
            }
        }
        let Some(next) = read(t.wrapping_add(u64::from(loc.next_at))) else { return RUNNING_UNKNOWN };
        t = next;
        walked += 1;
    }
    running
}

/// The 8 bytes at `at` in a frame's bytes (0 past the end: a layout never asks for that).
#[inline(always)]
fn field(bytes: &[u8; FRAME_READ_BYTES], at: u32) -> u64 {
    let at = at as usize;
    if at > FRAME_READ_BYTES - 8 {
        return 0;
    }
    // SAFETY: at + 8 <= FRAME_READ_BYTES, checked above.
    unsafe { core::ptr::read_unaligned(bytes.as_ptr().add(at).cast::<u64>()) }
}

/// Copies (code object, instruction) of each Python frame of the thread running now, innermost
/// first: pointers only. Every frame is copied, the owner byte (3.12+) in the instruction's top
/// byte, and user space drops the C stack's shims: one verifier state per step. Never fails the
/// collection's timing.
#[inline(always)]
fn copy_stack(loc: &StackLocator, inflight: &mut Inflight, regs: *mut pt_regs) {
    inflight.stack_depth = 0;
    if loc.tstate_via == tstate_via::NONE {
        inflight.stack_status = stack::UNSUPPORTED;
        return;
    }
    let tstate = match thread_state(loc, regs) {
        Some(0) => {
            inflight.stack_status = stack::NO_THREAD;
            return;
        }
        Some(t) => t,
        None => {
            inflight.stack_status = stack::READ_FAILED;
            return;
        }
    };
    // SAFETY (every read below): bpf_probe_read_user faults safely on a bad address.
    let read = |addr: u64| unsafe { bpf_probe_read_user(addr as *const u64) }.ok();
    let mut frame = read(tstate.wrapping_add(u64::from(loc.frame_at)));
    if loc.cframe_at != u32::MAX
        && let Some(cframe) = frame
        && cframe != 0
    {
        frame = read(cframe.wrapping_add(u64::from(loc.cframe_at)));
    }
    let Some(buf) = FRAME_BYTES.get_ptr_mut(0) else {
        inflight.stack_status = stack::READ_FAILED;
        return;
    };
    let mut status = stack::COMPLETE;
    let mut depth = 0;
    while depth < MAX_FRAMES {
        let f = match frame {
            Some(0) => break,
            Some(f) => f,
            None => {
                status = stack::READ_FAILED;
                break;
            }
        };
        // SAFETY: this CPU's buffer; the helper writes at most its size and faults safely.
        let got = unsafe { bpf_probe_read_user_buf(f as *const u8, &mut *buf) };
        if got.is_err() {
            status = stack::READ_FAILED;
            break;
        }
        // SAFETY: the buffer was just filled; offsets are bounded by `field`.
        let bytes = unsafe { &*buf };
        let (code, instr, previous) =
            (field(bytes, loc.code_at), field(bytes, loc.instr_at), field(bytes, loc.previous_at));
        let owner = if loc.owner_at == u32::MAX { 0 } else { field(bytes, loc.owner_at) & 0xff };
        inflight.frames[depth] =
            RawFrame { code, instr: (instr & FRAME_INSTR_MASK) | (owner << FRAME_OWNER_SHIFT) };
        depth += 1;
        frame = Some(previous);
    }
    if depth == MAX_FRAMES && frame.is_some_and(|f| f != 0) {
        status = stack::TRUNCATED;
    }
    inflight.stack_depth = depth as u32;
    inflight.stack_status = status;
}

#[inline(always)]
fn end(regs: *mut pt_regs) {
    let now = unsafe { bpf_ktime_get_ns() };
    let Some((tgid, tid, cfg)) = traced() else { return };
    let Some(inflight) = INFLIGHT.get_ptr_mut(&tid) else {
        bump(counter::UNPAIRED);
        return;
    };
    // SAFETY: pointer from the map lookup, valid for this program run.
    let inflight = unsafe { &mut *inflight };
    if inflight.depth > 0 {
        inflight.depth -= 1;
        return;
    }
    // The event is written in place in the ring: with its stack it is too large for the stack.
    let Some(mut entry) = EVENTS.reserve::<GcEvent>(0) else {
        let _ = INFLIGHT.remove(&tid);
        bump(counter::LOST);
        return;
    };
    let event = entry.as_mut_ptr();
    // SAFETY: `event` points at the reserved record, ours until submitted.
    let event = unsafe { &mut *event };
    event.start_ns = inflight.start_ns;
    event.end_ns = now;
    event.pid = tgid;
    event.tid = tid;
    event.arg_gen = inflight.arg_gen;
    event.result = read_arg(regs, &cfg.end_arg);
    event.flags = 0;
    event.running = inflight.running;
    event.running_tids = inflight.running_tids;
    let mut g = 0;
    let after = if inflight.flags & EVENT_HAS_STATS != 0 { read_stats(&cfg.stats) } else { None };
    while g < NUM_GENERATIONS {
        event.delta[g] = match &after {
            Some(after) => GenStats {
                collections: after[g].collections - inflight.stats[g].collections,
                collected: after[g].collected - inflight.stats[g].collected,
                uncollectable: after[g].uncollectable - inflight.stats[g].uncollectable,
            },
            None => GenStats { collections: 0, collected: 0, uncollectable: 0 },
        };
        g += 1;
    }
    if let Some(after) = after {
        event.after = after;
        event.flags = EVENT_HAS_STATS;
    } else {
        event.after = [GenStats { collections: 0, collected: 0, uncollectable: 0 }; NUM_GENERATIONS];
    }
    event.stack_status = inflight.stack_status;
    event.stack_depth = inflight.stack_depth;
    event.frames = inflight.frames;
    let _ = INFLIGHT.remove(&tid);
    let wakeup = if EVENTS.query(BPF_RB_AVAIL_DATA as u64) >= wakeup_bytes() as u64 {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    entry.submit(wakeup as u64);
}

#[inline(always)]
fn read_stats(loc: &StatsLocator) -> Option<[GenStats; NUM_GENERATIONS]> {
    if loc.enabled == 0 {
        return None;
    }
    let mut addr = loc.offset;
    if loc.base_ptr != 0 {
        // SAFETY: bpf_probe_read_user faults safely on a bad address.
        let base = unsafe { bpf_probe_read_user(loc.base_ptr as *const u64) }.ok()?;
        if base == 0 {
            return None;
        }
        addr = base.wrapping_add(loc.offset);
    }
    if loc.ring == 0 {
        return unsafe { bpf_probe_read_user(addr as *const [GenStats; NUM_GENERATIONS]) }.ok();
    }
    let rings = unsafe { bpf_probe_read_user(addr as *const u64) }.ok()?;
    if rings == 0 {
        return None;
    }
    let mut out = [GenStats { collections: 0, collected: 0, uncollectable: 0 }; NUM_GENERATIONS];
    let mut g = 0;
    while g < NUM_GENERATIONS {
        let index_at = rings.wrapping_add(loc.ring_index[g] as u64);
        let index = unsafe { bpf_probe_read_user(index_at as *const i8) }.ok()?;
        if index < 0 || index as u32 >= loc.ring_slots[g] {
            return None;
        }
        let record = rings
            .wrapping_add(loc.ring_items[g] as u64)
            .wrapping_add(index as u64 * RING_RECORD_BYTES)
            .wrapping_add(RING_COUNTERS_AT);
        out[g] = unsafe { bpf_probe_read_user(record as *const GenStats) }.ok()?;
        g += 1;
    }
    Some(out)
}

/// `pt_regs` index of %rdi (x86-64), the first integer argument at a function's entry.
const REG_RDI: u32 = 14;
/// `pt_regs` index of %rip: at a uprobe, the probed address (the kernel sets it back from the
/// trap before the handlers run).
const REG_RIP: u32 = 16;
/// `pt_regs` index of %rsp.
const REG_RSP: u32 = 19;

#[inline(always)]
fn read_reg(regs: *mut pt_regs, index: u32) -> u64 {
    if index >= 21 {
        return 0;
    }
    // SAFETY: `regs` is the probe context; the index is bounded by the size of pt_regs.
    unsafe { bpf_probe_read_kernel((regs as *const u64).add(index as usize)) }.unwrap_or(0)
}

#[inline(always)]
fn read_arg(regs: *mut pt_regs, spec: &ArgSpec) -> i64 {
    let raw: u64 = match spec.kind {
        ARG_REG => read_reg(regs, spec.reg),
        ARG_MEM => {
            let addr = read_reg(regs, spec.reg).wrapping_add(spec.disp as u64);
            // SAFETY: faults are caught by the helper.
            unsafe {
                match spec.size.unsigned_abs() {
                    1 => bpf_probe_read_user(addr as *const u8).map(u64::from),
                    2 => bpf_probe_read_user(addr as *const u16).map(u64::from),
                    4 => bpf_probe_read_user(addr as *const u32).map(u64::from),
                    _ => bpf_probe_read_user(addr as *const u64),
                }
            }
            .unwrap_or(0)
        }
        ARG_CONST => return spec.disp,
        // No argument to read: −1, which the agent reports as "generation unknown".
        _ => return -1,
    };
    match spec.size {
        -1 => raw as i8 as i64,
        -2 => raw as i16 as i64,
        -4 => raw as i32 as i64,
        1 => raw as u8 as i64,
        2 => raw as u16 as i64,
        4 => raw as u32 as i64,
        _ => raw as i64,
    }
}

#[inline(always)]
fn bump(index: u32) {
    if let Some(count) = COUNTERS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while we run.
        unsafe { *count += 1 };
    }
}

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// Censuses armed, by process (`CensusArm`); the census program takes its entry.
#[map]
static CENSUS_ARMED: HashMap<u32, CensusArm> = HashMap::with_max_entries(MAX_TARGETS, 0);

/// What the censuses walked, per (process, type); the agent reads and removes its process's.
#[map]
static CENSUS_TYPES: HashMap<CensusKey, CensusCount> = HashMap::with_max_entries(CENSUS_MAX_TYPES, 0);

/// One record per census done, waking the agent at once: it detaches the census probes, whose
/// every hit costs the target a trap.
#[map]
static CENSUS_RING: RingBuf = RingBuf::with_byte_size(CENSUS_RING_BYTES, 0);

/// The last census's objects, in list order: which words of its samples point into its
/// garbage, and to what. One census at a time per agent (one target censuses).
#[map]
static CENSUS_OBJECTS: Array<CensusObject> = Array::with_max_entries(CENSUS_MAX_OBJECTS, 0);

/// The last census's instances of Python classes, their attributes copied.
#[map]
static CENSUS_SAMPLES: Array<CensusSample> = Array::with_max_entries(CENSUS_MAX_SAMPLES, 0);

/// Where a census's walk is (`census_step`), one per CPU.
#[map]
static WALKS: PerCpuArray<Walk> = PerCpuArray::with_max_entries(1, 0);

/// The context `bpf_loop` hands its steps: the walk in its map slot.
#[repr(C)]
struct WalkAt(*mut Walk);

/// Where a census's walk is (`census_step`).
#[repr(C)]
struct Walk {
    op: u64,
    /// The collecting thread's stack pointer at the clear.
    sp: u64,
    tgid: u32,
    walked: u32,
    complete: u32,
    samples: u32,
    arm: CensusArm,
    /// `bpf_ktime_get_ns` past which the walk stops (`CensusArm::walk_budget_ns`).
    deadline: u64,
    /// The run of objects of one type being walked (a collection's garbage comes in runs: a
    /// cycle's objects, a heap page's), tallied into `CENSUS_TYPES` as the type changes: the
    /// type, its objects and items in the run, and its objects walked so far in all.
    run_ty: u64,
    run_objects: u64,
    run_items: u64,
    run_seen: u64,
}

/// The run walked so far, into `CENSUS_TYPES`.
fn flush_run(walk: &mut Walk) {
    if walk.run_objects == 0 {
        return;
    }
    let key = CensusKey { pid: walk.tgid, _pad: 0, ty: walk.run_ty };
    match CENSUS_TYPES.get_ptr_mut(&key) {
        // SAFETY: pointer from the map lookup; a race between CPUs only loses a count.
        Some(c) => unsafe {
            (*c).objects += walk.run_objects;
            (*c).items = (*c).items.wrapping_add(walk.run_items);
        },
        None => {
            let count = CensusCount { objects: walk.run_objects, items: walk.run_items };
            let _ = CENSUS_TYPES.insert(&key, &count, BPF_ANY as u64);
        }
    }
    walk.run_objects = 0;
    walk.run_items = 0;
}

/// `_PyGC_PREV_MASK_COLLECTING`, in a `PyGC_Head`'s `_gc_prev` (3.8+): set on every object of
/// the generations collected, and left set by `move_unreachable` only on the unreachable ones,
/// until they are freed or moved on. The garbage list's head never has it.
const PREV_MASK_COLLECTING: u64 = 2;

/// Whether the `PyGC_Head` at `node`, whose `_gc_prev` word is `prev`, is the garbage list's
/// head, a local of the collector's: the one node without the collecting bit, every object of
/// the garbage keeping it until it is freed (3.9+); on 3.8, which clears the bit first
/// (`STACK_LIST`), the node lying in the frames just above `sp`. Near, not the whole stack:
/// a worker thread's stack ends among the heap's mappings.
fn is_head(arm: &CensusArm, node: u64, prev: u64, sp: u64) -> bool {
    if arm.garbage == census_garbage::FLAGGED_LIST {
        prev & PREV_MASK_COLLECTING == 0
    } else {
        node >= sp && node < sp.wrapping_add(1 << 16)
    }
}

/// `_PyGC_BITS_UNREACHABLE` in a free-threaded object's `ob_gc_bits` (byte 11: byte 3 of its
/// second word): set on every object of the collector's unreachable worklist, cleared as each
/// is popped to be cleared.
const UNREACHABLE_BITS: u64 = 4 << 24;

/// `PyTypeObject`'s `tp_flags` and `tp_dictoffset`, the same in 3.8–3.15 (plus the header's
/// extra bytes in a free-threaded build: `type_field`).
const TP_FLAGS: u64 = 168;
const TP_DICTOFFSET: u64 = 288;

/// A field of the type object at `ty`, `offset` bytes in on a default build.
fn type_field(arm: &CensusArm, ty: u64, offset: u64) -> u64 {
    ty.wrapping_add(offset).wrapping_add(u64::from(arm.header).wrapping_sub(16))
}
/// `Py_TPFLAGS_HEAPTYPE`: a class made by Python code; `Py_TPFLAGS_INLINE_VALUES` (3.13+).
const HEAPTYPE: u64 = 1 << 9;
const INLINE_VALUES: u64 = 1 << 2;
/// `PyDictObject`'s `ma_keys` and `ma_values`, the same in 3.8–3.15 (plus the header's extra
/// bytes in a free-threaded build).
const MA_KEYS: u64 = 32;
const MA_VALUES: u64 = 40;

/// An instance's attribute values array and its dict's keys (0 each where not found), as
/// `arm.values` says they are reached from `op` of type `ty`.
fn values_of(op: u64, ty: u64, flags: u64, arm: &CensusArm) -> (u64, u64) {
    // SAFETY (every read below): bpf_probe_read_user faults safely on a bad address.
    let read = |addr: u64| unsafe { bpf_probe_read_user(addr as *const u64) }.unwrap_or(0);
    let at = op.wrapping_add(arm.values_at as u64);
    let managed = op.wrapping_add(arm.managed_dict as u64);
    let dict = match arm.values {
        census_values::DICT => {
            let offset = read(type_field(arm, ty, TP_DICTOFFSET)) as i64;
            if offset <= 0 {
                return (0, 0);
            }
            read(op.wrapping_add(offset as u64))
        }
        census_values::POINTER => match read(at) {
            0 => read(managed),
            values => return (values, 0),
        },
        census_values::TAGGED => match read(at) {
            w if w & 1 == 1 => return (w.wrapping_add(1), 0),
            w => w,
        },
        census_values::INLINE => {
            // SAFETY: as above; `valid` is byte 3 of the values' header, 8 bytes before them.
            let valid = unsafe { bpf_probe_read_user(at.wrapping_sub(5) as *const u8) }.unwrap_or(0);
            if flags & INLINE_VALUES != 0 && valid != 0 {
                return (at, 0);
            }
            read(managed)
        }
        _ => return (0, 0),
    };
    if dict == 0 {
        return (0, 0);
    }
    let extra = u64::from(arm.header).wrapping_sub(16);
    (read(dict.wrapping_add(MA_VALUES + extra)), read(dict.wrapping_add(MA_KEYS + extra)))
}

/// A census's copy of an instance of a Python class: its slots and its attribute values.
fn sample(walk: &mut Walk, op: u64, ty: u64, flags: u64) {
    let Some(s) = CENSUS_SAMPLES.get_ptr_mut(walk.samples) else { return };
    walk.samples += 1;
    let (values, keys) = values_of(op, ty, flags, &walk.arm);
    // SAFETY: an array slot of this agent's, written by one census at a time; the reads fault
    // safely, and a failed one leaves zeros.
    unsafe {
        (*s).op = op;
        (*s).ty = ty;
        (*s).keys = keys;
        zero(&mut (*s).slots_to);
        zero(&mut (*s).values_to);
        let slots = op.wrapping_add(u64::from(walk.arm.header));
        if bpf_probe_read_user_buf(slots as *const u8, words_as_bytes(&mut (*s).slots)).is_err() {
            zero(&mut (*s).slots);
        }
        if values == 0
            || bpf_probe_read_user_buf(values as *const u8, words_as_bytes(&mut (*s).values)).is_err()
        {
            zero(&mut (*s).values);
        }
    }
}

/// Words a sample copied: its slots', then its values'.
const SAMPLE_WORDS: u32 = 2 * CENSUS_SAMPLE_WORDS as u32;

/// One word of the samples (`index`: sample, then word): the type of what it points to, where
/// that is of the same garbage. Free-threaded only: every object of the worklist keeps its
/// unreachable flag, and every object has the flag's byte.
#[inline(never)]
unsafe extern "C" fn point_step(index: u64, _walk: *mut core::ffi::c_void) -> i64 {
    let (i, j) = ((index / u64::from(SAMPLE_WORDS)) as u32, (index % u64::from(SAMPLE_WORDS)) as usize);
    let Some(s) = CENSUS_SAMPLES.get_ptr_mut(i) else { return 1 };
    // SAFETY: an array slot of this agent's, written by one census at a time.
    let (word, to) = unsafe {
        if j < CENSUS_SAMPLE_WORDS {
            ((*s).slots[j], &raw mut (*s).slots_to[j])
        } else {
            let j = j - CENSUS_SAMPLE_WORDS;
            ((*s).values[j % CENSUS_SAMPLE_WORDS], &raw mut (*s).values_to[j % CENSUS_SAMPLE_WORDS])
        }
    };
    // SAFETY: bpf_probe_read_user faults safely on a bad address.
    let head = if word == 0 { None } else { unsafe { bpf_probe_read_user(word as *const [u64; 4]) }.ok() };
    let ty = match head {
        Some(h) if h[1] & UNREACHABLE_BITS != 0 => h[3],
        _ => 0,
    };
    // SAFETY: as above.
    unsafe { core::ptr::write_volatile(to, ty) };
    0
}

/// Word by word: an array assignment compiles to a byte-wise `memset`, a loop the verifier
/// walks 64 times over on every path through the census's step.
fn zero(words: &mut [u64; CENSUS_SAMPLE_WORDS]) {
    for w in words.iter_mut() {
        // SAFETY: a word of our own; volatile keeps it a word store.
        unsafe { core::ptr::write_volatile(w, 0) };
    }
}

fn words_as_bytes(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: the same memory, as bytes.
    unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), core::mem::size_of_val(words)) }
}

/// One object of a census's walk: its type tallied, then on to the next (1 stops the loop).
#[inline(never)]
unsafe extern "C" fn census_step(_index: u64, walk: *mut core::ffi::c_void) -> i64 {
    // SAFETY: bpf_loop hands back the pointer it was given, to the caller's `WalkAt`, which
    // points to this CPU's `WALKS` slot.
    let walk = unsafe { &mut *(*walk.cast::<WalkAt>()).0 };
    // SAFETY (every read below): bpf_probe_read_user faults safely on a bad address.
    let read = |addr: u64| unsafe { bpf_probe_read_user(addr as *const u64) }.ok();
    let op = walk.op;
    let worklist = walk.arm.garbage == census_garbage::WORKLIST;
    // One read for the object's header (after its `PyGC_Head` where it has one): the next
    // link, the flags, the type and `ob_size` (a value for every object, meaningful only where
    // the type has items). An object at the very end of its memory has no `ob_size` to read:
    // the three words alone then.
    let base = if worklist { op } else { op.wrapping_sub(16) };
    // (Read as a value, not into a zeroed buffer: the verifier walks a `memset` byte by byte on
    // every path.)
    // SAFETY: bpf_probe_read_user faults safely on a bad address.
    let head = match unsafe { bpf_probe_read_user(base as *const [u64; 5]) } {
        Ok(head) => head,
        Err(_) => match (read(base), read(base.wrapping_add(8)), read(base.wrapping_add(24))) {
            (Some(link), Some(flags), Some(ty)) => [link, flags, 0, ty, 0],
            _ => return 1,
        },
    };
    // Free-threaded: (`ob_tid`, the word of `ob_gc_bits`, `ob_ref_shared`, `ob_type`,
    // `ob_size`); else (`_gc_next`, `_gc_prev`, `ob_refcnt`, `ob_type`, `ob_size`).
    let [link, flags, _, ty, items] = head;
    let next = if worklist {
        // Every object on the worklist has the flag: one without it is none of this garbage.
        if flags & UNREACHABLE_BITS == 0 {
            return 1;
        }
        link
    } else {
        if is_head(&walk.arm, base, flags, walk.sp) {
            walk.complete = 1;
            return 1;
        }
        (link & !3).wrapping_add(16)
    };
    if ty != walk.run_ty || walk.run_objects == 0 {
        flush_run(walk);
        let key = CensusKey { pid: walk.tgid, _pad: 0, ty };
        // SAFETY: pointer from the map lookup, only read.
        walk.run_seen = unsafe { CENSUS_TYPES.get(&key) }.map_or(0, |c| c.objects);
        walk.run_ty = ty;
    }
    walk.run_objects += 1;
    walk.run_items = walk.run_items.wrapping_add(items);
    walk.run_seen += 1;
    let seen = walk.run_seen;
    if let Some(o) = CENSUS_OBJECTS.get_ptr_mut(walk.walked) {
        // SAFETY: an array slot of this agent's, written by one census at a time.
        unsafe { *o = CensusObject { op, ty } };
    }
    // The first few instances of each Python class: their attributes, for the closing edge
    // (the type's flags read only for those).
    if seen <= CENSUS_SAMPLES_PER_TYPE && walk.samples < CENSUS_MAX_SAMPLES {
        let flags = read(type_field(&walk.arm, ty, TP_FLAGS)).unwrap_or(0);
        if flags & HEAPTYPE != 0 {
            sample(walk, op, ty, flags);
        }
    }
    walk.walked += 1;
    if worklist && next == 0 {
        walk.complete = 1;
        return 1;
    }
    // The clock every 32 objects (a read costs as much as a step's other helpers).
    // SAFETY: a helper with no arguments.
    if walk.walked % 32 == 0 && unsafe { bpf_ktime_get_ns() } > walk.deadline {
        return 1;
    }
    walk.op = next;
    0
}

/// A garbage census, at the start of its collection's clearing, where the garbage is whole.
/// - In a list (3.8–3.15), at the first `tp_clear`, whose object is `op`: the collector clears
///   the first object left in its list again and again (each clear frees the rest of that
///   cycle). From `op`, the `PyGC_Head` links (16 bytes before each object) run through every
///   object the collection frees, back to the list's head, a local of the collector's (told
///   from the objects by its flags: a stack address told it for the main thread only, a worker
///   thread's stack lying among the heap's mappings).
/// - In a worklist (free-threaded), at `delete_garbage(state)`, `op` its argument: from the
///   head in the state, each object's `ob_tid` links the next (each `tp_clear` is called once
///   an object there, so the breakpoint is here and not on them).
///
/// Each object's type is tallied; nothing is written to the target, and the walk is bounded
/// in objects (`CENSUS_MAX_WALK`) and in time (`CensusArm::walk_budget_ns`).
#[inline(always)]
fn census(op: u64, sp: u64, ip: u64) {
    let Some((tgid, tid, _)) = traced() else { return };
    // SAFETY: pointers from map lookups, valid for this program run; only read.
    let Some(arm) = (unsafe { CENSUS_ARMED.get(&tgid) }).copied() else { return };
    let Some(inflight) = (unsafe { INFLIGHT.get(&tid) }) else { return };
    // A collection begun before the census was armed may have freed part of its garbage.
    if inflight.start_ns < arm.armed_ns {
        return;
    }
    // Whether `op` is the garbage's first (the census is then whole); a clear called on
    // anything else during the collection, by a finalizer say, leaves the arming to the next.
    let (first, op) = if arm.garbage == census_garbage::WORKLIST {
        // Nothing popped yet: the walk begins at the head (a collection that frees nothing
        // leaves the arming to the next).
        if ip != arm.delete_garbage {
            return;
        }
        let head_at = op.wrapping_add(u64::from(arm.head_word) * 8);
        // SAFETY: bpf_probe_read_user faults safely on a bad address.
        match unsafe { bpf_probe_read_user(head_at as *const u64) } {
            Ok(head) if head != 0 => (true, head),
            _ => return,
        }
    } else {
        // SAFETY (both reads): bpf_probe_read_user faults safely on a bad address.
        let read = |addr: u64| unsafe { bpf_probe_read_user(addr as *const u64) }.ok();
        // An object of the garbage, and whether it is the list's first: the node before it
        // is the list's head, the one without the collecting bit.
        let flagged = arm.garbage == census_garbage::FLAGGED_LIST;
        let Some(prev) = read(op.wrapping_sub(8)).filter(|p| !flagged || p & PREV_MASK_COLLECTING != 0)
        else {
            return;
        };
        let node = prev & !3;
        (read(node.wrapping_add(8)).is_some_and(|pp| is_head(&arm, node, pp, sp)), op)
    };
    let (start_ns, arg_gen) = (inflight.start_ns, inflight.arg_gen);
    let _ = CENSUS_ARMED.remove(&tgid);
    // SAFETY: a helper with no arguments.
    let walk_from = unsafe { bpf_ktime_get_ns() };
    let deadline = walk_from.saturating_add(arm.walk_budget_ns);
    // The walk's state in a map, not on the stack: the verifier follows a loop's callback
    // until its state repeats, and stack counters it knows exactly (objects walked, a run's
    // length) never repeat. What it reads from a map is any value.
    let Some(walk) = WALKS.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's slot; programs do not nest on a CPU.
    let walk = unsafe { &mut *walk };
    *walk = Walk {
        op,
        sp,
        tgid,
        walked: 0,
        complete: 0,
        samples: 0,
        arm,
        deadline,
        run_ty: 0,
        run_objects: 0,
        run_items: 0,
        run_seen: 0,
    };
    // bpf_loop (whose context must be on the stack): the verifier checks the step once, not
    // once per object.
    let mut at = WalkAt(&raw mut *walk);
    // SAFETY: a helper call with a static callback and a pointer to our own stack.
    unsafe {
        aya_ebpf::helpers::bpf_loop(
            CENSUS_MAX_WALK,
            census_step as *mut core::ffi::c_void,
            (&raw mut at).cast(),
            0,
        );
    }
    flush_run(walk);
    if arm.garbage == census_garbage::WORKLIST {
        // SAFETY: as above.
        unsafe {
            aya_ebpf::helpers::bpf_loop(
                walk.samples * SAMPLE_WORDS,
                point_step as *mut core::ffi::c_void,
                (&raw mut at).cast(),
                0,
            );
        }
    }
    let (walked, complete, samples) = (walk.walked, walk.complete, walk.samples);
    // SAFETY: as above.
    let walk_ns = unsafe { bpf_ktime_get_ns() }.saturating_sub(walk_from);
    // Whole only from the garbage's first object: where an object whose `tp_clear` is not
    // probed came first, its clear has freed its cycle already, and what is left is a sample.
    let complete = complete & u32::from(first);
    let done = CensusDone { start_ns, pid: tgid, tid, arg_gen, walked, complete, samples, _pad: 0, walk_ns };
    let _ = CENSUS_RING.output::<CensusDone>(&done, BPF_RB_FORCE_WAKEUP as u64);
}

/// The census at a uprobe on a `tp_clear` function (where hardware breakpoints are not to be
/// had): the probes trap on every call until the agent has closed them, 0.1 s each.
#[uprobe]
pub fn census_clear(ctx: ProbeContext) -> u32 {
    census(read_reg(ctx.regs, REG_RDI), read_reg(ctx.regs, REG_RSP), read_reg(ctx.regs, REG_RIP));
    0
}

/// The census at a hardware breakpoint on a `tp_clear` function, on one of the target's
/// threads: the agent disables it as soon as the census is done, at once.
#[perf_event]
pub fn census_breakpoint(ctx: PerfEventContext) -> u32 {
    // SAFETY: the context's registers are the thread's as it hit the breakpoint; the verifier
    // rewrites these field loads into reads of them.
    let (op, sp, ip) = unsafe { ((*ctx.ctx).regs.rdi, (*ctx.ctx).regs.rsp, (*ctx.ctx).regs.rip) };
    census(op, sp, ip);
    0
}
