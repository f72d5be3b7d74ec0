//! `report --html`: one self-contained page (inline CSS, SVG and a small script for the flame
//! graphs' zoom and search; nothing fetched): the KPIs and findings, where collections started
//! and the stack of each longest pause, a pause timeline by generation, the pause histogram, GC
//! share and RSS over time, threshold changes marked on the time plots. Plots take the page's
//! width.
use std::fmt::Write;

use super::{
    Report,
    analysis::{Analysis, Timeline},
    pct,
};
use crate::sinks::view::{duration, thresholds};

mod flame;

use flame::flame_graphs;

/// Generation 0, 1, 2 and unknown; the test finds these colours in a screenshot.
pub const GEN_COLORS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#d62728", "#7f7f7f"];

const W: f64 = 900.0;
const H: f64 = 240.0;
const PAD_L: f64 = 70.0;
const PAD_B: f64 = 30.0;
/// Room above the frame for the legend, which must never cover data.
const PAD_T: f64 = 24.0;
const PAD_R: f64 = 16.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A finding's text as HTML: escaped, with `code` in backticks set as code.
fn rich(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// An axis tick as round values are written: "100 ms", "1 s", "2.5 ms", "0". The tables'
/// durations keep their digits ("100.0ms"): on an axis those read as measurements.
fn tick_duration(ns: f64) -> String {
    let (v, unit) = match ns {
        x if x <= 0.0 => return "0".to_owned(),
        x if x < 1e3 => (x, "ns"),
        x if x < 1e6 => (x / 1e3, "µs"),
        x if x < 1e9 => (x / 1e6, "ms"),
        x => (x / 1e9, "s"),
    };
    format!("{} {unit}", trimmed(v))
}

/// A share's tick: "5%", "0.25%", "0".
fn tick_share(v: f64) -> String {
    if v <= 0.0 { "0".to_owned() } else { format!("{}%", trimmed(v * 100.0)) }
}

/// At most two decimals, none that are trailing zeros.
fn trimmed(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Round tick values from `lo` to `hi`, about `n` of them: steps of 1, 2, 2.5 or 5 times a power
/// of ten, as people read axes (0, 50, 100 MiB, not 29, 59, 88, 117).
fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A plot area: maps data to SVG coordinates.
struct Plot {
    x_max: f64,
    y_lo: f64,
    y_hi: f64,
    log: bool,
}

impl Plot {
    fn x(&self, v: f64) -> f64 {
        PAD_L + (v / self.x_max.max(1e-9)).clamp(0.0, 1.0) * (W - PAD_L - PAD_R)
    }
    fn y(&self, v: f64) -> f64 {
        let (v, lo, hi) = if self.log {
            (v.max(self.y_lo).log10(), self.y_lo.log10(), self.y_hi.log10())
        } else {
            (v, self.y_lo, self.y_hi)
        };
        let f = ((v - lo) / (hi - lo).max(1e-12)).clamp(0.0, 1.0);
        H - PAD_B - f * (H - PAD_B - PAD_T)
    }

    /// Frame, the y axis's ticks, and a time axis in seconds since the trace began.
    fn frame(&self, s: &mut String, y_label: impl Fn(f64) -> String, x_label: &str) {
        self.frame_y(s, y_label);
        for v in nice_ticks(0.0, self.x_max, 5) {
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{}" text-anchor="middle">{v:.0} s</text>"##,
                self.x(v),
                H - PAD_B + 16.0
            );
        }
        x_axis_label(s, x_label);
    }

    /// Frame and the y axis's ticks.
    fn frame_y(&self, s: &mut String, y_label: impl Fn(f64) -> String) {
        let _ = write!(
            s,
            r##"<rect x="{PAD_L}" y="{PAD_T}" width="{}" height="{}" fill="#fff" stroke="#999"/>"##,
            W - PAD_L - PAD_R,
            H - PAD_B - PAD_T
        );
        let ticks: Vec<f64> = if self.log {
            let (a, b) = (self.y_lo.log10().floor() as i32, self.y_hi.log10().ceil() as i32);
            (a..=b).map(|e| 10f64.powi(e)).filter(|v| *v >= self.y_lo && *v <= self.y_hi).collect()
        } else {
            nice_ticks(self.y_lo, self.y_hi, 4)
        };
        for v in ticks {
            let y = self.y(v);
            let _ = write!(
                s,
                r##"<line x1="{PAD_L}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                W - PAD_R,
                PAD_L - 4.0,
                y + 4.0,
                esc(&y_label(v))
            );
        }
    }

    /// Threshold changes (green: neurogc's, grey: the application's) and neurogc's freezes and
    /// unfreezes (blue), as vertical lines.
    fn changes(&self, s: &mut String, r: &Report) {
        // Labels step down in three rows, so marks close in time do not print over each other.
        let mut k = 0;
        let mut mark = |at_s: f64, color: &str, label: String| {
            let x = self.x(at_s);
            let y = PAD_T + 12.0 + f64::from(k % 3) * 12.0;
            k += 1;
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{PAD_T}" y2="{}" stroke="{color}" stroke-dasharray="4 3"/><text x="{:.1}" y="{}" fill="{color}">{}</text>"##,
                H - PAD_B,
                x + 3.0,
                y,
                esc(&label)
            );
        };
        for c in &r.threshold_changes {
            let (color, who) = match c.by {
                super::ChangedBy::Neurogc => ("#2ca02c", "neurogc"),
                super::ChangedBy::Application => ("#8c564b", "app"),
            };
            mark(c.at_s, color, format!("{who} {}", thresholds(c.to)));
        }
        for f in &r.freezes {
            mark(f.at_s, "#17becf", if f.event == "frozen" { "freeze".into() } else { "unfreeze".into() });
        }
    }
}

