//! The report's numbers, folded from the records in one pass with bounded memory: histograms
//! per generation, the ten longest pauses, GC time per second (for the worst minute), one small
//! entry per window (for changes, rates and plots), and a coarse timeline for the plots.
use std::{cmp::Reverse, collections::BinaryHeap};

use neurogc_trace::{Attach, Collection, ModelEffect, Record, Summary, Window};
use serde::Serialize;

use crate::session::aggregate::Aggregate;

/// GC time per second is kept for this many seconds (48 days); longer traces get no worst minute
/// beyond it.
const MAX_SECONDS: usize = 1 << 22;
/// Windows kept for changes and plots (11 days of 1 s windows).
const MAX_WINDOWS: usize = 1 << 20;
/// Timeline buckets: the width doubles whenever the trace outgrows them.
const TIMELINE_BUCKETS: usize = 2048;
/// Upper bounds of the pause histogram's buckets, ns (1-2-5 from 1 µs to 10 s, then the rest).
pub const HISTOGRAM_BOUNDS_NS: [u64; 22] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    u64::MAX,
];

/// Per generation 0, 1, 2, and "unknown" (−1).
const GENS: usize = 4;

fn slot(generation: i8) -> usize {
    match generation {
        0..=2 => generation as usize,
        _ => 3,
    }
}

#[derive(Clone, Copy, Default)]
pub struct Bucket {
    pub max_ns: [u64; GENS],
    pub count: [u64; GENS],
    pub pause_ns: u64,
}

/// Pauses over time, at a resolution that halves as the trace grows.
pub struct Timeline {
    pub width_ns: u64,
    pub buckets: Vec<Bucket>,
}

/// Calls `f(slot, ns)` for every slot of `width_ns` that the pause `[at_ns, at_ns + duration_ns)`
/// overlaps, with the part of the pause inside it: a pause longer than a slot is GC time in each
/// slot it covers, not all in the one where it began (which made shares over 100%). `f` returns
/// false past the last slot it keeps, which ends the walk (a corrupt trace's absurd duration
/// costs nothing).
fn spread(at_ns: u64, duration_ns: u64, width_ns: u64, mut f: impl FnMut(usize, u64) -> bool) {
    let end = at_ns.saturating_add(duration_ns);
    let mut from = at_ns;
    loop {
        let slot = from / width_ns;
        let slot_end = (slot + 1).saturating_mul(width_ns).min(end);
        if !f(slot as usize, slot_end - from) || slot_end >= end {
            return;
        }
        from = slot_end;
    }
}

impl Timeline {
    fn add(&mut self, at_ns: u64, g: usize, duration_ns: u64) {
        let last = |w: u64| (at_ns.saturating_add(duration_ns.saturating_sub(1)) / w) as usize;
        let mut i = (at_ns / self.width_ns) as usize;
        while last(self.width_ns) >= TIMELINE_BUCKETS {
            let merged: Vec<Bucket> = self
                .buckets
                .chunks(2)
                .map(|pair| {
                    let mut b = pair[0];
                    if let Some(o) = pair.get(1) {
                        for k in 0..GENS {
                            b.max_ns[k] = b.max_ns[k].max(o.max_ns[k]);
                            b.count[k] += o.count[k];
                        }
                        b.pause_ns += o.pause_ns;
                    }
                    b
                })
                .collect();
            self.buckets = merged;
            self.width_ns *= 2;
            i = (at_ns / self.width_ns) as usize;
        }
        if self.buckets.len() <= last(self.width_ns) {
            self.buckets.resize(last(self.width_ns) + 1, Bucket::default());
        }
        let b = &mut self.buckets[i];
        b.max_ns[g] = b.max_ns[g].max(duration_ns);
        b.count[g] += 1;
        let buckets = &mut self.buckets;
        spread(at_ns, duration_ns, self.width_ns, |j, ns| {
            buckets[j].pause_ns += ns;
            true
        });
    }
}

