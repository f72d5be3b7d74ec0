//! A run's timeline of windows and when it converged: the windows from attach until it has 90%
//! of its final gain over the defaults.
pub struct Timeline {
    /// (seconds since the run's start, generation, pause ms)
    pub pauses: Vec<(f64, i8, f64)>,
    /// (seconds since the run's start, what changed)
    pub changes: Vec<(f64, String)>,
    /// Every decision's time (seconds since the run's start): the agent's windows end there.
    pub windows: Vec<f64>,
    /// A batch job's measured steps: (seconds since the run's start when it ended, its ms).
    pub steps: Vec<(f64, f64)>,
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
    /// A batch job's own measure, its time: the mean step of the steps that ended in 3 windows;
    /// converged at the first window that reaches the goal. (GC share per window is no measure
    /// of it: a job whose full collections last 100-400 ms reads 0-99% from one 1 s window to
    /// the next, and a freeze that speeds the application as much as its collections leaves the
    /// share where it was.)
    StepTime { defaults_ms: f64 },
}

impl Timeline {
    /// The mean step (ms) of the steps that ended in each run of `span` windows from window k;
    /// NaN where none did (the warm-up before the measured part).
    fn mean_step_ms(&self, span: usize) -> Vec<f64> {
        self.windows
            .windows(span + 1)
            .map(|w| {
                let (n, sum) = self
                    .steps
                    .iter()
                    .filter(|s| s.0 >= w[0] && s.0 < w[span])
                    .fold((0usize, 0.0), |(n, sum), s| (n + 1, sum + s.1));
                if n == 0 { f64::NAN } else { sum / n as f64 }
            })
            .collect()
    }

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
            Gain::StepTime { defaults_ms } => (self.mean_step_ms(3), defaults_ms, false),
        };
        if series.len() < 9 {
            return None;
        }
        let tail = &series[series.len() * 2 / 3..];
        let last = if stays {
            tail.iter().copied().fold(0.0, f64::max)
        } else {
            let steps: Vec<f64> = tail.iter().copied().filter(|v| !v.is_nan()).collect();
            steps.iter().sum::<f64>() / steps.len() as f64
        };
        if defaults.is_nan() || last.is_nan() || defaults <= last {
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
