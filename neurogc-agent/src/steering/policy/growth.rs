//! What RSS holds of neurogc's settings against what is the application's own: the part of the
//! memory budget measured on RSS (`Kept`), and the pace at which the application's RSS grows at
//! its own settings, which is its own whatever neurogc sets (`OwnGrowth`).

/// What RSS holds of neurogc's settings, against what is the application's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kept {
    /// RSS in the window neurogc made its first change, and when (s): what its changes cost
    /// since can be no more than what RSS grew from there, past the application's own growth.
    base: Option<(f64, f64)>,
    /// The most a setting in force was predicted to keep since then (bytes): what garbage once
    /// took the allocator seldom hands back, so RSS holds it after a move back (the training
    /// loop's stayed 15 MiB up after 700/20/10 was left, and a budget counted from there let its
    /// peak RSS reach 1.27x the application's own).
    most: f64,
    /// RSS from which growth is measured as a setting's own (`grown`): the first change's, or,
    /// where that came before the application's heap was warm, the first warm window's, less
    /// what had grown as the settings' own before it (`grown_unsettled`, past the pace of the
    /// application's own windows). The ETL batch's RSS rose from 223 to 281 MiB while its heap
    /// filled after neurogc's first move (its garbage piles up until its first full collection,
    /// at any setting); counted whole as the setting's, that warm-up missed the memory budget
    /// (34 MiB allowed) and sent the agent to a collection, a freeze and four more moves (1.24x
    /// the defaults' time in that run).
    grown_from: Option<f64>,
    /// When `grown_from` was read (s, on the readings' clock).
    grown_since_s: f64,
}

/// How fast RSS grows at the application's own settings (its thresholds, nothing frozen by
/// neurogc): the growth the memory budget credits to the application while a setting of
/// neurogc's stands, for the budget bounds RSS against what the application would have had.
/// An evaluation draw's cache, still filling at 7.4 MiB/s at every setting, was frozen; its
/// own growth read as the freeze's ("+42 MiB since the freeze", 34 allowed), and the undo put
/// back its 230 ms full collections (0.92x the defaults' p99, where a freeze held 0.01x).
#[derive(Debug, Clone, Default)]
pub struct OwnGrowth {
    /// The latest run of consecutive windows at the application's own settings, and the one
    /// before it: (s, RSS bytes) each.
    run: Vec<(f64, f64)>,
    before: Vec<(f64, f64)>,
    /// The controller's window that added the last one.
    last_window: Option<u64>,
}

/// Windows of the application's own settings a growth rate is read from, at least.
const GROWTH_WINDOWS: usize = 4;
/// Windows of a run kept: the latest growth is the application's now.
const GROWTH_KEPT: usize = 120;

/// Bytes a second RSS grew from the first of `h`'s (s, RSS bytes) to its last (0 over no time).
fn slope(h: &[(f64, f64)]) -> f64 {
    match (h.first(), h.last()) {
        (Some(a), Some(b)) if b.0 > a.0 => (b.1 - a.1) / (b.0 - a.0),
        _ => 0.0,
    }
}

/// Bytes a second RSS grew in the windows of `h` (s, RSS bytes) that grew least: the least
/// where `h` has up to four windows, else the one a quarter of the way up (never below 0). A
/// pace is what nearly every window grows by: a heap that fills up slows down and is credited
/// as the slower, and a structure rebuilt every few windows steps up in some and stands still
/// in the others. Read as the slower of the run's two halves, evaluation draw 1474 (a 345k-list
/// catalog rebuilt every 2.5 s by a builder thread; RSS 156, 156, 258, 309 MiB in its own
/// windows) grew 51 MiB a second; credited as the application's growth, the freeze kept every
/// replaced copy, to 597 MiB, 1.93x the RSS it had at its own settings.
fn steady(h: &[(f64, f64)]) -> f64 {
    let mut each: Vec<f64> = h.windows(2).map(slope).collect();
    each.sort_by(f64::total_cmp);
    each.get(each.len() / 4).copied().unwrap_or(0.0).max(0.0)
}