/// What the report keeps of a window.
#[derive(Clone, Copy)]
pub struct WindowStat {
    pub end_ns: u64,
    pub end_s: f64,
    pub secs: f64,
    pub collections: u64,
    pub pause_share: f64,
    pub max_pause_us: f64,
    /// None where the estimate does not hold (see `view::alloc_estimate_holds`).
    pub alloc_per_s: Option<f64>,
    pub rss_mib: f64,
    pub thresholds: Option<[i64; 3]>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Longest {
    duration_ns: u64,
    ts_ns: u64,
    tid: u32,
    r#gen: i8,
    collected: i64,
    stack: Option<u32>,
}

#[derive(Serialize, Clone, Copy)]
pub struct Pause {
    pub at_s: f64,
    pub ts_ns: u64,
    pub tid: u32,
    pub r#gen: i8,
    pub duration_ns: u64,
    pub collected: i64,
    /// The stack it started in (a `StackDef` id), where the build's stacks are read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<u32>,
}

/// neurogc's `gc.freeze()` or `gc.unfreeze()` in the target, from its actuation records.
#[derive(Serialize, Clone, Debug)]
pub struct Freeze {
    pub at_s: f64,
    /// "frozen" or "unfrozen".
    pub event: String,
    /// Objects in the permanent generation after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
}

/// Who changed the thresholds, as far as the records tell.
#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ChangedBy {
    Neurogc,
    Application,
}

pub struct Analysis {
    pub attach: Option<Attach>,
    pub summary: Option<Summary>,
    start_ns: u64,
    pub last_ns: u64,
    /// Per-generation totals and pause histograms: the live agent's own aggregate.
    pub agg: Aggregate,
    longest: BinaryHeap<Reverse<Longest>>,
    /// GC time (µs) per second since the start.
    per_second_us: Vec<u32>,
    pub timeline: Timeline,
    pub windows: Vec<WindowStat>,
    pub windows_dropped: u64,
    /// Thresholds the actuator reported applying (or restoring), with when.
    neurogc_set: Vec<(u64, [i64; 3])>,
    /// Where the features the report uses sit in this trace's windows (from its attach record).
    at: FeatureAt,
    pub decisions: Decisions,
    /// What the learned model did to the decisions, where they say (`Decision::model`).
    pub model: Option<ModelTally>,
    pub actuations: u64,
    /// Bounded like the windows: a freeze is at most one per window.
    pub freezes: Vec<Freeze>,
    pub stacks: super::sites::Stacks,
    /// What the collector freed (`census` records).
    pub census: crate::session::garbage::Tally,
    /// What each full collection found dead, in order (bounded like the windows): the findings
    /// use its median, as a few large ones make the mean say little.
    pub full_found: Vec<i64>,
    /// threshold0 in force: the attach sample's, then each window's.
    threshold0: Option<i64>,
    /// Free-threaded collections' running (halted) threads, summed as they come.
    running: Running,
    /// Every thread a collection halted (`threads` records), up to `MAX_HALTED_TIDS`.
    halted_tids: std::collections::HashSet<u32>,
}

/// What advise or act mode decided over the trace: every window's decision counted, each
/// change of what was decided kept (advice stands in every window's decision while it holds),
/// and the advice standing at the end. A report that did not show it advised raising
/// threshold0 on a recording whose advice was to keep 700 and freeze.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Decisions {
    /// Windows decided.
    pub count: u64,
    /// Times what was decided changed: the advice (advise mode), a move (act mode).
    pub changes: u64,
    /// Those changes in order, the first `MAX_MOVES` of them.
    pub moves: Vec<DecisionMove>,
    /// Advise mode: what the agent recommended at exit, from its summary; where the trace
    /// has none (cut, or still being written), the advice its last decision stood on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<String>,
    #[serde(skip)]
    turns: crate::steering::advice::Turns,
    #[serde(skip)]
    last: Option<(f64, neurogc_trace::Decision)>,
}

/// A change of what was decided.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionMove {
    /// When (s into the trace).
    pub at_s: f64,
    /// "700/10/10 -> 5000/10/10 + collect, freeze".
    pub what: String,
    pub reason: String,
}

/// The changes of decision a report keeps (a recording's advice turns a few times a minute
/// at most; memory stays bounded whatever the trace holds).
const MAX_MOVES: usize = 1000;

impl Decisions {
    fn add(&mut self, at_s: f64, d: &neurogc_trace::Decision) {
        self.count += 1;
        if self.turns.see(d) && self.moves.len() < MAX_MOVES {
            self.moves.push(DecisionMove {
                at_s,
                what: d.what.clone().unwrap_or_else(|| crate::sinks::view::thresholds(d.thresholds)),
                reason: d.reason.clone(),
            });
        }
        self.changes = self.turns.changes;
        self.last = Some((at_s, d.clone()));
    }

