//! What the model reads: one window of the process (`Reading`, built from a feature window),
//! and an action to predict for (`Candidate`).
use crate::{
    session::features::{Window, feature, idle},
    sinks::view::thresholds,
};

/// One window as the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    pub ts_ns: u64,
    pub secs: f64,
    pub collections: [u64; 3],
    /// Per generation: median and longest pause in the window (ns).
    pub pause_p50_ns: [f64; 3],
    pub pause_max_ns: [f64; 3],
    pub collected_per: [f64; 3],
    /// Share of this window's wall time spent in collections.
    pub gc_share: f64,
    /// Net container allocations per second (the gen0 count's movement).
    pub alloc_per_s: f64,
    /// The process's CPU time in the window over its length (threads summed).
    pub cpu_share: f64,
    /// The threads' wait for a CPU in the window over its length (0 where the kernel does not
    /// keep it).
    pub runq_share: f64,
    /// Times a second its threads were put on a CPU (0 where unknown): about its requests, for
    /// a service that sleeps between them.
    pub runs_per_s: f64,
    pub rss: u64,
    /// Thresholds in force at the window's end (the target's own reading, when located).
    pub thresholds: Option<[i64; 3]>,
    /// Generations 1 and 2's counts.
    pub older_counts: Option<[i64; 2]>,
    pub long_lived: Option<[i64; 2]>,
    pub freeze_count: Option<i64>,
    /// Whether the permanent generation holds objects, read from memory (`Sample::frozen`).
    pub frozen: Option<bool>,
    /// Neither collected nor ran (see `features::idle`).
    pub idle: bool,
    /// Seconds since the process started.
    pub age_s: Option<f64>,
    /// The longest pause among the window's collections that began before it (ns), where the
    /// window says (`Window::carried_ns`).
    pub carried_ns: Option<f64>,
}

impl Reading {
    /// The window as the model of the collector reads it. `age_s`: the process's age at the
    /// window's end, where known.
    pub fn from_window(window: &Window, age_s: Option<f64>) -> Reading {
        let per_gen =
            |name: &str, scale: f64| [0, 1, 2].map(|g| feature(window, &format!("gen{g}_{name}")) * scale);
        let s = &window.sample;
        Reading {
            ts_ns: window.end_ns,
            secs: (window.end_ns.saturating_sub(window.start_ns) as f64 / 1e9).max(1e-3),
            collections: window.collections,
            pause_p50_ns: per_gen("p50_us", 1e3),
            pause_max_ns: per_gen("max_us", 1e3),
            collected_per: per_gen("collected_per", 1.0),
            gc_share: feature(window, "gc_share"),
            alloc_per_s: feature(window, "alloc_per_s"),
            cpu_share: feature(window, "cpu_share"),
            runq_share: window.runq_share.unwrap_or(0.0),
            runs_per_s: window.runs_per_s.unwrap_or(0.0),
            rss: s.rss_bytes,
            thresholds: s.thresholds,
            older_counts: s.older_counts,
            long_lived: s.long_lived,
            freeze_count: s.freeze_count,
            frozen: s.frozen,
            idle: idle(window),
            age_s,
            carried_ns: window.carried_ns.map(|ns| ns as f64),
        }
    }
    /// The work done in the window, per second: net container allocations, or the objects its
    /// collections freed where those are more. The gen0 count misses what the free lists hand
    /// out: lists, dicts and tuples a collection frees go onto them, and the next ones the
    /// application makes come back off them uncounted (up to 80 lists and 80 dicts, and
    /// thousands of tuples, per collection). The more often it collects, the less the count
    /// says of the same work: an ETL step read 132.5 allocations at threshold0 700 and 160.4 at
    /// 10,000, while its collections freed 162 at both (docs/steering.md). What the collector
    /// frees was allocated, whichever list it came from.
    pub fn work_per_s(&self) -> f64 {
        let freed: f64 = (0..3).map(|g| self.collected(g)).sum();
        self.alloc_per_s.max(freed / self.secs.max(1e-3))
    }

