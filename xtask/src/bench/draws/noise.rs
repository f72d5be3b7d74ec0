//! What an arm identical to another would read, from each draw's spread between its own rounds:
//! the noise floors a harm count and the act / oracle distribution are read against. Two rounds
//! a draw are what the targets are judged on, and the defaults' own rounds of one draw have
//! read 1.5x apart and more: a count or a percentile means something only beside its floor.
use super::{HARM, Score};
use crate::bench::{
    measure::{SplitMix, ln_mean_var, median},
    steer,
};

/// Simulated runs a distribution's floor is read from (a few ms).
const SIMULATED: usize = 2000;

/// The chance that an arm identical to the defaults, run as many rounds, reads worse than them
/// by more than `HARM` (`super::harmed`): the harm count's noise floor, from the spread of the
/// defaults' own rounds (ln scores; the median of a few rounds taken as their mean), in their
/// scores and, for a service, in their lengths, either of which counts. With two rounds a draw,
/// the 488 pairs of the defaults' rounds in bench/results (2026-11-28 to 12-01) put it at 4.6
/// of 24 draws on the scores alone: a harm count is read against it. `None` with fewer than
/// two rounds.
pub(super) fn harm(defaults: &[Score], service: bool) -> Option<f64> {
    let tail = |values: Vec<f64>| -> Option<f64> {
        let (_, var, n) = ln_mean_var(values)?;
        // Two arms' means of n rounds each differ with variance 2 var / n.
        let sd = (2.0 * var / n as f64).sqrt();
        if sd == 0.0 {
            return Some(0.0);
        }
        // The normal tail, by the logistic approximation (within 0.01 of it).
        Some(1.0 / (1.0 + (1.702 * HARM.ln() / sd).exp()))
    };
    let score = tail(defaults.iter().map(|s| s.value).collect())?;
    let time = if service { tail(defaults.iter().map(|s| s.total_s).collect()).unwrap_or(0.0) } else { 0.0 };
    Some(1.0 - (1.0 - score) * (1.0 - time))
}

/// One draw as the regret floor reads it: the scores of the defaults' rounds, and of the
/// oracle's recipe's beside them (none where the defaults stand as the oracle).
pub(super) struct Rounds {
    pub defaults: Vec<f64>,
    pub recipe: Vec<f64>,
}

