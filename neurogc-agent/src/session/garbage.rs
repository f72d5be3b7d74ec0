//! What the collector freed over a run, from its `census` records (`--census`): each type's
//! share of the objects and bytes the censuses walked, the generations it was freed in, and a
//! class's closing edge. `report` tells it; advise mode names a cycle that dominates it. Memory
//! stays bounded whatever the run holds (`MAX_TYPES`).
use std::collections::{BTreeSet, HashMap};

use neurogc_trace::Census;
use serde::Serialize;

/// Types a report tallies; past it, a new type's objects count only in the totals.
const MAX_TYPES: usize = 10_000;
/// Rows a report shows.
pub const SHOWN: usize = 12;

/// Closing edges a report tallies per type; past it, a new edge is not counted.
const MAX_EDGES: usize = 32;

#[derive(Debug, Default)]
pub struct Tally {
    censuses: u64,
    complete: u64,
    objects: u64,
    bytes: u64,
    types: HashMap<String, TypeTally>,
}

#[derive(Debug, Default)]
struct TypeTally {
    objects: u64,
    bytes: u64,
    generations: BTreeSet<i64>,
    /// Instances sampled, and per (attribute, type pointed to) how many had that edge.
    sampled: u64,
    edges: HashMap<(String, String), u64>,
}

/// The censuses of a trace, as the report tells them.
#[derive(Serialize, Clone, Debug)]
pub struct CensusReport {
    pub censuses: u64,
    /// Those that walked their collection's garbage to its end.
    pub complete: u64,
    pub objects: u64,
    pub bytes: u64,
    /// Most objects first, the first `SHOWN`.
    pub types: Vec<CensusRow>,
}

#[derive(Serialize, Clone, Debug)]
pub struct CensusRow {
    pub name: String,
    pub objects: u64,
    pub share_of_objects: f64,
    pub bytes: u64,
    pub share_of_bytes: f64,
    /// The generations asked for in the collections it was freed in (-1: the collector's own
    /// choice, 3.13+).
    pub generations: Vec<i64>,
    /// For a Python class: the attribute of its instances that most often points back into the
    /// garbage (None where none was seen, or the type is no class).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closing_edge: Option<ClosingEdge>,
}

/// "`Tok.parent` → `Tok`, in 97% of sampled `Tok`".
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ClosingEdge {
    pub attr: String,
    pub to: String,
    /// Of the sampled instances, the share that had it.
    pub share: f64,
    pub sampled: u64,
}

/// A type this share of the objects the censuses walked, or more, is what the collector's time
/// goes on: its cycles are worth removing before any setting is tuned.
pub const DOMINANT_SHARE: f64 = 0.4;

impl CensusReport {
    /// The type that is most of the garbage (`DOMINANT_SHARE`), if one is.
    pub fn dominant(&self) -> Option<&CensusRow> {
        self.types.first().filter(|t| t.share_of_objects >= DOMINANT_SHARE)
    }

    /// The closing edge that breaks the dominant cycle: the top type's own, else that of the
    /// first class among the top three that has one (a closure's cells are freed through the
    /// instance that holds the function).
    pub fn closing(&self) -> Option<(&CensusRow, &ClosingEdge)> {
        self.types.iter().take(3).find_map(|t| Some((t, t.closing_edge.as_ref()?)))
    }
}

impl Tally {
    pub fn add(&mut self, c: &Census) {
        self.censuses += 1;
        self.complete += u64::from(c.complete);
        for t in &c.types {
            self.objects = self.objects.saturating_add(t.objects);
            self.bytes = self.bytes.saturating_add(t.bytes);
            if self.types.len() >= MAX_TYPES && !self.types.contains_key(&t.name) {
                continue;
            }
            let e = self.types.entry(t.name.clone()).or_default();
            e.objects = e.objects.saturating_add(t.objects);
            e.bytes = e.bytes.saturating_add(t.bytes);
            e.generations.insert(c.arg_gen);
            e.sampled = e.sampled.saturating_add(t.sampled);
            for edge in &t.edges {
                let key = (edge.attr.clone(), edge.to.clone());
                if e.edges.len() < MAX_EDGES || e.edges.contains_key(&key) {
                    let n = e.edges.entry(key).or_default();
                    *n = n.saturating_add(edge.instances);
                }
            }
        }
    }