/// "seconds since 2026-11-24 20:43:14 UTC" (or since attach, for a trace without a real clock).
fn time_axis(r: &Report) -> String {
    super::started_at(r).map_or_else(|| "seconds since attach".to_owned(), |at| format!("seconds since {at}"))
}

fn x_axis_label(s: &mut String, label: &str) {
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" text-anchor="end" class="axis">{}</text>"##,
        W - PAD_R,
        H - 2.0,
        esc(label)
    );
}

fn svg_open(s: &mut String, title: &str) {
    let _ = write!(s, r#"<h2>{title}</h2><svg viewBox="0 0 {W} {H}" width="100%" role="img">"#);
}

fn timeline_plot(s: &mut String, r: &Report, t: &Timeline) {
    svg_open(s, "Pauses over time, by generation (longest in each interval)");
    let max = t.buckets.iter().flat_map(|b| b.max_ns).max().unwrap_or(1).max(1) as f64 / 1e3;
    let p = Plot { x_max: r.span_s, y_lo: 1.0, y_hi: max * 1.5, log: true };
    p.frame(s, |v| tick_duration(v * 1e3), &time_axis(r));
    let width_s = t.width_ns as f64 / 1e9;
    for (i, b) in t.buckets.iter().enumerate() {
        let x = p.x((i as f64 + 0.5) * width_s);
        for (g, color) in GEN_COLORS.iter().enumerate() {
            if b.count[g] > 0 {
                let _ = write!(
                    s,
                    r#"<circle cx="{x:.1}" cy="{:.1}" r="2.5" fill="{color}"/>"#,
                    p.y(b.max_ns[g] as f64 / 1e3)
                );
            }
        }
    }
    p.changes(s, r);
    legend(s, &GENS);
    s.push_str("</svg>");
}

/// Above the frame, so it never covers data.
fn legend(s: &mut String, labels: &[&str]) {
    for (g, (color, label)) in GEN_COLORS.iter().zip(labels).enumerate() {
        let x = PAD_L + g as f64 * 90.0;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="6" width="10" height="10" fill="{color}"/><text x="{}" y="15">{label}</text>"#,
            x + 14.0,
        );
    }
}

const GENS: [&str; 3] = ["gen0", "gen1", "gen2"];

