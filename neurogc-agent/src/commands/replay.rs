//! `replay TRACE`: a model and the controller run over a recording, offline. Every window is
//! recomputed from the recorded collections by the same `Windower` the live agent runs (and
//! checked against the recorded one), scored, and decided by a fresh controller (advise mode);
//! what it would have decided is shown next to what the recorded run had in force and decided.
//! This is how a new model meets production traces before it is allowed to act.
//!
//! What replay cannot tell is how the target would have answered a change it did not get: the
//! windows are the recorded ones, whatever the replayed policy decides.
use std::{
    io::{BufWriter, Write},
    time::Instant,
};

use anyhow::Result;
use neurogc_trace::{Decision, Record};

use crate::{
    error::bail_user,
    options::ReplayOptions as Options,
    session::features::{self, Windower},
    steering::actuate::ActuatorKind,
    steering::advice::Turns,
    steering::steer::{Mode, Steering},
};

/// One replayed window, until the recorded decision that follows it (if any) is read.
struct Row {
    at_s: f64,
    in_force: Option<[i64; 3]>,
    would: Decision,
    recorded: Option<Decision>,
}

#[derive(Default)]
struct Tally {
    windows: u64,
    identical: u64,
    /// How often the replayed and the recorded recommendations changed.
    would: Turns,
    recorded: Turns,
    recorded_decisions: u64,
    /// Windows with a recorded decision whose thresholds and freeze the replayed policy matched.
    agree: u64,
    /// When the others were (s into the trace): where another model or guard would have
    /// decided otherwise, or, for a recording made in act mode, where acting changed what came
    /// after.
    differ_at: Vec<f64>,
}

pub fn run(opts: &Options) -> Result<()> {
    let mut reader = crate::input::open_trace(&opts.trace)?;
    let read_error = |e| crate::input::trace_error(&opts.trace, e);
    // The trace's own errors come before the model's: its first record is read first.
    let mut first = reader.next().map_err(read_error)?;
    let model = opts.policy.load_model()?;
    // Advise mode: the live agent's own model-then-guard step, with no actuator behind it.
    let mut steer = Steering::new(Mode::Advise, model, opts.policy.guard.clone(), ActuatorKind::Hook);
    let source = steer.describe().0.source;
    let mut out = BufWriter::new(crate::sinks::output::LineWriter::new(std::io::stdout()));
    let mut windower: Option<Windower> = None;
    let mut start_ns = 0;
    let mut row: Option<Row> = None;
    let mut tally = Tally::default();
    if !opts.json {
        writeln!(out, "{:>9}  {:<14} {:<24} replayed ({source})", "window", "in force", "recorded")?;
    }
    while let Some(record) = match first.take() {
        Some(r) => Some(r),
        None => reader.next().map_err(read_error)?,
    } {
        match record {
            Record::Attach(a) => {
                if a.schema != features::SCHEMA {
                    bail_user!(
                        "{}: its windows have feature schema {}, this agent computes {}: replay it with the agent that recorded it",
                        opts.trace.display(),
                        a.schema,
                        features::SCHEMA
                    );
                }
                if windower.is_some() {
                    bail_user!(
                        "{}: a second attach record: two traces joined into one?",
                        opts.trace.display()
                    );
                }
                start_ns = a.sample.ts_ns;
                // Read as the live agent read it: a process that ran before the first window,
                // and the guard of its build.
                let free_threaded = a.build.as_ref().is_some_and(|b| b.free_threaded);
                steer.process(a.age_s, a.sample.ts_ns, free_threaded);
                windower = Some(Windower::new(a.sample));
                if opts.json {
                    // The stream starts as every stream does: what was observed, and by which
                    // model and guard it is replayed.
                    let (model, guard) = steer.describe();
                    let mut a = a;
                    (a.mode, a.model, a.guard) = ("advise".to_owned(), Some(model), Some(guard));
                    serde_json::to_writer(&mut out, &Record::Attach(a))?;
                    writeln!(out)?;
                }
            }
            Record::Gc(c) => windower.as_mut().expect("the reader checks attach comes first").record(&c),
            Record::Window(recorded) => {
                flush_row(&mut out, row.take(), opts.json, &mut tally)?;
                let window = windower.as_mut().expect("attach first").close(recorded.sample);
                tally.windows += 1;
                tally.identical += u64::from(window.features == recorded.features);
                let in_force = window.sample.thresholds;
                let would = steer.decide(&window, Instant::now())?;
                tally.would.see(&would);
                if opts.json {
                    serde_json::to_writer(&mut out, &Record::Window(window))?;
                    writeln!(out)?;
                }
                let at_s = (recorded.end_ns.saturating_sub(start_ns)) as f64 / 1e9;
                row = Some(Row { at_s, in_force, would, recorded: None });
            }
            Record::Decision(d) => {
                if let Some(r) = row.as_mut() {
                    r.recorded = Some(d);
                }
            }
            _ => {}
        }
    }
    flush_row(&mut out, row.take(), opts.json, &mut tally)?;
    if let Some(why) = reader.truncated() {
        tracing::warn!("{}: {why}", opts.trace.display());
    }
    if !opts.json {
        let plural = crate::text::plural;
        let summary = format!(
            "{}: {} recomputed identical to the recorded ones; the replayed policy would recommend \
             a change {} (the recorded run: {}); the same decision as recorded in {} of {}",
            plural(tally.windows, "window"),
            tally.identical,
            times(tally.would.changes),
            times(tally.recorded.changes),
            tally.agree,
            tally.recorded_decisions
        );
        writeln!(out, "{}", crate::text::wrap(&summary, 2))?;
        if !tally.differ_at.is_empty() {
            let at: Vec<String> = tally.differ_at.iter().map(|s| format!("{s:.1} s")).collect();
            let differ = format!("decided otherwise than recorded (*) at {}", at.join(", "));
            writeln!(out, "{}", crate::text::wrap(&differ, 2))?;
        }
    }
    out.flush()?;
    if tally.identical < tally.windows {
        tracing::warn!(
            "{} of {} differ from the recorded ones: recorded by another agent version, or collections were lost",
            tally.windows - tally.identical,
            crate::text::plural(tally.windows, "window")
        );
    }
    Ok(())
}

