//! `report TRACE`: GC pause forensics of a recording or a `--json` stream. One streaming pass
//! folds the records into an [`analysis::Analysis`] (and, with --perfetto, writes the trace
//! events as it goes); the [`Report`] built from it is printed as text or JSON, and drawn as
//! HTML with --html.
mod analysis;
mod census;
mod findings;
mod html;
mod perfetto;
mod sites;
mod text;

use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::Result;
use neurogc_trace::{Attach, Summary};
use serde::Serialize;

use self::{
    analysis::{Analysis, ChangedBy, Freeze, HISTOGRAM_BOUNDS_NS, Pause},
    findings::Finding,
};
use crate::{error::bail_user, session::aggregate::GenTotals, sinks::view::duration};

pub use self::sites::Weight;

pub struct Options {
    pub trace: PathBuf,
    pub json: bool,
    pub html: Option<PathBuf>,
    pub perfetto: Option<PathBuf>,
    pub folded: Option<(PathBuf, Weight)>,
}

/// Everything `report` tells, in the JSON it prints with --json.
#[derive(Serialize)]
pub struct Report {
    pub trace: TraceInfo,
    pub attach: Attach,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    pub span_s: f64,
    pub collections: u64,
    pub collections_per_s: f64,
    pub gc_share: f64,
    /// Free-threaded traces: the threads running Python that collections halted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub halted: Option<Halted>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_minute: Option<WorstMinute>,
    pub generations: Vec<GenReport>,
    pub histogram: Vec<HistogramBucket>,
    pub longest: Vec<Pause>,
    /// Mean allocation rate (net container allocations/s) over ten slices of the trace.
    pub allocation: Vec<Slice>,
    pub threshold_changes: Vec<ThresholdChange>,
    /// neurogc's freezes and unfreezes of the target.
    pub freezes: Vec<Freeze>,
    /// Where collections started: the innermost Python frame of their stacks, most collections
    /// first (empty for a trace without stacks).
    pub sites: Vec<sites::Site>,
    /// What the collector freed, by type, where the trace has `census` records (`--census`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub census: Option<crate::session::garbage::CensusReport>,
    /// Collections with a stack, and without one.
    pub stacks: StackCoverage,
    pub findings: Vec<Finding>,
    pub windows: u64,
    /// What advise or act mode decided, and the advice standing at the end.
    pub decisions: analysis::Decisions,
    /// What the learned model did to the decisions (absent: they do not say, `--model none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<analysis::ModelTally>,
    pub actuations: u64,
}

#[derive(Serialize)]
pub struct StackCoverage {
    pub with: u64,
    pub without: u64,
}

#[derive(Serialize)]
pub struct TraceInfo {
    pub path: String,
    /// "recording" (.ngc) or "json-lines".
    pub encoding: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    pub skipped_lines: u64,
}

#[derive(Serialize)]
pub struct WorstMinute {
    pub start_s: f64,
    pub length_s: f64,
    pub gc_share: f64,
}

#[derive(Serialize)]
pub struct GenReport {
    pub r#gen: i8,
    pub collections: u64,
    pub share_of_collections: f64,
    pub pause_total_ns: u64,
    pub share_of_pause_time: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub collected: i64,
    pub uncollectable: i64,
}

#[derive(Serialize)]
pub struct HistogramBucket {
    /// Pauses up to this many ns (the last bucket: anything longer).
    pub le_ns: u64,
    /// Per generation 0, 1, 2, unknown.
    pub counts: [u64; 4],
    /// Time spent in these pauses, per generation: what a user feels of them.
    pub pause_ns: [u64; 4],
}

#[derive(Serialize)]
pub struct Slice {
    pub from_s: f64,
    pub to_s: f64,
    /// None: gen0's count ran far past threshold0, where the estimate does not hold.
    pub alloc_per_s: Option<f64>,
    pub rss_mib: f64,
}

/// A window's thresholds differ from the previous window's, and what followed.
#[derive(Serialize)]
pub struct ThresholdChange {
    pub at_s: f64,
    pub from: [i64; 3],
    pub to: [i64; 3],
    pub by: ChangedBy,
    pub before: Effect,
    pub after: Effect,
}

