//! Shared harness for the tests that run the real agent against real interpreters. The
//! interpreters come from the manifest `cargo xtask pythons` writes (NEUROGC_PYTHONS).
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use serde_json::Value;

pub fn manifest() -> Value {
    let path = std::env::var("NEUROGC_PYTHONS").unwrap_or_else(|_| {
        panic!("NEUROGC_PYTHONS is not set: run the tests with `cargo xtask test`, which fetches the interpreters")
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    serde_json::from_str(&text).expect("manifest is JSON")
}

#[derive(Debug, Clone)]
pub struct Python {
    pub name: String,
    pub argv: Vec<String>,
    /// Root folder for interpreters that run in a chroot.
    pub root: Option<PathBuf>,
    pub probe: String,
    /// Built with `--disable-gil`.
    pub free_threaded: bool,
}

pub fn pythons() -> Vec<Python> {
    let m = manifest();
    let list: Vec<Python> = m["pythons"]
        .as_array()
        .expect("pythons")
        .iter()
        .map(|p| Python {
            name: p["name"].as_str().unwrap().to_owned(),
            argv: p["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect(),
            root: p["root"].as_str().map(PathBuf::from),
            probe: p["probe"].as_str().unwrap().to_owned(),
            free_threaded: p["free_threaded"].as_bool().unwrap_or(false),
        })
        .collect();
    // The builds the project promises to test on (docs/interpreters.md).
    for required in
        ["debian-bookworm-3.11", "pyenv-3.11.", "debian-trixie-3.13", "debian-sid-3.14", "source-3.13t"]
    {
        assert!(
            list.iter().any(|p| p.name.starts_with(required)),
            "required test interpreter {required} missing from the manifest"
        );
    }
    list
}

/// The manifest's interpreter whose name starts with `prefix`.
pub fn python(prefix: &str) -> Python {
    pythons()
        .into_iter()
        .find(|p| p.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} interpreter"))
}

/// Runs `check` on every interpreter, then fails once with every interpreter's problems.
/// `NEUROGC_TEST_PYTHONS=source-3.13t,pyenv-3.12` narrows it to the interpreters whose names
/// start so (a developer's shortcut; CI sets nothing and runs every one).
pub fn for_each_python(check: impl Fn(&Python) -> Vec<String>) {
    let mut errors = Vec::new();
    let only = std::env::var("NEUROGC_TEST_PYTHONS").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|p| name.starts_with(p));
    for py in pythons().into_iter().filter(|p| wanted(&p.name)) {
        eprintln!("--- {}", py.name);
        errors.extend(check(&py));
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

impl Python {
    /// workloads/tests/NAME as this interpreter sees it (copied into the chroot when needed).
    pub fn script(&self, name: &str) -> String {
        let src = repo_root().join("workloads/tests").join(name);
        match &self.root {
            None => src.to_string_lossy().into_owned(),
            Some(root) => {
                let dir = root.join("tmp/neurogc-tests");
                std::fs::create_dir_all(&dir).unwrap();
                let tmp = dir.join(format!(".{name}.{}", std::process::id()));
                std::fs::copy(&src, &tmp).unwrap();
                std::fs::rename(&tmp, dir.join(name)).unwrap();
                format!("/tmp/neurogc-tests/{name}")
            }
        }
    }

    /// Command line that runs workloads/tests/NAME with ARGS. `container`: chroot builds also
    /// get their own pid and mount namespaces (launch mode cannot follow unshare's fork).
    pub fn script_command(&self, name: &str, args: &[&str], container: bool) -> Vec<String> {
        let mut v = Vec::new();
        if container && let Some(root) = &self.root {
            // The container's own /proc, mounted inside its root (target.py reads /proc/self).
            v.extend(["unshare", "--pid", "--fork", "--kill-child"].map(String::from));
            v.push(format!("--mount-proc={}", root.join("proc").display()));
        }
        v.extend(self.argv.iter().cloned());
        v.push(self.script(name));
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    /// The ground-truth workload (cycles.py), directly.
    pub fn command(&self, args: &[&str]) -> Vec<String> {
        self.script_command("cycles.py", args, false)
    }

    /// The ground-truth workload in a container (chroot builds).
    pub fn container_command(&self, args: &[&str]) -> Vec<String> {
        self.script_command("cycles.py", args, true)
    }

    pub fn in_container(&self) -> bool {
        self.root.is_some()
    }

    /// Host path of the interpreter ELF that carries the USDT notes (Debian builds).
    pub fn usdt_binary(&self) -> Option<PathBuf> {
        (self.probe == "usdt").then(|| {
            let path = self.argv.last().unwrap();
            match &self.root {
                Some(root) => root.join(path.trim_start_matches('/')),
                None => PathBuf::from(path),
            }
        })
    }
}

pub fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_neurogc-agent"))
}

/// The agent attached to `pid`, its stdout and stderr read as lines, once it says it is armed.
pub fn attach_agent(pid: i32, extra: &[&str], what: &str) -> (Child, Lines, Lines) {
    let mut child = agent()
        .args(["--pid", &pid.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Lines::new(child.stdout.take().unwrap());
    let mut err = Lines::new(child.stderr.take().unwrap());
    err.wait_for("observing", 30, what);
    (child, out, err)
}

pub fn spawn(argv: &[String]) -> Child {
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {argv:?}: {e}"))
}

/// Lines of a child's stream, read on a thread so the child never blocks on a full pipe.
pub struct Lines {
    rx: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Lines {
    pub fn new(stream: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { rx, seen: Vec::new() }
    }

    /// The first new line containing `needle`, or panic after `secs`.
    pub fn wait_for(&mut self, needle: &str, secs: u64, what: &str) -> String {
        match self.find(needle, Duration::from_secs(secs)) {
            Some(line) => line,
            None => panic!("{what}: no line containing {needle:?} within {secs}s; saw {:?}", self.seen),
        }
    }

    /// The first new line containing `needle` within `within`.
    pub fn find(&mut self, needle: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return Some(line);
                    }
                }
                Err(_) => break,
            }
        }
        None
    }

    /// Everything until the stream closes.
    pub fn rest(&mut self, secs: u64) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => break,
            }
        }
        self.seen.clone()
    }
}

