//! `cargo xtask bench steer`: does steering win? A cache-heavy HTTP service (bench/
//! cache_service.py, standard library) under open-loop load, in every configuration, interleaved
//! round by round: CPython defaults, the hand-tuned static recipe (freeze + 50000/20/20), GC
//! disabled (a bound), the agent observing, the agent acting with the embedded model.
//!
//! Open loop: request i is due at start + i/rate whatever happened before, and its latency is
//! measured from that due time (coordinated omission corrected): a request that waited behind a
//! stop-the-world collection counts the wait. The service is pinned to CPU 0, the load generator
//! and the agent to CPU 1.
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{
    bench::{lines, median, wait_for},
    build_release_agent, workspace_root,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Config {
    Defaults,
    Static,
    GcOff,
    Observe,
    Act,
}

const CONFIGS: [Config; 5] = [Config::Defaults, Config::Static, Config::GcOff, Config::Observe, Config::Act];

impl Config {
    fn label(self) -> &'static str {
        match self {
            Config::Defaults => "CPython defaults",
            Config::Static => "static recipe (freeze + 50000/20/20)",
            Config::GcOff => "GC disabled (bound)",
            Config::Observe => "neurogc-agent --mode observe",
            Config::Act => "neurogc-agent --mode act (embedded model)",
        }
    }
}

struct Run {
    latencies_ms: Vec<f64>,
    errors: u64,
    seconds: f64,
    peak_rss_mib: f64,
    /// gc.get_stats() collections per generation during the run.
    collections: [u64; 3],
    /// Act mode: windows of the measured part, and how many held the default pause (10 ms) and
    /// GC (2%) budgets, from the agent's own decision records.
    budgets: Option<(usize, usize, usize)>,
}

/// (windows, pause budget held, GC budget held) among the decisions at or after `from_ns`.
fn budgets_held(jsonl: &Path, from_ns: u64) -> Option<(usize, usize, usize)> {
    let text = std::fs::read_to_string(jsonl).ok()?;
    let observed: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "decision" && v["ts_ns"].as_u64().is_some_and(|t| t >= from_ns))
        .filter_map(|v| v.get("observed").cloned())
        .collect();
    let held =
        |key: &str, max: f64| observed.iter().filter(|o| o[key].as_f64().is_some_and(|x| x <= max)).count();
    Some((observed.len(), held("pause_max_ms", 10.0), held("gc_share", 0.02)))
}

fn start_service(python: &Path, config: Config) -> Result<(Child, u16)> {
    let recipe = match config {
        Config::Static => "static",
        Config::GcOff => "gc-off",
        _ => "none",
    };
    let mut child = Command::new("taskset")
        .args(["-c", "0"])
        .arg(python)
        .arg(workspace_root().join("bench/cache_service.py"))
        .args(["--recipe", recipe])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting bench/cache_service.py")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line)?;
    let port = line.strip_prefix("ready ").and_then(|p| p.trim().parse().ok());
    match port {
        Some(p) => Ok((child, p)),
        None => bail!("the service did not start: {line:?}"),
    }
}

