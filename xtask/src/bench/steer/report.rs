//! The steering benchmark's report: per workload a table of medians (min–max over rounds), the
//! issue's targets checked against them, and the plots (plot.rs), all in one folder.
use anyhow::Result;

use crate::{
    bench::measure::{median, paired_ratio},
    bench::oracle,
    bench::plot,
    bench::steer::{CONFIGS, Config, Gain, Held, Options, Run, Workload},
};

/// "median (min–max)".
fn spread(mut v: Vec<f64>, digits: usize) -> String {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => "-".to_owned(),
        1 => format!("{:.digits$}", v[0]),
        n => format!("{:.digits$} ({:.digits$}–{:.digits$})", v[n / 2], v[0], v[n - 1]),
    }
}

struct Of<'a>(&'a [(Config, Run)]);

impl Of<'_> {
    fn runs(&self, c: Config) -> impl Iterator<Item = &Run> {
        self.0.iter().filter(move |(k, _)| *k == c).map(|(_, r)| r)
    }
    fn values(&self, c: Config, f: impl Fn(&Run) -> f64) -> Vec<f64> {
        self.runs(c).map(f).collect()
    }
    fn median(&self, c: Config, f: impl Fn(&Run) -> f64) -> f64 {
        median(self.values(c, f))
    }
    /// `c`'s median of `f` over the defaults'.
    fn vs_defaults(&self, c: Config, f: impl Fn(&Run) -> f64 + Copy) -> f64 {
        self.median(c, f) / self.median(Config::Defaults, f)
    }
    /// An agent's budgets over every run's measured windows (None without any).
    fn held(&self, c: Config) -> Option<HeldShare> {
        let held: Vec<_> = self.runs(c).filter_map(|r| r.held).collect();
        let windows: usize = held.iter().map(|h| h.windows).sum();
        let pct = |f: fn(&Held) -> usize| 100.0 * held.iter().map(f).sum::<usize>() as f64 / windows as f64;
        // Each run's figure (a p99 within the run, or its CPU), as the median over runs.
        let over_runs = |f: fn(&Held) -> f64| median(held.iter().map(f).collect());
        let holdable = |i: usize| {
            let n: usize = held.iter().map(|h| h.holdable[i]).sum();
            let ok: usize = held.iter().map(|h| h.held_where_holdable[i]).sum();
            (n, if n == 0 { 100.0 } else { 100.0 * ok as f64 / n as f64 })
        };
        (windows > 0).then(|| HeldShare {
            holdable: [holdable(0), holdable(1), holdable(2)],
            inference_p99_us: over_runs(|h| h.inference_p99_us),
            decision_p99_us: over_runs(|h| h.decision_p99_us),
            cpu_pct: over_runs(|h| h.cpu_pct),
            runs: held.len(),
            windows,
            pause: pct(|h| h.pause),
            gc: pct(|h| h.gc),
            memory: pct(|h| h.memory),
        })
    }
}

/// Percentages of windows in which each budget held.
struct HeldShare {
    /// Per budget (pause, GC, memory): windows where some action could hold it, and the
    /// percentage of those in which it held.
    holdable: [(usize, f64); 3],
    inference_p99_us: f64,
    decision_p99_us: f64,
    /// The agent's CPU over the measured part, % of a core: median over runs.
    cpu_pct: f64,
    runs: usize,
    windows: usize,
    pause: f64,
    gc: f64,
    memory: f64,
}

