//! The garbage census (`--census SECS`): every SECS, what one collection frees, by type. The
//! kernel walks the collection's garbage (`census_breakpoint`, or `census_clear` where
//! breakpoints cannot be had) at its first `tp_clear`, or on a free-threaded build at
//! `delete_garbage`; this side picks the functions to break at, arms and closes the
//! breakpoints around one collection, and names what was walked: each type's `tp_name`,
//! objects, and bytes (basic size plus items), and the classes' closing edges (`closing`), read
//! from the target while it lives.
//!
//! Where they go, only ever at a function's first instruction (a uprobe elsewhere would corrupt
//! the target's code): the `tp_clear` of dicts, lists, sets, functions, cells and bound
//! methods, read from the interpreter's exported type objects, and `subtype_clear`, the one of
//! Python classes' instances: named by `.symtab` where the file has one, else read from the
//! types of live instances in the collector's own lists, and taken only where three classes
//! agree on it (`subtype_clear_of`). A collection whose garbage holds none of those armed is
//! not censused. A free-threaded build calls `tp_clear` once an object: there the one site is
//! `delete_garbage`, named by `.symtab`.
use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use neurogc_common::{
    CENSUS_MAX_OBJECTS, CENSUS_MAX_SAMPLES, CensusArm, CensusCount, CensusDone, census_garbage, census_values,
};
use neurogc_trace::{Census as CensusRecord, CensusType};

use crate::{
    interp::{
        AttachPlan,
        elf::Elf,
        frames::CodeLayout,
        layout::GcState,
        versions::{Garbage, Instances},
    },
    kernel::{
        census::{BREAKPOINTS_PER_THREAD, CensusProbe, Site},
        probes::Kernel,
    },
    memory::{read_c_str, read_u64},
    session::closing,
};

/// `PyTypeObject` offsets on the builds censused (3.8-3.15): the first part of the type object
/// has kept its layout since 3.8, 16 bytes later in a free-threaded build (`Census::extra`).
const OB_TYPE: u64 = 8;
const TP_NAME: u64 = 24;
const TP_BASICSIZE: u64 = 32;
const TP_ITEMSIZE: u64 = 40;
const TP_FLAGS: u64 = 168;
const TP_CLEAR: u64 = 192;
/// `Py_TPFLAGS_HEAPTYPE`: a type made at run time (a Python class).
const HEAPTYPE: u64 = 1 << 9;
/// The collector's list heads (`PyGC_Head` and two ints) follow one another 24 bytes apart.
const GENERATION_STRIDE: u64 = 24;
/// Objects read from each list while looking for Python classes' `tp_clear`.
const LIST_READ: usize = 20_000;
/// Classes that must agree on their `tp_clear` before it is probed.
const AGREE: usize = 3;

/// Exported types whose `tp_clear` the census probes from the start, in the order they are
/// tried before a census has weighed them (after Python classes' `subtype_clear`): the
/// collector clears a cycle at its first object in the list, and in the loops measured
/// (docs/census.md) the clears called were instances', cells' (closures), then lists' and
/// dicts'; a function's cycle was broken at its cell.
const BUILTIN_TYPES: [&str; 6] =
    ["PyCell_Type", "PyList_Type", "PyDict_Type", "PyFunction_Type", "PyMethod_Type", "PySet_Type"];

/// How long a census stays armed with no collection to take it before it is let go (the
/// probes cost nothing while the target frees nothing, but only one process is armed at once).
const ARM_PATIENCE: Duration = Duration::from_secs(10);

/// Censused collections remembered, to leave their pauses out of the process's own.
const CENSUSED_KEPT: usize = 16;

/// Longest type name read.
const MAX_NAME: usize = 256;
/// Types whose names are kept, for a census named after its target exited.
const MAX_TYPES_NAMED: usize = 4096;

