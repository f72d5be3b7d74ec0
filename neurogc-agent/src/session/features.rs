//! Feature windows: the event stream folded into fixed windows, each closed by a `Sample` of the
//! target (thresholds and gen0 count from memory, RSS and CPU from /proc). The very same code
//! runs live and on a recorded `--json` stream (`replay`), so what a model was trained on and
//! what it is served cannot drift. Schema changes bump `SCHEMA`; docs/controller.md documents the names.
use neurogc_trace::Collection;
pub use neurogc_trace::{Sample, Window};

pub use neurogc_trace::features::{COUNT, NAMES, SCHEMA, index};

use crate::interp::process;

/// Folds collections into the current window.
pub struct Windower {
    prev: Sample,
    pauses: [Vec<u64>; 3],
    collected: [i64; 3],
    spans: PauseSpans,
}

/// A window's collections as spans of time: its GC share counts the time of each inside the
/// window, as `report` splits a pause across the buckets it spans. One running when the last
/// window closed began before this one; counted whole, a window of full collections read 103%.
/// One target's windows and fleet mode's rows both read their share here.
#[derive(Default)]
pub struct PauseSpans(Vec<(u64, u64)>);

impl PauseSpans {
    pub fn record(&mut self, c: &Collection) {
        self.0.push((c.ts_ns, c.ts_ns.saturating_add(c.duration_ns)));
    }

    /// The longest of the collections that began before `start_ns` (0 where none did): one
    /// running when the last window closed, when a setting decided on it was written.
    pub fn begun_before(&self, start_ns: u64) -> u64 {
        self.0.iter().filter(|&&(a, _)| a < start_ns).map(|&(a, b)| b - a).max().unwrap_or(0)
    }

    /// The share of `start_ns..end_ns` (Unix ns, the collections' clock) spent collecting; the
    /// spans are cleared for the next window.
    pub fn close(&mut self, start_ns: u64, end_ns: u64) -> f64 {
        let seconds = (end_ns.saturating_sub(start_ns) as f64 / 1e9).max(1e-6);
        let paused_ns: u64 = self.0.iter().map(|&(a, b)| b.min(end_ns).saturating_sub(a.max(start_ns))).sum();
        self.0.clear();
        // Collections do not overlap (one interpreter collects at a time, and ours are told
        // apart by process); the bound holds for several interpreters in one process too.
        (paused_ns as f64 / 1e9 / seconds).min(1.0)
    }
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    // Nearest rank: exact, deterministic, no interpolation to argue about.
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl Windower {
    pub fn new(first: Sample) -> Windower {
        Windower { prev: first, pauses: Default::default(), collected: [0; 3], spans: PauseSpans::default() }
    }

    pub fn record(&mut self, c: &Collection) {
        if let g @ 0..=2 = c.r#gen {
            self.pauses[g as usize].push(c.duration_ns);
            self.collected[g as usize] += c.collected;
        }
        self.spans.record(c);
    }

    /// Closes the window at `now` and starts the next one.
    pub fn close(&mut self, now: Sample) -> Window {
        let secs = (now.ts_ns.saturating_sub(self.prev.ts_ns) as f64 / 1e9).max(1e-6);
        let mut f = Vec::with_capacity(COUNT);
        let mut collections = [0u64; 3];
        for (g, p) in self.pauses.iter_mut().enumerate() {
            p.sort_unstable();
            let n = p.len() as u64;
            collections[g] = n;
            f.push(n as f64 / secs);
            for q in [0.5, 0.99] {
                f.push(percentile(p, q) as f64 / 1e3);
            }
            f.push(p.last().copied().unwrap_or(0) as f64 / 1e3);
            f.push(if n == 0 { 0.0 } else { self.collected[g] as f64 / n as f64 });
        }
        let total: u64 = collections.iter().sum();
        let thresholds = now.thresholds.unwrap_or([0; 3]);
        let alloc = match (now.count0, self.prev.count0) {
            (Some(c1), Some(c0)) => (total as f64 * thresholds[0] as f64 + (c1 - c0) as f64) / secs,
            _ => total as f64 * thresholds[0] as f64 / secs,
        };
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let carried_ns = self.spans.begun_before(self.prev.ts_ns);
        f.push(self.spans.close(self.prev.ts_ns, now.ts_ns));
        f.push(alloc);
        f.push(mib(now.rss_bytes));
        f.push((mib(now.rss_bytes) - mib(self.prev.rss_bytes)) / secs);
        f.push(now.cpu_ns.saturating_sub(self.prev.cpu_ns) as f64 / 1e9 / secs);
        f.extend(thresholds.map(|t| t as f64));
        f.push(now.count0.unwrap_or(0) as f64);
        f.push(now.freeze_count.unwrap_or(0) as f64);
        debug_assert_eq!(f.len(), COUNT);
        let runq_share = match (now.runq_ns, self.prev.runq_ns) {
            (Some(b), Some(a)) => Some(b.saturating_sub(a) as f64 / 1e9 / secs),
            _ => None,
        };
        let runs_per_s = match (now.runs, self.prev.runs) {
            (Some(b), Some(a)) => Some(b.saturating_sub(a) as f64 / secs),
            _ => None,
        };
        let window = Window {
            schema: SCHEMA,
            start_ns: self.prev.ts_ns,
            end_ns: now.ts_ns,
            collections,
            features: f,
            sample: now,
            runq_share,
            runs_per_s,
            carried_ns: Some(carried_ns),
        };
        self.prev = now;
        self.pauses = Default::default();
        self.collected = [0; 3];
        window
    }
}

