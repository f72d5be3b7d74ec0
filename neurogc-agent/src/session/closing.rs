//! A census's closing edges: for instances of Python classes among the garbage, which attribute
//! points to another object of the same garbage ("`Tok.parent` → `Tok`"). That is where a
//! weakref or a `del` breaks the cycle.
//!
//! The kernel copied, for the first instances of each class it walked, the words of their
//! slots and of their attribute values array (`CensusSample`), and the address and type of
//! every object walked: no more is read from the garbage, which is freed by the time this
//! runs. Names come from what lives on: a slot's from its class's member table (`tp_members`),
//! an attribute's from the keys its values are indexed by (its `__dict__`'s, else the class's
//! cached keys), as each build lays them out (`versions::Instances`).
use std::collections::{BTreeMap, HashMap, HashSet};

use neurogc_common::{CENSUS_SAMPLE_WORDS, CensusObject, CensusSample};
use neurogc_trace::CensusEdge;

use crate::{
    interp::{frames::CodeLayout, versions::Instances},
    memory::{i32_at, i64_at, read_bytes, read_c_str, read_u64, u64_at},
    session::stacks::read_str,
};

/// `PyTypeObject.tp_members`, the same in 3.8–3.15 (`Namer::header_extra` later in a
/// free-threaded build); a `PyMemberDef` is (name, type, offset, flags, doc), 40 bytes.
const TP_MEMBERS: u64 = 240;
const MEMBER_BYTES: usize = 40;
/// Member types that hold an object (`Py_T_OBJECT`, `Py_T_OBJECT_EX`): `__slots__` are these.
const OBJECT_MEMBERS: [i32; 2] = [6, 16];
/// Members read of one class at most.
const MAX_MEMBERS: usize = 64;
/// Longest member name read (a member's name is a C string).
const MAX_MEMBER_NAME: usize = 128;
/// Edges kept per class, most instances first.
const MAX_EDGES: usize = 3;

/// A class's instances sampled, and per (attribute, type pointed to) how many had that edge.
type ClassTally = (u64, BTreeMap<(String, u64), u64>);

/// Names read from the target, kept across censuses: a census read as the target exits (a
/// test's second census came after `os._exit`, and named no edge) names its edges from what
/// earlier ones read. Only what was read is kept, and at most `MAX_KEPT` of each.
#[derive(Default)]
pub struct Names {
    /// A class's object members: (word, name).
    members: HashMap<u64, Vec<(usize, String)>>,
    /// A class's cached keys object.
    cached_keys: HashMap<u64, u64>,
    /// A keys object's names, in entry order.
    keys: HashMap<u64, Vec<String>>,
}

const MAX_KEPT: usize = 4096;

/// `map[key]`, read by `read` the first time a census asks for it (`first`: a class's keys can
/// be replaced between censuses) and kept; what was kept where that read failed.
fn kept<V: Clone>(
    map: &mut HashMap<u64, V>,
    key: u64,
    first: bool,
    read: impl FnOnce() -> Option<V>,
) -> Option<V> {
    if first && let Some(v) = read() {
        if map.len() >= MAX_KEPT && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, v);
    }
    map.get(&key).cloned()
}

/// Where names are read from, for one census.
pub struct Namer<'a> {
    pub pid: i32,
    pub layout: &'a Instances,
    pub strings: &'a CodeLayout,
    /// Bytes an object's header has beyond 16 (16 in a free-threaded build): a type object's
    /// fields, and an instance's slots, are that much later.
    pub header_extra: u64,
    /// A type's name, as the census named it.
    pub type_name: &'a dyn Fn(u64) -> String,
}

/// Per class (type address): instances sampled, and the edges they had.
pub fn edges(
    namer: &Namer,
    names: &mut Names,
    objects: &[CensusObject],
    samples: &[CensusSample],
) -> HashMap<u64, (u64, Vec<CensusEdge>)> {
    let garbage: HashMap<u64, u64> = objects.iter().map(|o| (o.op, o.ty)).collect();
    let mut tally: HashMap<u64, ClassTally> = HashMap::new();
    // Classes and keys read in this census: once each, however many of their instances.
    let (mut classes, mut keys_read) = (HashSet::new(), HashSet::new());
    for s in samples {
        let (sampled, counts) = tally.entry(s.ty).or_default();
        *sampled += 1;
        let mut found: Vec<(String, u64)> = Vec::new();
        let first = classes.insert(s.ty);
        let slots =
            kept(&mut names.members, s.ty, first, || Some(slot_names(namer, s.ty)).filter(|v| !v.is_empty()));
        // What a word points to, where it is of the same garbage: as the kernel told it, else
        // among the objects it kept.
        let to = |word: u64, told: u64| (told != 0).then_some(told).or_else(|| garbage.get(&word).copied());
        for (word, name) in slots.iter().flatten() {
            if let Some(to) = to(s.slots[*word], s.slots_to[*word]) {
                found.push((name.clone(), to));
            }
        }
        let keys_at = match s.keys {
            0 => kept(&mut names.cached_keys, s.ty, first, || {
                read_u64(namer.pid, s.ty.wrapping_add(namer.layout.cached_keys)).ok().filter(|&k| k != 0)
            })
            .unwrap_or(0),
            k => k,
        };
        if keys_at != 0 {
            let keys = kept(&mut names.keys, keys_at, keys_read.insert(keys_at), || {
                Some(key_names(namer, keys_at)).filter(|v| !v.is_empty())
            });
            for (i, (&value, &told)) in s.values.iter().zip(&s.values_to).enumerate() {
                if let (Some(to), Some(name)) = (to(value, told), keys.as_ref().and_then(|k| k.get(i))) {
                    found.push((name.clone(), to));
                }
            }
        }
        found.sort();
        found.dedup();
        for edge in found {
            *counts.entry(edge).or_default() += 1;
        }
    }
    tally
        .into_iter()
        .map(|(ty, (sampled, counts))| {
            let mut edges: Vec<CensusEdge> = counts
                .into_iter()
                .map(|((attr, to), instances)| CensusEdge { attr, to: (namer.type_name)(to), instances })
                .collect();
            edges.sort_by(|a, b| b.instances.cmp(&a.instances).then(a.attr.cmp(&b.attr)));
            edges.truncate(MAX_EDGES);
            (ty, (sampled, edges))
        })
        .collect()
}