/// One process's census: what it probes, and when its next is due. The kernel side
/// (`CensusProbe`) is its owner's, loaded once and shared by every process it censuses.
pub struct Census {
    every: Duration,
    pid: i32,
    /// The interpreter file, by its descriptor's name (`_held`).
    file: PathBuf,
    _held: std::fs::File,
    elf: Elf,
    bias: u64,
    /// Run-time addresses of the `tp_clear` functions probed, with how many objects the last
    /// census met of the types they clear: the busiest get breakpoints (four a thread), and
    /// uprobes are attached, and closed, busiest first.
    clears: BTreeMap<u64, u64>,
    /// Each one's place before any census weighed it: `subtype_clear` first, then
    /// `BUILTIN_TYPES` in order.
    ranks: HashMap<u64, usize>,
    /// Armings let go with no census since the last census: the next tries the sites after
    /// those (a thread has four breakpoints, and the busiest may not be the ones a collection
    /// clears first).
    misses: usize,
    /// The longest pause of the process's own, its censused collections left out: a walk may
    /// hold a collection for half of it (`walk_budget`).
    longest_own_ns: u64,
    /// When the collections censused began (Unix ns), the last few: theirs are not its own.
    censused: VecDeque<u64>,
    /// `subtype_clear`'s run-time address, once known.
    subtype_clear: Option<u64>,
    /// The builtins' `tp_clear` have been read (`BUILTIN_TYPES`).
    builtins_read: bool,
    /// `PyType_Type`'s run-time address: a Python class is an instance of it.
    type_type: Option<u64>,
    /// Each type met: its name, basic size and item size, as last read (`type_of`).
    types: HashMap<u64, (String, u64, u64)>,
    /// The interpreter's `.text`, at run time: where a `tp_clear` must lie.
    text: std::ops::Range<u64>,
    /// How a collection holds its garbage (`versions::Row::garbage`).
    garbage: Garbage,
    /// Bytes an object's header has beyond 16 (a free-threaded build's 16): every type
    /// object's field is that much later.
    extra: u64,
    /// A free-threaded collector's `delete_garbage` (run-time address): the one site of its
    /// census.
    delete_garbage: Option<u64>,
    /// Closing edges' names as read so far (`closing::Names`).
    names: closing::Names,
    /// Where instances keep their attributes, and how strings are read: None, no closing edges.
    instances: Option<(Instances, CodeLayout)>,
    next_at: Instant,
}

/// Why a build cannot be censused, or None.
pub fn unsupported(plan: &AttachPlan) -> Option<String> {
    match plan.interpreter.row().map(|r| r.garbage) {
        None | Some(Garbage::Unknown) => Some(format!(
            "where a {} build holds a collection's garbage was never measured: not censused",
            plan.interpreter.version
        )),
        _ => None,
    }
}

