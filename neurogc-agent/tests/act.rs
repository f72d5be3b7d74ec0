//! advise/act against real interpreters: the thresholds the target itself reports must follow the
//! agent's decisions, and go back to the originals however the agent ends.
mod common;

use std::{
    path::Path,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// profiles.py in the container (chroot builds) or directly.
fn profile_command(py: &Python, profile: &str, seconds: u32) -> Vec<String> {
    let secs = seconds.to_string();
    py.script_command("profiles.py", &[profile, "--seconds", &secs, "--report-thresholds", "0.1"], true)
}

fn start_profile(py: &Python, profile: &str, seconds: u32, env: &[(&str, &str)]) -> Target {
    Target::start(py, &profile_command(py, profile, seconds), env)
}

/// `neurogc-agent --pid PID --mode act --model MODEL`, run to its end.
fn act_once(pid: i32, model: &str) -> std::process::Output {
    agent()
        .args(["--pid", &pid.to_string(), "--mode", "act", "--model", model, "--model-weight", "full"])
        .output()
        .unwrap()
}

/// A target under an act-mode agent whose model prefers 5000/10/10 (one move from 700/10/10),
/// once it has decided so.
fn steered(py: &Python) -> (Target, Child, Lines, Value) {
    let target = start_profile(py, "cycles", 40, &[]);
    let (agent, mut out, _err) = act_agent(target.pid, &fixture("prefer-5000.onnx"), &[]);
    let decision = decision_applied(&mut out, &py.name);
    (target, agent, out, decision)
}

#[test]
fn act_mode_steers_and_sigterm_restores() {
    for_each_python(|py| {
        let mut errors = Vec::new();
        let (mut target, mut agent, mut out, d) = steered(py);
        // The model's preference for a larger threshold0 (5000) decides the direction; how far
        // is the controller's to weigh with generations 1 and 2: on this 11 MiB target the memory
        // a young generation of 5000 is predicted to keep (+50 to +100 MiB, pessimistic before
        // it is measured) weighs against it, and on a busy machine 2000 came out cheaper (3.9
        // and 3.10, 2026-11-29), with both CPUs busy besides, 1000 (3.11, 2026-11-29).
        let decided = thresholds(&d);
        let larger = |t: i64| t > target.original[0] && t <= 5000;
        if decided.len() != 3 || !larger(decided[0]) {
            errors.push(format!("{}: unexpected decision {d}", py.name));
        }
        // Within one window (0.5 s) of the decision, the target itself sees the new thresholds.
        match target.reports(&decided, Duration::from_millis(600)) {
            Some(t) => eprintln!("{}: target saw {decided:?} {t:?} after the decision line", py.name),
            None => errors.push(format!("{}: the target never reported {decided:?}", py.name)),
        }
        signal(agent.id(), "-TERM");
        let status = wait_exit(&mut agent, 20, &py.name);
        let original = target.original.clone();
        if target.reports(&original, Duration::from_secs(2)).is_none() {
            errors.push(format!("{}: original thresholds {original:?} not back after SIGTERM", py.name));
        }
        let lines = json_lines(&out.rest(3));
        let s = summary(&lines);
        if !status.success()
            || s["policy"]["restored"] != true
            || s["policy"]["changes_applied"].as_u64().unwrap_or(0) < 1
        {
            errors.push(format!("{}: agent {status:?}, summary {s}", py.name));
        }
        if !alive(target.pid) {
            errors.push(format!("{}: target died", py.name));
        }
        target.stop();
        errors
    });
}

#[test]
fn sigkilled_agent_is_undone_by_the_hook_within_2s() {
    for_each_python(|py| {
        let mut errors = Vec::new();
        let (mut target, mut agent, _out, d) = steered(py);
        // The setting decided (threshold0 is the model's; generations 1 and 2 the controller's).
        let decided = thresholds(&d);
        if target.reports(&decided, Duration::from_secs(2)).is_none() {
            errors.push(format!("{}: change to {decided:?} not seen", py.name));
        }
        kill(&mut agent);
        let killed = Instant::now();
        let original = target.original.clone();
        match target.reports(&original, Duration::from_secs(2)) {
            Some(_) => eprintln!("{}: restored {:?} after SIGKILL", py.name, killed.elapsed()),
            None => {
                errors.push(format!("{}: originals {original:?} not restored within 2 s of SIGKILL", py.name))
            }
        }
        target.stop();
        errors
    });
}

/// The target's own gc.get_freeze_count() as it reports it, once it satisfies `want`.
fn frozen_reported(target: &mut Target, want: impl Fn(i64) -> bool, within: Duration) -> Option<i64> {
    let started = Instant::now();
    while started.elapsed() < within {
        let line = target.out.wait_for("frozen", within.as_secs() + 5, "target");
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(n) = v["frozen"].as_i64().filter(|&n| want(n)) {
            return Some(n);
        }
    }
    None
}

/// Full collections of hundreds of milliseconds over a heap that never changes (about one a
/// second on this VM), young ones of about a millisecond: only a freeze holds a 20 ms pause
/// budget, so the agent freezes the heap (the target's own gc.get_freeze_count() shows it),
/// and the freeze is undone however the agent ends: in
/// order on SIGTERM, by the custodian queueing the undo on SIGKILL. Where the permanent
/// generation is not empty to begin with (CPython 3.12 puts 375 objects there), gc.unfreeze()
/// could not undo only neurogc's part: no freeze.
#[test]
fn pause_budget_freezes_the_heap_and_every_ending_unfreezes_it() {
    for_each_python(|py| {
        if py.free_threaded {
            // The collector model the controller predicts a freeze's effect with is generational;
            // on 3.13t it does not predict that freezing shortens the (whole-heap) pauses, so it
            // never freezes there (docs/limits.md). Its guard there is tested in budgets.rs.
            eprintln!("{}: not tested: the controller does not freeze on free-threaded builds", py.name);
            return Vec::new();
        }
        let mut errors = Vec::new();
        for sig in ["-TERM", "-KILL"] {
            let what = format!("{} {sig}", py.name);
            // Not the cache profile: it replaces every entry in turn, so a freeze's gain fades
            // as the heap turns over, and whether one is worth it there is a close call.
            let mut target = start_profile(py, "warm", 40, &[]);
            let at_start = frozen_reported(&mut target, |_| true, Duration::from_secs(3)).unwrap();
            // Thresholds pinned to the defaults, so a freeze is the only remedy: larger ones
            // also hold the budget here (sessions then die young and full collections become
            // rare), and on a loaded machine that was the agent's choice, rightly.
            let (mut agent, mut out, _err) = act_agent(
                target.pid,
                &fixture("prefer-5000.onnx"),
                &[
                    "--pause-budget",
                    "20ms",
                    "--gc-budget",
                    "off",
                    "--freeze-after",
                    "0",
                    "--threshold-min",
                    "700,10,10",
                    "--threshold-max",
                    "700,10,10",
                ],
            );
            if at_start > 0 {
                // Where the agent stays with the budget missed, it says why it does not freeze.
                if out.find("\"event\":\"frozen\"", Duration::from_secs(10)).is_some() {
                    errors.push(format!("{what}: froze although {at_start} objects were frozen at start"));
                }
                let staying = json_lines(&out.rest(0))
                    .into_iter()
                    .filter_map(|d| d["reason"].as_str().map(str::to_owned))
                    .filter(|r| r.contains("pause budget missed") && r.contains("staying"))
                    .find(|r| !r.contains("freezing is not available"));
                if let Some(reason) = staying {
                    errors.push(format!(
                        "{what}: stays with the pause budget missed, not saying why: {reason}"
                    ));
                }
            } else {
                let frozen = out.wait_for("\"event\":\"frozen\"", 30, &what);
                let frozen: Value = serde_json::from_str(&frozen).unwrap();
                let count = frozen["freeze_count"].as_i64().unwrap_or(0);
                match frozen_reported(&mut target, |n| n > 10_000, Duration::from_secs(3)) {
                    Some(n) if count > 10_000 => {
                        eprintln!("{what}: agent froze {count}, the target counts {n}")
                    }
                    seen => errors.push(format!("{what}: agent says {frozen}, the target counts {seen:?}")),
                }
            }
            signal(agent.id(), sig);
            let status = wait_exit(&mut agent, 20, &what);
            let stopped = Instant::now();
            match frozen_reported(&mut target, |n| n == at_start, Duration::from_secs(3)) {
                Some(_) => {
                    eprintln!("{what}: {at_start} frozen again {:?} after the signal", stopped.elapsed())
                }
                None => {
                    errors.push(format!("{what}: the freeze count did not return to {at_start} after {sig}"))
                }
            }
            if sig == "-TERM" {
                let lines = json_lines(&out.rest(3));
                let s = summary(&lines);
                let restore = s["policy"]["restore"].as_str().unwrap_or("");
                let undone = at_start > 0 || restore.contains("freeze() undone");
                if !status.success() || s["policy"]["restored"] != true || !undone {
                    errors.push(format!("{what}: agent {status:?}, summary {s}"));
                }
            }
            target.stop();
        }
        errors
    });
}

#[test]
fn target_killed_mid_act_ends_the_agent_with_a_summary() {
    let py = python("debian-bookworm");
    let target = start_profile(&py, "cycles", 40, &[]);
    let (mut agent, mut out, _err) = act_agent(target.pid, &fixture("prefer-5000.onnx"), &[]);
    decision_applied(&mut out, "act");
    target.stop();
    let status = wait_exit(&mut agent, 10, "agent after the target was killed");
    let lines = json_lines(&out.rest(3));
    let s = summary(&lines);
    assert!(status.success(), "{status:?}");
    assert_eq!(s["stopped"], "target-exited", "{s}");
}

#[test]
fn a_proposal_that_would_break_the_memory_budget_is_not_taken() {
    let py = python("debian-bookworm");
    let target = start_profile(&py, "bulky", 60, &[]);
    // The model prefers 50000: cycles holding 4 KiB buffers would pile up between collections,
    // far past 10% of this small process.
    let (mut agent, mut out, _err) =
        act_agent(target.pid, &fixture("prefer-50000.onnx"), &["--memory-budget", "10%", "--duration", "8"]);
    let status = wait_exit(&mut agent, 30, "act agent");
    assert!(status.success(), "{status:?}");
    let lines = json_lines(&out.rest(3));
    let rss: Vec<f64> = lines
        .iter()
        .filter(|l| l["type"] == "window")
        .map(|l| l["sample"]["rss_bytes"].as_f64().unwrap() / 1048576.0)
        .collect();
    assert!(rss.len() >= 8, "{} windows", rss.len());
    // What the user relies on: the process stays within the budget (16 MiB at the least), with
    // a few MiB of the allocator's noise.
    let limit = rss[0] + (rss[0] * 0.10).max(16.0) + 4.0;
    let peak = rss.iter().copied().fold(0.0, f64::max);
    assert!(peak <= limit, "RSS reached {peak:.1} MiB, over {limit:.1} MiB: {rss:?}");
    let taken: Vec<&Value> =
        lines.iter().filter(|l| l["type"] == "decision" && l["thresholds"][0] == 50000).collect();
    assert!(taken.is_empty(), "50000 taken: {taken:?}");
    let said = lines
        .iter()
        .filter(|l| l["type"] == "decision")
        .filter_map(|l| l["predicted"]["memory_mib"].as_f64());
    assert!(said.count() > 0, "decisions carry the predicted memory cost");
    target.stop();
}

#[test]
fn a_second_agent_does_not_get_a_second_hook() {
    let py = python("pyenv-3.12");
    let mut target = start_profile(&py, "cycles", 40, &[]);
    let (mut first, mut out, _err) = act_agent(target.pid, &fixture("prefer-5000.onnx"), &[]);
    let decided = thresholds(&decision_applied(&mut out, "first agent"));
    assert!(target.reports(&decided, Duration::from_secs(2)).is_some());
    let second = act_once(target.pid, &fixture("prefer-50000.onnx"));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success() && stderr.contains("another neurogc agent"), "{stderr}");
    // The first agent's hook still rules.
    assert!(target.reports(&decided, Duration::from_secs(1)).is_some());
    target.stop_with(&mut first);
}