impl OwnGrowth {
    /// The controller's window `window`, at the application's own settings, ending at `t_s`
    /// with RSS at `rss`: one that does not follow the last added starts a new run.
    pub fn add(&mut self, window: u64, t_s: f64, rss: f64) {
        let next = self.last_window.is_some_and(|w| w + 1 == window);
        self.last_window = Some(window);
        if !next {
            // A run is kept for what it can tell: a rate from `GROWTH_WINDOWS`, a pace from two
            // (`pace`; the agent leaves the application's settings after two), never in place
            // of a longer one.
            if self.run.len() >= GROWTH_WINDOWS.min(self.before.len().max(2)) {
                self.before = std::mem::take(&mut self.run);
            }
            self.run.clear();
        }
        if self.run.len() == GROWTH_KEPT {
            self.run.remove(0);
        }
        self.run.push((t_s, rss));
    }

    /// The run a rate is read from: the latest long enough.
    fn measured(&self) -> &[(f64, f64)] {
        if self.run.len() >= GROWTH_WINDOWS { &self.run } else { &self.before }
    }

    /// Bytes a second RSS grew at the application's own settings, window by window (`steady`),
    /// and none where fewer than `GROWTH_WINDOWS` windows were measured.
    pub fn rate(&self) -> f64 {
        let run = self.measured();
        if run.len() < GROWTH_WINDOWS {
            return 0.0;
        }
        steady(run)
    }

    /// Bytes a second RSS grew over the latest run of two windows or more at the application's
    /// own settings, window by window (`steady`; 0 before there is one): too short a run for a
    /// rate to credit (`rate`), long enough to tell whether the application grows at all on
    /// its own. A step is not a pace: an evaluation draw's catalog (19k lists, rebuilt every
    /// 3.3 s by a builder thread) rose 8 MiB in the last of its four own windows, read first to
    /// last as 2.7 MiB/s, the pace each copy its full collections were put off kept at
    /// 5000/50/20 (2.4 MiB/s); credited as the application's, its RSS reached 1.46x the
    /// defaults' peak.
    pub fn pace(&self) -> f64 {
        steady(self.latest())
    }

    /// Whether the latest run is long enough to read a rate from (`rate`): the application's
    /// growth measured now.
    pub fn measured_now(&self) -> bool {
        self.run.len() >= GROWTH_WINDOWS
    }

    /// The latest run of two windows or more.
    fn latest(&self) -> &[(f64, f64)] {
        if self.run.len() >= 2 { &self.run } else { &self.before }
    }

    /// Whether RSS stood still over the latest run of two windows or more at the application's
    /// own settings: a pace (`pace`; a step of one window in three is none) of at most `still`
    /// bytes a second.
    pub fn stood_still(&self, still: f64) -> bool {
        self.latest().len() >= 2 && self.pace() <= still
    }

    /// What the application's own growth accounts for over `secs` since a change: at its
    /// rate, and for no longer than it was measured growing (past that, growth is the
    /// change's again: what stops growing at its own settings may have stopped).
    pub fn over(&self, secs: f64) -> f64 {
        let run = self.measured();
        let span = match (run.first(), run.last()) {
            (Some(a), Some(b)) => b.0 - a.0,
            _ => 0.0,
        };
        self.rate() * secs.clamp(0.0, span)
    }
}

/// What RSS did at neurogc's settings says of the application's own pace: each of them keeps
/// at least what its own keep (a higher threshold, a freeze), so a run of windows there in
/// which RSS grew slower than the pace credited to the application (`Controller::own_credit`)
/// says its own growth had slowed as much from the run's start. Evaluation draw 1396 (a
/// 1.2M-object heap filling at 125 MiB/s at its own 700/10/10, the fill stopping at 1.08 GiB)
/// grew 18 MiB a second frozen at 700/10/10; its fill was credited on until the
/// application's own full collection was due, and 100,000/10/10 entered on top grew 560 MiB
/// in three windows, counted as the fill ("memory +222 MiB"): RSS reached 1.77 GiB against a
/// bound of 1.24.
#[derive(Debug, Clone, Default)]
pub struct PaceCaps {
    /// Windows in a row at neurogc's settings, each in force all through.
    run: OwnGrowth,
    /// From when (s), the application's pace was at most so many bytes a second; each lower
    /// than the one before. A run that grows faster later is no proof that the application
    /// does: it may be the setting entered since.
    caps: Vec<(f64, f64)>,
}

