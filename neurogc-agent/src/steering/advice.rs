//! Advise mode's answer at exit: the advice that stood at the end, for how long, and the lines
//! to paste into the application that would make it so (a user who ran advise mode for a minute
//! wants the recommendation, not the last window's reason), after the cycle to fix first where
//! the censuses found one that is most of the garbage.

use crate::session::garbage::Tally;

/// One window's advice: the setting it would move to (None: stay with the application's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Move {
    pub thresholds: [i64; 3],
    /// The application's thresholds, which the advice is from.
    pub from: [i64; 3],
    pub freeze: bool,
    /// Freeze after a full collection (`gc.collect()` first).
    pub collect: bool,
}

/// The advice window by window, as it stood.
#[derive(Debug, Default)]
pub struct Advice {
    windows: u64,
    /// The advice in force, and the window it was first given in.
    current: Option<(Option<Move>, u64)>,
    /// Why, as the latest window said it: the measured evidence and the predicted effect.
    why: String,
    /// What the collector frees, over the censuses so far (`--census`).
    garbage: Tally,
}

impl Advice {
    /// A window decided: `advised` is what the advice was in it, and `why` its reason.
    pub fn record(&mut self, advised: Option<Move>, why: &str) {
        self.windows += 1;
        if self.current.is_none_or(|(a, _)| a != advised) {
            self.current = Some((advised, self.windows));
        }
        why.clone_into(&mut self.why);
    }

    /// A census of the target (`--census`).
    pub fn census(&mut self, c: &neurogc_trace::Census) {
        self.garbage.add(c);
    }

    /// Where one type is most of what the collector frees, the cycle to fix before any setting
    /// is tuned: removing it removes the collections' work, where a setting only moves it.
    pub fn cycle_first(&self) -> Option<String> {
        let r = self.garbage.report()?;
        let top = r.dominant()?;
        let share =
            format!("`{}` is {:.0}% of what the collector frees", top.name, top.share_of_objects * 100.0);
        Some(match r.closing() {
            Some((class, e)) => format!(
                "fix the cycle first: {share}, closed by `{}.{}` \u{2192} `{}` (in {:.0}% of {} sampled): make it a \
                 weakref, or `del` it once done",
                class.name,
                e.attr,
                e.to,
                e.share * 100.0,
                e.sampled
            ),
            None => format!(
                "fix the cycle first: {share}: where its objects refer back to each other, a weakref or a \
                 `del` once done frees them with no collection"
            ),
        })
    }

    /// What to do, in words and the Python that does it (the cycle to fix first, where one
    /// dominates the garbage); None before any window was decided and any cycle found.
    pub fn recommendation(&self) -> Option<String> {
        match (self.cycle_first(), self.settings()) {
            (Some(cycle), Some(s)) => Some(format!("{cycle}\n{s}")),
            (cycle, s) => s.or(cycle),
        }
    }

    /// The settings to use, in words and Python; None before any window was decided.
    fn settings(&self) -> Option<String> {
        let (advised, since) = self.current?;
        let stood = self.windows - since + 1;
        let held =
            format!("advised for the last {} of {}", stood, crate::text::plural(self.windows, "window"));
        let Some(m) = advised else {
            return Some(format!(
                "recommendation: keep the application's own settings ({held}): no setting \
                 was credibly better\nwhy: {}",
                self.why
            ));
        };
        let mut what = Vec::new();
        let mut code = vec!["import gc".to_owned()];
        if m.freeze {
            what.push(
                if m.collect { "collect and freeze after start-up" } else { "freeze after start-up" }
                    .to_owned(),
            );
            if m.collect {
                code.push("gc.collect()".to_owned());
            }
            code.push("gc.freeze()".to_owned());
        }
        if m.thresholds != m.from {
            let [a, b, c] = m.thresholds;
            what.push(format!("thresholds {}", crate::sinks::view::thresholds(m.thresholds)));
            code.push(format!("gc.set_threshold({a}, {b}, {c})"));
        }
        let code: String = code.iter().map(|l| format!("\n    {l}")).collect();
        Some(format!(
            "recommendation ({held}): {}\nwhy: {}\nin the application, once its start-up is \
             done:{code}",
            what.join(", "),
            self.why
        ))
    }
}

/// How often what a policy decides changes, over decision records. Advice repeats in every
/// window's decision while it stands (`change` stays true while it differs from what is in
/// force): counting those decisions, replay said "would change the thresholds 59 times (59 of
/// 60 decisions)" of advice that changed about ten times. In act mode a move is one decision.
#[derive(Debug, Default, Clone)]
pub struct Turns {
    last: Option<([i64; 3], Option<bool>)>,
    pub changes: u64,
}