fn table(workload: Workload, of: &Of) -> String {
    let batch = workload.is_batch();
    let (unit, rate) = if batch { ("step", "steps/s") } else { ("request", "req/s") };
    let mut md = format!(
        "| configuration | {unit} p50 ms | p99 ms | p99.9 ms | p99 vs defaults | {} | {rate} | errors | peak RSS MiB | \
         steady RSS MiB | collections gen0/1/2 | mean pause ms gen0/1/2 | longest pause ms |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        if batch { "total s (vs defaults)" } else { "measured s" },
    );
    let base_p99 = of.median(Config::Defaults, |r| r.quantile(0.99));
    let base_total = of.median(Config::Defaults, |r| r.seconds);
    for c in CONFIGS {
        if of.runs(c).next().is_none() {
            continue;
        }
        let total = of.median(c, |r| r.seconds);
        let mean_pause = |g: usize| of.median(c, |r| r.pauses[g].1 / r.pauses[g].0.max(1) as f64);
        md += &format!(
            "| {} | {} | {} | {} | {:.3}× | {}{} | {} | {} | {} | {} | {:.0}/{:.0}/{:.0} | {:.3}/{:.2}/{:.1} | {} |\n",
            c.label(),
            spread(of.values(c, |r| r.quantile(0.5)), 2),
            spread(of.values(c, |r| r.quantile(0.99)), 1),
            spread(of.values(c, |r| r.quantile(0.999)), 1),
            of.median(c, |r| r.quantile(0.99)) / base_p99,
            spread(of.values(c, |r| r.seconds), 2),
            if batch { format!(" ({:.3}×)", total / base_total) } else { String::new() },
            spread(of.values(c, |r| r.latencies_ms.len() as f64 / r.seconds), 1),
            of.runs(c).map(|r| r.errors).sum::<u64>(),
            spread(of.values(c, |r| r.peak_rss_mib), 0),
            spread(of.values(c, |r| r.steady_rss_mib), 0),
            of.median(c, |r| r.collections[0] as f64),
            of.median(c, |r| r.collections[1] as f64),
            of.median(c, |r| r.collections[2] as f64),
            mean_pause(0),
            mean_pause(1),
            mean_pause(2),
            spread(of.values(c, Run::longest_pause_ms), 1),
        );
    }
    for c in [Config::Act, Config::Rules] {
        if let Some(h) = of.held(c) {
            md += &format!(
                "\n{}, measured part ({} windows over {}): budgets held in {:.1}% of windows (pause 10 ms), \
                 {:.1}% (GC no worse than at attach), {:.1}% (memory 15%); where some action could hold \
                 them: pause {:.1}% of {}, GC {:.1}% of {}, memory {:.1}% of {}; p99 over runs (median): \
                 model call {:.0} µs, window to decision {:.0} µs; agent CPU {:.2}% of a core (median).\n",
                c.label(),
                h.windows,
                crate::bench::measure::plural(h.runs, "run"),
                h.pause,
                h.gc,
                h.memory,
                h.holdable[0].1,
                h.holdable[0].0,
                h.holdable[1].1,
                h.holdable[1].0,
                h.holdable[2].1,
                h.holdable[2].0,
                h.inference_p99_us,
                h.decision_p99_us,
                h.cpu_pct,
            );
        }
    }
    md
}

/// The headline measure of a workload, lower is better: p99 latency for services, total time
/// for batch loops.
fn headline(workload: Workload) -> (&'static str, fn(&Run) -> f64) {
    if workload.is_batch() { ("total time", |r| r.seconds) } else { ("p99", |r| r.quantile(0.99)) }
}

/// The oracle's measure as a share of the defaults' (NaN where either was not run).
fn reach(of: &Of, f: fn(&Run) -> f64) -> f64 {
    oracle(of, f).map_or(f64::NAN, |(_, best)| best / of.median(Config::Defaults, f))
}

/// "held out" or "tuning": which the workload is.
fn family(workload: Workload) -> &'static str {
    if workload.held_out() { "held out" } else { "tuning" }
}

/// What a configuration's runs kept, as medians: what decides whether it may be the oracle.
fn kept(of: &Of, c: Config) -> oracle::Kept {
    oracle::Kept {
        peak_rss_mib: of.median(c, |r| r.peak_rss_mib),
        longest_ms: of.median(c, Run::longest_pause_ms),
    }
}

/// Whether fixed recipe `c` may be the oracle (`oracle::admissible`, against the defaults' runs
/// beside it; any where the defaults were not run).
fn admissible(of: &Of, c: Config) -> bool {
    let own = kept(of, Config::Defaults);
    !own.peak_rss_mib.is_finite() || oracle::admissible(kept(of, c), own)
}