impl PaceCaps {
    /// The controller's window `window`, at a setting of neurogc's, ending at `t_s` with RSS at
    /// `rss`, the application credited `pace` bytes a second: where its last `GROWTH_WINDOWS`
    /// grew slower than `shown` of the lower of that pace and the last cap, a cap from the
    /// first of them.
    pub fn add(&mut self, window: u64, t_s: f64, rss: f64, pace: f64, shown: f64) {
        self.run.add(window, t_s, rss);
        let Some(last) = self.run.run.len().checked_sub(GROWTH_WINDOWS) else { return };
        let windows = &self.run.run[last..];
        let lowest = self.caps.last().map_or(pace, |c| c.1.min(pace));
        let grew = slope(windows).max(0.0);
        if grew < shown * lowest {
            self.caps.push((windows[0].0, grew));
        }
    }

    /// The application's own windows told its pace anew: nothing RSS did before at neurogc's
    /// settings bounds it.
    pub fn clear(&mut self) {
        *self = PaceCaps::default();
    }

    /// `credit`, what is credited to the application over the `secs` up to `now_s`, held to
    /// what each cap allows: `raw` over the seconds up to the cap's start (`raw(secs, now_s)`,
    /// as `credit` was reckoned), and the cap's pace after it.
    pub fn cap(&self, secs: f64, now_s: f64, credit: f64, raw: impl Fn(f64, f64) -> f64) -> f64 {
        let from = now_s - secs.max(0.0);
        self.caps.iter().filter(|(at, _)| *at < now_s).fold(credit, |c, &(at, pace)| {
            let start = at.max(from);
            c.min(raw(start - from, start) + pace * (now_s - start))
        })
    }
}

/// What RSS at `rss` has grown from `from` (RSS, s), at `t_s`, past what `own` credits to the
/// application over the seconds since (0 where it has not).
fn grown_past(rss: f64, from: (f64, f64), t_s: f64, own: impl Fn(f64) -> f64) -> f64 {
    (rss - from.0 - own(t_s - from.1)).max(0.0)
}

impl Kept {
    /// neurogc changed something, with RSS at `rss` (the first change counts) and the
    /// application's heap `warm` or not.
    pub fn changed(&mut self, rss: f64, warm: bool, t_s: f64) {
        self.base.get_or_insert((rss, t_s));
        if warm {
            self.warmed(rss, t_s, 0.0);
        }
    }

    /// The application's heap is warm, with RSS at `rss`: growth from here on can be a
    /// setting's own (the first such window after a change counts), on top of `carried`, what
    /// had grown as the settings' before (`grown_unsettled`).
    pub fn warmed(&mut self, rss: f64, t_s: f64, carried: f64) {
        if self.base.is_some() && self.grown_from.is_none() {
            self.grown_from = Some(rss - carried);
            self.grown_since_s = t_s;
        }
    }

    /// neurogc undid its freeze with RSS at `rss`: growth is measured afresh from here as a
    /// later setting's own (from a `warm` heap; else from the first warm window), but what RSS
    /// grew before stays neurogc's (`base`, `most`): the allocator seldom hands back what the
    /// freeze held. Counted afresh whole, evaluation draw 1820 at half speed (a closed-loop
    /// service at 33 MiB) had 54 MiB read as its own after its undo, and the next moves took
    /// RSS to 62.5 MiB, where the bound was 48.9.
    pub fn thawed(&mut self, rss: f64, warm: bool, t_s: f64) {
        if self.base.is_some() {
            self.grown_from = warm.then_some(rss);
            self.grown_since_s = t_s;
        }
    }

