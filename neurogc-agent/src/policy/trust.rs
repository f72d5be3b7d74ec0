//! How far this process's moves have borne out the learned model.
//!
//! The learned model corrects the analytic one by what it learned on other processes; whether
//! it holds for this one shows each time the controller moves: the GC share measured at the new
//! setting, against the analytic model's prediction made before the move, is what the learned
//! correction was there to predict. Its corrections are scaled by a weight fitted to those
//! residuals (least squares through the origin, shrunk towards 1, kept within 0..1): a model
//! whose corrections come true keeps its full weight, one whose corrections do not fades after
//! a move or two, and the analytic model and the evidence stand.

/// The prior's weight, in the units of Σ x²: a move whose learned correction was ln 2 (0.48)
/// and did not come true halves the weight.
const PRIOR: f64 = 0.5;

/// A move waiting for its first clean window: what was predicted for where it went.
#[derive(Debug, Clone, Copy)]
pub struct Trial<T> {
    pub to: T,
    /// The analytic model's GC share there, predicted before the move.
    pub analytic_share: f64,
    /// The learned model's correction of it (ln), before weighting.
    pub learned: f64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Trust {
    /// Σ x² and Σ x·y over the moves seen: x the learned correction, y the residual measured.
    sxx: f64,
    sxy: f64,
}

impl Trust {
    /// The share of the learned corrections to apply.
    pub fn weight(&self) -> f64 {
        ((PRIOR + self.sxy) / (PRIOR + self.sxx)).clamp(0.0, 1.0)
    }

    /// A move's outcome: the GC share measured at the setting it went to.
    pub fn record<T>(&mut self, trial: &Trial<T>, measured_share: f64) {
        if !(trial.analytic_share > 0.0 && measured_share > 0.0 && trial.learned.is_finite()) {
            return;
        }
        let residual = (measured_share / trial.analytic_share).ln();
        self.sxx += trial.learned * trial.learned;
        self.sxy += trial.learned * residual;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(learned: f64) -> Trial<()> {
        Trial { to: (), analytic_share: 0.10, learned }
    }

    #[test]
    fn corrections_that_come_true_keep_their_weight_and_others_fade() {
        let mut right = Trust::default();
        assert_eq!(right.weight(), 1.0);
        // Predicted half the analytic GC share, measured half.
        right.record(&trial(0.5f64.ln()), 0.05);
        assert!((right.weight() - 1.0).abs() < 1e-9, "{}", right.weight());
        let mut wrong = Trust::default();
        // Predicted half, measured what the analytic model said.
        wrong.record(&trial(0.5f64.ln()), 0.10);
        let once = wrong.weight();
        assert!((0.4..0.6).contains(&once), "{once}");
        wrong.record(&trial(0.5f64.ln()), 0.10);
        assert!(wrong.weight() < once * 0.8, "{}", wrong.weight());
        // A correction that pointed the wrong way: next to no weight.
        let mut opposite = Trust::default();
        opposite.record(&trial(0.5f64.ln()), 0.2);
        assert!(opposite.weight() < 0.05, "{}", opposite.weight());
        // A window with no collection teaches nothing.
        let mut none = Trust::default();
        none.record(&trial(0.5f64.ln()), 0.0);
        assert_eq!(none.weight(), 1.0);
    }
}
