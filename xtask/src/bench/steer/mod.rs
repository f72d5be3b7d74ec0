//! `cargo xtask bench steer`: does steering win? Eight workloads, each in every configuration,
//! interleaved round by round: CPython defaults, the hand-tuned static recipe (freeze +
//! 50000/20/20), GC disabled (a bound), the agent observing, the agent acting with the embedded
//! model (or `--model`). Four are from bench/ and were used while the controller was built (a
//! cache-heavy HTTP service, a training-loop-like batch job, a memory-risk service whose garbage
//! carries untracked payloads, a service whose load changes shape); four were written only to
//! evaluate, on third-party code from PyPI (a bottle web application, a micrograd training loop,
//! networkx graph analytics, and a document search service on sortedcontainers and Jinja2 written
//! after the controller's rules: workloads/heldout/).
//!
//! Open loop: request i is due at start + i/rate whatever happened before, and its latency is
//! measured from that due time (coordinated omission corrected): a request that waited behind a
//! stop-the-world collection counts the wait. The workload is pinned to CPU 0, the load generator
//! and the agent to CPU 1.
mod convergence;
pub mod report;
mod workloads;

pub use convergence::{Gain, Timeline};

pub use workloads::{CONFIGS, Config, Phase, RECIPES, WORKLOADS, Workload, held_out_site};

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use neurogc_trace::{Record, TraceReader};
use serde_json::Value;

use crate::{
    bench::measure::{http_get, lines, wait_for},
    build_release_agent, workspace_root,
};

/// Per generation: collections, total pause (ms), longest pause (ms), from workloads/workload.py.
pub type Pauses = [(u64, f64, f64); 3];

#[derive(Default, Clone, Copy)]
pub struct Held {
    pub windows: usize,
    pub pause: usize,
    pub gc: usize,
    pub memory: usize,
    /// Windows where some action the agent considered was predicted to hold each budget
    /// (pause, GC, memory), and how many of those held it.
    pub holdable: [usize; 3],
    pub held_where_holdable: [usize; 3],
    /// The agent's own p99s over the run (µs): the learned model's call, and a window's close to
    /// its decision (candidates predicted and scored).
    pub inference_p99_us: f64,
    pub decision_p99_us: f64,
    /// The agent's CPU over the measured part, % of one core (its own process: the custodian
    /// sleeps between writes).
    pub cpu_pct: f64,
}

#[derive(Default)]
pub struct Run {
    /// Request latency from its due time, or the batch job's step time (ms), sorted.
    pub latencies_ms: Vec<f64>,
    pub errors: u64,
    /// Measured wall time (the batch job: its total time for a fixed number of steps).
    pub seconds: f64,
    pub peak_rss_mib: f64,
    /// Median RSS over the measured part.
    pub steady_rss_mib: f64,
    pub collections: [u64; 3],
    pub pauses: Pauses,
    /// Act: windows of the measured part and how many held each budget, from the agent's records.
    pub held: Option<Held>,
    /// RSS (MiB) every 100 ms since the run's start, and where the measured part began (s).
    pub rss: Vec<(f64, f64)>,
    pub measured_from_s: f64,
    pub timeline: Option<Timeline>,
}

impl Run {
    /// The longest pause of any generation (ms).
    pub fn longest_pause_ms(&self) -> f64 {
        self.pauses.iter().map(|p| p.2).fold(0.0, f64::max)
    }

    /// A batch job's mean step (ms) over the measured part.
    pub fn mean_step_ms(&self) -> f64 {
        self.seconds * 1e3 / self.latencies_ms.len().max(1) as f64
    }

    pub fn quantile(&self, q: f64) -> f64 {
        quantile(&self.latencies_ms, q)
    }
}

pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn epoch_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The agent's budgets as its decisions state them (its defaults: a 10 ms pause, the GC share
/// at attach, 15% of memory), held or not in every decision window at or after `from_ns`; and
/// the act run's timeline.
fn agent_records(jsonl: &Path, start_ns: u64, from_ns: u64) -> Result<(Held, Timeline)> {
    let file = std::fs::File::open(jsonl).with_context(|| format!("opening {}", jsonl.display()))?;
    let mut reader = TraceReader::new(BufReader::new(file))?;
    let mut held = Held::default();
    let mut timeline =
        Timeline { pauses: Vec::new(), changes: Vec::new(), windows: Vec::new(), steps: Vec::new() };
    let at = |ts_ns: u64| ts_ns.saturating_sub(start_ns) as f64 / 1e9;
    while let Some(record) = reader.next()? {
        match record {
            Record::Gc(c) => timeline.pauses.push((at(c.ts_ns), c.r#gen, c.duration_ns as f64 / 1e6)),
            Record::Decision(d) => {
                timeline.windows.push(at(d.ts_ns));
                if d.change {
                    timeline.changes.push((at(d.ts_ns), d.what.unwrap_or_default()));
                }
                if let Some(o) = d.observed.filter(|_| d.ts_ns >= from_ns) {
                    held.windows += 1;
                    let ok = [
                        o.pause_budget_ms.is_none_or(|b| o.pause_max_ms <= b),
                        o.gc_budget.is_none_or(|b| o.gc_share <= b),
                        o.rss_limit_mib.is_none_or(|limit| o.rss_mib <= limit),
                    ];
                    held.pause += ok[0] as usize;
                    held.gc += ok[1] as usize;
                    held.memory += ok[2] as usize;
                    for (i, name) in ["pause", "gc", "memory"].into_iter().enumerate() {
                        if !d.unholdable.iter().any(|u| u == name) {
                            held.holdable[i] += 1;
                            held.held_where_holdable[i] += ok[i] as usize;
                        }
                    }
                }
            }
            Record::Summary(s) => {
                if let Some(p) = s.policy {
                    held.inference_p99_us = p.inference_ns.p99 as f64 / 1e3;
                    held.decision_p99_us = p.window_to_decision_ns.p99 as f64 / 1e3;
                }
            }
            _ => {}
        }
    }
    Ok((held, timeline))
}

/// VmRSS of `pid` every 100 ms until `done`, as (seconds since `start`, MiB).
fn sample_rss(pid: u32, start: Instant, done: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(f64, f64)>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        while !done.load(Ordering::Relaxed) {
            if let Some(kib) = crate::bench::measure::status_kib(pid, "VmRSS:") {
                out.push((start.elapsed().as_secs_f64(), kib as f64 / 1024.0));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        out
    })
}

pub fn stats(port: u16) -> Result<Value> {
    Ok(serde_json::from_str(&http_get(port, "/stats")?)?)
}

/// Open-loop load: each phase's rate × `rate` requests/s for its share of `seconds`, every
/// request timed from its due time.
fn load(port: u16, rate: f64, seconds: f64, phases: &[Phase]) -> (Vec<f64>, u64) {
    let (tx, rx) = mpsc::channel::<(Instant, &'static str)>();
    let rx = Arc::new(Mutex::new(rx));
    let results = Arc::new(Mutex::new((Vec::new(), 0u64)));
    // Enough connections in flight to ride out a long pause without delaying any send.
    let workers: Vec<_> = (0..128)
        .map(|_| {
            let (rx, results) = (Arc::clone(&rx), Arc::clone(&results));
            std::thread::spawn(move || {
                loop {
                    let (due, path) = match rx.lock().unwrap().recv() {
                        Ok(d) => d,
                        Err(_) => return,
                    };
                    let ok = http_get(port, path).is_ok();
                    let ms = due.elapsed().as_secs_f64() * 1e3;
                    let mut r = results.lock().unwrap();
                    if ok { r.0.push(ms) } else { r.1 += 1 }
                }
            })
        })
        .collect();
    let mut phase_start = Instant::now();
    for phase in phases {
        let (length, r) = (seconds * phase.share, rate * phase.rate);
        let n = (r * length) as u64;
        for i in 0..n {
            let due = phase_start + Duration::from_secs_f64(i as f64 / r);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let _ = tx.send((due, phase.path));
        }
        phase_start += Duration::from_secs_f64(length);
        if let Some(wait) = phase_start.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    drop(tx);
    for w in workers {
        let _ = w.join();
    }
    let r = results.lock().unwrap();
    (r.0.clone(), r.1)
}

fn pauses(before: &Value, after: &Value) -> Pauses {
    [0, 1, 2].map(|g| {
        let v = |s: &Value, i: usize| s[g][i].as_f64().unwrap_or(0.0);
        ((v(after, 0) - v(before, 0)) as u64, (v(after, 1) - v(before, 1)) / 1e6, v(after, 2) / 1e6)
    })
}

pub fn collections(stats: &Value) -> [u64; 3] {
    [0, 1, 2].map(|g| stats["gc"][g]["collections"].as_u64().unwrap_or(0))
}

/// What a measured part produced, before the harness adds RSS and the agent's records.
struct Measured {
    latencies_ms: Vec<f64>,
    errors: u64,
    seconds: f64,
    peak_rss_mib: f64,
    collections: [u64; 3],
    pauses: Pauses,
}

fn first_line(stdout: &mut BufReader<ChildStdout>, what: &str) -> Result<String> {
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    anyhow::ensure!(!line.is_empty(), "{what} exited early");
    Ok(line.trim_end().to_owned())
}

/// The HTTP workloads: the same open-loop load for `warmup` s, then the measured phases.
fn measure_http(
    port: u16,
    workload: Workload,
    opts: &Options,
    measured_from: &mut dyn FnMut(),
) -> Result<Measured> {
    let rate = workload.rate() * opts.load;
    if opts.warmup > 0.0 {
        load(port, rate, opts.warmup, &workload.phases()[..1]);
    }
    let before = stats(port)?;
    measured_from();
    let started = Instant::now();
    let (latencies_ms, errors) = load(port, rate, opts.seconds, &workload.phases());
    let seconds = started.elapsed().as_secs_f64();
    let after = stats(port)?;
    let (b, a) = (collections(&before), collections(&after));
    Ok(Measured {
        latencies_ms,
        errors,
        seconds,
        peak_rss_mib: after["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        collections: [0, 1, 2].map(|g| a[g] - b[g]),
        pauses: pauses(&before["pauses"], &after["pauses"]),
    })
}

/// The batch job: unmeasured steps for `warmup` s, then a fixed number of steps (500 per second
/// of `--seconds`: about that long under CPython defaults), timed by the job itself.
fn measure_batch(
    workload: Workload,
    service: &mut Child,
    stdout: &mut BufReader<ChildStdout>,
    opts: &Options,
    measured_from: &mut dyn FnMut(),
) -> Result<Measured> {
    let steps = (opts.seconds * workload.steps_per_s()) as u64;
    writeln!(service.stdin.as_mut().context("the batch job's stdin")?, "go {} {steps}", opts.warmup)?;
    anyhow::ensure!(
        first_line(stdout, "the batch job")? == "measuring",
        "the batch job did not start measuring"
    );
    measured_from();
    let line = first_line(stdout, "the batch job")?;
    let result: Value =
        serde_json::from_str(line.strip_prefix("result ").context("the batch job's result line")?)?;
    Ok(Measured {
        latencies_ms: result["step_ms"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect(),
        errors: 0,
        seconds: result["total_s"].as_f64().unwrap_or(f64::NAN),
        peak_rss_mib: result["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        collections: [0, 1, 2].map(|g| result["collections"][g].as_u64().unwrap_or(0)),
        pauses: pauses(&result["pauses_before"], &result["pauses"]),
    })
}

/// A workload started in `config`'s recipe, after it said it is ready.
pub struct Started {
    pub child: Child,
    stdout: BufReader<ChildStdout>,
    /// The HTTP workloads' port; None for the batch job.
    pub port: Option<u16>,
}

pub fn start_workload(workload: Workload, config: Config, python: &Path) -> Result<Started> {
    let site = if workload.held_out() { held_out_site()? } else { PathBuf::new() };
    let mut child = workload
        .command(python, config, &site)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the workload")?;
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let ready = first_line(&mut stdout, "the workload")?;
    let port = ready.strip_prefix("ready ").and_then(|p| p.parse().ok());
    anyhow::ensure!(ready == "ready" || port.is_some(), "the workload did not start: {ready:?}");
    Ok(Started { child, stdout, port })
}

/// The agent on CPU 1 in observe or act mode (None for the other configurations), once it is
/// observing; its records go to `jsonl`.
pub fn start_agent(
    agent: &Path,
    pid: u32,
    config: Config,
    jsonl: &Path,
    model: Option<&Path>,
) -> Result<Option<Child>> {
    let mode = match config {
        Config::Observe => "observe",
        Config::Act | Config::Rules => "act",
        _ => return Ok(None),
    };
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "1"])
        .arg(agent)
        .args(["--pid", &pid.to_string(), "--mode", mode, "--json", "-o"])
        .arg(jsonl);
    match (config, model) {
        (Config::Rules, _) => {
            cmd.args(["--model", "none"]);
        }
        (Config::Act, Some(model)) => {
            cmd.arg("--model").arg(model);
        }
        _ => {}
    }
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    // Read to the end by its own thread, so the agent never blocks on a full pipe.
    let err = lines(child.stderr.take().unwrap());
    wait_for(&err, "observing", "neurogc-agent")?;
    Ok(Some(child))
}

/// SIGTERM, so that the agent restores the target, then the workload.
pub fn stop(agent: Option<Child>, mut workload: Child) {
    if let Some(mut child) = agent {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let _ = child.wait();
    }
    let _ = workload.kill();
    let _ = workload.wait();
}

fn one_run(workload: Workload, config: Config, round: usize, agent: &Path, opts: &Options) -> Result<Run> {
    let spinner = Spinner::start(opts.half_speed)?;
    let run = one_run_at_speed(workload, config, round, agent, opts);
    drop(spinner);
    run
}

/// A busy loop pinned to the workload's CPU (0), killed when dropped.
pub struct Spinner(Option<Child>);

impl Spinner {
    pub fn start(on: bool) -> Result<Spinner> {
        if !on {
            return Ok(Spinner(None));
        }
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", "0", "sh", "-c", "while :; do :; done"]).stdout(Stdio::null());
        // The spinner dies with the benchmark, however that ends: one left behind by an
        // interrupted run takes a core from every run after it.
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent's.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().context("starting the half-speed spinner")?;
        Ok(Spinner(Some(child)))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn one_run_at_speed(
    workload: Workload,
    config: Config,
    round: usize,
    agent: &Path,
    opts: &Options,
) -> Result<Run> {
    let Started { child: mut service, mut stdout, port } = start_workload(workload, config, &opts.python)?;
    let pid = service.id();
    // Every round's record is kept: a round that changed nothing is read beside one that did.
    let jsonl = opts.out.join(format!("rec-{}-{}-r{round}.jsonl", workload.name(), config.short()));
    let observer = start_agent(agent, pid, config, &jsonl, opts.model.as_deref())?;
    let (start, start_ns) = (Instant::now(), epoch_ns());
    let done = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(pid, start, Arc::clone(&done));
    let agent_pid = observer.as_ref().map(Child::id);
    let (mut from_s, mut from_ns, mut cpu_from) = (0.0, 0, 0);
    let mut mark = || {
        (from_s, from_ns) = (start.elapsed().as_secs_f64(), epoch_ns());
        cpu_from = agent_pid.map_or(0, crate::bench::measure::cpu_ns);
    };
    let measured = match port {
        Some(port) => measure_http(port, workload, opts, &mut mark),
        None => measure_batch(workload, &mut service, &mut stdout, opts, &mut mark),
    };
    let agent_cpu_pct = agent_pid.map(|p| {
        let cpu_s = crate::bench::measure::cpu_ns(p).saturating_sub(cpu_from) as f64 / 1e9;
        100.0 * cpu_s / (start.elapsed().as_secs_f64() - from_s).max(1e-3)
    });
    done.store(true, Ordering::Relaxed);
    let rss = sampler.join().unwrap_or_default();
    stop(observer, service);
    let mut m = measured?;
    let (held, timeline) = match config {
        Config::Act | Config::Rules => {
            let (mut h, mut t) = agent_records(&jsonl, start_ns, from_ns)?;
            h.cpu_pct = agent_cpu_pct.unwrap_or(f64::NAN);
            if port.is_none() {
                // The job timed its steps back to back from the measured part's start.
                t.steps = m
                    .latencies_ms
                    .iter()
                    .scan(from_s, |end, &ms| {
                        *end += ms / 1e3;
                        Some((*end, ms))
                    })
                    .collect();
            }
            (Some(h), Some(t))
        }
        _ => (None, None),
    };
    m.latencies_ms.sort_by(f64::total_cmp);
    let mut steady: Vec<f64> = rss.iter().filter(|(t, _)| *t >= from_s).map(|(_, m)| *m).collect();
    steady.sort_by(f64::total_cmp);
    Ok(Run {
        latencies_ms: m.latencies_ms,
        errors: m.errors,
        seconds: m.seconds,
        peak_rss_mib: m.peak_rss_mib,
        steady_rss_mib: steady.get(steady.len() / 2).copied().unwrap_or(f64::NAN),
        collections: m.collections,
        pauses: m.pauses,
        held,
        rss,
        measured_from_s: from_s,
        timeline,
    })
}

pub struct Options {
    pub workloads: Vec<Workload>,
    /// The configurations each round runs, in turn.
    pub configs: Vec<Config>,
    pub rounds: usize,
    pub seconds: f64,
    pub warmup: f64,
    /// Multiplies every workload's request rate.
    pub load: f64,
    pub python: PathBuf,
    pub model: Option<PathBuf>,
    pub out: PathBuf,
    /// A spinner shares the workload's CPU for the whole run: the target at about half speed.
    pub half_speed: bool,
}

/// Every workload's runs, per configuration; `report::write` makes the report.
pub type Results = Vec<(Workload, Vec<(Config, Run)>)>;

pub fn run(opts: &Options) -> Result<Results> {
    if let Some(model) = &opts.model {
        anyhow::ensure!(model.is_file(), "--model {}: no such file", model.display());
    }
    let agent = build_release_agent()?;
    std::fs::create_dir_all(&opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let mut results = Vec::new();
    for &workload in &opts.workloads {
        let mut runs: Vec<(Config, Run)> = Vec::new();
        for round in 0..opts.rounds {
            for i in 0..opts.configs.len() {
                let config = opts.configs[(i + round) % opts.configs.len()];
                let r = one_run(workload, config, round, &agent, opts)
                    .with_context(|| format!("{}, round {round}, {}", workload.name(), config.label()))?;
                eprintln!(
                    "bench: {:<7} round {round} {:<38} p50 {:>8.2} ms  p99 {:>8.2} ms  {:>6.2} s  RSS {:>6.1} MiB  gen2 {}",
                    workload.name(),
                    config.label(),
                    r.quantile(0.5),
                    r.quantile(0.99),
                    r.seconds,
                    r.peak_rss_mib,
                    r.collections[2]
                );
                runs.push((config, r));
            }
        }
        results.push((workload, runs));
    }
    if results.is_empty() {
        bail!("no workload to run");
    }
    Ok(results)
}