/// Waits for a child with a deadline; kills it and panics when it overstays.
pub fn wait_exit(child: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not exit within {secs}s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Host PID of the interpreter: the child itself, or for `unshare --fork`, its only child.
pub fn interpreter_pid(child: &Child, py: &Python) -> i32 {
    let pid = child.id() as i32;
    if !py.in_container() {
        return pid;
    }
    let path = format!("/proc/{pid}/task/{pid}/children");
    let children = std::fs::read_to_string(&path).unwrap_or_default();
    children
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("unshare {pid} has no child"))
        .parse()
        .unwrap()
}

/// `kill SIGNAL PID`, e.g. `signal(pid, "-TERM")`.
pub fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill").args([signal, &pid.to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill {signal} {pid} failed");
}

pub fn alive(pid: i32) -> bool {
    // A zombie is not alive: it only waits to be reaped.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// Values of the gc__start/gc__done semaphores in the live process (non-PIE Debian builds: the
/// note's semaphore address is the run-time address).
pub fn semaphores(pid: i32, binary: &Path) -> Vec<u16> {
    let out = Command::new("readelf").arg("-n").arg(binary).output().expect("readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut values = Vec::new();
    let mut name = "";
    for line in text.lines() {
        let line = line.trim();
        if let Some(n) = line.strip_prefix("Name: ") {
            name = if n == "gc__start" || n == "gc__done" { "gc" } else { "" };
        }
        if name == "gc"
            && let Some(sem) = line.split("Semaphore: ").nth(1)
        {
            let addr = u64::from_str_radix(sem.trim().trim_start_matches("0x"), 16).unwrap();
            let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
            let mut buf = [0u8; 2];
            std::os::unix::fs::FileExt::read_exact_at(&mem, &mut buf, addr).unwrap();
            values.push(u16::from_le_bytes(buf));
        }
    }
    assert_eq!(values.len(), 2, "expected the two gc semaphores in {}", binary.display());
    values
}

pub fn json_lines(lines: &[String]) -> Vec<Value> {
    lines.iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect()
}

pub fn summary(lines: &[Value]) -> &Value {
    let s: Vec<&Value> = lines.iter().filter(|l| l["type"] == "summary").collect();
    assert_eq!(s.len(), 1, "exactly one summary line expected");
    s[0]
}

/// Compares the agent's "gc" lines with the workload's own gc.callbacks report. With
/// `with_baseline`, the collections the interpreter made before the workload started counting
/// (gc.get_stats() at that point) are expected too: launch mode sees them.
pub fn compare(py: &str, events: &[Value], report: &Value, with_baseline: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let gcs: Vec<&Value> = events.iter().filter(|e| e["type"] == "gc").collect();
    for g in 0..3 {
        let of_gen = || gcs.iter().filter(|e| e["gen"] == g);
        let seen = of_gen().count() as i64;
        let collected: i64 = of_gen().map(|e| e["collected"].as_i64().unwrap()).sum();
        let uncollectable: i64 = of_gen().map(|e| e["uncollectable"].as_i64().unwrap()).sum();
        let base = |key: &str| if with_baseline { report[key][g].as_i64().unwrap() } else { 0 };
        let want = report["collections"][g].as_i64().unwrap() + base("baseline_collections");
        let want_collected = report["collected"][g].as_i64().unwrap() + base("baseline_collected");
        let want_uncollectable = report["uncollectable"][g].as_i64().unwrap();
        if (seen, collected, uncollectable) != (want, want_collected, want_uncollectable) {
            errors.push(format!(
                "{py}: gen{g}: agent saw {seen} collections ({collected} collected, {uncollectable} uncollectable), \
                 the target counted {want} ({want_collected}, {want_uncollectable})"
            ));
        }
    }
    // No pause can outlast the agent's whole observation.
    let wall_ns = (summary(events)["elapsed_s"].as_f64().unwrap() * 1e9) as i64;
    for e in &gcs {
        // `running` and `halted` (free-threaded builds only) are checked where threads are known.
        let keys: Vec<&str> = e
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| !["running", "halted"].contains(k))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        // Every tested build's stacks are read (3.13t's too): each collection has one.
        if sorted
            != ["collected", "duration_ns", "gen", "pid", "stack", "tid", "ts_ns", "type", "uncollectable"]
        {
            errors.push(format!("{py}: unexpected gc line keys {keys:?}"));
            break;
        }
        let d = e["duration_ns"].as_i64().unwrap();
        if d <= 0 || d >= wall_ns {
            errors.push(format!("{py}: implausible pause {d} ns"));
            break;
        }
    }
    let unknown = gcs.iter().filter(|e| !(0..=2).contains(&e["gen"].as_i64().unwrap())).count();
    if unknown > 0 {
        errors.push(format!("{py}: {unknown} collections without a true generation"));
    }
    errors
}

/// xorshift64, seeded from the environment variable `var` when set (to reproduce a run), else
/// from the clock; the seed is printed either way. Interior mutability lets closures share it.
pub struct Rng(std::cell::Cell<u64>);

impl Rng {
    pub fn from_env(var: &str) -> Rng {
        let seed: u64 = std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
        eprintln!("{var}={seed}");
        Rng(std::cell::Cell::new(seed | 1))
    }

    pub fn next(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.set(x);
        x
    }
}

pub fn fixture(name: &str) -> String {
    repo_root().join("neurogc-agent/tests/fixtures").join(name).to_string_lossy().into_owned()
}

pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

pub fn thresholds(v: &Value) -> Vec<i64> {
    v["thresholds"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

/// A running workload that reports `gc.get_threshold()` lines (profiles.py, target.py).
pub struct Target {
    pub child: Child,
    pub out: Lines,
    pub pid: i32,
    pub original: Vec<i64>,
}

impl Target {
    /// Starts `argv` and waits for its first line containing `ready` or `thresholds`.
    pub fn start(py: &Python, argv: &[String], env: &[(&str, &str)]) -> Target {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut out = Lines::new(child.stdout.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        let original = loop {
            assert!(Instant::now() < deadline, "{}: no first line", py.name);
            let line = out.wait_for("", 30, &py.name);
            if let Some(t) = line.strip_prefix("ready ") {
                break serde_json::from_str::<Vec<i64>>(t).unwrap();
            }
            if line.contains("thresholds") {
                break thresholds(&serde_json::from_str(&line).unwrap());
            }
        };
        let pid = interpreter_pid(&child, py);
        Target { child, out, pid, original }
    }

    /// Waits until the target reports `want`.
    pub fn reports(&mut self, want: &[i64], within: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < within {
            let line = self.out.wait_for("thresholds", within.as_secs() + 5, "target");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("t").is_some() && thresholds(&v) == want {
                return Some(started.elapsed());
            }
        }
        None
    }

    /// target.py's final report, once it has exited (None: it died or never reported).
    pub fn final_report(&mut self, secs: u64) -> (Option<Value>, std::process::ExitStatus) {
        let status = wait_exit(&mut self.child, secs, "target");
        let report = self
            .out
            .rest(2)
            .iter()
            .rev()
            .find(|l| l.contains("\"original\"") || l.contains("exec_thresholds"))
            .and_then(|l| serde_json::from_str(l).ok());
        (report, status)
    }

    pub fn stop(mut self) {
        kill(&mut self.child);
    }

    /// Ends the agent too (SIGKILL: the hook restores on its own).
    pub fn stop_with(self, agent: &mut Child) {
        kill(agent);
        self.stop();
    }
}

/// `neurogc-agent --pid PID --mode act --json` with a fast window.
pub fn act_agent(pid: i32, model: &str, extra: &[&str]) -> (Child, Lines, Lines) {
    // The fixture models stand for one trained on the application: their corrections count in
    // full from attach, so the change they ask for is made at once.
    let mut args =
        vec!["--mode", "act", "--json", "--interval", "0.5", "--model", model, "--model-weight", "full"];
    // The model's path alone, unless a test states these budgets (memory: a ceiling far above
    // these small targets, so the model's proposals are what is applied).
    for (budget, value) in [("--pause-budget", "off"), ("--gc-budget", "off"), ("--memory-budget", "4GiB")] {
        if !extra.contains(&budget) {
            args.extend([budget, value]);
        }
    }
    // No freeze unless a test asks for one: a freeze the controller decides once the heap is
    // warm waits for the target's own next full collection, and its move's thresholds with it
    // (by design: they could put that collection off). These targets run one seconds apart, or
    // not at all, and a test waiting 10 s for the move to be applied failed (3.9, 2026-11-29).
    if !extra.contains(&"--freeze-after") {
        args.push("--no-freeze");
    }
    args.extend_from_slice(extra);
    attach_agent(pid, &args, "act agent")
}

/// The next change: the decision that requested it, and the actuator's confirmation.
pub fn decision_applied(out: &mut Lines, what: &str) -> Value {
    let decision = loop {
        let line = out.wait_for("\"type\":\"decision\"", 30, what);
        let d: Value = serde_json::from_str(&line).unwrap();
        if d["requested"] == true {
            break d;
        }
    };
    let line = out.wait_for("\"event\":\"applied\"", 10, what);
    let applied: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(applied["requested"], decision["thresholds"], "{what}: {applied}");
    decision
}

/// Waits for target.py to finish and checks its report: it must have exited 0 (not died) with
/// `want` thresholds and nothing of neurogc left.
pub fn finished_clean(what: &str, t: &mut Target, want: &[i64]) -> Vec<String> {
    match t.final_report(30) {
        (Some(report), status) if status.success() => leftovers(what, &report, want),
        (report, status) => vec![format!("{what}: target died ({status:?}), report {report:?}")],
    }
}

/// What target.py's report says neurogc left behind, against the thresholds it should have.
pub fn leftovers(what: &str, report: &Value, want: &[i64]) -> Vec<String> {
    let mut errors = Vec::new();
    if thresholds(report) != want {
        errors.push(format!("{what}: thresholds {:?}, expected {want:?}", report["thresholds"]));
    }
    if report["frozen"] != report["frozen_at_start"] {
        errors.push(format!(
            "{what}: gc.get_freeze_count() {} at the end, {} at the start",
            report["frozen"], report["frozen_at_start"]
        ));
    }
    for (key, empty) in [("modules", true), ("fds", true), ("main_names", true)] {
        if empty && !report[key].as_array().unwrap().is_empty() {
            errors.push(format!("{what}: left in the target: {key} {}", report[key]));
        }
    }
    if report["threads"] != 0 {
        errors.push(format!("{what}: {} more threads than at start", report["threads"]));
    }
    if report["at_fork"].as_i64().unwrap() > 1 {
        errors.push(format!("{what}: {} at-fork registrations (at most one per process)", report["at_fork"]));
    }
    for child in report["children"].as_array().unwrap() {
        if child["child"] != report["original"] {
            errors.push(format!(
                "{what}: a forked child kept {} (parent had {})",
                child["child"], child["parent"]
            ));
        }
    }
    errors
}