    /// "the advice changed 2 times in 66 windows".
    pub fn turned(&self) -> String {
        format!(
            "the advice changed {} in {}",
            crate::text::plural(self.changes, "time"),
            crate::text::plural(self.count, "window")
        )
    }

    /// Once the trace is read: the recommendation, the summary's or, without one, the last
    /// decision's (advise mode only: act mode's decisions were carried out, not advice).
    pub fn finish(&mut self, mode: &str, summary: Option<&neurogc_trace::Summary>) {
        let said = summary.and_then(|s| s.policy.as_ref()).and_then(|p| p.recommendation.clone());
        self.recommendation = said.or_else(|| {
            let (at_s, d) = self.last.as_ref().filter(|_| mode == "advise")?;
            let what = match (&d.what, d.change) {
                (Some(what), true) => what.as_str(),
                _ => "keep the application's own settings",
            };
            Some(format!(
                "recommendation (its last decision, at +{at_s:.1} s; the recording ends before the \
                 agent's own): {what}\nwhy: {}",
                d.reason
            ))
        });
    }
}

/// The learned model's part in a trace's decisions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModelTally {
    /// Decisions that say what the model did.
    pub decisions: u64,
    /// Of them, those where it carried weight (it is asked only then).
    pub weighed: u64,
    /// Its weight at the last of them.
    pub last_weight: f64,
    /// The decision whose predicted GC share it moved most (by ratio).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest: Option<ModelMove>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelMove {
    /// When (s into the trace).
    pub at_s: f64,
    pub effect: ModelEffect,
}

impl ModelTally {
    /// In words, for the text and HTML reports alike: "in 15 decisions, weighed in 15, weight
    /// 1.00 at the last; most at +3.0 s: the model (weight 1.00) moved …".
    pub fn words(&self) -> String {
        let mut words = format!(
            "in {}, weighed in {}, weight {:.2} at the last",
            crate::text::plural(self.decisions, "decision"),
            self.weighed,
            self.last_weight
        );
        if let Some(most) = &self.largest {
            let moved = crate::sinks::view::model_effect(&most.effect);
            words.push_str(&format!("; most at +{:.1} s: {moved}", most.at_s));
        }
        words
    }

    fn add(&mut self, at_s: f64, m: &ModelEffect) {
        self.decisions += 1;
        self.weighed += u64::from(m.weight > 0.0);
        self.last_weight = m.weight;
        let moved = |m: &ModelEffect| {
            m.moved
                .as_ref()
                .filter(|x| x.gc_share.iter().all(|s| *s > 0.0))
                .map_or(0.0, |x| (x.gc_share[1] / x.gc_share[0]).ln().abs())
        };
        if moved(m) > self.largest.as_ref().map_or(0.0, |l| moved(&l.effect)) {
            self.largest = Some(ModelMove { at_s, effect: m.clone() });
        }
    }
}

#[derive(Default)]
struct Running {
    /// Collections that counted their running threads.
    collections: u64,
    sum: u64,
    max: u32,
    /// Those with one or more.
    with_any: u64,
}

/// Distinct halted threads a report counts (memory stays bounded).
const MAX_HALTED_TIDS: usize = 65_536;

#[derive(Default)]
struct FeatureAt {
    max_pause_us: [Option<usize>; 3],
    gc_share: Option<usize>,
    alloc_per_s: Option<usize>,
}

impl Analysis {
    pub fn new() -> Analysis {
        Analysis {
            attach: None,
            summary: None,
            start_ns: 0,
            last_ns: 0,
            agg: Aggregate::default(),
            longest: BinaryHeap::with_capacity(11),
            per_second_us: Vec::new(),
            timeline: Timeline { width_ns: 100_000_000, buckets: Vec::new() },
            windows: Vec::new(),
            windows_dropped: 0,
            neurogc_set: Vec::new(),
            at: FeatureAt::default(),
            decisions: Decisions::default(),
            model: None,
            actuations: 0,
            freezes: Vec::new(),
            stacks: Default::default(),
            census: Default::default(),
            full_found: Vec::new(),
            running: Running::default(),
            halted_tids: Default::default(),
            threshold0: None,
        }
    }

