//! Names the frames the kernel copied at a collection's start: (code object, instruction)
//! pointers become (qualified name, file, line), read from the target's memory once per code
//! object and cached; stacks and frames are interned, so a stream carries each once.
use std::collections::HashMap;

use neurogc_common::{FRAME_INSTR_MASK, FRAME_OWNER_SHIFT, GcEvent, MAX_FRAMES, stack};
use neurogc_trace::{FrameDef, Record, StackCounts, StackDef, StackStatus};

use crate::{
    interp::{frames::CodeLayout, lines},
    memory::{i32_at, read_bytes, u64_at},
};

/// Code objects remembered per process (one target; fleet mode keeps fewer); past it the cache
/// starts again (a process that makes code objects without end, `exec` in a loop, cannot grow
/// the agent).
pub const MAX_CODES: usize = 1 << 16;
pub const MAX_CODES_FLEET: usize = 1 << 10;
/// Distinct frames and stacks interned per stream; past it, collections carry no stack.
const MAX_INTERNED: usize = 1 << 20;
/// Longest name or file name read.
const MAX_STRING: u64 = 4096;
/// The name of a frame whose code object could not be read.
pub const UNKNOWN: &str = "[unknown]";
/// Largest line table read.
const MAX_TABLE: u64 = 1 << 16;

/// A code object as read once from the target.
struct Code {
    name: String,
    file: String,
    firstlineno: i32,
    table: Vec<u8>,
    /// Tells this code object from another later at the same address: a hash of its name and
    /// first line (addresses do not tell: a freed object's name and tables are reallocated in
    /// place as often as the object itself).
    identity: u64,
}

/// What is known of one code address.
struct Cached {
    /// None: not a readable code object when last looked at.
    code: Option<Code>,
    /// Counts the code objects seen at this address: part of the frames' interning key.
    generation: u32,
    /// The window whose first use checked it against the target.
    checked: u64,
}

pub struct Resolver {
    pid: i32,
    layout: CodeLayout,
    /// Run-time address of `PyCode_Type`: a frame's code must be one.
    code_type: u64,
    codes: HashMap<u64, Cached>,
    /// By (code address, its generation there, line).
    frame_ids: HashMap<(u64, u32, u32), u32>,
    stack_ids: HashMap<(Vec<u32>, StackStatus), u32>,
    pub counts: StackCounts,
    /// Collections per innermost frame, as (code object, line), since the last `take_top`:
    /// None for no Python frame, (0, 0) for one whose code could not be read.
    leaves: HashMap<Option<(u64, u32)>, u64>,
    max_codes: usize,
    /// Windows seen (`new_window`).
    epoch: u64,
}

impl Resolver {
    /// `max_codes`: code objects cached (a single target can afford more than a fleet's many).
    pub fn new(pid: i32, layout: CodeLayout, code_type: u64, max_codes: usize) -> Resolver {
        Resolver {
            pid,
            layout,
            code_type,
            codes: HashMap::new(),
            frame_ids: HashMap::new(),
            stack_ids: HashMap::new(),
            counts: StackCounts::default(),
            leaves: HashMap::new(),
            max_codes,
            epoch: 0,
        }
    }

    /// The stack id for `ev`'s copy, writing through `emit` the frame and stack records a
    /// reader needs first. None: the build's stacks are not read, or the tables are full.
    pub fn resolve(&mut self, ev: &GcEvent, emit: &mut impl FnMut(Record)) -> Option<u32> {
        let status = match ev.stack_status {
            stack::COMPLETE => StackStatus::Complete,
            stack::TRUNCATED => StackStatus::Truncated,
            stack::NO_THREAD => StackStatus::NoThread,
            stack::READ_FAILED => StackStatus::ReadFailed,
            _ => return None,
        };
        let c = &mut self.counts;
        *match status {
            StackStatus::Complete => &mut c.complete,
            StackStatus::Truncated => &mut c.truncated,
            StackStatus::NoThread => &mut c.no_thread,
            StackStatus::ReadFailed => &mut c.read_failed,
        } += 1;
        let mut frames = Vec::with_capacity(ev.stack_depth as usize);
        let mut leaf = None;
        let layout = self.layout;
        for (i, (code_addr, instr)) in python_frames(&layout, ev).enumerate() {
            let line = self.line(code_addr, instr);
            if i == 0 {
                leaf = Some(leaf_key(code_addr, line));
            }
            if let Some(id) = line.and_then(|line| self.frame(code_addr, line, emit)) {
                frames.push(id);
            } else {
                // Read later than copied: the code object may be gone (the target exited or
                // freed it). The frame stays, unnamed, so the stack keeps its shape.
                self.counts.unresolved_frames += 1;
                frames.extend(self.unknown(emit));
            }
        }
        *self.leaves.entry(leaf).or_default() += 1;
        let key = (frames, status);
        if let Some(&id) = self.stack_ids.get(&key) {
            return Some(id);
        }
        if self.stack_ids.len() >= MAX_INTERNED {
            return None;
        }
        let id = self.stack_ids.len() as u32;
        emit(Record::Stack(StackDef { id, frames: key.0.clone(), status }));
        self.stack_ids.insert(key, id);
        Some(id)
    }