fn get(port: u16, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    anyhow::ensure!(body.starts_with("HTTP/1.0 200"), "bad answer: {body:.80}");
    Ok(body.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

fn stats(port: u16) -> Result<Value> {
    Ok(serde_json::from_str(&get(port, "/stats")?)?)
}

/// Open-loop load: `rate` requests/s for `seconds`, each timed from its due time.
fn load(port: u16, rate: f64, seconds: f64) -> (Vec<f64>, u64) {
    let (tx, rx) = mpsc::channel::<Instant>();
    let rx = Arc::new(Mutex::new(rx));
    let results = Arc::new(Mutex::new((Vec::new(), 0u64)));
    // Enough connections in flight to ride out a long pause without delaying any send.
    let workers: Vec<_> = (0..128)
        .map(|_| {
            let (rx, results) = (Arc::clone(&rx), Arc::clone(&results));
            std::thread::spawn(move || {
                loop {
                    let due = match rx.lock().unwrap().recv() {
                        Ok(d) => d,
                        Err(_) => return,
                    };
                    let ok = get(port, "/work").is_ok();
                    let ms = due.elapsed().as_secs_f64() * 1e3;
                    let mut r = results.lock().unwrap();
                    if ok { r.0.push(ms) } else { r.1 += 1 }
                }
            })
        })
        .collect();
    let start = Instant::now();
    let n = (rate * seconds) as u64;
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let _ = tx.send(due);
    }
    drop(tx);
    for w in workers {
        let _ = w.join();
    }
    let r = results.lock().unwrap();
    (r.0.clone(), r.1)
}

fn collections(stats: &Value) -> [u64; 3] {
    [0, 1, 2].map(|g| stats["gc"][g]["collections"].as_u64().unwrap_or(0))
}

fn one_run(config: Config, python: &Path, agent: &Path, rate: f64, seconds: f64, warmup: f64) -> Result<Run> {
    let (mut service, port) = start_service(python, config)?;
    let pid = service.id().to_string();
    let mut observer = match config {
        Config::Observe | Config::Act => {
            let mode = if config == Config::Act { "act" } else { "observe" };
            let mut child = Command::new("taskset")
                .args(["-c", "1"])
                .arg(agent)
                .args(["--pid", &pid, "--mode", mode, "--json", "-o"])
                .arg(workspace_root().join(format!("target/bench-steer/last-{mode}.jsonl")))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?;
            // Read to the end by its own thread, so the agent never blocks on a full pipe.
            let err = lines(child.stderr.take().unwrap());
            wait_for(&err, "observing", "neurogc-agent")?;
            Some(child)
        }
        _ => None,
    };
    if warmup > 0.0 {
        load(port, rate, warmup);
    }
    let before = collections(&stats(port)?);
    let started = Instant::now();
    let from_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64;
    let (latencies_ms, errors) = load(port, rate, seconds);
    let seconds = started.elapsed().as_secs_f64();
    let after = stats(port)?;
    if let Some(child) = observer.as_mut() {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let _ = child.wait();
    }
    let _ = service.kill();
    let _ = service.wait();
    let now = collections(&after);
    let budgets = (config == Config::Act)
        .then(|| budgets_held(&workspace_root().join("target/bench-steer/last-act.jsonl"), from_ns))
        .flatten();
    Ok(Run {
        budgets,
        latencies_ms,
        errors,
        seconds,
        peak_rss_mib: after["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        collections: [0, 1, 2].map(|g| now[g] - before[g]),
    })
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// "median (min–max)".
fn spread(mut v: Vec<f64>, digits: usize) -> String {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => "-".to_owned(),
        1 => format!("{:.digits$}", v[0]),
        n => format!("{:.digits$} ({:.digits$}–{:.digits$})", v[n / 2], v[0], v[n - 1]),
    }
}

pub fn run(rounds: usize, seconds: f64, warmup: f64, rate: f64, python: &Path) -> Result<()> {
    let agent = build_release_agent()?;
    let dir: PathBuf = workspace_root().join("target/bench-steer");
    std::fs::create_dir_all(&dir)?;
    let mut runs: Vec<(Config, Run)> = Vec::new();
    for round in 0..rounds {
        for i in 0..CONFIGS.len() {
            let config = CONFIGS[(i + round) % CONFIGS.len()];
            let mut r = one_run(config, python, &agent, rate, seconds, warmup)
                .with_context(|| format!("round {round}, {}", config.label()))?;
            r.latencies_ms.sort_by(f64::total_cmp);
            eprintln!(
                "bench: round {round} {:<44} p50 {:>8.2} ms  p99 {:>8.2} ms  RSS {:>6.1} MiB  gen2 {}",
                config.label(),
                quantile(&r.latencies_ms, 0.5),
                quantile(&r.latencies_ms, 0.99),
                r.peak_rss_mib,
                r.collections[2]
            );
            runs.push((config, r));
        }
    }
    let of = |c: Config| runs.iter().filter(move |(k, _)| *k == c).map(|(_, r)| r);
    let base_p99 = median(of(Config::Defaults).map(|r| quantile(&r.latencies_ms, 0.99)).collect());
    let mut md = format!(
        "# neurogc steering benchmark: cache service\n\n{} · {} · {rounds} rounds × {seconds:.0} s at {rate:.0} requests/s after {warmup:.0} s of \
         the same load, interleaved · medians (min–max)\n\n| configuration | p50 ms | p99 ms | p99.9 ms | p99 vs defaults | \
         throughput req/s | errors | peak RSS MiB | gen0/gen1/gen2 collections |\n|---|---|---|---|---|---|---|---|---|\n",
        python.display(),
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim()
    );
    for c in CONFIGS {
        let q = |q: f64| of(c).map(|r| quantile(&r.latencies_ms, q)).collect::<Vec<_>>();
        let p99 = median(q(0.99));
        md += &format!(
            "| {} | {} | {} | {} | {:.3}× | {} | {} | {} | {:.0}/{:.0}/{:.0} |\n",
            c.label(),
            spread(q(0.5), 2),
            spread(q(0.99), 1),
            spread(q(0.999), 1),
            p99 / base_p99,
            spread(of(c).map(|r| r.latencies_ms.len() as f64 / r.seconds).collect(), 1),
            of(c).map(|r| r.errors).sum::<u64>(),
            spread(of(c).map(|r| r.peak_rss_mib).collect(), 0),
            median(of(c).map(|r| r.collections[0] as f64).collect()),
            median(of(c).map(|r| r.collections[1] as f64).collect()),
            median(of(c).map(|r| r.collections[2] as f64).collect()),
        );
    }
    let held: Vec<(usize, usize, usize)> = of(Config::Act).filter_map(|r| r.budgets).collect();
    let (windows, pause, gc) = held.iter().fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    if windows > 0 {
        md += &format!(
            "\nAct, measured part ({windows} windows over {} runs): pause budget (10 ms) held in {:.1}% of windows, \
             GC budget (2%) in {:.1}%.\n",
            held.len(),
            100.0 * pause as f64 / windows as f64,
            100.0 * gc as f64 / windows as f64
        );
    }
    let report = dir.join("report.md");
    std::fs::write(&report, &md)?;
    println!("\n{md}\n(written to {})", report.display());
    Ok(())
}