/// Time spent in pauses of each length, stacked by generation: a few long gen2 pauses weigh
/// what users feel of them, where a count would hide them under thousands of short gen0 ones.
fn histogram_plot(s: &mut String, r: &Report) {
    svg_open(s, "Pause time by pause length");
    let total = |b: &super::HistogramBucket| b.pause_ns.iter().sum::<u64>();
    let first = r.histogram.iter().position(|b| total(b) > 0).unwrap_or(0);
    let last = r.histogram.iter().rposition(|b| total(b) > 0).unwrap_or(0);
    let bins = &r.histogram[first..=last];
    let peak = bins.iter().map(total).max().unwrap_or(1).max(1) as f64 / 1e6;
    let p = Plot { x_max: bins.len() as f64, y_lo: 0.0, y_hi: peak * 1.1, log: false };
    p.frame_y(s, |v| tick_duration(v * 1e6));
    x_axis_label(s, "pause length, up to");
    let bw = (W - PAD_L - PAD_R) / bins.len().max(1) as f64;
    for (i, b) in bins.iter().enumerate() {
        let mut base = 0.0;
        for (g, color) in GEN_COLORS.iter().enumerate() {
            let ms = b.pause_ns[g] as f64 / 1e6;
            if ms == 0.0 {
                continue;
            }
            let (y0, y1) = (p.y(base), p.y(base + ms));
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{y1:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {} pauses, {}</title></rect>"#,
                p.x(i as f64) + 2.0,
                bw - 4.0,
                (y0 - y1).max(1.0),
                if b.le_ns == u64::MAX { "longer".to_owned() } else { format!("≤ {}", duration(b.le_ns)) },
                b.counts[g],
                duration(b.pause_ns[g])
            );
            base += ms;
        }
    }
    // The x axis is pause length, not time: label the bins instead of frame's seconds.
    s.push_str(&bin_labels(&p, bins));
    legend(s, &GENS);
    s.push_str("</svg>");
}

fn bin_labels(p: &Plot, bins: &[super::HistogramBucket]) -> String {
    let mut s = String::new();
    for (i, b) in bins.iter().enumerate() {
        let label = if b.le_ns == u64::MAX { "more".to_owned() } else { duration(b.le_ns) };
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"##,
            p.x(i as f64 + 0.5),
            H - PAD_B + 16.0,
            esc(&label)
        );
    }
    s
}

/// One or more series over time. `cap`: the y axis never goes past it (a share's 100%).
struct Series<'a> {
    label: &'a str,
    color: &'a str,
    points: Vec<(f64, f64)>,
}

/// How the `i`th of several lines is drawn: each later one thinner and dashed, so that two that
/// coincide (threshold1 and threshold2 at 10) both show.
fn stroke(i: usize) -> (f64, &'static str) {
    match i {
        0 => (1.5, "none"),
        1 => (4.0, "none"),
        _ => (1.5, "6 4"),
    }
}

fn line_plot(
    s: &mut String,
    r: &Report,
    title: &str,
    series: &[Series],
    (log, cap): (bool, f64),
    y_label: impl Fn(f64) -> String,
) {
    svg_open(s, title);
    let all = || series.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let peak = all().fold(0.0, f64::max).max(1e-9);
    let p = if log {
        let low = all().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min).min(peak);
        Plot { x_max: r.span_s, y_lo: (low / 2.0).max(1e-9), y_hi: (peak * 2.0).min(cap), log: true }
    } else {
        Plot { x_max: r.span_s, y_lo: 0.0, y_hi: (peak * 1.1).min(cap), log: false }
    };
    p.frame(s, y_label, &time_axis(r));
    // The wide one first, so the dashed one stays visible on top of it.
    let mut order: Vec<usize> = (0..series.len()).collect();
    order.sort_by_key(|&i| if i == 1 { 0 } else { 1 });
    for i in order {
        let line = &series[i];
        let path: Vec<String> =
            line.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", p.x(x), p.y(y))).collect();
        let (width, dash) = if series.len() > 1 { stroke(i) } else { (1.5, "none") };
        let _ = write!(
            s,
            r##"<polyline fill="none" stroke="{}" stroke-width="{width}" stroke-dasharray="{dash}" points="{}"/>"##,
            line.color,
            path.join(" ")
        );
    }
    p.changes(s, r);
    if series.len() > 1 {
        let labels: Vec<&str> = series.iter().map(|l| l.label).collect();
        legend(s, &labels);
    }
    s.push_str("</svg>");
}

/// Changes of advice the page lists, the latest.
const ADVICE_ROWS: usize = 20;

