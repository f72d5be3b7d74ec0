//! One fleet target's numbers, as every sink reads them: totals since attach, the last window,
//! and a short history of its GC share.
use std::collections::VecDeque;

use hdrhistogram::Histogram;
use neurogc_trace::Collection;

use crate::session::features::PauseSpans;

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
    /// This window's collections: its share counts the time of each inside the window.
    window_spans: PauseSpans,
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
            window_spans: PauseSpans::default(),
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
        self.window_spans.record(c);
        self.pauses.saturating_record((c.duration_ns / 1000).max(1));
        self.max_ns = self.max_ns.max(c.duration_ns);
        if c.r#gen == 2 {
            self.full_pauses.saturating_record((c.duration_ns / 1000).max(1));
        }
    }

    /// The window from `start_ns` to `end_ns` (Unix ns, the collections' clock) is over.
    pub fn close_window(&mut self, start_ns: u64, end_ns: u64, thresholds: Option<[i32; 3]>) {
        let seconds = (end_ns.saturating_sub(start_ns) as f64 / 1e9).max(1e-3);
        self.gc_share = self.window_spans.close(start_ns, end_ns);
        self.per_s = self.window_collections as f64 / seconds;
        self.window_collections = 0;
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((self.gc_share * 1000.0).round() as u64);
        self.thresholds = thresholds.or(self.thresholds);
    }

    /// p99 pause since attach, µs (0 before the first collection).
    /// The histograms answer with the top of a quantile's bucket (2 significant digits), which
    /// may pass the longest pause itself: `top` showed "FULL P99 157.7ms MAX 157.6ms".
    pub fn p99_us(&self) -> u64 {
        if self.collections == 0 { 0 } else { self.pauses.value_at_quantile(0.99).min(self.max_us()) }
    }

    /// p99 of the full collections' pauses since attach, µs (0 before the first), no longer
    /// than the longest pause (`p99_us`).
    pub fn full_p99_us(&self) -> u64 {
        if self.full_pauses.is_empty() {
            0
        } else {
            self.full_pauses.value_at_quantile(0.99).min(self.max_us())
        }
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

/// A collection of `generation` at `ts_ns` taking `duration_ns` (tests of what reads Stats).
#[cfg(test)]
pub fn collection(generation: i8, ts_ns: u64, duration_ns: u64) -> Collection {
    Collection {
        ts_ns,
        pid: 1,
        tid: 1,
        r#gen: generation,
        duration_ns,
        collected: 0,
        uncollectable: 0,
        stack: None,
        running: None,
        halted: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gc(ts_ns: u64, duration_ns: u64) -> Collection {
        collection(2, ts_ns, duration_ns)
    }

    #[test]
    fn no_p99_is_longer_than_the_longest_pause() {
        let mut s = Stats::default();
        s.record(&collection(0, 0, 80_000));
        s.record(&collection(2, 0, 157_600_000));
        assert_eq!(s.max_us(), 157_600);
        assert!(s.p99_us() <= 157_600 && s.full_p99_us() <= 157_600, "{} {}", s.p99_us(), s.full_p99_us());
        assert!(s.full_p99_us() >= 156_000, "{}", s.full_p99_us());
    }

    #[test]
    fn a_windows_gc_share_counts_only_the_pause_time_inside_it() {
        // A 600 ms collection that began 400 ms before the window, and a 200 ms one inside
        // its first second: 400 ms of the window's 2 s (counted whole, 80%; it read 103% live).
        let mut s = Stats::default();
        let second = 1_000_000_000;
        s.record(&gc(10 * second - 400_000_000, 600_000_000));
        s.record(&gc(10 * second + 500_000_000, 200_000_000));
        s.close_window(10 * second, 12 * second, Some([700, 10, 10]));
        assert!((s.gc_share - 0.2).abs() < 1e-9, "{}", s.gc_share);
        assert!((s.per_s - 1.0).abs() < 1e-9, "{}", s.per_s);
        assert_eq!(s.history.back(), Some(&200));
        // The next window starts with nothing of them.
        s.close_window(12 * second, 13 * second, None);
        assert_eq!(s.gc_share, 0.0);
        assert_eq!(s.thresholds, Some([700, 10, 10]));
    }
}