    pub fn add(&mut self, record: &Record) {
        match record {
            Record::Attach(a) => {
                self.start_ns = a.sample.ts_ns;
                self.last_ns = a.sample.ts_ns;
                let pos = |name: &str| a.features.iter().position(|f| f == name);
                self.at = FeatureAt {
                    max_pause_us: [pos("gen0_max_us"), pos("gen1_max_us"), pos("gen2_max_us")],
                    gc_share: pos("gc_share"),
                    alloc_per_s: pos("alloc_per_s"),
                };
                self.threshold0 = a.sample.thresholds.map(|t| t[0]);
                self.attach = Some((**a).clone());
            }
            Record::Gc(c) => self.collection(c),
            Record::Window(w) => self.window(w),
            Record::Decision(d) => {
                let at_s = d.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9;
                self.decisions.add(at_s, d);
                if let Some(m) = &d.model {
                    self.model.get_or_insert_with(ModelTally::default).add(at_s, m);
                }
            }
            Record::Actuation(a) => {
                self.actuations += 1;
                if let (Some(t), "applied" | "finished" | "ready") = (a.thresholds, a.event.as_str()) {
                    self.neurogc_set.push((a.ts_ns, t));
                }
                if matches!(a.event.as_str(), "frozen" | "unfrozen") && self.freezes.len() < MAX_WINDOWS {
                    self.freezes.push(Freeze {
                        at_s: a.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9,
                        event: a.event.clone(),
                        count: a.freeze_count,
                    });
                }
                self.last_ns = self.last_ns.max(a.ts_ns);
            }
            Record::Summary(s) => {
                // The agent's own summary counts its GC share to when it stopped, which can be a
                // while after the last event: the report's span ends there too, so the two
                // figures agree (a run's summary said 88.33% where its report said 90%).
                let stopped = self.start_ns.saturating_add((s.elapsed_s.max(0.0) * 1e9) as u64);
                self.last_ns = self.last_ns.max(stopped);
                self.summary = Some(s.clone());
            }
            Record::Frame(f) => self.stacks.frame(f),
            Record::Stack(s) => self.stacks.stack(s),
            Record::Threads(t) => {
                for &tid in &t.tids {
                    if self.halted_tids.len() < MAX_HALTED_TIDS {
                        self.halted_tids.insert(tid);
                    }
                }
            }
            Record::Census(c) => self.census.add(c),
        }
    }

    /// None where no collection counted its running threads (GIL builds).
    pub fn halted(&self) -> Option<super::Halted> {
        let r = &self.running;
        (r.collections > 0).then(|| super::Halted {
            collections: r.collections,
            mean: r.sum as f64 / r.collections as f64,
            max: r.max,
            with_any: r.with_any,
            threads: self.halted_tids.len() as u64,
        })
    }

    fn collection(&mut self, c: &Collection) {
        let g = slot(c.r#gen);
        let d = c.duration_ns;
        self.agg.record(c);
        self.stacks.collection(c, self.threshold0);
        if c.r#gen == 2 && self.full_found.len() < MAX_WINDOWS {
            self.full_found.push(c.collected);
        }
        if let Some(n) = c.running {
            let r = &mut self.running;
            r.collections += 1;
            r.sum += u64::from(n);
            r.max = r.max.max(n);
            r.with_any += u64::from(n > 0);
        }
        self.last_ns = self.last_ns.max(c.ts_ns.saturating_add(d));
        let entry = Longest {
            duration_ns: d,
            ts_ns: c.ts_ns,
            tid: c.tid,
            r#gen: c.r#gen,
            collected: c.collected,
            stack: c.stack,
        };
        if self.longest.len() < 10 {
            self.longest.push(Reverse(entry));
        } else if self.longest.peek().is_some_and(|min| min.0 < entry) {
            self.longest.pop();
            self.longest.push(Reverse(entry));
        }
        let at = c.ts_ns.saturating_sub(self.start_ns);
        self.timeline.add(at, g, d);
        let per_second = &mut self.per_second_us;
        spread(at, d, 1_000_000_000, |second, ns| {
            if second >= MAX_SECONDS {
                return false;
            }
            if per_second.len() <= second {
                per_second.resize(second + 1, 0);
            }
            let us = u32::try_from(ns / 1000).unwrap_or(u32::MAX);
            per_second[second] = per_second[second].saturating_add(us);
            true
        });
    }