#[test]
fn injection_disabled_is_refused_and_memory_actuator_works_instead() {
    let py = python("debian-sid-3.14");
    let mut target = start_profile(&py, "cycles", 40, &[("PYTHON_DISABLE_REMOTE_DEBUG", "1")]);
    let out = act_once(target.pid, &fixture("prefer-5000.onnx"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("remote debugging disabled") && stderr.contains("--actuator memory"), "{stderr}");
    let original = target.original.clone();
    assert!(target.reports(&original, Duration::from_secs(1)).is_some(), "target changed after a refusal");

    let (mut agent, mut lines, _err) =
        act_agent(target.pid, &fixture("prefer-5000.onnx"), &["--actuator", "memory"]);
    let decided = thresholds(&decision_applied(&mut lines, "memory actuator"));
    assert!(target.reports(&decided, Duration::from_secs(2)).is_some(), "memory write not seen");
    signal(agent.id(), "-TERM");
    wait_exit(&mut agent, 20, "memory agent");
    assert!(target.reports(&original, Duration::from_secs(2)).is_some(), "memory actuator did not restore");
    target.stop();
}

#[test]
fn bad_models_and_missing_runtime_change_nothing() {
    let py = python("debian-bookworm");
    let mut target = start_profile(&py, "acyclic", 40, &[]);
    let pid = target.pid.to_string();
    /// (agent arguments, environment variable, what the error must say)
    type Case<'a> = (Vec<String>, Option<(&'a str, &'a str)>, &'a str);
    let cases: [Case; 4] = [
        (vec!["--model".into(), fixture("corrupt.onnx")], None, "is not a valid ONNX model"),
        (
            vec!["--model".into(), fixture("wrong-shape.onnx")],
            None,
            "does not follow neurogc's model contract",
        ),
        (vec!["--model".into(), "/nonexistent/model.onnx".into()], None, "cannot open model"),
        (
            vec![],
            Some(("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")),
            "ONNX Runtime library not found",
        ),
    ];
    for (args, env, message) in cases {
        let mut cmd = agent();
        cmd.args(["--pid", &pid, "--mode", "act"]).args(&args).stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.spawn().unwrap().wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(message), "{message:?} missing from {stderr}");
    }
    let original = target.original.clone();
    assert!(target.reports(&original, Duration::from_secs(1)).is_some());
    target.stop();
}

