//! The feature schema of "window" records: what each number of `Window::features` is. The agent
//! computes them (neurogc-agent/src/session/features.rs); models, report and training read them by name.
/// Bumped whenever a feature is added, removed, reordered or redefined.
pub const SCHEMA: u32 = 1;

/// Feature names, in vector order. Per generation: collections per second, pause p50/p99/max
/// (µs), objects collected per collection. Then: share of wall time in GC, net container
/// allocations per second (estimated), RSS (MiB) and its slope (MiB/s), the target's CPU share,
/// the thresholds in force and gen0's count at the window's end, and the `gc.freeze()` count.
pub const NAMES: [&str; 25] = [
    "gen0_per_s",
    "gen0_p50_us",
    "gen0_p99_us",
    "gen0_max_us",
    "gen0_collected_per",
    "gen1_per_s",
    "gen1_p50_us",
    "gen1_p99_us",
    "gen1_max_us",
    "gen1_collected_per",
    "gen2_per_s",
    "gen2_p50_us",
    "gen2_p99_us",
    "gen2_max_us",
    "gen2_collected_per",
    "gc_share",
    "alloc_per_s",
    "rss_mib",
    "rss_slope_mib_s",
    "cpu_share",
    "threshold0",
    "threshold1",
    "threshold2",
    "count0",
    "freeze_count",
];

pub const COUNT: usize = NAMES.len();

/// Where a feature sits in the vector.
pub fn index(name: &str) -> Option<usize> {
    NAMES.iter().position(|n| *n == name)
}
