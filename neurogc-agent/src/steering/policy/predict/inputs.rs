//! The learned model's inputs, one row per candidate: their names (the contract's
//! `neurogc.features`, which training/features.py reads from here) and their values.
use super::*;

/// The learned model's inputs for one candidate (the model contract's `neurogc.features`): the
/// analytic prediction, how far the candidate is from what the process has shown, and the
/// process's state. Logarithms, since pauses, rates and sizes span decades. The last six are the
/// move times the process's state: the agent applies a candidate's output less the output for
/// the setting in force, so in a model linear in its inputs the state alone cancels; these let
/// the same move be predicted differently in different processes. training/features.py reads
/// this array from here: keep it one name per line.
pub const FEATURES: [&str; 24] = [
    "ln_share",
    "ln_pause0_us",
    "ln_pause1_us",
    "ln_pause2_ms",
    "full_per_min",
    "d_ln_t0",
    "d_ln_t1",
    "d_ln_t2",
    "ln_t0_700",
    "freeze_change",
    "frozen",
    "ln_t0_seen",
    "ln_alloc_k",
    "young_garbage",
    "ln_old_100k",
    "pending_share",
    "ln_share_ratio",
    "ln_pause0_ratio",
    "d_ln_t0_x_alloc",
    "d_ln_t0_x_garbage",
    "d_ln_t0_x_old",
    "d_ln_t1_x_garbage",
    "freeze_x_old",
    "freeze_x_pending",
];
pub const FEATURE_COUNT: usize = FEATURES.len();

impl Collector {
    /// The learned model's inputs for `c` (see [`FEATURES`]), given its prediction `p`.
    pub fn features(&self, c: &Candidate, frozen_now: bool, p: &Prediction) -> [f32; FEATURE_COUNT] {
        let r = self.last.unwrap_or_default();
        let now = r.thresholds.unwrap_or(c.thresholds).map(|t| t.max(1) as f64);
        let t = c.thresholds.map(|t| t.max(1) as f64);
        // How far threshold0 is from the nearest one whose young cost was measured.
        let seen = self
            .young_by_t0
            .iter()
            .map(|(s, _)| (t[0] / s).ln())
            .min_by(|a, b| a.abs().total_cmp(&b.abs()))
            .unwrap_or((t[0] / 700.0).ln());
        let [total, pending] = r.long_lived.unwrap_or([0, 0]).map(|v| v.max(0) as f64);
        let d_t = [0, 1].map(|g| (t[g] / now[g]).ln());
        let freeze = f64::from(u8::from(c.frozen)) - f64::from(u8::from(frozen_now));
        let alloc = (self.alloc.or(0.0) / 1e3 + 1.0).ln();
        let garbage = self.young_garbage.or(0.5);
        let old = (total / 1e5 + 1.0).ln();
        let pending_share = if total > 0.0 { (pending / total).min(4.0) } else { 0.0 };
        let f = [
            (p.share + 1e-4).ln(),
            (p.pause_ns[0] / 1e3 + 1.0).ln(),
            (p.pause_ns[1] / 1e3 + 1.0).ln(),
            (p.pause_ns[2] / 1e6 + 1.0).ln(),
            (p.rate[2] * 60.0).min(600.0),
            d_t[0],
            d_t[1],
            (t[2] / now[2]).ln(),
            (t[0] / 700.0).ln(),
            freeze,
            f64::from(u8::from(frozen_now)),
            seen,
            alloc,
            garbage,
            old,
            pending_share,
            self.share_ratio.or(1.0).ln(),
            self.pause_ratio[0].ratio.or(1.0).ln(),
            d_t[0] * alloc,
            d_t[0] * garbage,
            d_t[0] * old,
            d_t[1] * garbage,
            freeze * old,
            freeze * pending_share,
        ];
        f.map(|x| if x.is_finite() { x as f32 } else { 0.0 })
    }
}