/// The per-generation table's columns, for every rendering.
pub const GEN_COLUMNS: [&str; 9] = ["gen", "count", "count %", "time %", "p50", "p90", "p99", "p99.9", "max"];

impl GenReport {
    pub fn cells(&self) -> [String; 9] {
        // A generation that never ran has no pauses: "-", not "0 ns".
        let d =
            |ns: u64| if self.collections == 0 { "-".to_owned() } else { crate::sinks::view::duration(ns) };
        [
            if self.r#gen < 0 { "?".to_owned() } else { self.r#gen.to_string() },
            self.collections.to_string(),
            pct(self.share_of_collections),
            pct(self.share_of_pause_time),
            d(self.p50_ns),
            d(self.p90_ns),
            d(self.p99_ns),
            d(self.p999_ns),
            d(self.max_ns),
        ]
    }
}

impl ThresholdChange {
    pub fn who(&self) -> &'static str {
        match self.by {
            ChangedBy::Neurogc => "neurogc",
            ChangedBy::Application => "the application",
        }
    }

    /// "GC share a → b, c → d collections/s, longest pause e → f".
    pub fn effect(&self) -> String {
        let (b, a) = (&self.before, &self.after);
        format!(
            "GC share {} → {}, {:.0} → {:.0} collections/s, longest pause {} → {}",
            pct(b.gc_share),
            pct(a.gc_share),
            b.collections_per_s,
            a.collections_per_s,
            duration((b.max_pause_us * 1e3) as u64),
            duration((a.max_pause_us * 1e3) as u64)
        )
    }
}

/// Other threads running Python when a collection began (free-threaded builds), each halted by
/// its stop-the-world: over the collections that counted them.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Halted {
    pub collections: u64,
    pub mean: f64,
    pub max: u32,
    /// Collections that halted at least one.
    pub with_any: u64,
    /// Distinct threads among those halted (their ids: the trace's `threads` records).
    pub threads: u64,
}

/// Up to 30 s of windows on one side of a change (never across another change).
#[derive(Serialize)]
pub struct Effect {
    pub seconds: f64,
    pub collections_per_s: f64,
    pub gc_share: f64,
    pub max_pause_us: f64,
}

pub fn run(opts: &Options) -> Result<()> {
    for out in [&opts.html, &opts.perfetto, &opts.folded.as_ref().map(|f| f.0.clone())].into_iter().flatten()
    {
        refuse_same_file(&opts.trace, out)?;
    }
    let mut reader = crate::input::open_trace(&opts.trace)?;
    let mut perfetto = match &opts.perfetto {
        Some(p) => Some(perfetto::Writer::new(BufWriter::with_capacity(
            1 << 20,
            crate::sinks::output::create(p, "Perfetto trace")?,
        ))?),
        None => None,
    };
    let mut analysis = Analysis::new();
    while let Some(record) = reader.next().map_err(|e| crate::input::trace_error(&opts.trace, e))? {
        if let Some(p) = perfetto.as_mut() {
            p.add(&record)?;
        }
        analysis.add(&record);
    }
    if let Some(p) = perfetto {
        p.finish()?;
    }
    let mode = analysis.attach.as_ref().map(|a| a.mode.clone()).unwrap_or_default();
    analysis.decisions.finish(&mode, analysis.summary.as_ref());
    let info = TraceInfo {
        path: opts.trace.display().to_string(),
        encoding: if reader.is_recording() { "recording" } else { "json-lines" },
        truncated: reader.truncated().map(str::to_owned),
        skipped_lines: reader.skipped,
    };
    let report = build(&analysis, info);
    if let Some((path, weight)) = &opts.folded {
        let mut f = crate::sinks::output::create(path, "folded stacks")?;
        f.write_all(analysis.stacks.folded(*weight).as_bytes())?;
    }
    if let Some(path) = &opts.html {
        let page = html::page(&report, &analysis);
        let mut f = crate::sinks::output::create(path, "HTML report")?;
        f.write_all(page.as_bytes())?;
    }
    let mut out = crate::sinks::output::LineWriter::new(std::io::stdout());
    if opts.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        out.write_all(text::render(&report).as_bytes())?;
    }
    out.flush()?;
    // The report of what could be read is out; the exit status says it is not the whole run
    // (with status 0, a script took a cut recording for a complete one).
    if let Some(why) = &report.trace.truncated {
        bail_user!("{} is incomplete: {why}; the report covers the part read", opts.trace.display());
    }
    Ok(())
}

