//! Plain-language findings, the most important first. Each has a stable id and a severity (for
//! `--json` consumers), and says only what the trace itself supports: advice that the trace
//! shows did not work, or that was already taken, is not given.
use serde::Serialize;

use super::{Report, analysis::Analysis, pct};
use crate::sinks::view::{duration, thresholds};

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

#[derive(Serialize, Clone, Debug)]
pub struct Finding {
    /// Stable, kebab-case: what the finding is about ("gc-share", "longest-pause", ...).
    pub id: &'static str,
    pub severity: Severity,
    pub text: String,
}

fn finding(id: &'static str, severity: Severity, text: String) -> Finding {
    Finding { id, severity, text }
}

/// What a finding says where the recording holds advise mode's recommendation: that one, not
/// another of the report's own.
const RECORDED: &str = "what advise mode recommended for this run is under \"recorded advice\"";

/// A change's effect is measured when both sides have windows and the side before had GC.
fn measured(c: &super::ThresholdChange) -> bool {
    c.before.seconds > 0.0 && c.after.seconds > 0.0 && c.before.gc_share > 0.0
}

pub fn findings(r: &Report, a: &Analysis) -> Vec<Finding> {
    use Severity::*;
    let mut out = Vec::new();
    if let Some(why) = &r.trace.truncated {
        out.push(finding(
            "trace-incomplete",
            Warning,
            format!("The trace is incomplete: {why}. Everything below covers the part that was read."),
        ));
    }
    if r.summary.is_none() && r.trace.truncated.is_none() {
        out.push(finding(
            "no-summary",
            Info,
            "There is no summary record: the recorder was killed or is still running, so the trace ends abruptly."
                .to_owned(),
        ));
    }
    if r.collections == 0 {
        let why = if r.trace.truncated.is_some() {
            "No collection in the part of the trace that could be read."
        } else {
            "No collection was recorded: the process allocated too few container objects to trigger one, or the \
             recording was too short."
        };
        out.push(finding("no-collections", Info, why.to_owned()));
        return out;
    }
    let gen2 = &r.generations[2];
    if gen2.collections > 0
        && gen2.share_of_pause_time >= 0.3
        && gen2.share_of_pause_time >= 3.0 * gen2.share_of_collections
    {
        let froze_before = r.attach.sample.freeze_count.is_some_and(|n| n > 0);
        let advice = match r.freezes.iter().find(|f| f.event == "frozen") {
            None if r.decisions.recommendation.is_some() => RECORDED.to_owned(),
            Some(f) => format!(
                "neurogc froze {} objects at +{:.1} s to move long-lived objects out of their way",
                f.count.unwrap_or(0),
                f.at_s
            ),
            None if froze_before => {
                "the process had already frozen objects (gc.freeze()) when the trace began, \
                                     and full collections still cost this much"
                    .to_owned()
            }
            None => "gc.freeze() after start-up moves long-lived objects out of their way".to_owned(),
        };
        out.push(finding(
            "gen2-pauses",
            Warning,
            format!(
                "gen2 collections are {} of collections but {} of pause time: the full collections are the pauses \
                 users feel ({advice}).",
                pct(gen2.share_of_collections),
                pct(gen2.share_of_pause_time)
            ),
        ));
    }
    if r.gc_share >= 0.02 {
        out.push(gc_share(r, a));
    }
    if let Some(f) = garbage(r) {
        out.push(f);
    }
    if let Some(w) = &r.worst_minute
        && w.gc_share >= 0.05
        && w.gc_share >= 3.0 * r.gc_share
        && r.span_s > 2.0 * w.length_s
    {
        out.push(finding(
            "bursts",
            Info,
            format!(
                "The worst minute (from +{:.0} s) spent {} in GC, {:.1}× the average: the cost comes in bursts.",
                w.start_s,
                pct(w.gc_share),
                w.gc_share / r.gc_share.max(1e-12)
            ),
        ));
    }
    if let Some(p) = r.longest.first()
        && p.duration_ns >= 10_000_000
    {
        out.push(finding(
            "longest-pause",
            if p.duration_ns >= 100_000_000 { Critical } else { Warning },
            format!(
                "The longest pause was {} (gen{} at +{:.1} s, thread {}): every thread of the process waited for it.",
                duration(p.duration_ns),
                p.r#gen,
                p.at_s,
                p.tid
            ),
        ));
    }
    if let Some(f) = rss_growth(a) {
        out.push(f);
    }
    let uncollectable: i64 = r.generations.iter().map(|g| g.uncollectable).sum();
    if uncollectable > 0 {
        let (was, they, grow) =
            if uncollectable == 1 { ("was", "it stays", "grows") } else { ("were", "they stay", "grow") };
        out.push(finding(
            "uncollectable",
            Warning,
            format!(
                "{} {was} uncollectable: {they} in gc.garbage (cycles with legacy finalizers) and {grow} memory.",
                crate::text::plural(uncollectable as u64, "object")
            ),
        ));
    }
    for c in r.threshold_changes.iter().filter(|c| measured(c)) {
        out.push(finding(
            "threshold-change",
            Info,
            format!(
                "At +{:.0} s {} set the thresholds {} → {}: {}.",
                c.at_s,
                c.who(),
                thresholds(c.from),
                thresholds(c.to),
                c.effect()
            ),
        ));
    }
    if let Some(s) = &r.summary
        && s.lost_events > 0
    {
        out.push(finding(
            "lost-events",
            Warning,
            format!(
                "{} lost (the ring buffer overflowed): counts are a lower bound.",
                crate::text::plural(s.lost_events, "collection event")
            ),
        ));
    }
    out
}

