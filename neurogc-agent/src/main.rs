//! neurogc-agent: observe every garbage collection of a live CPython process with eBPF.
mod actuate;
mod aggregate;
mod cli;
mod error;
mod events;
mod features;
mod launch;
mod memory;
mod observe;
mod output;
mod perf_uprobe;
mod policy;
mod probes;
mod replay;
mod steer;
mod target;
mod view;

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;

use crate::{
    cli::{Cli, Mode},
    launch::Launched,
    policy::{guard::GuardConfig, model::Model},
    probes::Probes,
    steer::Steering,
};

fn main() {
    let started = Instant::now();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NEUROGC_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_target(false)
        .without_time()
        .init();
    if let Err(err) = run(&cli, started) {
        eprintln!("neurogc-agent: error: {err:#}");
        std::process::exit(error::exit_code(&err));
    }
}

fn run(cli: &Cli, started: Instant) -> Result<()> {
    if let Some(trace) = &cli.replay {
        return replay::run(trace);
    }
    if !nix::unistd::geteuid().is_root() {
        bail_user!(
            "neurogc-agent must run as root: it loads eBPF programs and reads the target's memory (try sudo)"
        );
    }
    // Read-only checks of an existing target come first, so its errors are about the target.
    let attach_plan = cli.pid.map(|pid| target::resolve(pid, cli.probe)).transpose()?;
    // Then the model: a broken model file or a missing ONNX Runtime must change nothing.
    let steer = match cli.mode {
        Mode::Observe => None,
        mode => {
            let model = Model::load(cli.model.as_deref(), cli.ep)?;
            let guard = GuardConfig {
                min: cli.threshold_min,
                max: cli.threshold_max,
                cooldown: cli.cooldown,
                confirm: cli.confirm.max(1),
                max_rss_growth: cli.max_rss_growth / 100.0,
                allow_disable: cli.allow_disable,
            };
            Some(Steering::new(mode, model, guard, cli.actuator))
        }
    };
    // Launch mode holds the new process under ptrace until the probes are armed; ptrace
    // requests must come from this thread, so all of this happens before the runtime starts.
    let launched = if cli.command.is_empty() { None } else { Some(launch::spawn(&cli.command)?) };
    let plan = match (attach_plan, &launched) {
        (Some(plan), _) => Ok(plan),
        (None, Some(l)) => target::resolve(l.pid, cli.probe),
        (None, None) => unreachable!("clap requires --pid, COMMAND or --replay"),
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
        "observing {} · CPython {} · {} in {} · armed in {attach_ms:.0} ms",
        target::process::describe(pid),
        plan.interpreter.version,
        plan.source,
        plan.file.display()
    );
    let opts = observe::Options {
        json: cli.json,
        duration: cli.duration.map(Duration::from_secs_f64),
        interval: Duration::from_secs_f64(cli.interval),
        attach_ms,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(observe::run(&plan, probes, launched, steer, &opts))
}