fn flush_row(out: &mut impl Write, row: Option<Row>, json: bool, tally: &mut Tally) -> Result<()> {
    let Some(row) = row else { return Ok(()) };
    let differs = row.recorded.as_ref().is_some_and(|rec| !same_decision(rec, &row.would));
    if let Some(rec) = &row.recorded {
        tally.recorded_decisions += 1;
        tally.recorded.see(rec);
        tally.agree += u64::from(!differs);
    }
    if differs {
        tally.differ_at.push(row.at_s);
    }
    if json {
        serde_json::to_writer(&mut *out, &Record::Decision(row.would))?;
        writeln!(out)?;
        return Ok(());
    }
    let verdict = |d: &Decision| verdict(d.change, d.thresholds, d.freeze);
    // The row fits 80 columns; the replayed decision's reason goes under it, and what the
    // learned model did to it.
    writeln!(
        out,
        "{:>7.1} s  {:<14} {:<24} {}{}\n{}",
        row.at_s,
        row.in_force.map_or("unknown".to_owned(), crate::sinks::view::thresholds),
        row.recorded.as_ref().map_or("(observe: none)".to_owned(), verdict),
        verdict(&row.would),
        if differs { " *" } else { "" },
        crate::text::block(&row.would.reason, 11)
    )?;
    if let Some(m) = &row.would.model {
        writeln!(out, "{}", crate::text::block(&crate::sinks::view::model_effect(m), 11))?;
    }
    Ok(())
}

/// "never", "once", "3 times".
fn times(n: u64) -> String {
    match n {
        0 => "never".to_owned(),
        1 => "once".to_owned(),
        n => format!("{n} times"),
    }
}

/// Whether two decisions come to the same: the same thresholds, and the same done to the freeze.
fn same_decision(a: &Decision, b: &Decision) -> bool {
    let freeze = |d: &Decision| d.change.then_some(d.freeze).flatten();
    a.thresholds == b.thresholds && freeze(a) == freeze(b)
}

/// A decision in a table cell of at most 24 characters: "keep", or the thresholds it changes
/// to and what it does to the freeze ("2000/10/10 +freeze").
fn verdict(change: bool, thresholds: [i64; 3], freeze: Option<bool>) -> String {
    if !change {
        return "keep".to_owned();
    }
    let freeze = match freeze {
        Some(true) => " +freeze",
        Some(false) => " +unfreeze",
        None => "",
    };
    format!("{}{freeze}", crate::sinks::view::thresholds(thresholds))
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn a_decision_reads_with_its_freeze() {
        assert_eq!(verdict(false, [2000, 10, 10], Some(true)), "keep");
        assert_eq!(verdict(true, [2000, 10, 10], None), "2000/10/10");
        assert_eq!(verdict(true, [2000, 10, 10], Some(true)), "2000/10/10 +freeze");
        // The widest fits its column.
        assert_eq!(verdict(true, [100_000, 100, 100], Some(false)).chars().count(), 24);
    }
}
