//! neurogc-agent: observe every garbage collection of a live CPython process with eBPF.
mod cli;
mod commands;
mod error;
mod fleet;
mod input;
mod interp;
mod kernel;
mod memory;
mod options;
mod own_env;
mod report;
mod session;
mod sinks;
mod stderr;
mod steering;
mod text;
mod wait;

use std::time::Instant;

use anyhow::Result;

use crate::{
    cli::Cli,
    commands::launch,
    options::{FleetOutput, Task},
    steering::actuate,
};

fn main() {
    let started = Instant::now();
    own_env::settle();
    // The custodian is this same executable, started by the agent (see actuate::custodian).
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() == Some(actuate::custodian::ARG.as_ref()) {
        actuate::custodian::serve(&args.next().unwrap_or_default().to_string_lossy());
    }
    // `--all` is short for the `fleet` subcommand, wherever it stands among the main command's
    // options (after another, clap offered "--allow-disable" for it); a subcommand's are its own.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let options_first = args.get(1).is_some_and(|a| a.as_encoded_bytes().starts_with(b"-"));
    if let Some(i) =
        args.iter().take_while(|a| *a != "--").position(|a| a == "--all").filter(|_| options_first)
    {
        args.remove(i);
        args.insert(1, "fleet".into());
    }
    let cli = Cli::parse_or_exit(args);
    let task = Task::from_cli(cli);
    // The live view owns the terminal: log lines would tear it.
    let quiet = matches!(task, Ok(Task::Fleet(_, FleetOutput::Top(_))));
    tracing_subscriber::fmt()
        .with_writer(move || -> Box<dyn std::io::Write> {
            if quiet { Box::new(std::io::sink()) } else { Box::new(stderr::Quiet) }
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
            stderr::line(format_args!("neurogc-agent: error: {err:#}"));
            std::process::exit(error::exit_code(&err));
        }
    }
}

/// Runs the task; in launch mode, how the command ended.
fn run(task: Task, started: Instant) -> Result<Option<launch::Ended>> {
    // A report or a replay read by `| head` ends quietly once its reader has what it wanted.
    let to_the_reader = |r: Result<()>| match r {
        Err(err) if error::output_closed(&err) => Ok(None),
        r => r.map(|()| None),
    };
    match task {
        Task::Replay(opts) => to_the_reader(commands::replay::run(&opts)),
        Task::Report(opts) => to_the_reader(report::run(&opts)),
        Task::Observe(opts) => commands::live::run(opts, started),
        Task::Fleet(opts, output) => commands::fleet::run(opts, output).map(|()| None),
    }
}
