//! The human views: a screen redrawn in place when stdout is a terminal, one line per refresh
//! otherwise. Both render the same `Frame`.
use std::fmt::Write as _;

use neurogc_trace::{GenSummary, ModelEffect};

use crate::{session::aggregate::Aggregate, text};

pub struct Frame<'a> {
    pub pid: i32,
    pub name: &'a str,
    pub python: &'a str,
    pub probe: &'a str,
    pub elapsed_s: f64,
    pub agg: &'a Aggregate,
    /// Collections per generation and GC time during the last refresh interval.
    pub interval_collections: [u64; 3],
    pub interval_s: f64,
    pub gc_share: f64,
    /// Thresholds and gen0 count, when read from memory.
    pub settings: Option<([i64; 3], i64)>,
    /// Net container allocations per second, estimated (see docs/how-it-works.md).
    pub alloc_rate: Option<f64>,
    pub lost: u64,
    pub note: Option<&'a str>,
    /// Where most of the last window's collections started (builds whose stacks are read).
    pub trigger: Option<&'a str>,
    /// What the last garbage census found (`--census`, `garbage`).
    pub garbage: Option<&'a str>,
    /// The last decision of advise/act mode.
    pub decision: Option<&'a str>,
}

/// The generation a census's collection was asked for: "gen0", or "auto" for the collector's
/// own choice (3.13+).
pub fn census_generation(arg_gen: i64) -> String {
    if arg_gen < 0 { "auto".to_owned() } else { format!("gen{arg_gen}") }
}

/// A census in one line, the closing edge of its first class that has one: "garbage (gen0,
/// 775 objects): Tok 60% (.parent → Tok) · Node 10% · cell 10%".
pub fn garbage(c: &neurogc_trace::Census) -> String {
    let total = c.types.iter().map(|t| t.objects).sum::<u64>().max(1);
    let generation = census_generation(c.arg_gen);
    let mut edge_said = false;
    let types: Vec<String> = c
        .types
        .iter()
        .take(4)
        .map(|t| {
            let share = format!("{} {:.0}%", t.name, t.objects as f64 * 100.0 / total as f64);
            match t.edges.first().filter(|_| !edge_said) {
                Some(e) => {
                    edge_said = true;
                    format!("{share} (.{} → {})", e.attr, e.to)
                }
                None => share,
            }
        })
        .collect();
    let sample = if c.complete { "" } else { ", a sample" };
    format!("garbage ({generation}, {}{sample}): {}", text::plural(c.objects, "object"), types.join(" · "))
}

/// A pause in the unit that reads best, picked after rounding: 999.7 µs is "1.0 ms", not
/// "1000 µs". A space before the unit, as everywhere else the agent writes one (advice said
/// "45.3 ms" where the tables said "45.3ms").
pub fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..999_500 => format!("{:.0} µs", ns as f64 / 1e3),
        999_500..999_950_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

pub fn count(n: f64) -> String {
    match n.abs() {
        x if x < 10_000.0 => format!("{n:.0}"),
        x if x < 1_000_000.0 => format!("{:.1}k", n / 1e3),
        _ => format!("{:.2}M", n / 1e6),
    }
}

/// Thresholds as people write them: "700/10/10".
pub fn thresholds(t: [i64; 3]) -> String {
    format!("{}/{}/{}", t[0], t[1], t[2])
}