    /// Objects generation `g`'s collections freed in the window, all of them together.
    pub fn collected(&self, g: usize) -> f64 {
        self.collections[g] as f64 * self.collected_per[g].max(0.0)
    }

    /// Whether the window's allocations could be counted at all: the gen0 count shows them only
    /// as it fills between collections, while every object freed by reference counting takes one
    /// off again. A young generation that does not fill within the window (a service whose
    /// requests free what they allocate: the document search's 275 young collections a second
    /// at threshold0 700 became one in three seconds at 5000) reads as next to no work, and its
    /// setting as 200 times the cost per unit of it. Two collections bound one whole round.
    pub fn work_counted(&self) -> bool {
        self.collections.iter().sum::<u64>() >= 2
    }

    /// Whether anything is frozen: the act-mode hook's count where it has one (it knows what
    /// neurogc's own freeze holds), else the permanent generation read from memory.
    pub fn frozen_now(&self) -> Option<bool> {
        self.freeze_count.map(|n| n > 0).or(self.frozen)
    }

    /// The longest pause in the window and its generation.
    pub fn worst(&self) -> (usize, f64) {
        (0..3).fold(
            (0, 0.0),
            |best, g| if self.pause_max_ns[g] > best.1 { (g, self.pause_max_ns[g]) } else { best },
        )
    }

    /// How much of the window the process wanted a CPU: its CPU time plus its threads' wait for
    /// one, at most 1. Near 1, it always has work (a batch job, or a service with requests
    /// queued): what its collections cost it is throughput. Below, it waits for work, and what
    /// arrives while it collects waits out the pause. CPU time alone cannot tell a batch job
    /// sharing its CPU (half of it run, the rest waited for) from a service idle half the time.
    pub fn demand(&self) -> f64 {
        (self.cpu_share + self.runq_share).clamp(0.0, 1.0)
    }

    /// Whether the window's longest collection began before the window did. A collection is read
    /// when it ends, so one that spans a window's edge lands, whole, in the window it ends in.
    /// The window tells (`Window::carried_ns`; the windower's, live or rebuilt by `replay` from
    /// a recording's collections, always do). One that did not would be read from the pause:
    /// longer than all the window's time in collections (which counts only what falls inside
    /// it), by more than a tenth of it. That estimate, all there was before windows told,
    /// misses the long pause of a window that holds many others: evaluation draw 1681 (an
    /// overloaded service), moved from 700/10/10 frozen to 5,000/20/100 while a 355 ms full
    /// collection of 700/10/10's ran, read it whole in a window of 5,000's 22-39 ms rounds
    /// (33% GC) as the new setting's own, "pause budget missed at 5000/20/100 frozen (measured)",
    /// and moved again a window later; 16 of the 285 windows after a move in the evaluation
    /// samples so far, most in the draws whose act / oracle was worst.
    pub fn began_before(&self) -> bool {
        let (_, worst) = self.worst();
        self.carried_covers(worst)
            .unwrap_or_else(|| worst - self.gc_share * self.secs * 1e9 > (worst / 10.0).max(1e6))
    }

    /// The window's longest full collection began before it, in the window before: what RSS did
    /// there is what it ran beside. Unknown where the window does not say (`carried_ns`).
    pub fn full_began_before(&self) -> bool {
        self.collections[2] > 0 && self.carried_covers(self.pause_max_ns[2]) == Some(true)
    }

    /// Whether a pause of `pause_ns` in the window is the one that began before it: the longest
    /// of those is at least as long. None where the window does not say.
    fn carried_covers(&self, pause_ns: f64) -> Option<bool> {
        self.carried_ns.map(|carried| carried > 0.0 && carried >= pause_ns)
    }

    /// The longest young pause in the window (generations 0 and 1): what the young generations'
    /// size decides.
    pub fn young_pause_max_ns(&self) -> f64 {
        self.pause_max_ns[0].max(self.pause_max_ns[1])
    }
}

/// An action: thresholds, and whether neurogc's freeze is in force after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Candidate {
    pub thresholds: [i64; 3],
    pub frozen: bool,
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", thresholds(self.thresholds), if self.frozen { " frozen" } else { "" })
    }
}
