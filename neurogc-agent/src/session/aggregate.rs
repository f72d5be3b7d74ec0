//! Running totals per generation since attach: counts, collected objects, pause histograms.
use hdrhistogram::Histogram;
use neurogc_trace::{Collection, GenSummary, PauseSummary};

#[derive(Clone)]
pub struct GenTotals {
    pub collections: u64,
    pub collected: i64,
    pub uncollectable: i64,
    pub pause_ns: u64,
    pub pauses: Histogram<u64>,
}

impl Default for GenTotals {
    fn default() -> Self {
        GenTotals {
            collections: 0,
            collected: 0,
            uncollectable: 0,
            pause_ns: 0,
            // 1 ns to an hour at 3 significant digits: exact enough for µs pauses and long ones.
            pauses: Histogram::new_with_bounds(1, 3_600 * 1_000_000_000, 3).expect("valid histogram"),
        }
    }
}

#[derive(Default, Clone)]
pub struct Aggregate {
    pub gens: [GenTotals; 3],
    /// Collections whose generation could not be told (no GC state and an "auto" argument).
    pub unknown_gen: GenTotals,
}

impl Aggregate {
    pub fn record(&mut self, c: &Collection) {
        let totals = match c.r#gen {
            0..=2 => &mut self.gens[c.r#gen as usize],
            _ => &mut self.unknown_gen,
        };
        totals.collections += 1;
        totals.collected += c.collected;
        totals.uncollectable += c.uncollectable.max(0);
        totals.pause_ns += c.duration_ns;
        totals.pauses.saturating_record(c.duration_ns.max(1));
    }

    pub fn all(&self) -> impl Iterator<Item = &GenTotals> {
        self.gens.iter().chain(std::iter::once(&self.unknown_gen))
    }

    pub fn collections(&self) -> u64 {
        self.all().map(|g| g.collections).sum()
    }

    pub fn pause_ns(&self) -> u64 {
        self.all().map(|g| g.pause_ns).sum()
    }
}

fn summary(generation: i8, t: &GenTotals) -> GenSummary {
    let q = |q: f64| if t.collections == 0 { 0 } else { t.pauses.value_at_quantile(q) };
    GenSummary {
        r#gen: generation,
        collections: t.collections,
        collected: t.collected,
        uncollectable: t.uncollectable,
        pause_ns: PauseSummary { total: t.pause_ns, p50: q(0.5), p99: q(0.99), max: t.pauses.max() },
    }
}

impl Aggregate {
    pub fn summaries(&self) -> Vec<GenSummary> {
        let mut out: Vec<GenSummary> = (0..3).map(|g| summary(g as i8, &self.gens[g])).collect();
        if self.unknown_gen.collections > 0 {
            out.push(summary(-1, &self.unknown_gen));
        }
        out
    }
}