/// RSS still growing over the second half of the trace, by a quarter and 16 MiB at least, to
/// the highest it reads in the last quarter (a process that exits frees much of it in its last
/// window). Growth before that is warm-up as often as not: a language server's parse cache
/// filled 45 → 140 MiB in its first 7 s and held, and all of it read as "a leak?". What full
/// collections found is given by its median: one that freed 240,000 objects among nine that
/// freed none averaged 24,000 each.
fn rss_growth(a: &Analysis) -> Option<Finding> {
    let (first, end) = (a.windows.first()?.end_s, a.windows.last()?.end_s);
    let mid = a.windows.iter().find(|w| w.end_s >= (first + end) / 2.0)?;
    let last = a
        .windows
        .iter()
        .filter(|w| w.end_s >= first + (end - first) * 0.75)
        .max_by(|x, y| x.rss_mib.total_cmp(&y.rss_mib))?;
    if mid.rss_mib <= 0.0 || last.rss_mib < (mid.rss_mib * 1.25).max(mid.rss_mib + 16.0) {
        return None;
    }
    let full = match median(&a.full_found) {
        None => "no full collection ran".to_owned(),
        Some(m) => {
            let none = a.full_found.iter().filter(|&&n| n <= 0).count();
            format!(
                "the median full collection freed {}{}",
                crate::text::plural(m.max(0) as u64, "object"),
                if none > 0 {
                    format!(" ({none} of {} freed none)", a.full_found.len())
                } else {
                    String::new()
                }
            )
        }
    };
    Some(finding(
        "rss-growth",
        Severity::Warning,
        format!(
            "RSS kept growing after the first half of the trace, from {:.0} MiB at +{:.0} s to {:.0} MiB at \
             +{:.0} s, and {full}: live data keeps growing \u{2014} a leak?",
            mid.rss_mib, mid.end_s, last.rss_mib, last.end_s
        ),
    ))
}

