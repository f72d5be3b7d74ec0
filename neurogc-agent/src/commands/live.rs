//! One live target, attached (`--pid`) or launched (`-- COMMAND`), in observe, advise or act
//! mode: the checks that must pass before anything is touched, in the order that keeps a refusal
//! harmless (the target, then the model, then the output file), then the probes armed and the
//! loop started.
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::{
    commands::{
        launch::{self, Launched},
        observe,
    },
    interp,
    kernel::probes::Probes,
    options::{Options, Output},
    sinks::{TargetSink, live::LiveView, output, records::Records},
    steering::steer::{Mode, Steering},
};

/// Observes the target until it exits, the duration ends or a stop signal; in launch mode, how
/// the command ended.
pub fn run(opts: Options, started: Instant) -> Result<Option<launch::Ended>> {
    super::require_root()?;
    // Ctrl-C and SIGTERM wait (pending) until the loop's handlers are in place: from then on
    // they stop the agent in order, whenever they arrived.
    crate::wait::hold_stop_signals()?;
    // Read-only checks of an existing target come first, so its errors are about the target.
    let attach_plan = opts.pid.map(|pid| interp::resolve(pid, opts.probe)).transpose()?;
    // Then the model: a broken model file or a missing ONNX Runtime must change nothing.
    let steer = match opts.mode {
        Mode::Observe => None,
        mode => {
            let model = opts.policy.load_model()?;
            Some(Steering::new(mode, model, opts.policy.guard.clone(), opts.actuator))
        }
    };
    if let (Some(plan), Some(steer)) = (&attach_plan, &steer) {
        steer.precheck(plan)?;
    }
    // The output file last: input that is refused leaves no file behind.
    let records = open_records(&opts.output)?;
    let json_stdout = matches!(opts.output, Output::Json(None));
    // Launch mode holds the new process under ptrace until the probes are armed; ptrace
    // requests must come from this thread, so all of this happens before the runtime starts.
    let launched =
        if opts.command.is_empty() { None } else { Some(launch::spawn(&opts.command, json_stdout)?) };
    let plan = match (attach_plan, &launched) {
        (Some(plan), _) => Ok(plan),
        (None, Some(l)) => interp::resolve(l.pid, opts.probe),
        (None, None) => unreachable!("clap requires --pid or COMMAND"),
    };
    let armed = plan.and_then(|plan| Ok((Probes::arm(&plan)?, plan)));
    let (probes, plan) = match armed {
        Ok(armed) => armed,
        Err(err) => {
            if let Some(Launched { pid }) = launched {
                // We started it only to observe it: do not leave it behind.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return Err(err);
        }
    };
    let pid = plan.pid;
    tracing::debug!("attach plan: {plan:#x?}");
    let attach_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(
        "observing {} · CPython {} · armed in {attach_ms:.0} ms",
        interp::process::describe(pid),
        plan.interpreter.version,
    );
    tracing::info!("probes: {} in {}", plan.source, plan.file.display());
    // The live view goes to standard output unless the records do.
    let mut sinks: Vec<Box<dyn TargetSink>> = records.into_iter().map(|r| Box::new(r) as _).collect();
    if !json_stdout {
        sinks.push(Box::new(LiveView::new(&plan)));
    }
    let run = observe::Options {
        sinks,
        duration: opts.duration.map(Duration::from_secs_f64),
        interval: Duration::from_secs_f64(opts.interval),
        census: opts.census,
        attach_ms,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(observe::run(&plan, probes, launched, steer, run))
}

/// Where the records go, opened before anything is touched.
fn open_records(output: &Output) -> Result<Option<Records>> {
    use neurogc_trace::TraceWriter;
    Ok(match output {
        Output::View => None,
        Output::Json(None) => {
            Some(TraceWriter::json_lines(Box::new(output::LineWriter::new(std::io::stdout()))))
        }
        Output::Json(Some(path)) => {
            Some(TraceWriter::json_lines(Box::new(output::create(path, "JSON stream")?)))
        }
        Output::Recording(path) => {
            let file: Box<dyn std::io::Write> = Box::new(output::create(path, "recording")?);
            Some(TraceWriter::zstd(file)?)
        }
    })
}