/// Advise mode's recommendation as the recording holds it, and the changes of advice before it.
fn recorded_advice(s: &mut String, r: &Report) {
    let Some(rec) = &r.decisions.recommendation else { return };
    let d = &r.decisions;
    let _ = write!(s, "<h2>Recorded advice</h2><p>{}.</p><pre>{}</pre>", esc(&d.turned()), esc(rec));
    if d.moves.is_empty() {
        return;
    }
    let shown = &d.moves[d.moves.len().saturating_sub(ADVICE_ROWS)..];
    let _ = write!(
        s,
        "<details><summary>{} of advice</summary><table class=\"left\"><tr><th>at</th><th>advice</th><th>why</th></tr>",
        if shown.len() < d.moves.len() {
            format!("the last {} changes", shown.len())
        } else {
            "changes".to_owned()
        }
    );
    for m in shown {
        let _ = write!(
            s,
            "<tr><td>+{:.1} s</td><td>{}</td><td class=\"w\">{}</td></tr>",
            m.at_s,
            esc(&m.what),
            esc(&m.reason)
        );
    }
    s.push_str("</table></details>");
}

/// What the collector freed: the censuses' table.
fn census_table(s: &mut String, c: &crate::session::garbage::CensusReport) {
    let _ = write!(
        s,
        "<h2>What the collector freed</h2><p><small>{}: {} walked, {} to the end of its \
         collection's garbage (<code>--census</code>).</small></p><table><tr><th>type</th>\
         <th>objects</th><th>bytes</th><th>count</th><th>freed in</th><th>closing edge</th></tr>",
        esc(&crate::text::plural(c.censuses, "census")),
        esc(&crate::text::plural(c.objects, "object")),
        c.complete
    );
    for t in &c.types {
        let _ = write!(
            s,
            "<tr><td class=\"w\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"w\">{}</td></tr>",
            esc(&t.name),
            pct(t.share_of_objects),
            pct(t.share_of_bytes),
            t.objects,
            super::census::generations(&t.generations),
            t.closing_edge.as_ref().map_or(String::new(), |e| esc(&super::census::brief(e)))
        );
    }
    s.push_str("</table>");
}

/// Where collections started: the report's sites table.
fn sites_table(s: &mut String, r: &Report) {
    s.push_str(
        "<h2>Where collections started</h2><p><small>The innermost Python frame of each collection's stack; \
         ≈allocs/s: threshold0 net allocations for each young collection a site started (- where it started \
         none).</small></p><table><tr><th>site</th><th>collections</th><th>gen2</th><th>pause</th><th>p99</th>\
         <th>≈allocs/s</th></tr>",
    );
    for site in &r.sites {
        let at = if site.file.is_empty() {
            esc(&site.name)
        } else {
            format!("{} <small>({}:{})</small>", esc(&site.name), esc(&site.short_file), site.line)
        };
        let _ = write!(
            s,
            "<tr><td class=\"w\" title=\"{}\">{at}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&site.file),
            site.total_collections(),
            site.collections[2],
            duration(site.total_pause_ns()),
            duration(site.p99_ns),
            site.allocations
                .map_or("-".to_owned(), |a| crate::sinks::view::count(a as f64 / r.span_s.max(1e-9)))
        );
    }
    s.push_str("</table>");
}

/// At most `n` points, evenly strided.
fn thin<T: Copy>(v: &[T], n: usize) -> Vec<T> {
    let step = v.len().div_ceil(n.max(1)).max(1);
    v.iter().step_by(step).copied().collect()
}