impl Turns {
    /// Whether `d` changes what is decided (its move is new).
    pub fn see(&mut self, d: &neurogc_trace::Decision) -> bool {
        self.see_advice(d.change.then_some((d.thresholds, d.freeze)))
    }

    /// `now`: the thresholds and freeze decided, None where the setting in force stands.
    fn see_advice(&mut self, now: Option<([i64; 3], Option<bool>)>) -> bool {
        let turned = now.is_some() && now != self.last;
        self.changes += u64::from(turned);
        self.last = now;
        turned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standing_advice_counts_once() {
        let five = Some(([5000, 10, 10], Some(true)));
        let mut r = Turns::default();
        // Advised three windows running, dropped, advised again, then another.
        for now in [five, five, five, None, five, Some(([700, 10, 10], Some(true)))] {
            r.see_advice(now);
        }
        assert_eq!(r.changes, 3);
    }

    const FREEZE_5K: Move =
        Move { thresholds: [5000, 20, 10], from: [700, 10, 10], freeze: true, collect: false };

    #[test]
    fn the_recommendation_is_the_advice_that_stood_at_the_end_with_its_code() {
        let mut a = Advice::default();
        assert_eq!(a.recommendation(), None);
        a.record(None, "staying");
        a.record(Some(Move { freeze: false, ..FREEZE_5K }), "5000/20/10");
        for _ in 0..3 {
            a.record(Some(FREEZE_5K), "pause budget missed at 700/10/10 (measured over 900 …)");
        }
        let r = a.recommendation().unwrap();
        assert_eq!(
            r,
            "recommendation (advised for the last 3 of 5 windows): freeze after start-up, \
             thresholds 5000/20/10\nwhy: pause budget missed at 700/10/10 (measured over 900 …)\n\
             in the application, once its start-up is done:\n    \
             import gc\n    gc.freeze()\n    gc.set_threshold(5000, 20, 10)"
        );
        // A freeze alone, made after a collection: no thresholds to set.
        a.record(Some(Move { thresholds: [700, 10, 10], collect: true, ..FREEZE_5K }), "freeze");
        let r = a.recommendation().unwrap();
        assert!(r.contains("gc.collect()\n    gc.freeze()") && !r.contains("set_threshold"), "{r}");
        assert!(r.starts_with("recommendation (advised for the last 1 of 6 windows)"), "{r}");
    }

    #[test]
    fn advice_to_stay_says_so() {
        let mut a = Advice::default();
        a.record(None, "budgets hold; no setting credibly cheaper");
        assert_eq!(
            a.recommendation().unwrap(),
            "recommendation: keep the application's own settings (advised for the last 1 of 1 \
             window): no setting was credibly better\nwhy: budgets hold; no setting credibly cheaper"
        );
    }

    #[test]
    fn a_cycle_that_is_most_of_the_garbage_is_advised_before_any_setting() {
        use neurogc_trace::{Census, CensusEdge, CensusType};
        let t = |name: &str, objects, edges: Vec<CensusEdge>| CensusType {
            name: name.into(),
            objects,
            sampled: if edges.is_empty() { 0 } else { 16 },
            edges,
            ..Default::default()
        };
        let census = |types| Census {
            ts_ns: 0,
            tid: 1,
            arg_gen: 0,
            objects: 100,
            complete: true,
            types,
            ..Default::default()
        };
        let mut a = Advice::default();
        // A type under 40% of the garbage names no cycle.
        a.census(&census(vec![t("cell", 35, vec![]), t("function", 33, vec![]), t("tuple", 32, vec![])]));
        assert_eq!(a.cycle_first(), None);
        let parent = CensusEdge { attr: "parent".into(), to: "Tok".into(), instances: 16 };
        for _ in 0..3 {
            a.census(&census(vec![t("Tok", 600, vec![parent.clone()]), t("cell", 100, vec![])]));
        }
        let cycle = a.cycle_first().unwrap();
        assert_eq!(
            cycle,
            "fix the cycle first: `Tok` is 82% of what the collector frees, closed by `Tok.parent` \u{2192} \
             `Tok` (in 100% of 48 sampled): make it a weakref, or `del` it once done"
        );
        // Before any window is decided, and before the settings once one is.
        assert_eq!(a.recommendation(), Some(cycle.clone()));
        a.record(Some(FREEZE_5K), "pause budget missed");
        let r = a.recommendation().unwrap();
        assert!(r.starts_with(&format!("{cycle}\nrecommendation (advised")), "{r}");
    }
}
