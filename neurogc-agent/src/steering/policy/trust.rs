//! How far this process's moves have borne out the learned model.
//!
//! The learned model corrects the analytic one by what it learned on other processes; whether
//! it holds for this one shows each time the controller moves: the GC share measured at the new
//! setting, against the analytic model's prediction made before the move, is what the learned
//! correction was there to predict. Its corrections are scaled by a weight fitted to those
//! residuals (least squares through the origin, shrunk towards 0, kept within 0..1). A model
//! starts with no weight and earns it here: on the benchmark (docs/steering.md, 2026-11-26) the
//! embedded model at full weight from attach cost 1.04–1.33× what the analytic model alone did
//! on every family, and a weight that had to be lost first still cost 1.24× on the ETL batch.
//! The moves the analytic model makes are the trials: a model whose corrections come true in
//! them gains weight after a move or two, one whose corrections do not never gets any.

/// The prior, in the units of Σ x²: a move whose learned correction was ln 2 (0.48) and came
/// true gives half the weight; two, two thirds.
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
    /// The weight the prior shrinks towards: 0, or 1 for a model trusted from the start
    /// (`--model-weight full`: one trained on this application).
    prior_weight: f64,
}

impl Trust {
    /// A model trusted in full from the start, fading where its corrections do not come true.
    pub fn full() -> Trust {
        Trust { prior_weight: 1.0, ..Trust::default() }
    }

    /// The share of the learned corrections to apply.
    pub fn weight(&self) -> f64 {
        ((PRIOR * self.prior_weight + self.sxy) / (PRIOR + self.sxx)).clamp(0.0, 1.0)
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
    fn a_model_earns_its_weight_where_its_corrections_come_true() {
        let mut right = Trust::default();
        assert_eq!(right.weight(), 0.0, "no weight before any move");
        // Predicted half the analytic GC share, measured half.
        right.record(&trial(0.5f64.ln()), 0.05);
        let once = right.weight();
        assert!((0.4..0.6).contains(&once), "{once}");
        right.record(&trial(0.5f64.ln()), 0.05);
        right.record(&trial(0.5f64.ln()), 0.05);
        assert!(right.weight() > 0.7, "{}", right.weight());
        // Predicted half, measured what the analytic model said: none.
        let mut wrong = Trust::default();
        wrong.record(&trial(0.5f64.ln()), 0.10);
        wrong.record(&trial(0.5f64.ln()), 0.10);
        assert!(wrong.weight() < 0.01, "{}", wrong.weight());
        // Earned, then moves that do not bear it out take it back.
        for _ in 0..3 {
            right.record(&trial(0.5f64.ln()), 0.10);
        }
        assert!(right.weight() < once, "{}", right.weight());
        // A correction that pointed the wrong way: none.
        let mut opposite = Trust::default();
        opposite.record(&trial(0.5f64.ln()), 0.2);
        assert_eq!(opposite.weight(), 0.0);
        // A window with no collection teaches nothing.
        let mut none = Trust::default();
        none.record(&trial(0.5f64.ln()), 0.0);
        assert_eq!(none.weight(), 0.0);
        // Trusted from the start: full weight, halved by a move that does not bear it out.
        let mut full = Trust::full();
        assert_eq!(full.weight(), 1.0);
        full.record(&trial(0.5f64.ln()), 0.10);
        assert!((0.4..0.6).contains(&full.weight()), "{}", full.weight());
    }
}
