//! neurogc-agent: observe every garbage collection of a live CPython process with eBPF.
mod actuate;
mod advice;
mod aggregate;
mod cli;
mod error;
mod events;
mod features;
mod fleet;
mod halted;
mod input;
mod interp;
mod launch;
mod memory;
mod metrics;
mod observe;
mod output;
mod own_env;
mod perf_uprobe;
mod policy;
mod probes;
mod replay;
mod report;
mod session;
mod stacks;
mod steer;
mod text;
mod top;
mod view;
mod wait;

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;

use crate::{
    cli::{Cli, FleetOutput, Output, Task},
    launch::Launched,
    probes::Probes,
    steer::{Mode, Steering},
};

fn main() {
    let started = Instant::now();
    own_env::settle();
    // The custodian is this same executable, started by the agent (see actuate::custodian).
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() == Some(actuate::custodian::ARG.as_ref()) {
        actuate::custodian::serve(&args.next().unwrap_or_default().to_string_lossy());
    }
    // `--all` is short for the `fleet` subcommand.
    let args =
        std::env::args_os().enumerate().map(|(i, a)| if i == 1 && a == "--all" { "fleet".into() } else { a });
    let cli = Cli::parse_from(args);
    let task = cli.task();
    // The live view owns the terminal: log lines would tear it.
    let quiet = matches!(task, Ok(Task::Fleet(_, FleetOutput::Top(_))));
    tracing_subscriber::fmt()
        .with_writer(move || -> Box<dyn std::io::Write> {
            if quiet { Box::new(std::io::sink()) } else { Box::new(std::io::stderr()) }
        })
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NEUROGC_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_target(false)
        .without_time()
        // Colour only for a person at a terminal, never into a file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match task.and_then(|task| run(task, started)) {
        // Launch mode: the command's own status, as `time` and `strace` give it.
        Ok(Some(ended)) => std::process::exit(ended.status()),
        Ok(None) => {}
        Err(err) => {
            eprintln!("neurogc-agent: error: {err:#}");
            std::process::exit(error::exit_code(&err));
        }
    }
}

/// Runs the task; in launch mode, how the command ended.
fn run(task: Task, started: Instant) -> Result<Option<launch::Ended>> {
    let opts = match task {
        Task::Replay(opts) => return replay::run(&opts).map(|()| None),
        Task::Report(opts) => return report::run(&opts).map(|()| None),
        Task::Observe(opts) => opts,
        Task::Fleet(opts, output) => return fleet(opts, output).map(|()| None),
    };
    require_root()?;
    // Ctrl-C and SIGTERM wait (pending) until the loop's handlers are in place: from then on
    // they stop the agent in order, whenever they arrived.
    wait::hold_stop_signals()?;
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
    let run = observe::Options {
        records,
        view: !json_stdout,
        duration: opts.duration.map(Duration::from_secs_f64),
        interval: Duration::from_secs_f64(opts.interval),
        attach_ms,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(observe::run(&plan, probes, launched, steer, run))
}

fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail_user!(
            "neurogc-agent must run as root: it loads eBPF programs and reads the target's memory (try sudo)"
        );
    }
    Ok(())
}

/// Fleet mode and its live view: every Python process on the host, observe-only.
fn fleet(opts: fleet::Options, output: FleetOutput) -> Result<()> {
    require_root()?;
    wait::hold_stop_signals()?;
    let (quit_tx, quit_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut sinks: Vec<Box<dyn fleet::Sink>> = Vec::new();
    match output {
        FleetOutput::Metrics { addr: Some(addr), python_names } => {
            let listener = metrics::bind(addr)?;
            let exporter = metrics::Exporter::new(python_names);
            exporter.serve(listener)?;
            tracing::info!("Prometheus metrics at http://{addr}/metrics");
            sinks.push(Box::new(exporter));
        }
        FleetOutput::Metrics { addr: None, .. } => tracing::warn!(
            "no --metrics-addr: processes are observed and logged only (`top` shows them live)"
        ),
        FleetOutput::Top(sort) => sinks.push(Box::new(top::Top::start(sort, quit_tx)?)),
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(fleet::run(opts, sinks, quit_rx))
}

/// Where the records go, opened before anything is touched.
fn open_records(output: &Output) -> Result<Option<observe::Records>> {
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