pub fn page(r: &Report, a: &Analysis) -> String {
    let mut s = String::with_capacity(256 << 10);
    let at = &r.attach;
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>neurogc report: {}</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1600px}}
li.Warning{{border-left:4px solid #e6a100;padding-left:6px;margin:4px 0}}li.Critical{{border-left:4px solid #d62728;padding-left:6px;margin:4px 0}}
li.Info{{border-left:4px solid #9ab;padding-left:6px;margin:4px 0}}.sev{{font-size:11px;text-transform:uppercase;color:#666;margin-right:6px}}
code{{background:#f3f3f3;padding:0 3px;border-radius:3px}}.fg g.hit rect{{fill:#b300ff}}.fg g{{cursor:pointer}}
table{{border-collapse:collapse;margin:8px 0}}td,th{{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}}
th:first-child,td:first-child,table.left td{{text-align:left}}pre{{white-space:pre-wrap;background:#f7f7f7;padding:8px}}
svg text{{font-size:11px;fill:#444}}.change{{fill:#2ca02c}}
.kpi{{display:inline-block;margin:0 24px 8px 0}}.kpi b{{display:block;font-size:22px}}h2{{font-size:16px;margin-top:28px}}
.flame .fg{{display:none;margin-top:8px}}.flame svg text{{font-size:11px;fill:#222}}
#fg-all:checked~.fg-all,#fg-g0:checked~.fg-g0,#fg-g1:checked~.fg-g1,#fg-g2:checked~.fg-g2{{display:block}}
td{{white-space:nowrap}}td.w{{white-space:normal}}
@media (max-width:1100px){{svg text,.flame svg text{{font-size:13px}}}}
@media (max-width:900px){{svg text,.flame svg text{{font-size:14px}}}}
</style></head><body><h1>GC pause report</h1><p>pid {} · CPython {} · {} probes · {} mode{} · {}{}</p>"#,
        esc(&r.trace.path),
        at.pid,
        esc(&at.python),
        esc(&at.probe),
        esc(&at.mode),
        at.host.as_ref().map_or(String::new(), |h| format!(" · host {}", esc(h))),
        esc(&r.trace.path),
        super::started_at(r).map_or(String::new(), |t| format!(" · started {t}"))
    );
    let kpi = |s: &mut String, label: &str, value: String| {
        let _ = write!(s, r#"<div class="kpi">{label}<b>{}</b></div>"#, esc(&value));
    };
    kpi(&mut s, "GC share of wall time", pct(r.gc_share));
    // Only where it is a part of the trace: over all of it, it repeats the GC share.
    if let Some(w) = r.worst_minute.as_ref().filter(|w| w.length_s < 0.9 * r.span_s) {
        kpi(&mut s, &format!("worst {:.0} s (from +{:.0} s)", w.length_s, w.start_s), pct(w.gc_share));
    }
    kpi(&mut s, "collections/s", format!("{:.1}", r.collections_per_s));
    kpi(&mut s, "collections", r.collections.to_string());
    kpi(&mut s, "span", format!("{:.1} s", r.span_s));
    s.push_str("<h2>Findings</h2><ul>");
    if r.findings.is_empty() {
        s.push_str("<li>Nothing stands out: GC cost is low and pauses are short.</li>");
    }
    for f in &r.findings {
        let _ = write!(
            s,
            r#"<li class="{:?}"><span class="sev">{:?}</span>{}</li>"#,
            f.severity,
            f.severity,
            rich(&f.text)
        );
    }
    s.push_str("</ul>");
    recorded_advice(&mut s, r);
    s.push_str("<h2>Pauses by generation</h2><table><tr>");
    for c in super::GEN_COLUMNS {
        let _ = write!(s, "<th>{c}</th>");
    }
    s.push_str("</tr>");
    for g in &r.generations {
        s.push_str("<tr>");
        for c in g.cells() {
            let _ = write!(s, "<td>{}</td>", esc(&c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    if r.collections > 0 {
        timeline_plot(&mut s, r, &a.timeline);
        histogram_plot(&mut s, r);
    }
    if !r.sites.is_empty() {
        sites_table(&mut s, r);
    }
    if let Some(c) = &r.census {
        census_table(&mut s, c);
    }
    if a.stacks.with > 0 {
        flame_graphs(&mut s, a);
    }
    let width_s = a.timeline.width_ns as f64 / 1e9;
    let share: Vec<(f64, f64)> = a
        .timeline
        .buckets
        .iter()
        .enumerate()
        .map(|(i, b)| ((i as f64 + 0.5) * width_s, b.pause_ns as f64 / 1e9 / width_s))
        .collect();
    let one = |label, points| [Series { label, color: "#9467bd", points }];
    if !share.is_empty() {
        line_plot(&mut s, r, "GC share of wall time", &one("GC share", share), (false, 1.0), tick_share);
    }
    let windows = thin(&a.windows, 1500);
    let rss: Vec<(f64, f64)> = windows.iter().map(|w| (w.end_s, w.rss_mib)).collect();
    if !rss.is_empty() {
        line_plot(&mut s, r, "RSS (MiB)", &one("RSS", rss), (false, f64::INFINITY), |v| format!("{v:.0}"));
    }
    let alloc: Vec<(f64, f64)> = windows.iter().filter_map(|w| Some((w.end_s, w.alloc_per_s?))).collect();
    if !alloc.is_empty() {
        let title = "Allocation rate (net container allocations/s, estimated)";
        line_plot(&mut s, r, title, &one("allocs/s", alloc), (false, f64::INFINITY), |v| {
            crate::sinks::view::count(v)
        });
    }
    let settings: Vec<Series> = ["threshold0", "threshold1", "threshold2"]
        .iter()
        .enumerate()
        .map(|(g, label)| Series {
            label,
            color: GEN_COLORS[g],
            points: windows.iter().filter_map(|w| Some((w.end_s, w.thresholds?[g] as f64))).collect(),
        })
        .collect();
    if settings.iter().any(|t| !t.points.is_empty()) {
        let title = "Thresholds over time";
        line_plot(&mut s, r, title, &settings, (true, f64::INFINITY), |v| format!("{v:.0}"));
    }
    if !r.longest.is_empty() {
        s.push_str(
            "<h2>Longest pauses</h2><table><tr><th>pause</th><th>gen</th><th>at</th><th>thread</th>\
             <th>collected</th><th>started in (innermost first)</th></tr>",
        );
        for p in &r.longest {
            let stack = p
                .stack
                .and_then(|id| a.stacks.innermost(id, 3))
                .map_or("-".to_owned(), |frames| esc(&frames.join(" ← ")));
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>+{:.3} s</td><td>{}</td><td>{}</td><td class=\"w\" style=\"text-align:left\">{stack}</td></tr>",
                duration(p.duration_ns),
                p.r#gen,
                p.at_s,
                p.tid,
                p.collected
            );
        }
        s.push_str("</table>");
    }
    if let Some(m) = &r.model {
        let _ = write!(s, "<h2>The learned model</h2><p>Its part: {}.</p>", esc(&m.words()));
    }
    if !r.freezes.is_empty() {
        s.push_str("<h2>neurogc's freezes</h2><table><tr><th>at</th><th>event</th><th>objects frozen after</th></tr>");
        for f in &r.freezes {
            let count = f.count.map_or("unknown".to_owned(), |n| n.to_string());
            let _ = write!(s, "<tr><td>+{:.1} s</td><td>{}</td><td>{count}</td></tr>", f.at_s, esc(&f.event));
        }
        s.push_str("</table>");
    }
    if !r.threshold_changes.is_empty() {
        s.push_str("<h2>Threshold changes</h2><table><tr><th>at</th><th>from</th><th>to</th><th>by</th><th>30 s before → after</th></tr>");
        for c in &r.threshold_changes {
            let _ = write!(
                s,
                "<tr><td>+{:.1} s</td><td>{}</td><td>{}</td><td>{}</td><td class=\"w\">{}</td></tr>",
                c.at_s,
                thresholds(c.from),
                thresholds(c.to),
                c.who(),
                esc(&c.effect())
            );
        }
        s.push_str("</table>");
    }
    let _ = writeln!(
        s,
        "<p><small>{} · {}</small></p></body></html>",
        esc(at.agent.as_deref().unwrap_or("neurogc-agent")),
        esc(r.trace.truncated.as_deref().unwrap_or("complete trace"))
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_as_round_values() {
        // They read "100.0ms", "1.00s", "0.00%" and "0ns", as the tables' measurements do.
        let got: Vec<String> = [1e8, 1e9, 2.5e6, 0.0, 500.0].into_iter().map(tick_duration).collect();
        assert_eq!(got, ["100 ms", "1 s", "2.5 ms", "0", "500 ns"]);
        assert_eq!([0.0, 0.05, 0.0025].map(tick_share), ["0", "5%", "0.25%"]);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_ticks(0.0, 117.3, 4), vec![0.0, 50.0, 100.0]);
        assert_eq!(nice_ticks(0.0, 27.0, 5), vec![0.0, 10.0, 20.0]);
        assert_eq!(nice_ticks(0.0, 711.6, 4), vec![0.0, 200.0, 400.0, 600.0]);
        assert_eq!(nice_ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn code_in_backticks_is_set_as_code() {
        assert_eq!(rich("run `neurogc-agent <x>` now"), "run <code>neurogc-agent &lt;x&gt;</code> now");
    }
}