/// The oracle: the best of the fixed recipes run on the measure `f` (lower is better), chosen
/// after the fact among those that keep the promises act is held to, and its median.
fn oracle(of: &Of, f: fn(&Run) -> f64) -> Option<(Config, f64)> {
    best_recipe(of, f, |c| admissible(of, c))
}

/// The best recipe on `f` of those `may` lets in.
fn best_recipe(of: &Of, f: fn(&Run) -> f64, may: impl Fn(Config) -> bool) -> Option<(Config, f64)> {
    crate::bench::steer::RECIPES
        .iter()
        .filter(|&&c| may(c))
        .map(|&c| (c, of.median(c, f)))
        .filter(|(_, v)| v.is_finite())
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Regret against the oracle: per workload, the best of the fixed recipes run (chosen after the
/// fact on the workload's own measure), against act and act on the analytic model alone; with
/// act's cost in time and peak RSS against CPython's defaults.
fn regret(results: &[(Workload, Vec<(Config, Run)>)]) -> String {
    let mut md = format!(
        "## Regret against the best fixed recipe

The oracle is the best, after the fact, of the fixed \
         recipes run (defaults, static, freeze alone, freeze + 5k, freeze + 20k) on the workload's \
         own measure (p99 for services, total time for batch), among those that keep act's \
         promises ({}); medians over rounds. Targets: act \
         ≤ 1.5× the oracle, never worse than defaults by more than 5% on time or 15% on peak RSS.\n\n\
         | workload | family | measure | oracle | act / oracle | rules / oracle | act / defaults | act RSS / defaults | verdict |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        oracle::promises()
    );
    let mut left_out = Vec::new();
    for (workload, runs) in results {
        let of = Of(runs);
        let (what, f) = headline(*workload);
        let Some((oracle, best)) = oracle(&of, f) else { continue };
        if let Some((c, v)) = best_recipe(&of, f, |_| true).filter(|&(_, v)| v < best) {
            let (k, own) = (kept(&of, c), kept(&of, Config::Defaults));
            left_out.push(format!(
                "{} {} {v:.2} (peak RSS {:.0} MiB, the defaults' {:.0}; longest pause {:.0} ms, the \
                 defaults' {:.0})",
                workload.name(),
                c.short(),
                k.peak_rss_mib,
                own.peak_rss_mib,
                k.longest_ms,
                own.longest_ms
            ));
        }
        let ratio = |c: Config| of.median(c, f) / best;
        let total = |r: &Run| r.seconds;
        let peak = |r: &Run| r.peak_rss_mib;
        let defaults = of.vs_defaults(Config::Act, f);
        let rss = of.vs_defaults(Config::Act, peak);
        let time = of.vs_defaults(Config::Act, total);
        let ok = ratio(Config::Act) <= 1.5 && (!workload.is_batch() || time <= 1.05) && rss <= 1.15;
        // A configuration not run is a dash, not "NaN×".
        let times = |x: f64| if x.is_finite() { format!("{x:.2}×") } else { "—".to_owned() };
        md += &format!(
            "| {} | {} | {what} | {} {best:.2} | {} | {} | {} | {} | {} |\n",
            workload.name(),
            family(*workload),
            oracle.short(),
            times(ratio(Config::Act)),
            times(ratio(Config::Rules)),
            times(defaults),
            times(rss),
            verdict(ok)
        );
    }
    if !left_out.is_empty() {
        md += &format!(
            "\nScored better but not the oracle (not keeping act's promises: {}): {}.\n",
            oracle::promises(),
            left_out.join("; ")
        );
    }
    md
}

/// What the learned model earns: act with it against act on the analytic model alone, on each
/// workload's headline measure: ratios of medians, and round by round (the rounds are
/// interleaved, so each pair ran under the same load on the machine); below 1, the model helps.
fn ablation(results: &[(Workload, Vec<(Config, Run)>)]) -> String {
    let mut md = String::from(
        "## What the learned model earns\n\nAct with the learned model against act on the analytic model \
         alone (`--model none`), same rounds, interleaved. Below 1×, the model helps. Paired: the \
         geometric mean of each round's ratio and its 90% interval; a family is lost where the \
         whole interval is above 1×. \"(alike)\": the two arms collected the same (each \
         generation's median count within 1%), so their ratio is noise, not evidence.\n\n\
         | workload | measure | act | rules only | act / rules | paired (90% interval) |\n\
         |---|---|---|---|---|---|\n",
    );
    let mut held_out = Vec::new();
    let mut lost = Vec::new();
    for (workload, runs) in results {
        let of = Of(runs);
        let (what, f) = headline(*workload);
        let (act, rules) = (of.median(Config::Act, f), of.median(Config::Rules, f));
        if !(act.is_finite() && rules.is_finite()) {
            continue;
        }
        let paired = paired_ratio(&of.values(Config::Act, f), &of.values(Config::Rules, f));
        let alike = collected_alike(&of);
        if workload.held_out() {
            held_out.push((act / rules, alike));
            if paired.is_some_and(|(_, lo, _)| lo > 1.0) {
                lost.push(workload.name());
            }
        }
        let paired = paired.map_or("-".to_owned(), |(g, lo, hi)| format!("{g:.3}× ({lo:.3}–{hi:.3})"));
        md += &format!(
            "| {} | {what} | {act:.2} | {rules:.2} | {:.3}×{} | {paired} |\n",
            workload.name(),
            act / rules,
            if alike { " (alike)" } else { "" }
        );
    }
    if !held_out.is_empty() {
        let ratios: Vec<f64> = held_out.iter().map(|(r, _)| *r).collect();
        // The verdict is on the families where the model changed what the collector did.
        let differ: Vec<f64> = held_out.iter().filter(|(_, alike)| !alike).map(|(r, _)| *r).collect();
        let geo = crate::bench::measure::geomean(&ratios);
        let judged = if differ.is_empty() { f64::NAN } else { crate::bench::measure::geomean(&differ) };
        let worse = ratios.iter().filter(|r| **r > 1.0).count();
        let without = match differ.len() {
            n if n == ratios.len() => String::new(),
            0 => " (every family alike: nothing to judge)".to_owned(),
            _ => format!(" ({judged:.3}× without the alike)"),
        };
        md += &format!(
            "\nHeld-out families: geometric mean {geo:.3}×{without}; medians worse with the model on \
             {worse} of {}, credibly worse (paired) on {} ({}).\n",
            held_out.len(),
            if lost.is_empty() { "none".to_owned() } else { lost.join(", ") },
            verdict(judged < 1.0 && lost.is_empty())
        );
    }
    md
}

/// Whether act and act on the analytic model alone collected the same: each generation's median
/// count within 1% (or one collection). Then the model changed nothing the collector did, and
/// the two arms' ratio is the noise between runs (the document service, 2026-11-28: 8184/744/68
/// against 8184/743/68, read as 0.62x).
fn collected_alike(of: &Of) -> bool {
    (0..3).all(|g| {
        let count = |c| of.median(c, |r| r.collections[g] as f64);
        let (a, b) = (count(Config::Act), count(Config::Rules));
        (a - b).abs() <= (0.01 * a.max(b)).max(1.0)
    })
}

/// The oracle's measure above this share of the defaults' is no gain to converge to.
const NO_GAIN: f64 = 0.9;

/// Windows from attach to 90% of the final gain over the defaults, act against act on the
/// analytic model alone (medians over the runs that gained; a dash where none did).
fn convergence(results: &[(Workload, Vec<(Config, Run)>)]) -> String {
    let mut md = String::from(
        "## Convergence\n\nWindows from attach until a run has 90% of its final gain over the \
         defaults (the final level is its last third's). A service's gain is in its longest \
         pauses: converged from the first window after which no window's longest pause is above \
         that level. A batch job's is in its own time: converged at the first window from which \
         the mean step over 3 windows reaches that level. Medians over the runs that gained; a family where no fixed \
         recipe gains over 10% on its own measure has no gain to converge to. Targets: ≤ 10 \
         windows; with the model ≤ 0.7× the windows without it on the held-out mean.\n\n\
         | workload | family | act | rules only | act / rules | verdict |\n|---|---|---|---|---|---|\n",
    );
    let mut held_out = Vec::new();
    for (workload, runs) in results {
        let of = Of(runs);
        let gain = if workload.is_batch() {
            Gain::StepTime { defaults_ms: of.median(Config::Defaults, Run::mean_step_ms) }
        } else {
            Gain::LongestPause { defaults_ms: of.median(Config::Defaults, Run::longest_pause_ms) }
        };
        let windows = |c: Config| {
            let v: Vec<f64> = of
                .runs(c)
                .filter_map(|r| r.timeline.as_ref()?.windows_to_converge(gain))
                .map(|w| w as f64)
                .collect();
            (!v.is_empty()).then(|| (median(v.clone()), v.len()))
        };
        let (act, rules) = (windows(Config::Act), windows(Config::Rules));
        if act.is_none() && rules.is_none() {
            continue;
        }
        // Where no fixed recipe gains more than the machine's noise on the family's own
        // measure, there is no gain to converge to: the windows counted would be the time until
        // noise in the longest pauses died down (the web application: defaults' longest pause
        // 0.7-3.8 ms from run to run, its p99 the same under every recipe).
        let (_, f) = headline(*workload);
        let reached = reach(&of, f);
        if reached > NO_GAIN {
            md += &format!(
                "| {} | {} | — | — | — | does not apply (the best fixed recipe is {reached:.2}× the \
                 defaults) |\n",
                workload.name(),
                family(*workload),
            );
            continue;
        }
        let cell = |w: Option<(f64, usize)>| {
            w.map_or("—".to_owned(), |(m, n)| {
                format!("{m:.0} ({})", crate::bench::measure::plural(n, "run"))
            })
        };
        let ratio = act.zip(rules).map(|(a, r)| a.0 / r.0.max(1.0));
        if let Some(r) = ratio.filter(|_| workload.held_out()) {
            held_out.push(r);
        }
        md += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            workload.name(),
            family(*workload),
            cell(act),
            cell(rules),
            ratio.map_or("—".to_owned(), |r| format!("{r:.2}×")),
            verdict(act.is_some_and(|a| a.0 <= 10.0))
        );
    }
    if !held_out.is_empty() {
        let mean = held_out.iter().sum::<f64>() / held_out.len() as f64;
        md +=
            &format!("\nHeld-out families: act / rules {mean:.2}× on the mean ({}).\n", verdict(mean <= 0.7));
    }
    md
}

fn verdict(ok: bool) -> &'static str {
    if ok { "MET" } else { "MISSED" }
}