/// CPU share below which a window without collections counts as idle.
pub const IDLE_CPU_SHARE: f64 = 0.05;

/// The target neither collected nor ran (under 5% of a CPU) in this window. A process that is
/// busy without collecting (acyclic churn frees what it allocates) is not idle.
pub fn idle(window: &Window) -> bool {
    window.collections.iter().sum::<u64>() == 0 && feature(window, "cpu_share") < IDLE_CPU_SHARE
}

/// A window's feature by name (0 where the schema has none).
pub fn feature(window: &Window, name: &str) -> f64 {
    index(name).and_then(|i| window.features.get(i)).copied().unwrap_or(0.0)
}

/// The target's threads, summed, from /proc: RSS, CPU time and the time they waited for a CPU
/// (schedstat's first two fields, in ns), and how many times they were put on one (its third).
pub struct ProcStat {
    pub rss_bytes: u64,
    pub cpu_ns: u64,
    pub runq_ns: u64,
    pub runs: u64,
}

pub fn read_proc(pid: i32) -> Option<ProcStat> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let [cpu_ns, runq_ns, runs] = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(|t| process::schedstat(&t.ok()?.path()))
        .fold([0; 3], |sum, s| [0, 1, 2].map(|i| sum[i] + s[i]));
    Some(ProcStat { rss_bytes: pages * page, cpu_ns, runq_ns, runs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steering::policy::predict::Reading;

    fn sample(ts_s: f64, count0: i64, rss_mib: u64, cpu_ms: u64) -> Sample {
        Sample {
            ts_ns: (ts_s * 1e9) as u64,
            thresholds: Some([700, 10, 10]),
            count0: Some(count0),
            rss_bytes: rss_mib << 20,
            cpu_ns: cpu_ms * 1_000_000,
            freeze_count: None,
            older_counts: None,
            long_lived: None,
            frozen: None,
            runq_ns: None,
            runs: None,
        }
    }

    /// A collection that began 11 s in (the windows below start at 10 s).
    fn gc(r#gen: i8, duration_us: u64, collected: i64) -> Collection {
        Collection {
            ts_ns: 11_000_000_000,
            pid: 1,
            tid: 1,
            r#gen,
            duration_ns: duration_us * 1000,
            collected,
            uncollectable: 0,
            stack: None,
            running: None,
            halted: None,
        }
    }

    #[test]
    fn a_window_is_what_happened_between_two_samples() {
        let mut w = Windower::new(sample(10.0, 100, 50, 0));
        for (d, c) in [(10, 5), (20, 7), (30, 9), (40, 11)] {
            w.record(&gc(0, d, c));
        }
        w.record(&gc(2, 5000, 100));
        let win = w.close(sample(12.0, 300, 54, 1000));
        let f = &win.features;
        assert_eq!(win.collections, [4, 0, 1]);
        assert_eq!(f[0], 2.0); // 4 collections in 2 s
        assert_eq!((f[1], f[2], f[3]), (20.0, 40.0, 40.0)); // nearest-rank p50, p99, max in µs
        assert_eq!(f[4], 8.0);
        assert_eq!(f[10], 0.5);
        assert!((f[15] - 0.00255).abs() < 1e-12); // 5.1 ms of pauses in 2 s
        assert_eq!(f[16], (5.0 * 700.0 + 200.0) / 2.0);
        assert_eq!((f[17], f[18], f[19]), (54.0, 2.0, 0.5));
        assert_eq!(&f[20..24], &[700.0, 10.0, 10.0, 300.0]);
        // The next window starts empty.
        let next = w.close(sample(13.0, 300, 54, 1000));
        assert_eq!(next.collections, [0, 0, 0]);
        assert_eq!(next.start_ns, win.end_ns);
    }

    #[test]
    fn a_pause_that_began_before_the_window_counts_from_its_start() {
        // A 1.5 s full collection that was running when the window opened at 10 s and ended
        // 0.5 s into it, and a 0.7 s one inside it: 1.2 s of the window's 2 s.
        let mut w = Windower::new(sample(10.0, 100, 50, 0));
        w.record(&Collection { ts_ns: 9_000_000_000, ..gc(2, 1_500_000, 10) });
        w.record(&Collection { ts_ns: 11_000_000_000, ..gc(2, 700_000, 10) });
        let win = w.close(sample(12.0, 100, 50, 2000));
        assert!((win.features[index("gc_share").unwrap()] - 0.6).abs() < 1e-12, "{:?}", win.features);
        // The pauses themselves are what the collections took.
        assert_eq!(win.features[index("gen2_max_us").unwrap()], 1_500_000.0);
        // And the window tells which began before it: the longest of those.
        assert_eq!(win.carried_ns, Some(1_500_000_000));
        assert!(Reading::from_window(&win, None).began_before());
        // One that reads as ending after the window closed (the probe's clock and the sample's
        // are read apart) counts up to the close.
        let mut w = Windower::new(sample(10.0, 100, 50, 0));
        w.record(&Collection { ts_ns: 11_000_000_000, ..gc(2, 3_000_000, 10) });
        let late = w.close(sample(12.0, 100, 50, 2000));
        assert_eq!(late.features[index("gc_share").unwrap()], 0.5);
        assert_eq!(late.carried_ns, Some(0));
    }

    #[test]
    fn demand_is_cpu_time_and_the_wait_for_a_cpu() {
        let at = |ts_s: f64, cpu_ms: u64, runq_ms: Option<u64>| Sample {
            runq_ns: runq_ms.map(|ms| ms * 1_000_000),
            ..sample(ts_s, 100, 50, cpu_ms)
        };
        // A batch job sharing its CPU: half of it run, the other half waited for.
        let mut w = Windower::new(at(10.0, 0, Some(0)));
        let shared = w.close(at(12.0, 1000, Some(1000)));
        assert_eq!(shared.runq_share, Some(0.5));
        assert_eq!(Reading::from_window(&shared, None).demand(), 1.0);
        // A service idle most of the time; and a kernel that keeps no run-queue delay.
        let mut w = Windower::new(at(10.0, 0, Some(0)));
        assert_eq!(Reading::from_window(&w.close(at(12.0, 400, Some(40))), None).demand(), 0.22);
        let mut w = Windower::new(at(10.0, 0, None));
        let unknown = w.close(at(12.0, 400, None));
        assert_eq!((unknown.runq_share, Reading::from_window(&unknown, None).demand()), (None, 0.2));
    }

    #[test]
    fn a_service_sleeping_between_requests_is_put_on_a_cpu_about_once_a_request() {
        // 100 requests a second, each a few microseconds of work after a 10 ms sleep.
        let mut child = std::process::Command::new("python3")
            .args(["-c", "import time\nwhile True:\n    time.sleep(0.01)\n    sum(range(20))"])
            .spawn()
            .expect("python3");
        let pid = child.id() as i32;
        std::thread::sleep(std::time::Duration::from_millis(300));
        let at = |ts_s: f64| Sample { runs: read_proc(pid).map(|p| p.runs), ..sample(ts_s, 100, 50, 0) };
        let mut w = Windower::new(at(0.0));
        std::thread::sleep(std::time::Duration::from_secs(1));
        let window = w.close(at(1.0));
        child.kill().ok();
        child.wait().ok();
        let rate = window.runs_per_s.expect("schedstat");
        assert!((50.0..=300.0).contains(&rate), "{rate} a second");
    }
}