#[test]
fn features_live_and_replayed_are_identical() {
    for_each_python(|py| {
        // `-o` keeps the live view on stdout and the stream in a file of its own.
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-{}-{}", std::process::id(), py.name));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("trace.jsonl");
        let cmd = profile_command(py, "cycles", 3);
        // Launch mode cannot follow unshare's fork: record chroot builds through plain chroot.
        let cmd: Vec<String> =
            cmd.into_iter().skip_while(|a| a == "unshare" || a.starts_with("--")).collect();
        let out = agent()
            .args(["--mode", "observe", "--json", "-o"])
            .arg(&trace)
            .args(["--interval", "0.5", "--"])
            .args(&cmd)
            .output()
            .unwrap();
        let recorded = std::fs::read_to_string(&trace).unwrap_or_default();
        let replay = agent().arg("replay").arg(&trace).arg("--json").output().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let windows = |text: &str| -> Vec<Value> {
            json_lines(&text.lines().map(String::from).collect::<Vec<_>>())
                .into_iter()
                .filter(|l| l["type"] == "window")
                .collect()
        };
        let live = windows(&recorded);
        let replayed = windows(&String::from_utf8_lossy(&replay.stdout));
        let mut errors = Vec::new();
        if !out.status.success() || !replay.status.success() || live.len() < 4 || live != replayed {
            errors.push(format!(
                "{}: {} live windows, {} replayed (status {:?}/{:?}, {})",
                py.name,
                live.len(),
                replayed.len(),
                out.status,
                replay.status,
                String::from_utf8_lossy(&replay.stderr)
            ));
        }
        // Every recorded line is the agent's: the target's output stayed on the terminal.
        if recorded
            .lines()
            .any(|l| serde_json::from_str::<Value>(l).map_or(true, |v| v.get("type").is_none()))
        {
            errors.push(format!("{}: a line in the -o stream is not a record", py.name));
        }
        errors
    });
}