/// The steering targets by kind of workload, each as measured in this run. A target that holds
/// only where the oracle reaches a level (a service's 0.1×, a batch job's 0.7×) says so where
/// it does not, rather than counting a miss no fixed recipe could avoid.
fn targets(results: &[(Workload, Vec<(Config, Run)>)]) -> String {
    let mut md = String::from(
        "## Targets\n\nServices whose oracle reaches ≤ 0.1× the defaults' p99: act ≤ 0.1×. Batch and \
         training jobs whose oracle reaches ≤ 0.7× the defaults' time: act ≤ 0.8×, and step p99 no \
         worse than the defaults' on every one. The memory-risky batch: time ≤ 1.03×, peak RSS ≤ \
         1.15×. Every workload: the agent's budgets held where some action could hold them.\n\n\
         | target | measured | verdict |\n|---|---|---|\n",
    );
    let mut row = |what: &str, measured: String, ok: Option<bool>| {
        // A target against a configuration this run did not include is not a miss.
        md += &match ok {
            _ if measured.starts_with("NaN") => format!("| {what} | not run | — |\n"),
            Some(ok) => format!("| {what} | {measured} | {} |\n", verdict(ok)),
            None => format!("| {what} | {measured} | does not apply |\n"),
        };
    };
    for (workload, runs) in results {
        let of = Of(runs);
        let name = workload.name();
        let (_, f) = headline(*workload);
        let reached = reach(&of, f);
        let act = of.vs_defaults(Config::Act, f);
        let p99 = |r: &Run| r.quantile(0.99);
        let total = |r: &Run| r.seconds;
        let peak = |r: &Run| r.peak_rss_mib;
        match workload {
            Workload::Etl => {
                let time = of.vs_defaults(Config::Act, total);
                row(
                    "etl (memory-risky): act total time ≤ 1.03× defaults",
                    format!("{time:.3}×"),
                    Some(time <= 1.03),
                );
                let rss = of.vs_defaults(Config::Act, peak);
                row(
                    "etl (memory-risky): act peak RSS ≤ 1.15× defaults",
                    format!("{rss:.3}×"),
                    Some(rss <= 1.15),
                );
            }
            w if w.is_batch() => {
                row(
                    &format!("{name}: act total time ≤ 0.8× defaults where the oracle reaches ≤ 0.7×"),
                    format!("{act:.3}× (oracle {reached:.3}×)"),
                    (reached <= 0.7).then_some(act <= 0.8),
                );
                let steps = of.vs_defaults(Config::Act, p99);
                row(&format!("{name}: act step p99 ≤ defaults"), format!("{steps:.3}×"), Some(steps <= 1.0));
                if *w == Workload::Batch {
                    let cost = of.vs_defaults(Config::Observe, total) - 1.0;
                    row(
                        "observe costs ≤ 2% throughput (batch total time)",
                        format!("{:+.1}%", 100.0 * cost),
                        Some(cost <= 0.02),
                    );
                }
            }
            _ => row(
                &format!("{name}: act p99 ≤ 0.1× defaults where the oracle reaches ≤ 0.1×"),
                format!("{act:.3}× (oracle {reached:.3}×)"),
                (reached <= 0.1).then_some(act <= 0.1),
            ),
        }
        if let Some(h) = of.held(Config::Act) {
            let [p, g, m] = h.holdable;
            row(
                &format!("{name}: every budget held in ≥ 99% of the windows where some action could hold it"),
                format!(
                    "pause {:.1}% of {}, GC {:.1}% of {}, memory {:.1}% of {} (of {} windows)",
                    p.1, p.0, g.1, g.0, m.1, m.0, h.windows
                ),
                Some(p.1 >= 99.0 && g.1 >= 99.0 && m.1 >= 99.0),
            );
        }
    }
    md
}