    /// Only the innermost Python frame of `ev`, counted for `take_top` (fleet mode: no records,
    /// no interning, memory bounded by the code objects' cache).
    pub fn count_leaf(&mut self, ev: &GcEvent) {
        if ev.stack_status == stack::UNSUPPORTED {
            return;
        }
        let layout = self.layout;
        let leaf = python_frames(&layout, ev)
            .next()
            .map(|(code_addr, instr)| leaf_key(code_addr, self.line(code_addr, instr)));
        *self.leaves.entry(leaf).or_default() += 1;
    }

    /// Where most collections started since the last call, with their share of them.
    pub fn take_top(&mut self) -> Option<(String, f64)> {
        let total: u64 = self.leaves.values().sum();
        let (&leaf, &n) = self.leaves.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
        let label = match leaf {
            Some((addr, line)) => match self.codes.get(&addr).and_then(|c| c.code.as_ref()) {
                Some(code) => label(&code.name, &code.file, line),
                None => UNKNOWN.to_owned(),
            },
            None => "no Python frame".to_owned(),
        };
        self.leaves.clear();
        Some((label, n as f64 / total as f64))
    }

    /// A new window: each cached code object is checked again on its first use in it.
    pub fn new_window(&mut self) {
        self.epoch += 1;
    }

    fn intern_frame(&mut self, def: FrameDef, key: (u64, u32, u32), emit: &mut impl FnMut(Record)) -> u32 {
        let id = def.id;
        emit(Record::Frame(def));
        self.frame_ids.insert(key, id);
        id
    }

    /// The one frame standing for code that could not be read.
    fn unknown(&mut self, emit: &mut impl FnMut(Record)) -> Option<u32> {
        if let Some(&id) = self.frame_ids.get(&(0, 0, 0)) {
            return Some(id);
        }
        let id = self.frame_ids.len() as u32;
        let def = FrameDef { id, name: UNKNOWN.to_owned(), file: String::new(), line: 0 };
        Some(self.intern_frame(def, (0, 0, 0), emit))
    }

    /// The code object at `addr`, read once and cached. Its identity is checked again on its
    /// first use in each window (one 8-byte read): a code object freed and replaced at the same
    /// address is read anew instead of lending its name to the newcomer.
    fn code(&mut self, addr: u64) -> Option<&Code> {
        let epoch = self.epoch;
        let recheck =
            self.codes.get(&addr).map(|c| (c.checked != epoch, c.code.as_ref().map(|c| c.identity)));
        let stale = match recheck {
            Some((true, known)) => {
                let now = self.identity(addr);
                let c = self.codes.get_mut(&addr)?;
                c.checked = epoch;
                // Unreadable before: try again; read before: read again only if replaced.
                match known {
                    Some(identity) if now == Some(identity) => None,
                    _ => Some(c.generation + 1),
                }
            }
            Some((false, _)) => None,
            None => Some(0),
        };
        if let Some(generation) = stale {
            if self.codes.len() >= self.max_codes {
                self.codes.clear();
            }
            let code = self.read_code(addr);
            self.codes.insert(addr, Cached { code, generation, checked: epoch });
        }
        self.codes.get(&addr)?.code.as_ref()
    }

    /// The line of `instr` in the (cached) code object at `code_addr`. An instruction with no
    /// line of its own is in the prologue (MAKE_CELL, COPY_FREE_VARS: a cell made there can
    /// start a collection): it is placed at the `def` line, not at a line 0 that splits one
    /// function into two sites.
    fn line(&mut self, code_addr: u64, instr: u64) -> Option<u32> {
        let (bytecode, in_units, table) =
            (self.layout.bytecode, self.layout.lasti_in_units, self.layout.table);
        let code = self.code(code_addr)?;
        let offset = match bytecode {
            // An instruction pointer: code units from the bytecode's start.
            Some(at) => instr.checked_sub(code_addr + at)? / 2,
            None if in_units => instr.checked_mul(2)?,
            None => instr,
        };
        Some(
            lines::line_at(table, &code.table, code.firstlineno, offset)
                .unwrap_or(code.firstlineno.max(0) as u32),
        )
    }

    /// The interned frame for `line` of the (cached) code object at `code_addr`.
    fn frame(&mut self, code_addr: u64, line: u32, emit: &mut impl FnMut(Record)) -> Option<u32> {
        let generation = self.codes.get(&code_addr)?.generation;
        let key = (code_addr, generation, line);
        if let Some(&id) = self.frame_ids.get(&key) {
            return Some(id);
        }
        if self.frame_ids.len() >= MAX_INTERNED {
            return None;
        }
        let code = self.codes.get(&code_addr)?.code.as_ref()?;
        let id = self.frame_ids.len() as u32;
        let def = FrameDef { id, name: code.name.clone(), file: code.file.clone(), line };
        Some(self.intern_frame(def, key, emit))
    }