    /// Whether growth is measured from a warm window yet (`warmed`).
    pub fn is_warm(&self) -> bool {
        self.grown_from.is_some()
    }

    /// A full collection of the application's own told that what RSS holds at `rss` is its
    /// live data: growth, and what settings kept, are measured from here, at `t_s`.
    pub fn rebase(&mut self, rss: f64, t_s: f64) {
        if self.base.is_some() {
            *self = Kept { base: Some((rss, t_s)), most: 0.0, grown_from: Some(rss), grown_since_s: t_s };
        }
    }

    /// When neurogc made its first change (s), if it has.
    pub fn first_change_s(&self) -> Option<f64> {
        self.base.map(|(_, t)| t)
    }

    /// Whether neurogc has changed anything yet.
    pub fn any(&self) -> bool {
        self.base.is_some()
    }

    /// What RSS has grown since neurogc's first change, or since the heap was warm where that
    /// came later (0 before either), at `t_s`, past the application's own growth since
    /// (`own`: bytes credited to it over so many seconds).
    pub fn grown(&self, rss: f64, t_s: f64, own: impl Fn(f64) -> f64) -> f64 {
        self.grown_from.map_or(0.0, |from| grown_past(rss, (from, self.grown_since_s), t_s, own))
    }

    /// What RSS has grown since neurogc's first change (0 before one), at `t_s`, past the
    /// application's own growth since (`own`, as for `grown`): what a setting is judged to keep
    /// before the heap is warm, with `own` at the pace its own windows grew at.
    pub fn grown_unsettled(&self, rss: f64, t_s: f64, own: impl Fn(f64) -> f64) -> f64 {
        self.base.map_or(0.0, |from| grown_past(rss, from, t_s, own))
    }

