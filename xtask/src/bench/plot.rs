//! SVG plots of one workload of the steering benchmark (plotters): latency by percentile on a
//! "nines" axis (every round pooled), RSS over time and, for act, the pause timeline with the
//! agent's changes marked (the last round).
use std::path::Path;

use anyhow::Result;
use plotters::{coord::types::RangedCoordf64, prelude::*};

use crate::bench::steer::{CONFIGS, Config, Run, Workload};

fn colour(c: Config) -> RGBColor {
    match c {
        Config::Defaults => RGBColor(30, 30, 30),
        Config::Static => RGBColor(31, 119, 180),
        Config::GcOff => RGBColor(150, 150, 150),
        Config::Freeze => RGBColor(148, 103, 189),
        Config::Freeze5k => RGBColor(140, 86, 75),
        Config::Freeze20k => RGBColor(227, 119, 194),
        Config::Observe => RGBColor(44, 160, 44),
        Config::Act => RGBColor(214, 39, 40),
        Config::Rules => RGBColor(255, 127, 14),
    }
}

const SIZE: (u32, u32) = (900, 480);

/// The plots written for `workload` into `dir`: (file name, caption).
pub fn plots(dir: &Path, workload: Workload, runs: &[(Config, Run)]) -> Result<Vec<(String, String)>> {
    let name = workload.name();
    let mut out = Vec::new();
    let file = format!("{name}-latency.svg");
    latency(&dir.join(&file), workload, runs)?;
    out.push((file, format!("{}: latency by percentile", workload.title())));
    let file = format!("{name}-rss.svg");
    rss(&dir.join(&file), workload, runs)?;
    out.push((file, format!("{}: RSS over time", workload.title())));
    if let Some(act) = runs.iter().rev().find(|(c, _)| *c == Config::Act).map(|(_, r)| r) {
        let file = format!("{name}-timeline.svg");
        timeline(&dir.join(&file), workload, act)?;
        out.push((file, format!("{}: pauses and the agent's changes (act, last round)", workload.title())));
    }
    Ok(out)
}

/// x = −log10(1 − q): 1 is p90, 2 is p99, 3 is p99.9.
fn latency(path: &Path, workload: Workload, runs: &[(Config, Run)]) -> Result<()> {
    let mut curves = Vec::new();
    for c in CONFIGS {
        let mut pooled: Vec<f64> =
            runs.iter().filter(|(k, _)| *k == c).flat_map(|(_, r)| r.latencies_ms.iter().copied()).collect();
        if pooled.is_empty() {
            continue;
        }
        pooled.sort_by(f64::total_cmp);
        let top = (pooled.len() as f64).log10();
        let points: Vec<(f64, f64)> = (0..=400)
            .map(|i| {
                let x = top * i as f64 / 400.0;
                let q = 1.0 - 10f64.powf(-x);
                (x, crate::bench::steer::quantile(&pooled, q).max(0.01))
            })
            .collect();
        curves.push((c, points));
    }
    let xmax = curves.iter().flat_map(|(_, p)| p.last().map(|p| p.0)).fold(1.0, f64::max);
    let ymax = curves.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.5;
    let ymin = curves.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)).fold(ymax, f64::min) * 0.7;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let what = if workload.is_batch() { "step time" } else { "request latency" };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: {what} (all rounds)", workload.title()), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, (ymin..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc(format!("{what} (ms)"))
        .x_labels(((xmax as usize) + 1).min(8))
        .x_label_formatter(&|x| match x.round() as i32 {
            0 => "p0".into(),
            1 => "p90".into(),
            2 => "p99".into(),
            n => format!("p99.{}", "9".repeat(n as usize - 2)),
        })
        .draw()?;
    for (c, points) in curves {
        config_line(&mut chart, c, points)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

/// One configuration's curve, in its colour, with its legend entry.
fn config_line<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    c: Config,
    points: impl IntoIterator<Item = (f64, f64)>,
) -> Result<()> {
    let col = colour(c);
    chart
        .draw_series(LineSeries::new(points, col.stroke_width(2)))?
        .label(c.label())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
    Ok(())
}