/// A class's object members in the words the kernel copied: (word, name).
fn slot_names(namer: &Namer, ty: u64) -> Vec<(usize, String)> {
    let Ok(table) = read_u64(namer.pid, ty.wrapping_add(TP_MEMBERS + namer.header_extra)) else {
        return Vec::new();
    };
    if table == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    // One definition at a time: the table ends where its memory may.
    for i in 0..MAX_MEMBERS as u64 {
        let Ok(def) = read_bytes(namer.pid, table + i * MEMBER_BYTES as u64, MEMBER_BYTES) else { break };
        let def = def.as_slice();
        let name = u64_at(def, 0);
        if name == 0 {
            break;
        }
        let offset = i64_at(def, 16);
        // The kernel copied the words after the header.
        let word = (offset - 16 - namer.header_extra as i64) / 8;
        if !OBJECT_MEMBERS.contains(&i32_at(def, 8))
            || offset % 8 != 0
            || !(0..CENSUS_SAMPLE_WORDS as i64).contains(&word)
        {
            continue;
        }
        if let Some(name) = read_c_str(namer.pid, name, MAX_MEMBER_NAME) {
            out.push((word as usize, name));
        }
    }
    out
}

/// A keys object's key names, in entry order (the index of each value in a values array), as
/// far as the kernel copied values.
fn key_names(namer: &Namer, keys: u64) -> Vec<String> {
    let l = namer.layout;
    let Ok(head) = read_bytes(namer.pid, keys, 40) else { return Vec::new() };
    let (entries, count) = if l.log2_indices {
        let index_bytes = 1u64 << head[9].min(32);
        (keys + 32 + index_bytes, u64_at(&head, 24))
    } else {
        let size = u64_at(&head, 8);
        let width = match size {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            0x1_0000..=0xffff_ffff => 4,
            _ => 8,
        };
        (keys + 40 + size.saturating_mul(width), u64_at(&head, 32))
    };
    // The key is the entry's first word, after the hash where there is one.
    let key_at = if l.entry_bytes == 24 { 8 } else { 0 };
    (0..count.min(CENSUS_SAMPLE_WORDS as u64))
        .map(|i| {
            read_u64(namer.pid, entries + i * l.entry_bytes + key_at)
                .ok()
                .filter(|&k| k != 0)
                .and_then(|k| read_str(namer.pid, namer.strings, k))
                .unwrap_or_else(|| format!("[attribute {i}]"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::versions::{Build, row};

    /// A class of this process's memory, as a free-threaded build lays it out: `tp_members`
    /// (16 bytes later than a default build's) names one object slot, `parent`, right after
    /// the 32-byte header.
    struct FakeClass {
        ty: Vec<u64>,
        _members: Vec<u64>,
        _name: std::ffi::CString,
    }

    fn fake_class() -> FakeClass {
        let name = std::ffi::CString::new("parent").unwrap();
        // (name, type Py_T_OBJECT_EX, offset 32, flags, doc), then the table's end.
        let members = vec![name.as_ptr() as u64, 16, 32, 0, 0, 0, 0, 0, 0, 0];
        let mut ty = vec![0u64; 128];
        ty[(TP_MEMBERS as usize + 16) / 8] = members.as_ptr() as u64;
        FakeClass { ty, _members: members, _name: name }
    }

    #[test]
    fn an_edge_the_kernel_told_is_named_past_the_objects_kept() {
        // A free-threaded census walks more objects than it keeps: the kernel tells each
        // copied word's object's type where that object is of the garbage (its flag), and
        // that is named though the object is not among those kept.
        let class = fake_class();
        let ty = class.ty.as_ptr() as u64;
        let r = row(13, Build::FreeThreaded).unwrap();
        let (layout, strings) = (r.instances.unwrap(), r.code.unwrap());
        let namer = Namer {
            pid: std::process::id() as i32,
            layout: &layout,
            strings: &strings,
            header_extra: 16,
            type_name: &|t| if t == ty { "Tok".to_owned() } else { format!("{t:#x}") },
        };
        let mut sample = CensusSample { op: 0x1000, ty, ..Default::default() };
        sample.slots[0] = 0x2000;
        let told = |slots_to: [u64; CENSUS_SAMPLE_WORDS]| {
            let mut told = sample;
            told.slots_to = slots_to;
            told
        };
        let mut names = Names::default();
        let found = edges(&namer, &mut names, &[], &[told([ty, 0, 0, 0, 0, 0, 0, 0])]);
        let (sampled, found) = &found[&ty];
        assert_eq!(*sampled, 1);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].attr.as_str(), found[0].to.as_str(), found[0].instances), ("parent", "Tok", 1));
        // Not told, and not among the objects kept: no edge.
        let none = edges(&namer, &mut names, &[], &[told([0; 8])]);
        assert!(none[&ty].1.is_empty(), "{:?}", none[&ty]);
        // Not told, but kept: named from the objects, as on a default build.
        let kept = [CensusObject { op: 0x2000, ty }];
        let found = edges(&namer, &mut names, &kept, &[told([0; 8])]);
        assert_eq!(found[&ty].1.len(), 1);
    }
}
