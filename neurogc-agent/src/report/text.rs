//! The report for a terminal: KPIs first, then the detail an analyst reads next.
use std::fmt::Write;

use super::{Report, pct};
use crate::{
    sinks::view::{duration, thresholds},
    text,
};

fn bound(ns: u64) -> String {
    if ns == u64::MAX { "longer".to_owned() } else { format!("≤ {}", duration(ns)) }
}

/// What the collector freed, as the censuses read it.
fn census_table(s: &mut String, c: &crate::session::garbage::CensusReport) {
    let _ = writeln!(
        s,
        "\nwhat the collector freed ({}, {}, {} walked to the end)",
        text::plural(c.censuses, "census"),
        text::plural(c.objects, "object"),
        c.complete
    );
    let _ = writeln!(s, "  {:>8} {:>8} {:>10}  type (freed in) · closing edge", "objects", "bytes", "count");
    for t in &c.types {
        let row = format!("  {:>8} {:>8} {:>10} ", pct(t.share_of_objects), pct(t.share_of_bytes), t.objects);
        let gens = format!("({})", super::census::generations(&t.generations));
        let edge =
            t.closing_edge.as_ref().map_or(String::new(), |e| format!("· {}", super::census::brief(e)));
        let _ = writeln!(s, "{}", text::fit_from(row, &[t.name.clone(), gens, edge], " ", 32));
    }
}