    /// The code object's name and first line, hashed: what `Code::identity` holds.
    fn identity(&self, addr: u64) -> Option<u64> {
        let l = &self.layout;
        let header = read_bytes(self.pid, addr, (l.name + 8).max(l.firstlineno + 4) as usize).ok()?;
        if u64_at(&header, (8 + l.header_extra) as usize) != self.code_type {
            return None;
        }
        let name = self.string(u64_at(&header, l.name as usize))?;
        Some(fingerprint(&name, i32_at(&header, l.firstlineno as usize)))
    }

    fn read_code(&self, addr: u64) -> Option<Code> {
        let l = &self.layout;
        let header = read_bytes(self.pid, addr, (l.linetable + 8).max(l.firstlineno + 4) as usize).ok()?;
        if u64_at(&header, (8 + l.header_extra) as usize) != self.code_type {
            return None;
        }
        let ptr = |off: u64| u64_at(&header, off as usize);
        // Every format's table is a `bytes` object.
        let table = bytes_object(self.pid, ptr(l.linetable), l.header_extra)?;
        let name = self.string(ptr(l.name)).unwrap_or_else(|| "?".to_owned());
        let firstlineno = i32_at(&header, l.firstlineno as usize);
        Some(Code {
            identity: fingerprint(&name, firstlineno),
            name,
            file: self.string(ptr(l.filename)).unwrap_or_else(|| "?".to_owned()),
            firstlineno,
            table,
        })
    }

    fn string(&self, addr: u64) -> Option<String> {
        read_str(self.pid, &self.layout, addr)
    }
}

/// A `str` object's text: compact ASCII or compact UCS-1/2/4 (every code object's names are).
pub fn read_str(pid: i32, layout: &CodeLayout, addr: u64) -> Option<String> {
    let extra = layout.header_extra as usize;
    let head = read_bytes(pid, addr, 36 + extra).ok()?;
    let len = u64_at(&head, 16 + extra);
    let state = u32::from_le_bytes(head[32 + extra..36 + extra].try_into().ok()?);
    let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1 == 1, (state >> 6) & 1 == 1);
    if !compact || len > MAX_STRING || !matches!(kind, 1 | 2 | 4) {
        return None;
    }
    let at = if ascii { layout.ascii_data } else { layout.compact_data };
    let data = read_bytes(pid, addr + at, (len * u64::from(kind)) as usize).ok()?;
    Some(match kind {
        1 => data.iter().map(|&b| char::from(b)).collect(),
        2 => data
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .map(|u| char::from_u32(u.into()).unwrap_or('?'))
            .collect(),
        _ => data
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('?'))
            .collect(),
    })
}

/// The (code object, instruction) of each Python frame of `ev`'s copy, innermost first: shims
/// of the C stack dropped, tags and the owner byte masked off.
fn python_frames<'a>(layout: &'a CodeLayout, ev: &'a GcEvent) -> impl Iterator<Item = (u64, u64)> + 'a {
    let depth = (ev.stack_depth as usize).min(MAX_FRAMES);
    ev.frames[..depth].iter().filter_map(move |raw| {
        let owner = (raw.instr >> FRAME_OWNER_SHIFT) as u8;
        if layout.owner_not_python.is_some_and(|limit| owner >= limit) {
            return None;
        }
        let mut instr = raw.instr & FRAME_INSTR_MASK;
        if layout.bytecode.is_none() {
            instr &= 0xffff_ffff; // `int f_lasti`; the next field shares the word
        }
        Some((raw.code & !layout.tag_mask, instr))
    })
}

/// How `take_top` counts an innermost frame: (code object, line), or (0, 0) when its code
/// could not be read.
fn leaf_key(code_addr: u64, line: Option<u32>) -> (u64, u32) {
    line.map_or((0, 0), |l| (code_addr, l))
}

/// "name (file.py:line)": the file's own name, enough for a live view or a terminal table.
pub fn label(name: &str, file: &str, line: u32) -> String {
    match std::path::Path::new(file).file_name() {
        Some(f) => format!("{name} ({}:{line})", f.to_string_lossy()),
        None => name.to_owned(),
    }
}

fn fingerprint(name: &str, firstlineno: i32) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (name, firstlineno).hash(&mut h);
    h.finish()
}

/// A `bytes` object's content (`ob_size` at 16, the bytes at 32, each `header_extra` later).
fn bytes_object(pid: i32, addr: u64, header_extra: u64) -> Option<Vec<u8>> {
    let size = u64_at(&read_bytes(pid, addr + 16 + header_extra, 8).ok()?, 0);
    if size > MAX_TABLE {
        return None;
    }
    read_bytes(pid, addr + 32 + header_extra, size as usize).ok()
}