/// The learned model's part in a decision, in words: "the model (weight 0.60) moved
/// 5000/10/10's predicted GC share from 8.1% to 6.3%", with the factors on its pauses where it
/// moved them by a percent or more.
pub fn model_effect(m: &ModelEffect) -> String {
    let Some(moved) = &m.moved else {
        return if m.weight > 0.0 {
            format!("the model (weight {:.2}) weighed no other setting", m.weight)
        } else {
            "the model has no weight here yet: it earns it as moves bear its corrections out".to_owned()
        };
    };
    let [analytic, corrected] = moved.gc_share.map(|s| s * 100.0);
    let mut words = if format!("{analytic:.1}") == format!("{corrected:.1}") {
        format!(
            "the model (weight {:.2}) left {}'s predicted GC share at {analytic:.1}%",
            m.weight, moved.setting
        )
    } else {
        format!(
            "the model (weight {:.2}) moved {}'s predicted GC share from {analytic:.1}% to {corrected:.1}%",
            m.weight, moved.setting
        )
    };
    if moved.pause_ln.iter().any(|k| k.abs() >= 0.01) {
        let factors: Vec<String> = moved.pause_ln.iter().map(|k| format!("x{:.2}", k.exp())).collect();
        words.push_str(&format!(", its pauses {}", factors.join("/")));
    }
    words
}

fn settings_text(f: &Frame) -> String {
    match f.settings {
        Some((t, count0)) => format!("thresholds {} · gen0 count {count0}", thresholds(t.map(i64::from))),
        None => "thresholds unknown (GC state not located)".to_owned(),
    }
}

fn alloc_text(f: &Frame) -> String {
    match (f.alloc_rate, f.settings) {
        (Some(_), Some((t, count0))) if !alloc_estimate_holds(t[0], count0) => {
            format!("not estimated (gen0 count {count0} > 2× threshold0)")
        }
        (Some(r), _) => format!("{}/s", count(r)),
        (None, _) => "n/a".to_owned(),
    }
}

/// The allocation estimate (collections × threshold0 + the change in gen0's count) assumes a
/// collection runs once gen0's count reaches threshold0. Far above it (3.12+ defers collection
/// to the eval breaker, 3.14's incremental collector counts differently, gc.disable()), that
/// does not hold and the estimate is not shown.
pub fn alloc_estimate_holds(threshold0: i64, count0: i64) -> bool {
    threshold0 > 0 && count0 <= 2 * threshold0
}

pub fn screen(f: &Frame) -> String {
    let mut s = String::new();
    // Home + clear: redraw in place like top.
    s.push_str("\x1b[H\x1b[2J");
    // The title is fitted without its escape codes, which take no columns.
    let title = [
        "neurogc".to_owned(),
        format!("pid {} {}", f.pid, f.name),
        format!("CPython {}", f.python),
        f.probe.to_owned(),
        format!("{:.0} s", f.elapsed_s),
    ];
    let title = text::fit(&title, " · ", 2).replacen("neurogc", "\x1b[1mneurogc\x1b[0m", 1);
    let _ = writeln!(s, "{title}");
    let state = [
        settings_text(f),
        format!("GC {:.2}% of wall time", f.gc_share * 100.0),
        format!("net allocs {}", alloc_text(f)),
        format!("lost events {}", f.lost),
    ];
    let _ = writeln!(s, "{}", text::fit(&state, " · ", 2));
    if let Some(trigger) = f.trigger {
        let _ = writeln!(s, "{}", text::wrap(trigger, 2));
    }
    if let Some(garbage) = f.garbage {
        let _ = writeln!(s, "{}", text::wrap(garbage, 2));
    }
    if let Some(note) = f.note {
        let _ = writeln!(s, "\x1b[33m{}\x1b[0m", text::wrap(note, 2));
    }
    if let Some(decision) = f.decision {
        let _ = writeln!(s, "\x1b[36m{}\x1b[0m", text::wrap_lines(decision, 2));
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "\x1b[7m{:<4} {:>8} {:>10} {:>9} {:>9} {:>9} {:>11} {:>8}\x1b[0m",
        "GEN", "COLL/s", "TOTAL", "P50", "P99", "MAX", "COLLECTED", "UNCOLL"
    );
    for (g, t) in f.agg.gens.iter().enumerate() {
        let rate = f.interval_collections[g] as f64 / f.interval_s.max(1e-9);
        let q = |q: f64| {
            if t.collections == 0 { "-".to_owned() } else { duration(t.pauses.value_at_quantile(q)) }
        };
        let _ = writeln!(
            s,
            "{:<4} {:>8} {:>10} {:>9} {:>9} {:>9} {:>11} {:>8}",
            g,
            count(rate),
            t.collections,
            q(0.5),
            q(0.99),
            if t.collections == 0 { "-".to_owned() } else { duration(t.pauses.max()) },
            count(t.collected as f64),
            t.uncollectable
        );
    }
    if f.agg.unknown_gen.collections > 0 {
        let _ = writeln!(s, "?    {:>8} {:>10}  (generation unknown)", "", f.agg.unknown_gen.collections);
    }
    let _ =
        writeln!(s, "\npauses since attach · rates over the last {:.1} s · Ctrl-C to detach", f.interval_s);
    s
}