    /// None where the trace holds no census.
    pub fn report(&self) -> Option<CensusReport> {
        if self.censuses == 0 {
            return None;
        }
        let share = |part: u64, whole: u64| if whole > 0 { part as f64 / whole as f64 } else { 0.0 };
        let mut types: Vec<CensusRow> = self
            .types
            .iter()
            .map(|(name, t)| CensusRow {
                name: name.clone(),
                objects: t.objects,
                share_of_objects: share(t.objects, self.objects),
                bytes: t.bytes,
                share_of_bytes: share(t.bytes, self.bytes),
                generations: t.generations.iter().copied().collect(),
                closing_edge: t.edges.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(
                    |((attr, to), &n)| ClosingEdge {
                        attr: attr.clone(),
                        to: to.clone(),
                        share: share(n, t.sampled),
                        sampled: t.sampled,
                    },
                ),
            })
            .collect();
        types.sort_by(|a, b| b.objects.cmp(&a.objects).then(a.name.cmp(&b.name)));
        types.truncate(SHOWN);
        Some(CensusReport {
            censuses: self.censuses,
            complete: self.complete,
            objects: self.objects,
            bytes: self.bytes,
            types,
        })
    }
}

#[cfg(test)]
mod tests {
    use neurogc_trace::CensusType;

    use super::*;

    fn census(arg_gen: i64, types: &[(&str, u64, u64)]) -> Census {
        Census {
            ts_ns: 0,
            tid: 1,
            arg_gen,
            objects: types.iter().map(|t| t.1).sum(),
            complete: true,
            types: types
                .iter()
                .map(|&(n, o, b)| CensusType { name: n.into(), objects: o, bytes: b, ..Default::default() })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn shares_are_of_every_census_together() {
        let mut t = Tally::default();
        assert!(t.report().is_none());
        t.add(&census(0, &[("Tok", 60, 1920), ("list", 30, 1200)]));
        t.add(&census(2, &[("Tok", 20, 640), ("dict", 10, 480)]));
        let r = t.report().unwrap();
        assert_eq!((r.censuses, r.objects, r.bytes), (2, 120, 4240));
        assert_eq!(r.types[0].name, "Tok");
        assert!((r.types[0].share_of_objects - 80.0 / 120.0).abs() < 1e-9);
        assert!((r.types[0].share_of_bytes - 2560.0 / 4240.0).abs() < 1e-9);
        assert_eq!(r.types[0].generations, [0, 2]);
        assert_eq!(r.types[0].closing_edge, None);
    }

    #[test]
    fn a_closing_edge_is_the_one_most_sampled_instances_had() {
        let edge = |attr: &str, to: &str, instances| neurogc_trace::CensusEdge {
            attr: attr.into(),
            to: to.into(),
            instances,
        };
        let tok = |sampled, edges| CensusType {
            name: "Tok".into(),
            objects: 60,
            sampled,
            edges,
            ..Default::default()
        };
        let mut t = Tally::default();
        for _ in 0..3 {
            let c = Census {
                types: vec![tok(16, vec![edge("parent", "Tok", 15), edge("kids", "list", 2)])],
                ..census(0, &[])
            };
            t.add(&c);
        }
        t.add(&Census { types: vec![tok(4, vec![edge("kids", "list", 4)])], ..census(0, &[]) });
        let e = t.report().unwrap().types[0].closing_edge.clone().unwrap();
        assert_eq!((e.attr.as_str(), e.to.as_str(), e.sampled), ("parent", "Tok", 52));
        assert!((e.share - 45.0 / 52.0).abs() < 1e-9);
    }
}