/// A file's SHA-256 (the model's, so that training can tell whether a report measured the
/// model it made).
pub fn sha256(path: &std::path::Path) -> String {
    std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

pub fn write(opts: &Options, results: &[(Workload, Vec<(Config, Run)>)]) -> Result<()> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cpu = crate::bench::measure::cpu_model();
    let mut md = format!(
        "# neurogc steering benchmark\n\n{} · {} · {cpu} · {} CPUs{} · {} × {:.0} s after {:.0} s of the same load, \
         interleaved · model: {} (sha256 {}) · medians (min–max)\n\nWorkloads in bench/; none of them is a training profile. \
         Latency of requests is taken from their intended send time (open loop); the batch job's from each step.\n\n",
        opts.python.display(),
        host.trim(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        if opts.half_speed { " · half speed (a busy loop shares the workload's CPU)" } else { "" },
        if opts.rounds == 1 { "1 round".to_owned() } else { format!("{} rounds", opts.rounds) },
        opts.seconds,
        opts.warmup,
        opts.model.as_ref().map_or("embedded default".to_owned(), |m| m.display().to_string()),
        sha256(
            opts.model
                .clone()
                .unwrap_or_else(|| crate::workspace_root().join("models/default.onnx"))
                .as_path()
        ),
    );
    md += &regret(results);
    md += "\n";
    md += &targets(results);
    md += "\n";
    md += &ablation(results);
    md += "\n";
    md += &convergence(results);
    for (workload, runs) in results {
        let of = Of(runs);
        let base_rate = if workload.is_batch() { String::new() } else { format!(", load × {}", opts.load) };
        md += &format!("\n## {} (`{}`{base_rate})\n\n", workload.title(), workload.name());
        if workload.phases().len() > 1 {
            let p: Vec<String> = workload
                .phases()
                .iter()
                .map(|p| format!("{} {:.0}% at {}× ({})", p.name, p.share * 100.0, p.rate, p.path))
                .collect();
            md += &format!("Measured part: {}.\n\n", p.join(", "));
        }
        md += &table(*workload, &of);
        for (file, what) in plot::plots(&opts.out, *workload, runs)? {
            md += &format!("\n![{what}]({file})\n");
        }
    }
    let report = opts.out.join("report.md");
    std::fs::write(&report, &md)?;
    println!("\n{md}\n(written to {})", report.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p99_ms: f64, seconds: f64) -> Run {
        Run { latencies_ms: vec![p99_ms; 10], seconds, peak_rss_mib: 100.0, ..Run::default() }
    }

    fn verdicts(md: &str, of: &str) -> Vec<String> {
        md.lines()
            .filter(|l| l.starts_with(&format!("| {of}")))
            .map(|l| l.rsplit('|').nth(1).unwrap().trim().to_owned())
            .collect()
    }

    #[test]
    fn a_service_target_applies_only_where_the_oracle_reaches_it() {
        // The web service: no fixed recipe beats the defaults' p99, so 0.1× is no target there.
        let web = vec![
            (Config::Defaults, run(1.0, 30.0)),
            (Config::Freeze, run(0.95, 30.0)),
            (Config::Act, run(1.05, 30.0)),
        ];
        // The docs service: freeze alone reaches 0.02×, and act 0.3× misses.
        let docs = vec![
            (Config::Defaults, run(150.0, 30.0)),
            (Config::Freeze, run(3.0, 30.0)),
            (Config::Act, run(45.0, 30.0)),
        ];
        let md = targets(&[(Workload::Web, web), (Workload::Docs, docs)]);
        assert_eq!(verdicts(&md, "web"), ["does not apply"], "{md}");
        assert_eq!(verdicts(&md, "docs"), ["MISSED"], "{md}");
    }

    #[test]
    fn a_recipe_over_the_memory_budget_is_no_oracle_and_is_named() {
        // micrograd (held out, 2026-12-04): the static recipe took 0.57x the defaults' time at
        // 2.1x their RSS; freeze alone 0.81x within the budget. The oracle is freeze alone, so
        // the 0.8x target does not apply, and act at 0.93x is within 1.5x of it.
        let autograd = || {
            let mut fat = run(300.0, 14.8);
            fat.peak_rss_mib = 266.0;
            vec![
                (Config::Defaults, run(300.0, 26.1)),
                (Config::Static, fat),
                (Config::Freeze, run(190.0, 21.2)),
                (Config::Act, run(290.0, 19.7)),
            ]
        };
        let md = targets(&[(Workload::Autograd, autograd())]);
        assert_eq!(verdicts(&md, "autograd"), ["does not apply", "MET"], "{md}");
        let md = regret(&[(Workload::Autograd, autograd())]);
        assert!(md.contains("| autograd | held out | total time | freeze 21.20 | 0.93× |"), "{md}");
        assert!(
            md.contains("Scored better but not the oracle") && md.contains("static 14.80 (peak RSS 266 MiB"),
            "{md}"
        );
    }

    #[test]
    fn convergence_applies_only_where_some_recipe_gains() {
        // A long pause in the first windows, then none: converged at window 4 where the
        // defaults' p99 is far above the best recipe's, no gain to converge to where it is not.
        let with = |defaults_p99: f64| {
            let mut act = run(1.0, 30.0);
            act.timeline = Some(timeline(&[9.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]));
            let mut defaults = run(defaults_p99, 30.0);
            defaults.pauses = [(0, 0.0, 0.0), (0, 0.0, 0.0), (1, 9.0, 9.0)];
            vec![(Config::Defaults, defaults), (Config::Freeze, run(1.0, 30.0)), (Config::Act, act)]
        };
        let md = convergence(&[(Workload::Docs, with(50.0)), (Workload::Web, with(1.05))]);
        assert_eq!(verdicts(&md, "docs"), ["MET"], "{md}");
        assert!(md.contains("| docs | held out | 4 (1 run) |"), "{md}");
        assert_eq!(
            verdicts(&md, "web"),
            ["does not apply (the best fixed recipe is 0.95× the defaults)"],
            "{md}"
        );
    }

    #[test]
    fn a_ratio_whose_arms_collected_the_same_is_marked_noise() {
        // The document service's arms (2026-11-28): 8184/744/68 against 8184/743/68.
        let with = |rules_gen0: u64| {
            let (mut act, mut rules) = (run(1.0, 30.0), run(1.6, 30.0));
            act.collections = [8184, 744, 68];
            rules.collections = [rules_gen0, 743, 68];
            vec![(Config::Act, act), (Config::Rules, rules)]
        };
        let md = ablation(&[(Workload::Docs, with(8184))]);
        assert!(md.contains("| docs | p99 | 1.00 | 1.60 | 0.625× (alike) |"), "{md}");
        assert!(md.contains("geometric mean 0.625× (every family alike: nothing to judge)"), "{md}");
        assert!(md.contains("(MISSED)"), "{md}");
        let md = ablation(&[(Workload::Docs, with(6100))]);
        assert!(md.contains("| docs | p99 | 1.00 | 1.60 | 0.625× |"), "{md}");
        // Alike on one family, not on the other: the verdict is on the one that differed.
        let mut web = with(6100);
        web[0].1.latencies_ms = vec![2.0; 10];
        let md = ablation(&[(Workload::Docs, with(8184)), (Workload::Web, web)]);
        assert!(md.contains("geometric mean 0.884× (1.250× without the alike)"), "{md}");
    }

    #[test]
    fn a_training_job_is_held_to_its_step_p99_whatever_the_oracle() {
        let autograd = vec![
            (Config::Defaults, run(160.0, 40.0)),
            (Config::Freeze, run(55.0, 19.0)),
            (Config::Act, run(170.0, 20.0)),
        ];
        let md = targets(&[(Workload::Autograd, autograd)]);
        assert_eq!(verdicts(&md, "autograd"), ["MET", "MISSED"], "{md}");
    }

    /// A timeline of one-second windows, with one pause of `ms[k]` in window k.
    fn timeline(ms: &[f64]) -> crate::bench::steer::Timeline {
        crate::bench::steer::Timeline {
            pauses: ms.iter().enumerate().map(|(k, &m)| (k as f64 + 1.5, 2, m)).collect(),
            changes: Vec::new(),
            windows: (0..=ms.len()).map(|k| k as f64 + 1.0).collect(),
            steps: Vec::new(),
        }
    }

    #[test]
    fn a_service_converges_only_once_no_long_pause_comes_back() {
        // A freeze early, then one full collection at the defaults' length at window 6: the
        // p99 saw it, so the run converged after it, not at the freeze.
        let mut ms = vec![300.0, 5.0, 5.0, 5.0, 300.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0];
        let gain = Gain::LongestPause { defaults_ms: 300.0 };
        assert_eq!(timeline(&ms).windows_to_converge(gain), Some(7));
        ms[4] = 5.0;
        assert_eq!(timeline(&ms).windows_to_converge(gain), Some(3));
        // Nothing gained over the defaults: no convergence to speak of.
        assert_eq!(timeline(&ms).windows_to_converge(Gain::LongestPause { defaults_ms: 4.0 }), None);
    }

    #[test]
    fn a_batch_job_converges_when_its_mean_step_first_reaches_the_goal() {
        // Two warm-up windows without steps, then steps of 100 ms (the defaults') until 6 s
        // and of 50 ms after: the 3-window mean reaches the goal (55 ms) once the slow steps
        // are out of it, from the window that starts at 6 s (window 7).
        let mut t = timeline(&[1.0; 14]);
        let mut end = 3.0;
        while end < 15.0 {
            let ms = if end < 6.0 { 100.0 } else { 50.0 };
            end += ms / 1e3;
            t.steps.push((end, ms));
        }
        assert_eq!(t.windows_to_converge(Gain::StepTime { defaults_ms: 100.0 }), Some(7));
        // Steps no faster than the defaults': no gain to converge to.
        assert_eq!(t.windows_to_converge(Gain::StepTime { defaults_ms: 50.0 }), None);
    }
}