    /// `keeps`: the model's figure for the setting in force, over its horizon (garbage takes
    /// that long to pile up, and RSS shows what has so far). Returns what the setting
    /// in force costs, which its budget judges, and the RSS the application would have without
    /// neurogc, which a relative budget is a share of: growth past what neurogc's settings keep
    /// is the application's own, and so is `own`, what is credited to it since the first change
    /// (bytes; `first_change_s`): a cache filling at 13 MiB/s had grown 159 MiB since then,
    /// and a figure of 59 MiB for 50,000/20/10 frozen stood against it, though RSS had grown
    /// 2 MiB past the fill since the freeze.
    pub fn split(&mut self, rss: f64, keeps: f64, own: f64) -> (f64, f64) {
        let Some((base, _)) = self.base else { return (0.0, rss) };
        let grown = (rss - base - own).max(0.0);
        self.most = self.most.max(keeps);
        (keeps.min(grown), (rss - self.most.min(grown)).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing credited to the application's own growth.
    fn none(_: f64) -> f64 {
        0.0
    }

    #[test]
    fn what_a_setting_left_behind_still_holds_is_not_counted_as_the_applications() {
        const MIB: f64 = 1048576.0;
        let mut kept = Kept::default();
        // Before neurogc changes anything, all of RSS is the application's.
        assert_eq!(kept.split(400.0 * MIB, 20.0 * MIB, 0.0), (0.0, 400.0 * MIB));
        kept.changed(400.0 * MIB, true, 0.0);
        // A setting keeping 20 MiB, and RSS grown by as much: the application's is 400 MiB.
        assert_eq!(kept.split(420.0 * MIB, 20.0 * MIB, 0.0), (20.0 * MIB, 400.0 * MIB));
        // Back at a setting that keeps nothing, RSS stays up: still not the application's, and
        // the budget stays a share of 400 MiB; the setting in force costs nothing.
        kept.changed(420.0 * MIB, true, 0.0);
        assert_eq!(kept.split(420.0 * MIB, 0.0, 0.0), (0.0, 400.0 * MIB));
        // Growth past what any setting kept is the application's own (a heap warming up).
        assert_eq!(kept.split(450.0 * MIB, 0.0, 0.0), (0.0, 430.0 * MIB));
    }

    #[test]
    fn what_the_applications_own_growth_accounts_for_caps_no_settings_figure() {
        const MIB: f64 = 1048576.0;
        // A cache filling at 13 MiB/s: 160 MiB grown in 10 s since the first change, 130 of it
        // the fill. A figure of 59 MiB for the setting in force is held to the 30 past it, and
        // the application's RSS is all but those 30.
        let mut kept = Kept::default();
        kept.changed(200.0 * MIB, true, 0.0);
        assert_eq!(kept.split(360.0 * MIB, 59.0 * MIB, 130.0 * MIB), (30.0 * MIB, 330.0 * MIB));
        // Nothing credited: the figure stands against the whole growth.
        assert_eq!(kept.split(360.0 * MIB, 59.0 * MIB, 0.0), (59.0 * MIB, 301.0 * MIB));
    }

    #[test]
    fn the_applications_own_growth_is_credited_at_its_slower_rate_for_as_long_as_measured() {
        const MIB: f64 = 1048576.0;
        let mut own = OwnGrowth::default();
        // A cache filling at 7 MiB/s, then at 3 MiB/s, over eight windows at its own settings.
        for w in 0..8 {
            let rss = if w <= 4 { 200.0 + 7.0 * w as f64 } else { 228.0 + 3.0 * (w - 4) as f64 };
            own.add(w, w as f64, rss * MIB);
        }
        assert!((own.rate() - 3.0 * MIB).abs() < 1.0, "{}", own.rate() / MIB);
        // Credited for no longer than measured: 7 s.
        assert!((own.over(20.0) - 21.0 * MIB).abs() < 1.0);
        let mut kept = Kept::default();
        kept.changed(240.0 * MIB, true, 10.0);
        assert_eq!(kept.grown(246.0 * MIB, 12.0, |s| own.over(s)), 0.0, "the application's own 6 MiB");
        assert!((kept.grown(270.0 * MIB, 12.0, |s| own.over(s)) - 24.0 * MIB).abs() < 1.0);
        // Windows at neurogc's settings break the run; three own ones after them are too few to
        // read a rate from, and the run before still tells it.
        for w in 20..23 {
            own.add(w, w as f64, 300.0 * MIB);
        }
        assert!((own.rate() - 3.0 * MIB).abs() < 1.0);
        // Four that do not grow: the application's RSS stands still now.
        own.add(23, 23.0, 300.0 * MIB);
        assert_eq!(own.rate(), 0.0);
        // A heap that shrank is credited nothing.
        let mut falling = OwnGrowth::default();
        for w in 0..6 {
            falling.add(w, w as f64, (300.0 - w as f64) * MIB);
        }
        assert_eq!(falling.over(10.0), 0.0);
    }

    #[test]
    fn a_step_in_the_applications_own_windows_is_no_pace() {
        const MIB: f64 = 1048576.0;
        // A catalog rebuilt in the last of four own windows: 8 MiB in one step.
        let mut step = OwnGrowth::default();
        for (w, rss) in [21.0, 21.0, 21.0, 29.0].into_iter().enumerate() {
            step.add(w as u64, w as f64, rss * MIB);
        }
        assert_eq!(step.pace(), 0.0);
        assert!(step.stood_still(0.0));
        // A cache filling at 16 MiB/s: two windows, or three, tell its pace.
        let mut fill = OwnGrowth::default();
        fill.add(0, 0.0, 200.0 * MIB);
        fill.add(1, 1.0, 216.0 * MIB);
        assert_eq!(fill.pace(), 16.0 * MIB);
        fill.add(2, 2.0, 231.0 * MIB);
        assert_eq!(fill.pace(), 15.0 * MIB);
        assert!(!fill.stood_still(MIB));
    }

    #[test]
    fn a_structure_rebuilt_every_few_windows_grows_at_no_pace() {
        const MIB: f64 = 1048576.0;
        // Evaluation draw 1474's own windows (a catalog rebuilt every 2.5 s): two steps after
        // two windows that stood still, and the windows after them, at every setting.
        let mut own = OwnGrowth::default();
        for (w, rss) in [156.0, 156.0, 258.0, 309.0, 309.0, 345.0, 309.0].into_iter().enumerate() {
            own.add(w as u64, w as f64, rss * MIB);
            assert_eq!((own.pace(), own.rate()), (0.0, 0.0), "window {w}");
        }
        // A heap growing 2 MiB a window, one window of eight standing still: still a pace.
        let mut fill = OwnGrowth::default();
        for (w, rss) in [89.0, 91.0, 93.0, 93.0, 95.0, 97.0, 99.0, 101.0].into_iter().enumerate() {
            fill.add(w as u64, w as f64, rss * MIB);
        }
        assert_eq!(fill.rate(), 2.0 * MIB);
    }

    #[test]
    fn rss_at_neurogcs_settings_growing_slower_than_the_credited_pace_caps_it_from_then() {
        const MIB: f64 = 1048576.0;
        let raw = |secs: f64, _now: f64| 20.0 * MIB * secs;
        // Credited 20 MiB/s; four windows at neurogc's settings growing 16 MiB each keep three
        // quarters of that pace or more: no cap.
        let mut caps = PaceCaps::default();
        for w in 0..4 {
            caps.add(w, w as f64, (400.0 + 16.0 * w as f64) * MIB, 20.0 * MIB, 0.75);
        }
        assert_eq!(caps.cap(10.0, 10.0, raw(10.0, 10.0), raw), 200.0 * MIB);
        // Four growing 1 MiB each, from 10 s: from then on the application grew 1 MiB/s at most.
        let mut caps = PaceCaps::default();
        for w in 10..14 {
            caps.add(w, w as f64, (480.0 + (w - 10) as f64) * MIB, 20.0 * MIB, 0.75);
        }
        // Credited from 5 s to 16 s: 20 MiB/s up to 10 s, 1 MiB/s after.
        assert_eq!(caps.cap(11.0, 16.0, raw(11.0, 16.0), raw), 106.0 * MIB);
        // Spans that begin after the cap are credited its pace alone.
        assert_eq!(caps.cap(2.0, 16.0, raw(2.0, 16.0), raw), 2.0 * MIB);
        // Windows that then grow 60 MiB each (a setting entered on top) lift no cap.
        for w in 14..20 {
            caps.add(w, w as f64, (483.0 + 60.0 * (w - 13) as f64) * MIB, 20.0 * MIB, 0.75);
        }
        assert_eq!(caps.cap(11.0, 16.0, raw(11.0, 16.0), raw), 106.0 * MIB);
        // The application's own pace measured anew clears every cap.
        caps.clear();
        assert_eq!(caps.cap(11.0, 16.0, raw(11.0, 16.0), raw), 220.0 * MIB);
    }

    #[test]
    fn growth_while_the_heap_fills_is_not_a_settings_own() {
        const MIB: f64 = 1048576.0;
        let mut kept = Kept::default();
        kept.warmed(200.0 * MIB, 0.0, 0.0); // nothing changed yet: nothing to measure from
        assert_eq!(kept.grown(260.0 * MIB, 0.0, none), 0.0);
        // The first change before the heap is warm: the application's warm-up is its own.
        kept.changed(220.0 * MIB, false, 0.0);
        assert_eq!(kept.grown(280.0 * MIB, 0.0, none), 0.0);
        kept.warmed(280.0 * MIB, 0.0, 0.0);
        kept.warmed(290.0 * MIB, 0.0, 0.0); // the first warm window counts
        assert_eq!(kept.grown(300.0 * MIB, 0.0, none), 20.0 * MIB);
        // A first change once the heap is warm measures from that change.
        let mut kept = Kept::default();
        kept.changed(220.0 * MIB, true, 0.0);
        kept.warmed(240.0 * MIB, 0.0, 0.0);
        assert_eq!(kept.grown(250.0 * MIB, 0.0, none), 30.0 * MIB);
    }
}