/// `report t.ngc --html t.ngc` would truncate the trace before reading it.
fn refuse_same_file(input: &Path, output: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(input), std::fs::metadata(output))
        && (a.dev(), a.ino()) == (b.dev(), b.ino())
    {
        bail_user!("{} is the trace being read: choose another output file", output.display());
    }
    Ok(())
}

fn build(a: &Analysis, trace: TraceInfo) -> Report {
    let attach = a.attach.clone().expect("the reader returns an attach record first");
    // Generations 0, 1, 2, then unknown: the slots of the histogram's counts too.
    let totals: Vec<&GenTotals> = a.agg.all().collect();
    let collections = a.agg.collections();
    let pause_total = a.agg.pause_ns();
    let span_s = a.span_s().max(1e-9);
    let generations: Vec<GenReport> = (0..4)
        .filter(|&g| g < 3 || totals[g].collections > 0)
        .map(|g| {
            let t = totals[g];
            let h = &t.pauses;
            let q = |q: f64| if h.is_empty() { 0 } else { h.value_at_quantile(q) };
            GenReport {
                r#gen: if g < 3 { g as i8 } else { -1 },
                collections: t.collections,
                share_of_collections: ratio(t.collections as f64, collections as f64),
                pause_total_ns: t.pause_ns,
                share_of_pause_time: ratio(t.pause_ns as f64, pause_total as f64),
                p50_ns: q(0.5),
                p90_ns: q(0.9),
                p99_ns: q(0.99),
                p999_ns: q(0.999),
                max_ns: h.max(),
                collected: t.collected,
                uncollectable: t.uncollectable,
            }
        })
        .collect();
    let histogram = histogram(&totals);
    let worst_minute = a.worst_minute().map(|(start, share)| WorstMinute {
        start_s: start as f64,
        length_s: span_s.min(60.0),
        gc_share: share,
    });
    let mut report = Report {
        trace,
        attach,
        summary: a.summary.clone(),
        span_s,
        collections,
        collections_per_s: collections as f64 / span_s,
        gc_share: pause_total as f64 / 1e9 / span_s,
        halted: a.halted(),
        worst_minute,
        generations,
        histogram,
        longest: a.longest(),
        allocation: slices(a),
        threshold_changes: changes(a),
        freezes: a.freezes.clone(),
        sites: a.stacks.top_sites(TOP_SITES),
        census: a.census.report(),
        stacks: StackCoverage { with: a.stacks.with, without: a.stacks.without },
        findings: Vec::new(),
        windows: a.windows.len() as u64 + a.windows_dropped,
        decisions: a.decisions.clone(),
        model: a.model.clone(),
        actuations: a.actuations,
    };
    report.findings = findings::findings(&report, a);
    report
}

/// Sites a report lists.
const TOP_SITES: usize = 10;

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

fn histogram(totals: &[&GenTotals]) -> Vec<HistogramBucket> {
    let mut lo = 0u64;
    HISTOGRAM_BOUNDS_NS
        .iter()
        .map(|&hi| {
            // hdrhistogram counts values in (lo, hi] at its resolution (3 significant digits).
            let sum = |g: usize, weigh: &dyn Fn(u64, u64) -> u64| -> u64 {
                let h = &totals[g].pauses;
                if h.is_empty() || lo > h.max() {
                    return 0;
                }
                h.iter_recorded()
                    .filter(|v| v.value_iterated_to() > lo && v.value_iterated_to() <= hi)
                    .map(|v| weigh(v.value_iterated_to(), v.count_at_value()))
                    .fold(0u64, u64::saturating_add)
            };
            let counts = [0, 1, 2, 3].map(|g| sum(g, &|_, n| n));
            let pause_ns = [0, 1, 2, 3].map(|g| sum(g, &|v, n| v.saturating_mul(n)));
            let bucket = HistogramBucket { le_ns: hi, counts, pause_ns };
            lo = hi;
            bucket
        })
        .collect()
}

