//! A run's timeline of windows and when it converged: the windows from attach until it has 90%
//! of its final gain over the defaults.
pub struct Timeline {
    /// (seconds since the run's start, generation, pause ms)
    pub pauses: Vec<(f64, i8, f64)>,
    /// (seconds since the run's start, what changed)
    pub changes: Vec<(f64, String)>,
    /// Every decision's time (seconds since the run's start): the agent's windows end there.
    pub windows: Vec<f64>,
}

/// Share of the final gain that counts as converged.
const CONVERGED: f64 = 0.9;

/// What a workload's convergence is measured on, with its level under CPython's defaults (the
/// interleaved defaults runs), since the first windows after attach show too few full
/// collections to stand for the level before the agent acted.
#[derive(Clone, Copy)]
pub enum Gain {
    /// A service's p99 comes from its longest pauses: converged from the first window after
    /// which no window's longest pause is above the goal.
    LongestPause { defaults_ms: f64 },
    /// A batch job's time: GC time per unit of the application's own time (share / (1 −
    /// share)), smoothed over 3 windows; converged at the first window that reaches the goal.
    GcPerWork { defaults: f64 },
}

impl Timeline {
    fn per_window(&self, f: impl Fn(&[f64], f64) -> f64) -> Vec<f64> {
        self.windows
            .windows(2)
            .map(|w| {
                let ms: Vec<f64> =
                    self.pauses.iter().filter(|p| p.0 >= w[0] && p.0 < w[1]).map(|p| p.2).collect();
                f(&ms, (w[1] - w[0]).max(1e-3))
            })
            .collect()
    }

    /// Windows from attach until the run has 90% of its final gain over CPython's defaults; the
    /// final level is the last third's (its longest pause, or its mean). None where the run
    /// gained nothing over the defaults or has under 9 windows.
    pub fn windows_to_converge(&self, gain: Gain) -> Option<usize> {
        let (series, defaults, stays) = match gain {
            Gain::LongestPause { defaults_ms } => {
                (self.per_window(|ms, _| ms.iter().copied().fold(0.0, f64::max)), defaults_ms, true)
            }
            Gain::GcPerWork { defaults } => {
                let odds = self.per_window(|ms, s| {
                    let share = (ms.iter().sum::<f64>() / 1e3 / s).min(0.99);
                    share / (1.0 - share)
                });
                let smooth = odds.windows(3).map(|w| w.iter().sum::<f64>() / 3.0).collect();
                (smooth, defaults, false)
            }
        };
        if series.len() < 9 {
            return None;
        }
        let tail = &series[series.len() * 2 / 3..];
        let last = if stays {
            tail.iter().copied().fold(0.0, f64::max)
        } else {
            tail.iter().sum::<f64>() / tail.len() as f64
        };
        if defaults.is_nan() || defaults <= last {
            return None;
        }
        let goal = last + (1.0 - CONVERGED) * (defaults - last);
        let k = if stays {
            (0..series.len()).find(|&k| series[k..].iter().all(|&v| v <= goal))
        } else {
            (0..series.len()).find(|&k| series[k] <= goal)
        };
        // The agent's first decision closes window 1 after attach, so the span from decision k
        // to k + 1 (for a smoothed level, the first of its three) is window k + 2.
        k.map(|k| k + 2)
    }
}
