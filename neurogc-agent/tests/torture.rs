//! The torture harness: act mode against real targets in every state (workloads/tests/target.py),
//! with the agent SIGKILLed, SIGTERMed or interrupted at uniformly random moments and at moments
//! aimed at each step of an injection (custodian started, stub queued, hook installed, first
//! change applied, heap frozen). The target churns cyclic garbage over a warm heap and the pause
//! budget is 2 ms, so the agent freezes it at its first long full collection. After each trial
//! the target must have finished its work, hold the application's own thresholds (its forked
//! children too), have nothing frozen, and have nothing of neurogc left: no module, thread,
//! descriptor or name, no file in its /tmp, no custodian still running.
//!
//! Per injection path: the 32-slot ring (3.8–3.12), the counted queue (3.13+), and the counted
//! queue of the free-threaded 3.13t (no freeze there: the controller does not freeze on
//! free-threaded builds, so no trial aims at one). CI runs a few
//! trials per path (this test, within `cargo xtask test`); `cargo xtask torture --trials 200`
//! runs the bench job. NEUROGC_TORTURE_TRIALS and NEUROGC_TORTURE_SEED set them here.
mod common;

use std::{
    collections::BTreeSet,
    io::Write,
    os::fd::OwnedFd,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::*;

const PATHS: [(&str, &[&str]); 3] = [
    ("ring (3.8-3.12)", &["debian-bookworm-3.11", "pyenv-3.12"]),
    ("counted (3.13+)", &["debian-trixie-3.13", "debian-sid-3.14", "debian-sid-3.15"]),
    // The counted queue again, its main thread running at once with every other thread and the
    // eval breaker's bits set by them (stop-the-world requests at every collection).
    ("free-threaded (3.13t)", &["source-3.13t"]),
];
const STATES: [&str; 8] = ["busy", "sleep", "stdin", "asyncio", "shadow", "sigpipe", "fork", "appset"];
/// Where a kill is aimed: a line the agent prints (debug log or JSON) at that step.
const FROZEN: &str = "\"event\":\"frozen\"";
const AIMS: [&str; 5] =
    ["custodian started", "hook queued", "hook installed", "\"event\":\"applied\"", FROZEN];
const SECONDS: f64 = 4.0;

/// xorshift64*: reproducible from the printed seed, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Counts {
    trials: u32,
    aimed: u32,
    aim_missed: u32,
    deaths: u32,
    settings_left: u32,
    files_left: u32,
    leftovers: u32,
    custodians_left: u32,
    /// Trials in which the agent froze the target's heap before it was stopped, and of those,
    /// the ones that ran a full collection first.
    froze: u32,
    collected_first: u32,
    failures: Vec<String>,
}

/// What is in the target's /tmp: everything in a container's own; in the host's, shared with
/// every other process on the machine, the names neurogc ever used (`neurogc*`).
fn tmp_listing(py: &Python) -> BTreeSet<String> {
    let dir = py.root.as_ref().map_or("/tmp".into(), |r| r.join("tmp"));
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|name| py.root.is_some() || name.starts_with("neurogc"))
        .collect()
}

fn custodians() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_to_string(e.path().join("cmdline"))
                .is_ok_and(|c| c.starts_with("neurogc-custodian"))
        })
        .count()
}