fn slices(a: &Analysis) -> Vec<Slice> {
    let w = &a.windows;
    if w.is_empty() {
        return Vec::new();
    }
    let n = w.len().min(10);
    (0..n)
        .map(|i| {
            let part = &w[i * w.len() / n..(i + 1) * w.len() / n];
            // Over the windows whose estimate holds; none of them: not estimated.
            let known = || part.iter().filter_map(|s| Some((s.alloc_per_s?, s.secs)));
            let secs: f64 = known().map(|(_, secs)| secs).sum();
            let alloc: f64 = known().map(|(rate, secs)| rate * secs).sum();
            Slice {
                from_s: part[0].end_s - part[0].secs,
                to_s: part[part.len() - 1].end_s,
                alloc_per_s: (secs > 0.0).then(|| alloc / secs),
                rss_mib: part[part.len() - 1].rss_mib,
            }
        })
        .collect()
}

/// How long each side of a change is measured.
const EFFECT_SPAN_S: f64 = 30.0;

fn changes(a: &Analysis) -> Vec<ThresholdChange> {
    let w = &a.windows;
    let idx: Vec<usize> = (1..w.len())
        .filter(|&i| matches!((w[i - 1].thresholds, w[i].thresholds), (Some(x), Some(y)) if x != y))
        .collect();
    idx.iter()
        .enumerate()
        .map(|(k, &i)| {
            let lower = if k == 0 { 0 } else { idx[k - 1] };
            let upper = idx.get(k + 1).copied().unwrap_or(w.len());
            let before_start = w[lower..i].iter().rposition(|s| w[i - 1].end_s - s.end_s >= EFFECT_SPAN_S);
            let before = &w[lower + before_start.map_or(0, |p| p + 1)..i];
            let after_len = w[i..upper].iter().take_while(|s| s.end_s - w[i].end_s < EFFECT_SPAN_S).count();
            let after = &w[i..i + after_len];
            ThresholdChange {
                at_s: w[i - 1].end_s,
                from: w[i - 1].thresholds.unwrap_or_default(),
                to: w[i].thresholds.unwrap_or_default(),
                by: a.changed_by(
                    w[i - 1].end_ns.saturating_sub(1_000_000_000),
                    w[i].end_ns,
                    w[i].thresholds.unwrap_or_default(),
                ),
                before: effect(before),
                // The window in which the change landed is a mix: the effect starts after it.
                after: effect(after.get(1..).filter(|s| !s.is_empty()).unwrap_or(after)),
            }
        })
        .collect()
}

fn effect(windows: &[analysis::WindowStat]) -> Effect {
    let secs: f64 = windows.iter().map(|s| s.secs).sum();
    Effect {
        seconds: secs,
        collections_per_s: ratio(windows.iter().map(|s| s.collections as f64).sum(), secs),
        gc_share: ratio(windows.iter().map(|s| s.pause_share * s.secs).sum(), secs),
        max_pause_us: windows.iter().map(|s| s.max_pause_us).fold(0.0, f64::max),
    }
}

/// When the trace began, as a UTC date and time (its times are Unix nanoseconds); None for a
/// trace whose clock is not a real date (synthetic traces start near zero).
pub fn started_at(r: &Report) -> Option<String> {
    wall_clock(r.attach.sample.ts_ns)
}

/// A Unix time in ns as "2026-11-24 20:43:14 UTC", when it is after 2000.
pub fn wall_clock(ts_ns: u64) -> Option<String> {
    const Y2000_NS: u64 = 946_684_800_000_000_000;
    (ts_ns >= Y2000_NS).then(|| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ts_ns);
        humantime::format_rfc3339_seconds(t).to_string().replace('T', " ").replace('Z', " UTC")
    })
}

pub fn pct(x: f64) -> String {
    if x >= 0.1 { format!("{:.0}%", x * 100.0) } else { format!("{:.2}%", x * 100.0) }
}