#[test]
fn cuda_falls_back_to_the_cpu_and_says_why() {
    // CI machines have no GPU and the CPU-only ONNX Runtime: the CUDA provider cannot register.
    let py = python("debian-bookworm");
    let mut target = start_profile(&py, "cycles", 20, &[]);
    let out = agent()
        .args(["--pid", &target.pid.to_string(), "--ep", "cuda", "--json", "--duration", "2.5"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines =
        json_lines(&String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect::<Vec<_>>());
    let s = summary(&lines);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("CUDA execution provider unavailable, running the model on the CPU"), "{stderr}");
    assert_eq!(s["policy"]["provider"], "CPU", "{s}");
    assert!(s["policy"]["decisions"].as_u64().unwrap() >= 2, "{s}");
    let original = target.original.clone();
    assert!(target.reports(&original, Duration::from_secs(1)).is_some(), "advise mode changed the target");
    target.stop();
}

#[test]
fn advise_mode_gives_its_recommendation_on_sigusr1_and_goes_on() {
    // A user who wants the advice without stopping the agent sends SIGUSR1: the recommendation
    // as it stands comes at once (on stderr beside a JSON stream), the agent keeps deciding, and
    // at its end says the same at exit; the target is never changed.
    let py = python("debian-bookworm");
    let mut target = start_profile(&py, "cycles", 30, &[]);
    let (mut agent, mut out, mut err) =
        attach_agent(target.pid, &["--mode", "advise", "--json", "--duration", "8"], &py.name);
    for _ in 0..3 {
        out.wait_for("\"type\":\"decision\"", 10, "a decision");
    }
    let before = out.rest(0).len();
    signal(agent.id(), "-USR1");
    let asked = err.wait_for("recommendation", 5, "the recommendation asked for");
    let status = wait_exit(&mut agent, 20, "the advising agent");
    let all = out.rest(5);
    let lines = json_lines(&all);
    let s = summary(&lines);
    assert!(status.success(), "SIGUSR1 ended the agent: {status:?}");
    assert!(asked.starts_with("recommendation"), "{asked}");
    let after = json_lines(&all[before..]);
    let decided = after.iter().filter(|l| l["type"] == "decision").count();
    assert!(decided >= 2, "the agent stopped deciding after SIGUSR1: {decided} more decisions");
    assert!(s["policy"]["recommendation"].as_str().is_some_and(|r| r.starts_with("recommendation")), "{s}");
    let original = target.original.clone();
    assert!(target.reports(&original, Duration::from_secs(1)).is_some(), "advise mode changed the target");
    target.stop();
}

#[test]
fn the_model_runtime_writes_nothing_and_the_command_keeps_its_environment() {
    // Microsoft's ONNX Runtime builds start a telemetry client that writes a device id and an
    // event database under $HOME/.cache; the agent must leave no file behind on a user's machine,
    // and the command it launches must see the environment the user gave it.
    let py = python("debian-bookworm");
    let show = "import gc, os, time\nprint('child sees', os.environ.get('ORT_DISABLE_TELEMETRY'), flush=True)\n\
                end = time.time() + 3\nwhile time.time() < end:\n    [[] for _ in range(2000)]\n    gc.collect(0)";
    let mut errors = Vec::new();
    for users in [None, Some("0")] {
        let home =
            std::env::temp_dir().join(format!("neurogc-home-{}-{}", std::process::id(), users.is_some()));
        std::fs::create_dir(&home).unwrap();
        let mut cmd = agent();
        cmd.env("HOME", &home).env_remove("ORT_DISABLE_TELEMETRY");
        if let Some(value) = users {
            cmd.env("ORT_DISABLE_TELEMETRY", value);
        }
        let out = cmd.args(["--json", "--"]).args(&py.argv).args(["-c", show]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines = json_lines(&stdout.lines().map(String::from).collect::<Vec<_>>());
        let decisions = summary(&lines)["policy"]["decisions"].as_u64().unwrap_or(0);
        let left: Vec<_> = walk(&home);
        let want = format!("child sees {}", users.unwrap_or("None"));
        if !out.status.success() || decisions == 0 {
            errors.push(format!("{users:?}: the model never ran ({decisions} decisions): {stderr}"));
        }
        if !left.is_empty() {
            errors.push(format!("{users:?}: the agent left {left:?} in HOME"));
        }
        if !stderr.contains(&want) {
            errors.push(format!("{users:?}: {want:?} missing from the command's output: {stderr}"));
        }
        std::fs::remove_dir_all(&home).unwrap();
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

/// Every path under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map_while(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}