/// One type the bulk of what the collector freed (`--census`): the cycles through it are what
/// the collector spends its time on, and making them acyclic removes that cost, where tuning
/// only moves it. Where the census read which attribute closes the cycle (of the type itself,
/// else of the first class among the top three), the finding names it and the fix.
fn garbage(r: &Report) -> Option<Finding> {
    let c = r.census.as_ref()?;
    let top = c.dominant()?;
    let others: Vec<&str> = c.types.iter().skip(1).take(2).map(|t| t.name.as_str()).collect();
    let severity = if r.gc_share >= 0.02 { Severity::Warning } else { Severity::Info };
    let share = format!(
        "`{}` objects are {} of what the collector freed in {} ({} of the bytes{})",
        top.name,
        pct(top.share_of_objects),
        crate::text::plural(c.censuses, "census"),
        pct(top.share_of_bytes),
        if others.is_empty() { String::new() } else { format!("; then {}", others.join(", ")) }
    );
    let text = match c.closing() {
        Some((class, e)) => format!(
            "{share}. The cycle closes through `{}.{}` \u{2192} `{}`, in {} of {} sampled `{}`: make \
             `{}` a weakref (`weakref.ref`, or a `WeakValueDictionary` for many), or `del` it once \
             done, and reference counting frees them with no collection.",
            class.name,
            e.attr,
            e.to,
            pct(e.share),
            e.sampled,
            class.name,
            e.attr
        ),
        None => format!(
            "{share}: cycles through them are what it walks. Where they refer back to each other (a \
             parent, a closure over itself), a weakref or a `del` once done lets reference counting \
             free them, and the collections they cause go with them."
        ),
    };
    Some(finding("garbage-type", severity, text))
}

/// The middle value (the lower of the two middle ones).
fn median(values: &[i64]) -> Option<i64> {
    let mut v = values.to_vec();
    if v.is_empty() {
        return None;
    }
    let mid = (v.len() - 1) / 2;
    Some(*v.select_nth_unstable(mid).1)
}

/// The collector's share of wall time, and what raising threshold0 did where the trace shows it.
fn gc_share(r: &Report, a: &Analysis) -> Finding {
    let severity = if r.gc_share >= 0.1 { Severity::Critical } else { Severity::Warning };
    let took = format!(
        "The collector took {} of wall time, {:.0} collections/s",
        pct(r.gc_share),
        r.collections_per_s
    );
    // What the trace measured of raising threshold0, the most recent raise first.
    let raise = r.threshold_changes.iter().rev().find(|c| c.to[0] > c.from[0] && measured(c));
    let advice = match raise {
        Some(c) if c.after.gc_share < 0.9 * c.before.gc_share => format!(
            "raising threshold0 {} → {} at +{:.0} s cut it from {} to {}",
            c.from[0],
            c.to[0],
            c.at_s,
            pct(c.before.gc_share),
            pct(c.after.gc_share)
        ),
        Some(c) => format!(
            "raising threshold0 {} → {} at +{:.0} s {} ({} → {}): the cost is not in how often young collections run",
            c.from[0],
            c.to[0],
            c.at_s,
            if c.after.gc_share < c.before.gc_share { "cut it only a little" } else { "did not cut it" },
            pct(c.before.gc_share),
            pct(c.after.gc_share)
        ),
        // The recording holds advise mode's own answer: the report points to it rather than
        // give another (it said "raise threshold0" where the advice was to keep 700 and freeze).
        None if r.decisions.recommendation.is_some() => RECORDED.to_owned(),
        // One type is most of what it frees: removing those cycles removes the cost, where a
        // threshold only moves it.
        None if garbage(r).is_some() => {
            "most of what it frees is one type's cycles (below): removing them removes the cost, where \
             tuning only moves it"
                .to_owned()
        }
        // Full collections take most of the time: how often young ones run is not the cost (a
        // language server's gen2 was 91% of its pause time, and the report said raise threshold0).
        None if r.generations[2].share_of_pause_time >= 0.5 => format!(
            "full collections are {} of that, which raising threshold0 does not cut; `neurogc-agent \
             --mode advise` weighs what would",
            pct(r.generations[2].share_of_pause_time)
        ),
        None => {
            let first = a.windows.iter().find_map(|w| w.thresholds).or(r.attach.sample.thresholds);
            let t0 = first.map_or("threshold0".to_owned(), |t| format!("threshold0 (now {})", t[0]));
            format!(
                "raising {t0} usually cuts that; `neurogc-agent --mode advise` shows what it would change"
            )
        }
    };
    finding("gc-share", severity, format!("{took}: {advice}."))
}
