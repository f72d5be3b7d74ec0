//! What the collector freed, from a trace's `census` records (`--census`): each type's share of
//! the objects and bytes the censuses walked, and the generations it was freed in. Memory stays
//! bounded whatever the trace holds (`MAX_TYPES`).
use std::collections::{BTreeSet, HashMap};

use neurogc_trace::Census;
use serde::Serialize;

/// Types a report tallies; past it, a new type's objects count only in the totals.
const MAX_TYPES: usize = 10_000;
/// Rows a report shows.
pub const SHOWN: usize = 12;

#[derive(Default)]
pub struct Tally {
    censuses: u64,
    complete: u64,
    objects: u64,
    bytes: u64,
    types: HashMap<String, (u64, u64, BTreeSet<i64>)>,
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
            e.0 = e.0.saturating_add(t.objects);
            e.1 = e.1.saturating_add(t.bytes);
            e.2.insert(c.arg_gen);
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
            .map(|(name, (objects, bytes, gens))| CensusRow {
                name: name.clone(),
                objects: *objects,
                share_of_objects: share(*objects, self.objects),
                bytes: *bytes,
                share_of_bytes: share(*bytes, self.bytes),
                generations: gens.iter().copied().collect(),
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

/// "gen0, gen1" ("auto" for the collector's own choice).
pub fn generations(gens: &[i64]) -> String {
    gens.iter().map(|&g| crate::sinks::view::census_generation(g)).collect::<Vec<_>>().join(", ")
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
                .map(|&(n, o, b)| CensusType { name: n.into(), objects: o, bytes: b })
                .collect(),
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
        assert_eq!(generations(&r.types[0].generations), "gen0, gen2");
        assert_eq!(generations(&[-1]), "auto");
    }
}