/// One refresh as fields, fitted to 80 columns (a wrapped refresh is indented under its time).
pub fn line(f: &Frame) -> String {
    let mut fields = vec![format!("{:>6.1} s", f.elapsed_s)];
    for (g, t) in f.agg.gens.iter().enumerate() {
        let rate = f.interval_collections[g] as f64 / f.interval_s.max(1e-9);
        let mut field = format!("gen{g} {} ({}/s)", t.collections, count(rate));
        if t.collections > 0 {
            let _ = write!(
                field,
                " p50 {} p99 {} max {}",
                duration(t.pauses.value_at_quantile(0.5)),
                duration(t.pauses.value_at_quantile(0.99)),
                duration(t.pauses.max())
            );
        }
        fields.push(field);
    }
    fields.push(format!("gc {:.2}%", f.gc_share * 100.0));
    fields.push(format!("allocs {}", alloc_text(f)));
    fields.push(settings_text(f));
    fields.push(format!("lost {}", f.lost));
    fields.extend(f.trigger.map(str::to_owned));
    fields.extend(f.garbage.map(str::to_owned));
    if let Some(decision) = f.decision {
        fields.extend(decision.lines().map(str::to_owned));
    }
    text::fit(&fields, " | ", 9)
}

/// How a run ended, in words, from the summary record's `stopped` (its codes are for machines).
fn ended(stopped: &str, elapsed_s: f64) -> String {
    let after = format!("after {elapsed_s:.1} s");
    match stopped {
        "duration" => format!("ran {elapsed_s:.1} s, as --duration asked"),
        "target-exited" => format!("the target exited {after}"),
        "output-closed" => format!("its reader went away {after}"),
        "act-failed" => format!("steering failed {after}"),
        "failed" => format!("failed {after}"),
        s if s.starts_with("SIG") => format!("stopped by {s} {after}"),
        other => format!("{other} {after}"),
    }
}

