//! One fleet target's numbers, as every sink reads them: totals since attach, the last window,
//! and a short history of its GC share.
use std::collections::VecDeque;

use hdrhistogram::Histogram;
use neurogc_trace::Collection;

/// Windows of GC-share history kept (the live view's sparkline).
pub const HISTORY: usize = 120;

pub struct Stats {
    pub collections: u64,
    /// Pauses since attach, 1 µs to 100 s at 2 significant digits (≈ 10 KiB: a fleet holds
    /// hundreds of these).
    pub pauses: Histogram<u32>,
    /// Full collections' pauses alone: under 1% of collections, they are the pauses users feel,
    /// and an all-generation p99 never sees them.
    pub full_pauses: Histogram<u32>,
    /// The longest pause since attach, exactly (ns).
    max_ns: u64,
    window_collections: u64,
    window_pause_ns: u64,
    /// Last closed window: share of wall time in GC, and collections per second.
    pub gc_share: f64,
    pub per_s: f64,
    /// GC share of each window, oldest first, in per-mille (what the sparkline draws).
    pub history: VecDeque<u64>,
    pub thresholds: Option<[i32; 3]>,
    /// Where most of the last window's collections started, and their share (builds whose
    /// stacks are read).
    pub top_trigger: Option<(String, f64)>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            collections: 0,
            pauses: Histogram::new_with_bounds(1, 100_000_000, 2).expect("valid histogram"),
            full_pauses: Histogram::new_with_bounds(1, 100_000_000, 2).expect("valid histogram"),
            max_ns: 0,
            window_collections: 0,
            window_pause_ns: 0,
            gc_share: 0.0,
            per_s: 0.0,
            history: VecDeque::with_capacity(HISTORY),
            thresholds: None,
            top_trigger: None,
        }
    }
}

impl Stats {
    pub fn record(&mut self, c: &Collection) {
        self.collections += 1;
        self.window_collections += 1;
        self.window_pause_ns += c.duration_ns;
        self.pauses.saturating_record((c.duration_ns / 1000).max(1));
        self.max_ns = self.max_ns.max(c.duration_ns);
        if c.r#gen == 2 {
            self.full_pauses.saturating_record((c.duration_ns / 1000).max(1));
        }
    }

    pub fn close_window(&mut self, seconds: f64, thresholds: Option<[i32; 3]>) {
        let seconds = seconds.max(1e-3);
        self.gc_share = (self.window_pause_ns as f64 / 1e9 / seconds).min(1.0);
        self.per_s = self.window_collections as f64 / seconds;
        (self.window_collections, self.window_pause_ns) = (0, 0);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((self.gc_share * 1000.0).round() as u64);
        self.thresholds = thresholds.or(self.thresholds);
    }

    /// p99 pause since attach, µs (0 before the first collection).
    pub fn p99_us(&self) -> u64 {
        if self.collections == 0 { 0 } else { self.pauses.value_at_quantile(0.99) }
    }

    /// p99 of the full collections' pauses since attach, µs (0 before the first).
    pub fn full_p99_us(&self) -> u64 {
        if self.full_pauses.is_empty() { 0 } else { self.full_pauses.value_at_quantile(0.99) }
    }

    /// The longest pause since attach, µs.
    pub fn max_us(&self) -> u64 {
        self.max_ns / 1000
    }

    /// Mean GC share over the last `n` windows: a sort key that does not reorder the rows at
    /// every window's noise.
    pub fn recent_share(&self, n: usize) -> f64 {
        let n = n.min(self.history.len());
        if n == 0 {
            self.gc_share
        } else {
            self.history.iter().rev().take(n).sum::<u64>() as f64 / n as f64 / 1000.0
        }
    }
}