    fn window(&mut self, w: &Window) {
        self.last_ns = self.last_ns.max(w.end_ns);
        if let Some(t) = w.sample.thresholds {
            self.threshold0 = Some(t[0]);
        }
        if self.windows.len() >= MAX_WINDOWS {
            self.windows_dropped += 1;
            return;
        }
        let secs = (w.end_ns.saturating_sub(w.start_ns) as f64 / 1e9).max(1e-9);
        let f = |i: Option<usize>| w.features.get(i?).copied();
        let max_pause_us = self.at.max_pause_us.iter().filter_map(|&i| f(i)).fold(0.0, f64::max);
        self.windows.push(WindowStat {
            end_ns: w.end_ns,
            end_s: w.end_ns.saturating_sub(self.start_ns) as f64 / 1e9,
            secs,
            collections: w.collections.iter().sum(),
            pause_share: f(self.at.gc_share).unwrap_or(0.0),
            max_pause_us,
            alloc_per_s: f(self.at.alloc_per_s).filter(|_| match (w.sample.thresholds, w.sample.count0) {
                (Some(t), Some(c)) => crate::sinks::view::alloc_estimate_holds(t[0], c),
                _ => true,
            }),
            rss_mib: w.sample.rss_bytes as f64 / 1048576.0,
            thresholds: w.sample.thresholds,
        });
    }

    pub fn span_s(&self) -> f64 {
        self.last_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    pub fn longest(&self) -> Vec<Pause> {
        let mut v: Vec<Longest> = self.longest.iter().map(|r| r.0).collect();
        v.sort_by(|a, b| b.cmp(a));
        v.into_iter()
            .map(|l| Pause {
                at_s: l.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9,
                ts_ns: l.ts_ns,
                tid: l.tid,
                r#gen: l.r#gen,
                duration_ns: l.duration_ns,
                collected: l.collected,
                stack: l.stack,
            })
            .collect()
    }

    /// The 60 s (or the whole trace, if shorter) with the most GC time: (start second, share).
    pub fn worst_minute(&self) -> Option<(usize, f64)> {
        let s = &self.per_second_us;
        if s.is_empty() {
            return None;
        }
        let n = s.len().min(60);
        let mut sum: u64 = s[..n].iter().map(|&x| u64::from(x)).sum();
        let mut best = (0, sum);
        for i in n..s.len() {
            sum = sum + u64::from(s[i]) - u64::from(s[i - n]);
            if sum > best.1 {
                best = (i + 1 - n, sum);
            }
        }
        let span = (n as f64).min(self.span_s().max(1e-9));
        Some((best.0, best.1 as f64 / 1e6 / span))
    }

    /// Whether neurogc set `to` shortly before `at_ns` (its actuation precedes the next window).
    pub fn changed_by(&self, before_ns: u64, at_ns: u64, to: [i64; 3]) -> ChangedBy {
        let ours = self.neurogc_set.iter().any(|&(ts, t)| t == to && ts >= before_ns && ts <= at_ns);
        if ours { ChangedBy::Neurogc } else { ChangedBy::Application }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_longer_than_a_bucket_is_split_across_the_buckets_it_covers() {
        let mut t = Timeline { width_ns: 100, buckets: Vec::new() };
        t.add(50, 2, 260); // 50..310: 50 in bucket 0, 100 in 1 and 2, 10 in 3
        t.add(320, 0, 10);
        let pause: Vec<u64> = t.buckets.iter().map(|b| b.pause_ns).collect();
        assert_eq!(pause, [50, 100, 100, 20]);
        assert!(t.buckets.iter().all(|b| b.pause_ns <= t.width_ns));
        assert_eq!((t.buckets[0].count[2], t.buckets[0].max_ns[2], t.buckets[3].count[0]), (1, 260, 1));
        // Past the last bucket the width doubles, and the split stays within each bucket.
        t.add(100 * TIMELINE_BUCKETS as u64 - 30, 2, 500);
        assert_eq!(t.width_ns, 200);
        assert!(t.buckets.iter().all(|b| b.pause_ns <= t.width_ns));
        assert_eq!(t.buckets.iter().map(|b| b.pause_ns).sum::<u64>(), 770);
    }
}