/// The closing table printed when the agent detaches (human output).
pub fn summary(gens: &[GenSummary], stopped: &str, elapsed_s: f64, gc_share: f64, lost: u64) -> String {
    let total: u64 = gens.iter().map(|g| g.collections).sum();
    let mut s = text::wrap(
        &format!(
            "neurogc summary ({}): {}, GC {:.2}% of wall time, lost events {lost}",
            ended(stopped, elapsed_s),
            text::plural(total, "collection"),
            gc_share * 100.0
        ),
        2,
    );
    s.push('\n');
    let _ = writeln!(
        s,
        "{:<4} {:>11} {:>11} {:>8} {:>9} {:>9} {:>9} {:>11}",
        "GEN", "COLLECTIONS", "COLLECTED", "UNCOLL", "P50", "P99", "MAX", "TOTAL PAUSE"
    );
    for g in gens {
        let label = if g.r#gen < 0 { "?".to_owned() } else { g.r#gen.to_string() };
        // A generation that never ran has no pauses, not pauses of 0 ns.
        let duration = |ns| if g.collections == 0 { "-".to_owned() } else { duration(ns) };
        let _ = writeln!(
            s,
            "{label:<4} {:>11} {:>11} {:>8} {:>9} {:>9} {:>9} {:>11}",
            g.collections,
            g.collected,
            g.uncollectable,
            duration(g.pause_ns.p50),
            duration(g.pause_ns.p99),
            duration(g.pause_ns.max),
            duration(g.pause_ns.total)
        );
    }
    s.pop();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_census_reads_as_one_line_of_shares() {
        let t = |name: &str, objects| neurogc_trace::CensusType {
            name: name.into(),
            objects,
            ..Default::default()
        };
        let mut c = neurogc_trace::Census {
            ts_ns: 0,
            tid: 1,
            arg_gen: 0,
            objects: 100,
            complete: true,
            types: vec![t("Tok", 60), t("Node", 10), t("cell", 10), t("function", 10), t("tuple", 10)],
            ..Default::default()
        };
        assert_eq!(garbage(&c), "garbage (gen0, 100 objects): Tok 60% · Node 10% · cell 10% · function 10%");
        let edge = |attr: &str, to: &str| neurogc_trace::CensusEdge {
            attr: attr.into(),
            to: to.into(),
            instances: 16,
        };
        c.types[0].edges = vec![edge("parent", "Tok")];
        c.types[1].edges = vec![edge("me", "Node")];
        assert_eq!(
            garbage(&c),
            "garbage (gen0, 100 objects): Tok 60% (.parent → Tok) · Node 10% · cell 10% · function 10%"
        );
        (c.arg_gen, c.complete) = (-1, false);
        assert!(garbage(&c).starts_with("garbage (auto, 100 objects, a sample): Tok 60%"), "{}", garbage(&c));
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(850), "850 ns");
        assert_eq!(duration(38_400), "38 µs");
        assert_eq!(duration(999_499), "999 µs");
        assert_eq!(duration(999_700), "1.0 ms");
        assert_eq!(duration(999_949_000), "999.9 ms");
        assert_eq!(duration(999_960_000), "1.00 s");
        assert_eq!(duration(1_250_000), "1.2 ms");
        assert_eq!(duration(2_500_000_000), "2.50 s");
        assert_eq!(count(700.0), "700");
        assert_eq!(count(277_100.0), "277.1k");
        assert_eq!(count(7_769_865.0), "7.77M");
    }

    #[test]
    fn the_summary_shows_no_pauses_for_a_generation_that_never_ran() {
        use neurogc_trace::{GenSummary, PauseSummary};
        let generation = |g: i8, n: u64, ns: u64| GenSummary {
            r#gen: g,
            collections: n,
            collected: 0,
            uncollectable: 0,
            pause_ns: PauseSummary { total: ns * n, p50: ns, p99: ns, max: ns },
        };
        let s = summary(&[generation(0, 3, 999_700), generation(2, 0, 0)], "detached", 1.0, 0.01, 0);
        let rows: Vec<&str> = s.lines().skip_while(|l| !l.starts_with("GEN")).skip(1).collect();
        assert!(rows[0].contains("1.0 ms") && !rows[0].contains("µs"), "{s}");
        assert!(rows[1].split_whitespace().skip(4).all(|c| c == "-"), "{s}");
        assert!(!s.contains("0 ns"), "{s}");
    }

    #[test]
    fn the_summary_says_how_the_run_ended_in_words() {
        // Its codes are the summary record's: "(target-exited after 26.5s)" read as a token.
        for (code, words) in [
            ("duration", "(ran 60.2 s, as --duration asked)"),
            ("target-exited", "(the target exited after 60.2 s)"),
            ("SIGINT", "(stopped by SIGINT after 60.2 s)"),
        ] {
            let s = summary(&[], code, 60.2, 0.0, 0);
            assert!(s.starts_with(&format!("neurogc summary {words}")), "{s}");
        }
    }
}