impl Census {
    pub fn new(plan: &AttachPlan, every: Duration) -> Result<Census> {
        // The interpreter file as mapped now (a map_files name lasts only as long as its
        // mapping's bounds, which the loader changes), held open: its /proc/self/fd name stays
        // the same inode for every probe attached later.
        let mapped = crate::interp::candidates(plan.pid)?
            .into_iter()
            .find(|m| m.path == plan.file)
            .with_context(|| format!("{} is no longer mapped", plan.file.display()))?;
        let held = mapped.open(plan.pid)?;
        let file = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held)));
        let elf = Elf::open(&file)?;
        let mut census = Census {
            every,
            pid: plan.pid,
            file,
            _held: held,
            elf,
            bias: plan.bias,
            clears: BTreeMap::new(),
            ranks: Default::default(),
            misses: 0,
            longest_own_ns: 0,
            censused: Default::default(),
            subtype_clear: None,
            builtins_read: false,
            type_type: None,
            types: Default::default(),
            text: 0..0,
            garbage: plan.interpreter.row().map_or(Garbage::Unknown, |r| r.garbage),
            extra: plan.interpreter.header_extra(),
            delete_garbage: None,
            names: Default::default(),
            instances: plan.interpreter.row().and_then(|r| r.instances).zip(plan.code.map(|c| c.0)),
            next_at: Instant::now() + every,
        };
        let bias = census.bias;
        census.text = census.elf.section_range(".text").map_or(0..0, |r| r.start + bias..r.end + bias);
        census.type_type = census.elf.symbol_address("PyType_Type").map(|a| a + bias);
        if matches!(census.garbage, Garbage::Worklist { .. }) {
            // Its `tp_clear` run once an object (the worklist holds every object until its
            // turn), too often to break at: a census begun mid-collection trapped 480,000
            // times, and the collection took 3.8 s.
            let found = census.elf.symbol_address("delete_garbage").map(|a| a + bias);
            census.delete_garbage = found.filter(|&a| census.offset_of(a).is_some());
            anyhow::ensure!(
                census.delete_garbage.is_some(),
                "this free-threaded build's .symtab does not name delete_garbage (stripped?), the \
                 one place its census can be taken: not censused"
            );
        }
        if let Some(addr) = census.elf.symbol_address("subtype_clear") {
            census.subtype_clear = Some(addr + bias);
            census.learn_function(addr + bias, 0);
        }
        Ok(census)
    }

    /// A collection of the process's: the longest of its own bounds the census's walk.
    pub fn collection(&mut self, c: &neurogc_trace::Collection) {
        if !self.censused.contains(&c.ts_ns) {
            self.longest_own_ns = self.longest_own_ns.max(c.duration_ns);
        }
    }

    /// How long a walk may hold the collection it censuses: half the longest pause the process
    /// has had of its own, so that a collection and its census together stay within it unless
    /// the collection itself is over half of it (a walk costs 0.11-0.18 µs an object:
    /// docs/census.md). None before any collection was seen.
    fn walk_budget(&self) -> Option<u64> {
        (self.longest_own_ns > 0).then_some(self.longest_own_ns / 2)
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// When its next census is due.
    pub fn next_at(&self) -> Instant {
        self.next_at
    }

    /// Each window: a census is armed when one is due and `probe` has none armed. One armed
    /// for `ARM_PATIENCE` with no collection to take it (an idle process) is let go, and
    /// another process's may be armed. `gc`: the collector's state once located, where Python
    /// classes' `tp_clear` is looked for until found.
    pub fn tick(&mut self, probe: &mut CensusProbe, kernel: &Kernel, gc: Option<GcState>) -> Result<()> {
        match probe.armed() {
            Some((pid, since)) if pid == self.pid && since.elapsed() >= ARM_PATIENCE => {
                probe.disarm(self.pid);
                self.misses += 1;
                self.next_at = Instant::now() + self.every;
                return Ok(());
            }
            Some(_) => return Ok(()),
            None if Instant::now() < self.next_at => return Ok(()),
            None => {}
        }
        let Some(walk_budget_ns) = self.walk_budget() else { return Ok(()) };
        let sites = match self.delete_garbage {
            Some(addr) => self.offset_of(addr).map(|offset| Site { offset, addr }).into_iter().collect(),
            None => self.clear_sites(gc),
        };
        if sites.is_empty() {
            return Ok(());
        }
        let (garbage, head_word) = match self.garbage {
            Garbage::FlaggedList => (census_garbage::FLAGGED_LIST, 0),
            Garbage::StackList => (census_garbage::STACK_LIST, 0),
            Garbage::Worklist { head } => (census_garbage::WORKLIST, head),
            Garbage::Unknown => return Ok(()),
        };
        tracing::debug!("census armed: breakpoints at {sites:x?} in {}", self.file.display());
        let (values, values_at, managed_dict) = self
            .instances
            .map_or((census_values::NONE, 0, 0), |(i, _)| (i.values, i.values_at, i.managed_dict));
        let armed_ns = crate::session::events::Clock::now_monotonic_ns();
        probe.arm(
            kernel,
            self.pid,
            &self.file,
            &sites,
            CensusArm {
                armed_ns,
                values,
                garbage,
                values_at,
                managed_dict,
                walk_budget_ns,
                header: 16 + self.extra as u32,
                delete_garbage: self.delete_garbage.unwrap_or(0),
                head_word,
                _pad: 0,
            },
        )
    }

    /// The `tp_clear` functions to break at, busiest first, the rotation past those armed in
    /// vain. Read once the collector is located, the interpreter is up: a launched one's type
    /// objects may not have been relocated yet when the agent starts (an unrelocated pointer
    /// lies outside `.text`, and is not probed).
    fn clear_sites(&mut self, gc: Option<GcState>) -> Vec<Site> {
        if let Some(gc) = gc {
            if !self.builtins_read {
                self.builtins_read = true;
                for (i, name) in BUILTIN_TYPES.iter().enumerate() {
                    if let Some(addr) = self.elf.symbol_address(name)
                        && let Ok(clear) = read_u64(self.pid, addr.wrapping_add(self.bias + TP_CLEAR))
                    {
                        self.learn_function(clear, 1 + i);
                    }
                }
            }
            if self.subtype_clear.is_none() {
                self.subtype_clear = self.subtype_clear_of(&gc);
                if let Some(clear) = self.subtype_clear {
                    self.learn_function(clear, 0);
                }
            }
        }
        let mut clears: Vec<(u64, u64)> = self.clears.iter().map(|(&a, &w)| (a, w)).collect();
        let rank = |addr: &u64| self.ranks.get(addr).copied().unwrap_or(usize::MAX);
        clears.sort_by(|a, b| b.1.cmp(&a.1).then(rank(&a.0).cmp(&rank(&b.0))).then(a.0.cmp(&b.0)));
        let mut sites: Vec<Site> = clears
            .into_iter()
            .filter_map(|(addr, _)| Some(Site { offset: self.offset_of(addr)?, addr }))
            .collect();
        let turn = (self.misses * BREAKPOINTS_PER_THREAD) % sites.len().max(1);
        sites.rotate_left(turn);
        sites
    }

    /// Its census is done (`d`, from `probe`'s ring): the probes are closed first (each hit
    /// costs the target a trap), then what was walked is named.
    pub fn read(
        &mut self,
        probe: &mut CensusProbe,
        d: &CensusDone,
        to_unix_ns: impl Fn(u64) -> u64,
    ) -> CensusRecord {
        probe.disarm(self.pid);
        self.misses = 0;
        self.next_at = Instant::now() + self.every;
        let tallies = probe.take(self.pid);
        let mut types = self.name(&tallies);
        self.close_edges(probe, d, &mut types);
        let ts_ns = to_unix_ns(d.start_ns);
        if self.censused.len() >= CENSUSED_KEPT {
            self.censused.pop_front();
        }
        self.censused.push_back(ts_ns);
        CensusRecord {
            ts_ns,
            tid: d.tid,
            arg_gen: d.arg_gen,
            objects: u64::from(d.walked),
            complete: d.complete == 1,
            types: types.into_iter().map(|(_, t)| t).collect(),
            walk_ns: d.walk_ns,
        }
    }

    /// The closing edges of the census's Python classes, from what the kernel copied of them.
    fn close_edges(&mut self, probe: &CensusProbe, d: &CensusDone, types: &mut [(u64, CensusType)]) {
        let Some((layout, strings)) = self.instances.as_ref() else { return };
        let (objects, samples) =
            probe.walked(d.walked.min(CENSUS_MAX_OBJECTS), d.samples.min(CENSUS_MAX_SAMPLES));
        let names: HashMap<u64, String> = types.iter().map(|(ty, t)| (*ty, t.name.clone())).collect();
        let type_name = |ty: u64| names.get(&ty).cloned().unwrap_or_else(|| format!("[type at {ty:#x}]"));
        let namer = closing::Namer {
            pid: self.pid,
            layout,
            strings,
            header_extra: self.extra,
            type_name: &type_name,
        };
        let mut edges = closing::edges(&namer, &mut self.names, &objects, &samples);
        for (ty, t) in types.iter_mut() {
            if let Some((sampled, e)) = edges.remove(ty) {
                t.sampled = sampled;
                t.edges = e;
            }
        }
    }

    /// Each type walked (its address), named and sized, most objects first; the `tp_clear` of
    /// each learned, weighed by its objects.
    fn name(&mut self, tallies: &[(u64, CensusCount)]) -> Vec<(u64, CensusType)> {
        for w in self.clears.values_mut() {
            *w = 0;
        }
        let mut types: Vec<(u64, CensusType)> = tallies
            .iter()
            .map(|&(ty, count)| {
                self.weigh(ty, count.objects);
                let (name, basic, item) = self.type_of(ty);
                let bytes = count.objects.saturating_mul(basic).saturating_add(if item > 0 {
                    count.items.saturating_mul(item)
                } else {
                    0
                });
                (ty, CensusType { name, objects: count.objects, bytes, ..Default::default() })
            })
            .collect();
        types.sort_by(|(_, a), (_, b)| b.objects.cmp(&a.objects).then(a.name.cmp(&b.name)));
        types
    }

    /// A type's `tp_name`, basic size and item size, read from the target, else as last read
    /// (a census that comes as the target exits is named after it has gone: the report read
    /// "[type at 0x10ecfa00]" for 30% of a run's garbage), else its address.
    fn type_of(&mut self, ty: u64) -> (String, u64, u64) {
        let word = |off: u64| read_u64(self.pid, ty.wrapping_add(off + self.extra)).ok();
        let name = word(TP_NAME).and_then(|at| read_c_str(self.pid, at, MAX_NAME));
        if let (Some(name), Some(basic), Some(item)) = (name, word(TP_BASICSIZE), word(TP_ITEMSIZE)) {
            if self.types.len() < MAX_TYPES_NAMED || self.types.contains_key(&ty) {
                self.types.insert(ty, (name.clone(), basic, item));
            }
            return (name, basic, item);
        }
        self.types.get(&ty).cloned().unwrap_or_else(|| (format!("[type at {ty:#x}]"), 0, 0))
    }

    /// The census's objects of type `ty` count for the probe on its `tp_clear`, where probed.
    fn weigh(&mut self, ty: u64, objects: u64) {
        if let Ok(clear) = read_u64(self.pid, ty.wrapping_add(TP_CLEAR + self.extra))
            && let Some(w) = self.clears.get_mut(&clear)
        {
            *w = w.saturating_add(objects);
        }
    }

    /// A `tp_clear` to probe (run-time address), where it lies in the interpreter's code, and
    /// its place before any census weighs it.
    fn learn_function(&mut self, addr: u64, rank: usize) {
        if self.offset_of(addr).is_some() {
            self.clears.entry(addr).or_default();
            let r = self.ranks.entry(addr).or_insert(rank);
            *r = (*r).min(rank);
        }
    }

    fn offset_of(&self, addr: u64) -> Option<u64> {
        if !self.text.contains(&addr) {
            return None;
        }
        self.elf.file_offset(addr.wrapping_sub(self.bias))
    }

    /// Python classes' `tp_clear` (`subtype_clear`), from live instances in the collector's
    /// lists: the `tp_clear` of heap types that are instances of `type` itself, taken where
    /// `AGREE` of them share it. Read while the target runs, a list can change under the
    /// reader: each link is read once, a stale one ends that list, and a value read from a
    /// type that was freed meanwhile would not be shared by three.
    fn subtype_clear_of(&self, gc: &GcState) -> Option<u64> {
        let type_type = self.type_type?;
        // Every address here is the target's, read as it changes: none is trusted to add up.
        let read = |addr: u64, off: u64| read_u64(self.pid, addr.wrapping_add(off)).ok();
        let mut seen: BTreeMap<u64, std::collections::BTreeSet<u64>> = BTreeMap::new();
        for g in 0..3 {
            let head = gc.address.wrapping_add(gc.generations).wrapping_add(g * GENERATION_STRIDE);
            let mut node = read(head, 0)? & !3;
            for _ in 0..LIST_READ {
                if node == head || node == 0 {
                    break;
                }
                let ty = read(node, 16 + OB_TYPE).unwrap_or(0);
                if ty != 0
                    && read(ty, OB_TYPE) == Some(type_type)
                    && read(ty, TP_FLAGS).is_some_and(|f| f & HEAPTYPE != 0)
                    && let Some(clear) = read(ty, TP_CLEAR).filter(|c| self.text.contains(c))
                {
                    let types = seen.entry(clear).or_default();
                    types.insert(ty);
                    if types.len() >= AGREE {
                        return Some(clear);
                    }
                }
                let Some(next) = read(node, 0) else { break };
                node = next & !3;
            }
        }
        None
    }
}