fn legend<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    at: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(at)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    Ok(())
}

/// The last round of each configuration; the measured part starts at the dashed line.
fn rss(path: &Path, workload: Workload, runs: &[(Config, Run)]) -> Result<()> {
    let last: Vec<(Config, &Run)> = CONFIGS
        .iter()
        .filter_map(|&c| runs.iter().rev().find(|(k, _)| *k == c).map(|(_, r)| (c, r)))
        .collect();
    let xmax = last.iter().flat_map(|(_, r)| r.rss.last().map(|p| p.0)).fold(1.0, f64::max);
    let ymax = last.iter().flat_map(|(_, r)| r.rss.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.1;
    let from = last.first().map_or(0.0, |(_, r)| r.measured_from_s);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: RSS (last round; measured from the dashed line)", workload.title()),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart.configure_mesh().x_desc("seconds").y_desc("RSS (MiB)").draw()?;
    chart.draw_series(DashedLineSeries::new(
        vec![(from, 0.0), (from, ymax)],
        6,
        4,
        BLACK.mix(0.5).stroke_width(1),
    ))?;
    for (c, r) in last {
        config_line(&mut chart, c, r.rss.iter().copied())?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

/// The longest pause of generation `g` in every 100 ms: a batch job collects thousands of times a
/// second, and a dot per collection would make a plot of megabytes that shows nothing more.
fn longest_per_tick(pauses: &[(f64, i8, f64)], g: i8) -> impl Iterator<Item = (f64, f64)> {
    let mut ticks: std::collections::BTreeMap<u64, (f64, f64)> = std::collections::BTreeMap::new();
    for &(at, _, ms) in pauses.iter().filter(|p| p.1 == g) {
        let e = ticks.entry((at * 10.0) as u64).or_insert((at, ms));
        if ms > e.1 {
            *e = (at, ms);
        }
    }
    ticks.into_values()
}

/// The longest collection of each generation per 100 ms as a dot (colour = generation), every
/// change the agent made as a vertical line labelled with what it changed.
fn timeline(path: &Path, workload: Workload, act: &Run) -> Result<()> {
    let Some(t) = &act.timeline else { return Ok(()) };
    let xmax = t.pauses.iter().map(|p| p.0).chain(act.rss.last().map(|p| p.0)).fold(1.0, f64::max);
    let ymax = t.pauses.iter().map(|p| p.2).fold(1.0, f64::max) * 3.0;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: longest pause per 100 ms, and the agent's changes (act)", workload.title()),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, (0.005f64..ymax).log_scale())?;
    chart.configure_mesh().x_desc("seconds").y_desc("pause (ms)").draw()?;
    chart.draw_series(DashedLineSeries::new(
        vec![(act.measured_from_s, 0.005), (act.measured_from_s, ymax)],
        6,
        4,
        BLACK.mix(0.5).stroke_width(1),
    ))?;
    let gens = [RGBColor(120, 170, 220), RGBColor(255, 150, 40), RGBColor(200, 30, 30)];
    for (g, col) in gens.into_iter().enumerate() {
        chart
            .draw_series(
                longest_per_tick(&t.pauses, g as i8)
                    .map(|(at, ms)| Circle::new((at, ms.max(0.005)), 2, col.filled())),
            )?
            .label(format!("gen{g}"))
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, col.filled()));
    }
    for (i, (at, what)) in t.changes.iter().enumerate() {
        chart.draw_series(LineSeries::new(vec![(*at, 0.005), (*at, ymax)], BLACK.stroke_width(1)))?;
        // Stagger the labels down the plot so that neighbours do not overlap.
        let y = ymax / 10f64.powf(0.25 * (i % 6) as f64 + 0.1);
        chart.draw_series(std::iter::once(Text::new(format!(" {what}"), (*at, y), ("sans-serif", 12))))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}
