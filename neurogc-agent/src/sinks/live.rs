//! The single-target live view, a consumer of the loop's windows: the screen redrawn in place
//! when standard output is a terminal, one line per window otherwise (`view` renders both), and
//! the summary at the end, in 80 columns.
use std::{
    io::{self, Write},
    time::Instant,
};

use neurogc_trace::Summary;

use crate::{
    interp::{AttachPlan, process},
    session::features,
    sinks::{Shown, TargetSink, output::LineWriter, view},
    text,
};

pub struct LiveView {
    out: LineWriter<io::Stdout>,
    tty: bool,
    pid: i32,
    name: String,
    python: String,
    probe: String,
    started: Instant,
    /// A recommendation asked for (SIGUSR1), shown under the screen for this many windows more.
    pinned: Option<(String, u32)>,
    /// The last garbage census, in words (`view::garbage`): on the screen until the next; on
    /// a line-per-window output, in the window after it only.
    garbage: Option<(String, bool)>,
}

/// Windows a recommendation asked for stays on the redrawn screen: long enough to read and copy.
const PINNED_WINDOWS: u32 = 15;

impl LiveView {
    pub fn new(plan: &AttachPlan) -> LiveView {
        LiveView {
            out: LineWriter::new(io::stdout()),
            tty: io::IsTerminal::is_terminal(&io::stdout()),
            pid: plan.pid,
            name: process::describe(plan.pid).split_once(' ').map(|(_, n)| n.to_owned()).unwrap_or_default(),
            python: plan.interpreter.version.to_string(),
            probe: plan.source.to_string(),
            started: Instant::now(),
            pinned: None,
            garbage: None,
        }
    }
}

impl TargetSink for LiveView {
    fn record(&mut self, rec: &neurogc_trace::Record) -> io::Result<()> {
        if let neurogc_trace::Record::Census(c) = rec {
            self.garbage = Some((view::garbage(c), true));
        }
        Ok(())
    }

    /// Shows `text` now: on a redrawn screen, under it for the next windows; one line per
    /// window otherwise, at once.
    fn note(&mut self, text: &str) -> io::Result<bool> {
        if self.tty {
            self.pinned = Some((text.to_owned(), PINNED_WINDOWS));
            return Ok(true);
        }
        writeln!(self.out, "{}", text::wrap_lines(text, 2))?;
        self.out.flush()?;
        Ok(true)
    }

    fn window(&mut self, shown: &Shown) -> io::Result<()> {
        let Shown { window, agg, lost, note, trigger, decision } = *shown;
        let f = &window.features;
        let pinned = self.pinned.take().map(|(text, left)| {
            if left > 1 {
                self.pinned = Some((text.clone(), left - 1));
            }
            text
        });
        let decision = match (decision, pinned.as_deref()) {
            (Some(d), Some(p)) => Some(format!("{d}\n{p}")),
            (d, p) => d.or(p).map(str::to_owned),
        };
        let garbage = match &mut self.garbage {
            Some((words, fresh)) if self.tty || *fresh => {
                *fresh = false;
                Some(words.clone())
            }
            _ => None,
        };
        let frame = view::Frame {
            pid: self.pid,
            name: &self.name,
            python: &self.python,
            probe: &self.probe,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            agg,
            interval_collections: window.collections,
            interval_s: (window.end_ns - window.start_ns) as f64 / 1e9,
            gc_share: f[features::index("gc_share").expect("a feature")],
            settings: window.sample.thresholds.zip(window.sample.count0),
            alloc_rate: window
                .sample
                .thresholds
                .map(|_| f[features::index("alloc_per_s").expect("a feature")]),
            lost,
            note,
            trigger,
            garbage: garbage.as_deref(),
            decision: decision.as_deref(),
        };
        let text = if self.tty { view::screen(&frame) } else { view::line(&frame) + "\n" };
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    fn summary(&mut self, summary: &Summary, lost: u64, ended: Option<&str>) -> io::Result<bool> {
        let out = &mut self.out;
        writeln!(
            out,
            "{}",
            view::summary(
                &summary.generations,
                &summary.stopped,
                summary.elapsed_s,
                summary.gc_time_share,
                lost
            )
        )?;
        // The record keeps the recommendation's lines whole; the terminal's fit 80 columns.
        if let Some(r) = summary.policy.as_ref().and_then(|p| p.recommendation.as_ref()) {
            writeln!(out, "{}", text::wrap_lines(r, 2))?;
        }
        if let Some(ended) = ended {
            writeln!(out, "{ended}")?;
        }
        out.flush()?;
        Ok(true)
    }
}