/// The act / oracle distribution an arm identical to the better of the defaults and the
/// oracle's recipe would read over these draws, run as many rounds as the defaults: its median,
/// 90th percentile and worst, each the median of `SIMULATED` runs. Each simulated round is a
/// normal ln score about its arm's mean, the variance pooled from both arms' own rounds; each
/// arm's figure is the median of its rounds and the oracle the lesser of the recipe's and the
/// defaults', as the report reads them. So even a perfect arm reads above 1 where the rounds
/// spread: the oracle is the lesser of two noisy figures. None where no draw has two rounds of
/// the defaults.
pub(super) fn regret(draws: &[Rounds]) -> Option<[f64; 3]> {
    struct Fit {
        defaults: (f64, usize),
        recipe: Option<(f64, usize)>,
        sd: f64,
    }
    let fits: Vec<Fit> = draws
        .iter()
        .filter_map(|d| {
            let (dm, dv, dn) = ln_mean_var(d.defaults.iter().copied())?;
            let (mut ss, mut dof) = (dv * (dn - 1) as f64, dn - 1);
            let recipe = match ln_mean_var(d.recipe.iter().copied()) {
                Some((m, v, n)) => {
                    (ss, dof) = (ss + v * (n - 1) as f64, dof + n - 1);
                    Some((m, n))
                }
                // One round of it: its mean, the spread the defaults'.
                None => d.recipe.iter().find(|x| **x > 0.0).map(|x| (x.ln(), 1)),
            };
            Some(Fit { defaults: (dm, dn), recipe, sd: (ss / dof as f64).sqrt() })
        })
        .collect();
    if fits.is_empty() {
        return None;
    }
    let mut rng = SplitMix(0x5eed);
    let mut arm = |mean: f64, n: usize, sd: f64| median((0..n).map(|_| mean + sd * rng.normal()).collect());
    let mut quantiles: [Vec<f64>; 3] = Default::default();
    for _ in 0..SIMULATED {
        let mut ratios: Vec<f64> = fits
            .iter()
            .map(|f| {
                let (dm, n) = f.defaults;
                let best = f.recipe.map_or(dm, |(rm, _)| rm.min(dm));
                let perfect = arm(best, n, f.sd);
                let defaults = arm(dm, n, f.sd);
                let oracle = f.recipe.map_or(defaults, |(rm, rn)| arm(rm, rn, f.sd).min(defaults));
                (perfect - oracle).exp()
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        quantiles[0].push(steer::quantile(&ratios, 0.5));
        quantiles[1].push(steer::quantile(&ratios, 0.9));
        quantiles[2].push(ratios[ratios.len() - 1]);
    }
    Some(quantiles.map(median))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::draws::tests::timed;

    fn rounds(values: &[f64]) -> Vec<Score> {
        timed(&values.iter().map(|&v| (v, 20.0)).collect::<Vec<_>>(), false)
    }

    #[test]
    fn the_harm_floor_grows_with_the_defaults_own_spread() {
        assert_eq!(harm(&rounds(&[1.0]), false), None);
        assert_eq!(harm(&rounds(&[2.0, 2.0]), false), Some(0.0));
        // Rounds 1% apart: an identical arm next to never reads 5% worse.
        assert!(harm(&rounds(&[1.0, 1.01]), false).unwrap() < 0.01);
        // Rounds 1.5x apart (the 90th percentile of the pairs measured): two arms' means of two
        // differ by 0.29 in ln (one standard deviation), and 5% is 0.17 of that: the normal
        // tail there is 0.43.
        let wide = harm(&rounds(&[1.0, 1.5]), false).unwrap();
        assert!((wide - 0.4325).abs() < 0.01, "{wide}");
        // More rounds at the same spread narrow it.
        assert!(harm(&rounds(&[1.0, 1.5, 1.0, 1.5]), false).unwrap() < wide);
    }

    #[test]
    fn a_services_harm_floor_counts_the_spread_of_its_lengths_too() {
        // Scores alike, lengths 1.5x apart: a batch job's floor is its scores' alone (its score
        // is its length), a service's the chance that either reads 5% worse.
        let defaults = timed(&[(1.0, 20.0), (1.0, 30.0)], false);
        assert_eq!(harm(&defaults, false), Some(0.0));
        let service = harm(&defaults, true).unwrap();
        assert!((service - 0.4325).abs() < 0.01, "{service}");
        // Both spread: more than either alone.
        let both = timed(&[(1.0, 20.0), (1.5, 30.0)], false);
        assert!(harm(&both, true).unwrap() > service + 0.2);
    }

    fn draws(n: usize, defaults: &[f64], recipe: &[f64]) -> Vec<Rounds> {
        (0..n).map(|_| Rounds { defaults: defaults.to_vec(), recipe: recipe.to_vec() }).collect()
    }

    #[test]
    fn a_perfect_arm_reads_1_where_the_rounds_agree() {
        assert_eq!(regret(&draws(8, &[2.0], &[1.0])), None);
        assert_eq!(regret(&draws(8, &[2.0, 2.0], &[])), Some([1.0; 3]));
        // The recipe twice as good: the perfect arm is as good as it.
        assert_eq!(regret(&draws(8, &[2.0, 2.0], &[1.0, 1.0])), Some([1.0; 3]));
    }

    #[test]
    fn the_regret_floor_rises_with_the_spread_and_falls_with_rounds() {
        // Rounds 1.5x apart, the defaults the oracle: a perfect arm's median stays near 1, its
        // worst of 24 does not.
        let [median, p90, worst] = regret(&draws(24, &[1.0, 1.5], &[])).unwrap();
        assert!((0.9..1.1).contains(&median), "{median}");
        assert!(p90 > median && worst > p90 && worst > 1.3, "{p90} {worst}");
        // Where a recipe as good as the defaults is run too, the oracle is the lesser of two
        // noisy figures: a perfect arm reads worse against it.
        let [m2, ..] = regret(&draws(24, &[1.0, 1.5], &[1.0, 1.5])).unwrap();
        assert!(m2 > median + 0.05, "{m2} against {median}");
        // Six rounds at the same spread narrow it.
        let [_, _, narrower] = regret(&draws(24, &[1.0, 1.5, 1.0, 1.5, 1.0, 1.5], &[])).unwrap();
        assert!(narrower < worst, "{narrower} against {worst}");
        // Tighter rounds, a lower floor.
        let [_, _, tight] = regret(&draws(24, &[1.0, 1.1], &[])).unwrap();
        assert!(tight < worst && tight < 1.2, "{tight}");
    }
}