/// Each line of `text` indented by two spaces.
fn indented(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

pub fn render(r: &Report) -> String {
    let mut s = String::new();
    let a = &r.attach;
    let title = [
        "neurogc report".to_owned(),
        r.trace.path.clone(),
        format!("pid {}", a.pid),
        format!("CPython {} ({})", a.python, a.probe),
        a.mode.clone(),
        a.host.as_ref().map_or(String::new(), |h| format!("host {h}")),
    ];
    let _ = writeln!(s, "{}", text::fit(&title, " · ", 2));
    if let Some(at) = super::started_at(r) {
        let _ = writeln!(s, "started {at}");
    }
    if let Some(b) = &a.build {
        let free = if b.free_threaded { " (free-threaded)" } else { "" };
        let _ = writeln!(s, "{}", text::wrap(&format!("interpreter {}{free}", b.file), 2));
    }
    if let Some(m) = &a.model {
        let _ = writeln!(
            s,
            "{}",
            text::wrap(&format!("model {} (digest {}, {})", m.source, m.digest, m.provider), 2)
        );
    }
    // Said before any figure, which covers only the part read.
    if let Some(why) = &r.trace.truncated {
        let _ = writeln!(
            s,
            "{}",
            text::wrap(&format!("INCOMPLETE: {why}; what follows covers the part read"), 2)
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "  span            {:.1} s", r.span_s);
    let _ = writeln!(s, "  collections     {} ({:.1}/s)", r.collections, r.collections_per_s);
    let _ = writeln!(s, "  GC share        {} of wall time", pct(r.gc_share));
    if let Some(h) = &r.halted {
        // Free-threaded: every collection stops the world, halting each thread mid-Python.
        let _ = writeln!(
            s,
            "  threads halted  {:.1} mid-Python per collection, max {} ({} of {})",
            h.mean,
            h.max,
            h.with_any,
            text::plural(h.collections, "collection")
        );
        if h.threads > 0 {
            let _ = writeln!(
                s,
                "                  {} in all (`threads` records)",
                text::plural(h.threads, "thread")
            );
        }
    }
    if let Some(w) = &r.worst_minute {
        let label = format!("worst {:.0} s", w.length_s);
        let _ = writeln!(s, "  {label:<15} {} of wall time (from +{:.0} s)", pct(w.gc_share), w.start_s);
    }
    let _ = writeln!(s);
    let row = |s: &mut String, cells: &[&str]| {
        // 80 columns: durations are at most 8 characters ("296.5 ms"), and two spaces apart.
        let _ = write!(s, "  {:<3} {:>8} {:>7} {:>7}", cells[0], cells[1], cells[2], cells[3]);
        for c in &cells[4..] {
            let _ = write!(s, " {c:>9}");
        }
        s.push('\n');
    };
    row(&mut s, &super::GEN_COLUMNS);
    for g in &r.generations {
        let cells = g.cells();
        row(&mut s, &cells.each_ref().map(String::as_str));
    }
    if r.collections > 0 {
        let _ = writeln!(s, "\npause histogram (all generations)");
    }
    let peak = r.histogram.iter().map(|b| b.counts.iter().sum::<u64>()).max().unwrap_or(0).max(1);
    let first = r.histogram.iter().position(|b| b.counts.iter().sum::<u64>() > 0);
    let last = r.histogram.iter().rposition(|b| b.counts.iter().sum::<u64>() > 0);
    if let (Some(first), Some(last)) = (first, last) {
        for b in &r.histogram[first..=last] {
            let n: u64 = b.counts.iter().sum();
            let bar = "█".repeat(((n as f64 / peak as f64) * 40.0).ceil() as usize);
            let _ = writeln!(s, "  {:>12} {:>10} {bar}", bound(b.le_ns), n);
        }
    }
    if !r.longest.is_empty() {
        let _ = writeln!(s, "\nlongest pauses");
        for p in &r.longest {
            let _ = writeln!(
                s,
                "  {:>10}  gen{}  at +{:.3} s  thread {}  {} collected",
                duration(p.duration_ns),
                p.r#gen,
                p.at_s,
                p.tid,
                p.collected
            );
        }
    }
    if !r.sites.is_empty() {
        let _ = writeln!(s, "\nwhere collections started (innermost Python frame)");
        let _ = writeln!(
            s,
            "  {:>8} {:>5} {:>9} {:>9} {:>9}  site",
            "count", "gen2", "pause", "p99", "≈allocs/s"
        );
        // Files by the shortest tail of their path that tells them apart in the trace; --json
        // and --folded carry the whole path.
        for site in &r.sites {
            let row = format!(
                "  {:>8} {:>5} {:>9} {:>9} {:>9} ",
                site.total_collections(),
                site.collections[2],
                duration(site.total_pause_ns()),
                duration(site.p99_ns),
                site.allocations.map_or("-".to_owned(), |a| crate::sinks::view::count(a as f64 / r.span_s)),
            );
            let at = if site.file.is_empty() {
                String::new()
            } else {
                format!("({}:{})", site.short_file, site.line)
            };
            // A name and place too long for the room left go on under the column, whole: cut,
            // "…ode.__init__" was no name, and a frozen module's place left none at all.
            // Under the site column where they fit, else as far right as they do.
            let column = row.chars().count() + 1;
            let longest = site.name.chars().count().max(at.chars().count());
            let indent = column.min(text::WIDTH.saturating_sub(longest)).max(4);
            let _ = writeln!(s, "{}", text::fit_from(row, &[site.name.clone(), at], " ", indent));
        }
        let _ = writeln!(
            s,
            "{}",
            text::wrap(
                "  ≈allocs/s: threshold0 net allocations for each young collection a site started \
                 (- where it started none, or threshold0 was not known)",
                4
            )
        );
        if r.stacks.without > 0 {
            let _ = writeln!(
                s,
                "{}",
                text::wrap(
                    &format!("  {} without a stack", crate::text::plural(r.stacks.without, "collection")),
                    4
                )
            );
        }
    }
    if let Some(c) = &r.census {
        census_table(&mut s, c);
    }
    if !r.allocation.is_empty() {
        let _ = writeln!(s, "\nallocation rate and RSS over time");
        for a in &r.allocation {
            let rate = a.alloc_per_s.map_or("not estimated".to_owned(), |r| format!("{r:.0} allocs/s"));
            let _ = writeln!(
                s,
                "  +{:>8.1} s … +{:>8.1} s  {rate:>21}  RSS {:.1} MiB",
                a.from_s, a.to_s, a.rss_mib
            );
        }
    }
    if !r.threshold_changes.is_empty() {
        let _ = writeln!(s, "\nthreshold changes (30 s before → after)");
        for c in &r.threshold_changes {
            let line = format!(
                "  +{:.1} s  {} → {} by {}: {}",
                c.at_s,
                thresholds(c.from),
                thresholds(c.to),
                c.who(),
                c.effect()
            );
            let _ = writeln!(s, "{}", text::wrap(&line, 4));
        }
    }
    if !r.freezes.is_empty() {
        let _ = writeln!(s, "\nneurogc's freezes (objects in the permanent generation after)");
        for f in &r.freezes {
            let count = f.count.map_or("unknown".to_owned(), |n| n.to_string());
            let _ = writeln!(s, "  +{:.1} s  {:<8}  {count}", f.at_s, f.event);
        }
    }
    if let Some(m) = &r.model {
        let _ = writeln!(s, "\nthe learned model\n{}", text::wrap(&format!("  {}", m.words()), 4));
    }
    let _ = writeln!(s, "\nfindings");
    if r.findings.is_empty() {
        let _ = writeln!(s, "  nothing stands out: GC cost is low and pauses are short.");
    }
    for f in &r.findings {
        let _ = writeln!(s, "{}", text::wrap(&format!("  • {}", f.text), 4));
    }
    if let Some(rec) = &r.decisions.recommendation {
        let _ = writeln!(s, "\nrecorded advice ({})", r.decisions.turned());
        let _ = writeln!(s, "{}", text::wrap_lines(&indented(rec), 4));
    }
    s
}