/// `freeze`: aim at the freeze (so every run covers it, whatever the draw).
fn trial(py: &Python, rng: &mut Rng, c: &mut Counts, freeze: bool) {
    let state = STATES[rng.below(STATES.len() as u64) as usize];
    let sig = ["-KILL", "-KILL", "-KILL", "-TERM", "-INT"][rng.below(5) as usize];
    let aim = (rng.below(3) != 0).then(|| AIMS[rng.below(AIMS.len() as u64) as usize]);
    let aim = if freeze { Some(FROZEN) } else { aim };
    let jitter = Duration::from_micros(rng.below(3000));
    let uniform = Duration::from_millis(rng.below(2500));
    // stay: every change costs more than it saves, so only the pause budget acts (a freeze at
    // the first long full collection). prefer-5000: the model's change first, then the budgets.
    let model = ["stay.onnx", "prefer-5000.onnx"][rng.below(2) as usize];
    let model = if freeze { "stay.onnx" } else { model };
    let what = format!(
        "{} {state} {model} {sig} {}",
        py.name,
        aim.map_or(format!("at {uniform:?}"), |a| format!("after {a:?} +{jitter:?}"))
    );
    // The harness's own copy of the script goes into a container's /tmp first: made by the
    // first trial on a fresh container, after the listing, it read as a file the agent left.
    py.script("target.py");
    let before = tmp_listing(py);
    let secs = SECONDS.to_string();
    let mut args = vec![state, "--seconds", &secs, "--cycles"];
    if state == "appset" {
        args.extend(["--set-at", "2"]);
    }
    let mut t = Target::start(py, &py.script_command("target.py", &args, true), &[]);
    // The agent's stdout and stderr on one pipe, so JSON lines and debug lines can both be aimed at.
    let (read, write) = nix::unistd::pipe().unwrap();
    let write2: OwnedFd = write.try_clone().unwrap();
    let mut agent = agent()
        .args(["--pid", &t.pid.to_string(), "--mode", "act", "--json", "--interval", "0.5"])
        .args(["--model", &fixture(model), "--model-weight", "full"])
        // Budgets that freeze at once: every trial also covers a freeze and its undo.
        .args(["--pause-budget", "2ms", "--gc-budget", "off", "--freeze-after", "0"])
        // A garbage census armed every second: one is often in flight when the agent dies.
        .args(["--census", "1"])
        .env("NEUROGC_LOG", "debug")
        .stdout(Stdio::from(write))
        .stderr(Stdio::from(write2))
        .spawn()
        .unwrap();
    let mut lines = Lines::new(std::fs::File::from(read));
    let started = Instant::now();
    match aim {
        Some(marker) => {
            c.aimed += 1;
            if lines.find(marker, Duration::from_secs(3)).is_none() {
                c.aim_missed += 1; // e.g. a blocked main thread never runs the hook: killed anyway
            }
            let until = Instant::now() + jitter;
            while Instant::now() < until {}
        }
        None => std::thread::sleep(uniform),
    }
    signal(agent.id(), sig);
    wait_exit(&mut agent, 20, &what);
    if let Some(frozen) = lines.rest(1).iter().find(|l| l.contains(FROZEN)) {
        c.froze += 1;
        c.collected_first += u32::from(frozen.contains("gc.collect(), then"));
    }
    if state == "stdin" {
        std::thread::sleep((Duration::from_secs_f64(SECONDS - 1.0)).saturating_sub(started.elapsed()));
        let _ = t.child.stdin.as_mut().unwrap().write_all(b"go\n");
    }
    let want = if state == "appset" { vec![1234, 5, 6] } else { t.original.clone() };
    c.trials += 1;
    match t.final_report(30) {
        (Some(report), status) if status.success() => {
            let found = leftovers(&what, &report, &want);
            let settings = found
                .iter()
                .filter(|e| ["thresholds", "forked child", "freeze"].iter().any(|k| e.contains(k)))
                .count();
            if settings > 0 {
                c.settings_left += 1;
            }
            if found.len() > settings {
                c.leftovers += 1;
            }
            c.failures.extend(found);
        }
        (report, status) => {
            c.deaths += 1;
            c.failures.push(format!("{what}: target died ({status:?}), report {report:?}"));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while custodians() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if custodians() > 0 {
        c.custodians_left += 1;
        c.failures.push(format!("{what}: a custodian process is still running"));
        let _ = Command::new("pkill").args(["-KILL", "-f", "^neurogc-custodian"]).status();
    }
    let new: Vec<String> = tmp_listing(py).difference(&before).cloned().collect();
    if !new.is_empty() {
        c.files_left += 1;
        c.failures.push(format!("{what}: new files in the target's /tmp: {new:?}"));
    }
}

#[test]
fn the_agent_killed_at_any_moment_leaves_the_target_whole() {
    let per_path: u32 =
        std::env::var("NEUROGC_TORTURE_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let seed = std::env::var("NEUROGC_TORTURE_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    // NEUROGC_TORTURE_PATHS=ring, =counted or =free-threaded: one injection path only.
    let only = std::env::var("NEUROGC_TORTURE_PATHS").unwrap_or_default();
    println!("torture: seed {seed}, {per_path} trials per injection path");
    let mut rng = Rng(seed);
    let mut all = Vec::new();
    for (path, names) in PATHS.into_iter().filter(|(p, _)| p.starts_with(only.as_str())) {
        let pythons: Vec<Python> = names.iter().map(|n| python(n)).collect();
        let mut c = Counts::default();
        for i in 0..per_path {
            // Every fourth trial, on the path's first interpreter (not 3.12: it never freezes;
            // nor a free-threaded build: the controller does not freeze there).
            let py = &pythons[i as usize % pythons.len()];
            trial(py, &mut rng, &mut c, i % 4 == 0 && !py.free_threaded);
        }
        println!(
            "torture: {path}: {} trials ({} aimed, {} of them not reached; {} froze the heap, {} after a \
             full collection), {} target deaths, \
             {} with settings left, {} with files left, {} with other leftovers, {} custodians left",
            c.trials,
            c.aimed,
            c.aim_missed,
            c.froze,
            c.collected_first,
            c.deaths,
            c.settings_left,
            c.files_left,
            c.leftovers,
            c.custodians_left
        );
        all.extend(c.failures);
    }
    assert!(all.is_empty(), "seed {seed}:\n{}", all.join("\n"));
}
