//! The agent against real CPython processes, every interpreter of the manifest: it must see
//! exactly the collections the target itself counts with gc.callbacks.
mod common;

use std::{
    io::Write,
    process::Stdio,
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

fn report_of(lines: &[Value]) -> Value {
    lines.iter().find(|l| l.get("baseline_collections").is_some()).cloned().expect("workload report line")
}

/// `neurogc-agent ARGS -- TARGET` (launch mode) run to its end: the JSON lines of its standard
/// output and of its standard error (where the command's own output goes with --json). Err: the
/// agent did not exit 0.
fn launched(py: &Python, args: &[&str], target: &[String]) -> Result<(Vec<Value>, Vec<Value>), Vec<String>> {
    let out = agent().args(args).arg("--").args(target).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(0) {
        return Err(vec![format!("{}: agent exited {:?}: {stderr}", py.name, out.status)]);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = |text: &str| json_lines(&text.lines().map(str::to_owned).collect::<Vec<_>>());
    Ok((json(&stdout), json(&stderr)))
}

#[test]
fn launch_mode_sees_every_collection_from_the_first() {
    for_each_python(|py| {
        // A second thread makes some collections run off the main thread.
        let target = py.command(&["--seconds", "1", "--threads", "1", "--manual", "3000"]);
        let (lines, err_lines) = match launched(py, &["--json", "--duration", "120"], &target) {
            Ok(out) => out,
            Err(e) => return e,
        };
        // With --json the command's own output goes to standard error, never into the stream.
        if lines.iter().any(|l| l.get("baseline_collections").is_some()) {
            return vec![format!("{}: the target's output is mixed into the JSON stream", py.name)];
        }
        let report = report_of(&err_lines);
        let mut errors = compare(&py.name, &lines, &report, true);
        let s = summary(&lines);
        if s["stopped"] != "target-exited" || s["target_exit_status"] != 0 || s["lost_events"] != 0 {
            errors.push(format!("{}: unexpected summary {s}", py.name));
        }
        if s["probe"] != py.probe.as_str() {
            errors.push(format!("{}: probe {} where {} was expected", py.name, s["probe"], py.probe));
        }
        // Every thread that ran a collection is seen under its own id.
        let tids: Vec<i64> =
            lines.iter().filter(|l| l["type"] == "gc").map(|l| l["tid"].as_i64().unwrap()).collect();
        for t in report["gc_threads"].as_array().unwrap() {
            if !tids.contains(&t.as_i64().unwrap()) {
                errors.push(format!("{}: no collection reported on thread {t}", py.name));
            }
        }
        errors
    });
}

#[test]
fn four_threads_every_collection_counted_and_timed_around_the_workloads_own_timing() {
    // Four threads allocating cyclic garbage: on a free-threaded build they run at once and each
    // collection stops them all. The workload times each collection itself (its gc.callbacks'
    // "start" to "stop"). On 3.13t the probed gc_collect_main runs both callbacks inside it, so
    // every pause the agent reports contains the workload's. On the other builds the callbacks
    // run outside the probed span, and a thread switch inside a callback would lengthen the
    // workload's timing (it lengthens its switch interval): there the two agree at the median.
    for_each_python(|py| {
        let target = py.command(&["--seconds", "2", "--threads", "4", "--pauses"]);
        let (lines, err_lines) =
            match launched(py, &["--mode", "observe", "--json", "--duration", "120"], &target) {
                Ok(out) => out,
                Err(e) => return e,
            };
        let report = report_of(&err_lines);
        let mut errors = compare(&py.name, &lines, &report, true);
        if !errors.is_empty() {
            return errors;
        }
        let mut gcs: Vec<&Value> = lines.iter().filter(|l| l["type"] == "gc").collect();
        gcs.sort_by_key(|l| l["ts_ns"].as_i64().unwrap());
        // The startup collections (before the callback was installed) come first.
        let before: i64 =
            report["baseline_collections"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).sum();
        let ours: Vec<i64> =
            gcs[before as usize..].iter().map(|l| l["duration_ns"].as_i64().unwrap()).collect();
        let own: Vec<i64> =
            report["pause_ns"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        if ours.len() != own.len() {
            return vec![format!(
                "{}: {} pauses timed, the workload timed {}",
                py.name,
                ours.len(),
                own.len()
            )];
        }
        let shorter = ours.iter().zip(&own).filter(|(a, w)| a < w).count();
        if py.free_threaded && shorter > 0 {
            errors.push(format!(
                "{}: {shorter} of {} pauses shorter than the workload's own timing",
                py.name,
                own.len()
            ));
        }
        let mut excess: Vec<i64> = ours.iter().zip(&own).map(|(a, w)| a - w).collect();
        excess.sort_unstable();
        let median = excess[excess.len() / 2];
        let (total, total_own) = (ours.iter().sum::<i64>(), own.iter().sum::<i64>());
        eprintln!(
            "{}: {} collections, pauses {:.1} ms in all (workload {:.1} ms), median excess {:.1} µs",
            py.name,
            own.len(),
            total as f64 / 1e6,
            total_own as f64 / 1e6,
            median as f64 / 1e3
        );
        // (The workload lengthens its GIL switch interval while it times pauses: at CPython's
        // 5 ms, collections of 35–45 ms with four threads read 5–7 ms longer in the callbacks
        // at the median, a handoff inside the workload's timing.)
        if median.abs() > 300_000 {
            errors.push(format!("{}: the median pause exceeds the workload's own by {median} ns", py.name));
        }
        // Free-threaded: the other threads running Python when each collection began (the ones
        // its stop-the-world halted): never more than the workload's other four, and with four
        // threads allocating, usually some. GIL builds have none to report.
        let running: Vec<Option<i64>> =
            gcs[before as usize..].iter().map(|l| l["running"].as_i64()).collect();
        if py.free_threaded {
            let counted: Vec<i64> = running.iter().flatten().copied().collect();
            let busy = counted.iter().filter(|&&n| n >= 1).count();
            eprintln!(
                "{}: threads running Python at each collection's start: {counted:?} ({busy} of {} with one or more)",
                py.name,
                counted.len()
            );
            if counted.len() != running.len() || counted.iter().any(|&n| !(0..=4).contains(&n)) {
                errors.push(format!(
                    "{}: running threads {running:?}, expected 0–4 on every collection",
                    py.name
                ));
            } else if busy * 2 < counted.len() {
                errors.push(format!(
                    "{}: other threads running at only {busy} of {} collections",
                    py.name,
                    counted.len()
                ));
            }
            // Which: each collection's `halted` set names exactly `running` of the workload's own
            // threads, never the collecting thread itself.
            let sets: std::collections::HashMap<i64, Vec<i64>> = lines
                .iter()
                .filter(|l| l["type"] == "threads")
                .map(|l| {
                    let tids = l["tids"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
                    (l["id"].as_i64().unwrap(), tids)
                })
                .collect();
            let threads: Vec<i64> =
                report["threads"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
            for g in &gcs[before as usize..] {
                let n = g["running"].as_i64().unwrap_or(0);
                let set = g["halted"].as_i64().and_then(|id| sets.get(&id)).cloned().unwrap_or_default();
                let tid = g["tid"].as_i64().unwrap();
                if set.len() as i64 != n || set.contains(&tid) || set.iter().any(|t| !threads.contains(t)) {
                    errors.push(format!(
                        "{}: a collection on thread {tid} halted {n} running threads, named {set:?} (the workload's: {threads:?})",
                        py.name
                    ));
                    break;
                }
            }
        } else if running.iter().any(Option::is_some) || lines.iter().any(|l| l["type"] == "threads") {
            errors.push(format!("{}: running threads reported on a GIL build", py.name));
        }
        errors
    });
}

#[test]
fn threads_that_all_call_the_collector_at_once_are_each_counted_once() {
    // Three threads calling gc.collect() on every iteration: on a free-threaded build they enter
    // the collector together, most return at once, and windows straddle each other's ends. Each
    // collection the workload's callbacks saw is counted once, with what it freed.
    for_each_python(|py| {
        let target =
            py.command(&["--seconds", "1", "--threads", "3", "--manual", "1", "--bare", "--idle-main"]);
        let (lines, err_lines) =
            match launched(py, &["--mode", "observe", "--json", "--duration", "120"], &target) {
                Ok(out) => out,
                Err(e) => return e,
            };
        let report = report_of(&err_lines);
        let seen = lines.iter().filter(|l| l["type"] == "gc").count();
        eprintln!("{}: {seen} collections", py.name);
        compare(&py.name, &lines, &report, true)
    });
}

#[test]
fn a_windows_gc_share_is_the_pause_time_inside_it() {
    for_each_python(|py| {
        // Collections back to back over a 500,000-container heap, in 0.1 s windows: most
        // windows open while one runs. Counted whole in the window it ended in, such a one made
        // the share read over 100%.
        let target = py.command(&["--seconds", "1.5", "--manual", "3", "--heap", "500000"]);
        let (lines, _) = match launched(py, &["--json", "--interval", "0.1", "--duration", "120"], &target) {
            Ok(out) => out,
            Err(e) => return e,
        };
        let share_at = neurogc_trace::features::index("gc_share").unwrap();
        let (mut errors, mut spans, mut spanning) = (Vec::new(), Vec::new(), 0);
        for l in &lines {
            let n = |k: &str| l[k].as_u64().unwrap();
            match l["type"].as_str() {
                Some("gc") => spans.push((n("ts_ns"), n("ts_ns") + n("duration_ns"))),
                Some("window") => {
                    let (start, end) = (n("start_ns"), n("end_ns"));
                    spanning += spans.iter().filter(|&&(a, _)| a < start).count();
                    let inside: u64 =
                        spans.iter().map(|&(a, b)| b.min(end).saturating_sub(a.max(start))).sum();
                    let want = inside as f64 / (end - start) as f64;
                    let share = l["features"][share_at].as_f64().unwrap();
                    if share > 1.0 || (share - want).abs() > 1e-9 {
                        errors.push(format!(
                            "{}: window at {start}: GC share {share}, {want} inside it",
                            py.name
                        ));
                    }
                    spans.clear();
                }
                _ => {}
            }
        }
        if spanning == 0 {
            errors.push(format!("{}: no collection began before the window it ended in", py.name));
        }
        errors
    });
}

/// A folder of this test run's own, `name`.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn output_alone_writes_the_stream_to_its_file_and_keeps_the_live_view() {
    // `neurogc-agent -o FILE -- cmd`: --help says the live view stays on standard output, yet
    // `-o` asked for --json too and exited 2 without it.
    let py = python("debian-bookworm");
    let dir = scratch("output");
    let file = dir.join("stream.jsonl");
    let target = py.command(&["--seconds", "1", "--manual", "3000"]);
    let out = agent().arg("-o").arg(&file).args(["--duration", "120", "--"]).args(&target).output().unwrap();
    let stream = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&stream.lines().map(str::to_owned).collect::<Vec<_>>());
    // The command's own output stays on standard output, beside the live view.
    let own = json_lines(&stdout.lines().map(str::to_owned).collect::<Vec<_>>());
    let errors = compare(&py.name, &lines, &report_of(&own), true);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        stdout.lines().any(|l| l.contains("collections") && !l.starts_with('{')),
        "no live view on standard output: {stdout}"
    );
}

#[test]
fn launch_mode_exits_with_the_commands_status() {
    // As `time` and `strace` do: `neurogc-agent -- pytest` in CI must fail when pytest fails.
    let mut errors = Vec::new();
    for name in ["debian-bookworm-3.11", "pyenv-3.13"] {
        let py = python(name);
        let collect = "import gc; gc.collect(); ";
        let cases = [
            ("import sys; sys.exit(3)", 3, "exited with status 3"),
            ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 139, "killed by SIGSEGV"),
            ("pass", 0, "exited with status 0"),
        ];
        for (code, want, words) in cases {
            let out = agent()
                .args(["--duration", "120", "--"])
                .args(&py.argv)
                .args(["-c", &format!("{collect}{code}")])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            if out.status.code() != Some(want) || !stdout.contains(words) {
                errors.push(format!(
                    "{name}: `{code}`: agent exited {:?}, expected {want} and {words:?} in:\n{stdout}",
                    out.status
                ));
            }
        }
    }
    // With --json there is no live view: the last line on standard error says whose status
    // it is (the agent's own failures also exit 2, with "neurogc-agent: error: …").
    let py = python("debian-bookworm-3.11");
    let out = agent()
        .args(["--json", "--duration", "120", "--"])
        .args(&py.argv)
        .args(["-c", "import gc, sys; gc.collect(); sys.exit(2)"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    if out.status.code() != Some(2) || last != "neurogc-agent: the command exited with status 2" {
        errors.push(format!("--json: agent exited {:?}, last line on standard error {last:?}", out.status));
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

/// A command that collects, sleeps 3 s and exits 3: windows are shown before it ends.
const SLEEPS_THEN_EXITS_3: &str = "import gc, sys, time; gc.collect(); time.sleep(3); sys.exit(3)";

/// Launches, with `extra`, the Python `code`, with the agent's standard output (`Out`) or
/// standard error closed by its reader at once: how the agent ended, and after how long.
fn launched_with_a_stream_closed(
    extra: &[&str],
    code: &str,
    closed: Closed,
) -> (std::process::ExitStatus, Duration) {
    let py = python("debian-bookworm-3.11");
    let started = Instant::now();
    let (stdout, stderr) = match closed {
        Closed::Out => (Stdio::piped(), Stdio::null()),
        Closed::Err => (Stdio::null(), Stdio::piped()),
    };
    let mut child = agent()
        .args(extra)
        .args(["--duration", "120", "--"])
        .args(&py.argv)
        .args(["-c", code])
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap();
    drop((child.stdout.take(), child.stderr.take()));
    (wait_exit(&mut child, 60, &format!("agent {extra:?}")), started.elapsed())
}

enum Closed {
    Out,
    Err,
}

#[test]
fn launch_mode_keeps_the_commands_status_when_its_summary_is_the_first_line_unread() {
    // A command that ends before the first window: the summary is the first write to the
    // closed output (`neurogc-agent -- cmd | true`), and it ended "error: Broken pipe", exit 1.
    let quick = "import gc, sys; gc.collect(); sys.exit(3)";
    let errors: Vec<String> = [&[][..], &["--json"][..]]
        .into_iter()
        .filter_map(|extra| {
            let (status, _) = launched_with_a_stream_closed(extra, quick, Closed::Out);
            (status.code() != Some(3)).then(|| {
                format!("{extra:?}: agent exited {status:?} with standard output closed, expected 3")
            })
        })
        .collect();
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn launch_mode_keeps_the_commands_status_when_standard_error_is_closed() {
    // `neurogc-agent --mode act -- cmd 2>&1 | head -1`: the reader goes away after one line,
    // and every later log line or last word fails to write. The agent ends as the command
    // does, not with a panic's 101 (tracing-subscriber and `eprintln!` both panicked there).
    let errors: Vec<String> = [&["--mode", "act"][..], &["--mode", "act", "--json"][..]]
        .into_iter()
        .filter_map(|extra| {
            let (status, _) = launched_with_a_stream_closed(extra, SLEEPS_THEN_EXITS_3, Closed::Err);
            (status.code() != Some(3))
                .then(|| format!("{extra:?}: agent exited {status:?} with standard error closed, expected 3"))
        })
        .collect();
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn launch_mode_waits_for_its_command_when_standard_output_is_closed() {
    // `neurogc-agent -- cmd | head -1`: the live view's reader goes away at once. The agent
    // stops observing quietly, as a filter does, and still ends as `time` does: when the
    // command ends, with its status (it used to exit 0 at once, the command left running on).
    let errors: Vec<String> = [&[][..], &["--mode", "act"][..], &["--json"][..]]
        .into_iter()
        .filter_map(|extra| {
            let (status, took) = launched_with_a_stream_closed(extra, SLEEPS_THEN_EXITS_3, Closed::Out);
            (status.code() != Some(3) || took < Duration::from_secs(3)).then(|| {
                format!(
                    "{extra:?}: agent exited {status:?} after {took:?} with standard output closed, \
                     expected 3 once the command ended"
                )
            })
        })
        .collect();
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn record_goes_on_when_its_live_views_reader_goes_away() {
    // `neurogc-agent record -o t.ngc -- cmd | head -1`: the live view's reader goes away, but
    // the recording is what was asked for. It stopped there (1 s of a 2.3 s run, no summary);
    // it now goes on to the command's end, every collection the command counted in it, and
    // ends with the command's status.
    let py = python("debian-bookworm-3.11");
    let dir = scratch("record-pipe");
    let (trace, counted) = (dir.join("t.ngc"), dir.join("counted"));
    let code = r#"
import gc, os, sys, time
kept = []
for i in range(200_000):
    kept.append([i])
time.sleep(1.5)
for i in range(200_000):
    kept.append([i])
gc.collect()
# Every collection since start-up; no finalisation's after it.
open(sys.argv[1], "w").write(str(sum(s["collections"] for s in gc.get_stats())))
os._exit(3)
"#;
    let mut child = agent()
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--mode", "observe", "--duration", "120", "--"])
        .args(&py.argv)
        .args(["-c", code])
        .arg(&counted)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = wait_exit(&mut child, 60, "record with its live view closed");
    assert_eq!(status.code(), Some(3), "record ended {status:?}");
    let out = agent().args(["report", "--json"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let counted: u64 = std::fs::read_to_string(&counted).unwrap().trim().parse().unwrap();
    assert_eq!(report["summary"]["stopped"], "target-exited", "{}", report["summary"]);
    assert_eq!(report["summary"]["target_exit_status"], 3);
    assert_eq!(
        report["collections"].as_u64(),
        Some(counted),
        "the recording against the command's own count"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_attached_agent_stops_quietly_when_its_reader_goes_away() {
    // `neurogc-agent --pid P | head -1` (and with --json, and advise mode): the reader goes
    // away at once. The agent detaches and ends 0, the target runs on untouched.
    let py = python("debian-bookworm-3.11");
    let mut target = spawn(&py.command(&["--wait", "--seconds", "1", "--manual", "5000"]));
    let mut target_out = Lines::new(target.stdout.take().unwrap());
    target_out.wait_for("ready", 30, &py.name);
    let pid = interpreter_pid(&target, &py);
    for extra in [&[][..], &["--json"][..], &["--mode", "advise"][..]] {
        let started = Instant::now();
        let mut child = agent()
            .args(["--pid", &pid.to_string(), "--duration", "60"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let status = wait_exit(&mut child, 30, &format!("agent {extra:?} with its output closed"));
        assert_eq!(status.code(), Some(0), "{extra:?}: ended {status:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{extra:?}: took {:?}", started.elapsed());
        assert!(target.try_wait().unwrap().is_none(), "{extra:?}: the target ended");
    }
    let _ = target.kill();
    let _ = target.wait();
}

#[test]
fn attach_to_a_running_process_in_its_own_pid_and_mount_namespace() {
    for_each_python(|py| {
        let mut target = spawn(&py.container_command(&["--wait", "--seconds", "1", "--manual", "5000"]));
        let mut target_out = Lines::new(target.stdout.take().unwrap());
        target_out.wait_for("ready", 30, &py.name);
        let pid = interpreter_pid(&target, py);
        let (mut agent, mut agent_out, mut agent_err) =
            attach_agent(pid, &["--json", "--duration", "120"], &format!("{}: agent", py.name));
        target.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        let report: Value = serde_json::from_str(&target_out.wait_for("baseline", 60, &py.name)).unwrap();
        // The target exits on its own: the agent must notice and stop with its summary.
        let status = wait_exit(&mut agent, 30, &format!("{}: agent after the target exited", py.name));
        let _ = target.wait();
        let lines = json_lines(&agent_out.rest(5));
        let mut errors = Vec::new();
        if status.code() != Some(0) {
            errors.push(format!("{}: agent exited {status:?}: {:?}", py.name, agent_err.rest(1)));
            return errors;
        }
        errors.extend(compare(&py.name, &lines, &report, false));
        let s = summary(&lines);
        if s["stopped"] != "target-exited" || s["lost_events"] != 0 {
            errors.push(format!("{}: unexpected summary {s}", py.name));
        }
        // BPF reports host PIDs, whatever namespace the target sees itself in.
        if lines.iter().filter(|l| l["type"] == "gc").any(|l| l["pid"] != pid) {
            errors.push(format!("{}: events not attributed to host pid {pid}", py.name));
        }
        errors
    });
}

/// Starts a target that keeps collecting, attaches, then stops the agent with `signal`: the
/// target must run on unharmed, semaphores back to 0.
fn detach_leaves_target_untouched(py: &Python, signal: &str) -> Vec<String> {
    let name = format!("{} ({signal})", py.name);
    let mut errors = Vec::new();
    let mut target = spawn(&py.container_command(&["--wait", "--seconds", "2"]));
    let mut target_out = Lines::new(target.stdout.take().unwrap());
    target_out.wait_for("ready", 30, &name);
    let pid = interpreter_pid(&target, py);
    let usdt = py.usdt_binary();
    if let Some(bin) = &usdt
        && semaphores(pid, bin) != [0, 0]
    {
        errors.push(format!("{name}: semaphores set before the agent attached"));
    }
    let (mut agent, mut agent_out, _agent_err) = attach_agent(pid, &["--json"], &name);
    if let Some(bin) = &usdt {
        let armed = semaphores(pid, bin);
        if armed != [1, 1] {
            errors.push(format!("{name}: semaphores {armed:?} while attached, expected [1, 1]"));
        }
    }
    target.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    std::thread::sleep(Duration::from_millis(700));
    common::signal(agent.id(), signal);
    let status = wait_exit(&mut agent, 30, &name);
    if signal == "-TERM" {
        let lines = json_lines(&agent_out.rest(5));
        let s = summary(&lines);
        if status.code() != Some(0)
            || s["stopped"] != "SIGTERM"
            || s["collections"].as_u64().unwrap_or(0) == 0
        {
            errors.push(format!("{name}: agent exit {status:?}, summary {s}"));
        }
    }
    if !alive(pid) {
        errors.push(format!("{name}: target died with the agent"));
        let _ = target.wait();
        return errors;
    }
    if let Some(bin) = &usdt {
        let after = semaphores(pid, bin);
        if after != [0, 0] {
            errors.push(format!("{name}: semaphores {after:?} after the agent left, expected [0, 0]"));
        }
    }
    // The target finishes its work normally: report printed, exit status 0.
    let report: Value = serde_json::from_str(&target_out.wait_for("baseline", 60, &name)).unwrap();
    let exit = wait_exit(&mut target, 30, &name);
    if !exit.success() || report["collections"][0].as_i64().unwrap_or(0) == 0 {
        errors.push(format!("{name}: target exit {exit:?}, report {report}"));
    }
    errors
}

#[test]
fn sigterm_detaches_and_leaves_the_target_untouched() {
    for_each_python(|py| detach_leaves_target_untouched(py, "-TERM"));
}

#[test]
fn sigkill_of_the_agent_still_removes_every_probe() {
    for_each_python(|py| detach_leaves_target_untouched(py, "-KILL"));
}

#[test]
fn live_view_reads_thresholds_and_count_from_memory() {
    for_each_python(|py| {
        // The target sets threshold0 itself and idles; the agent must read back the same values.
        let mut target = spawn(&py.container_command(&["--wait", "--threshold", "555"]));
        let mut target_out = Lines::new(target.stdout.take().unwrap());
        let ready = target_out.wait_for("ready", 30, &py.name);
        let thresholds: Vec<i64> = serde_json::from_str(ready.trim_start_matches("ready ")).unwrap();
        let pid = interpreter_pid(&target, py);
        let out = agent()
            .args(["--pid", &pid.to_string(), "--duration", "1.3", "--interval", "0.5"])
            .output()
            .unwrap();
        let _ = target.kill();
        let _ = target.wait();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let want = format!("thresholds {}/{}/{} · gen0 count", thresholds[0], thresholds[1], thresholds[2]);
        // A refresh starts with its time and gen0; lines indented under the time continue it.
        let mut blocks: Vec<String> = Vec::new();
        for line in stdout.lines() {
            if line.contains("s | gen0 ") {
                blocks.push(line.to_owned());
            } else if let (Some(block), true) = (blocks.last_mut(), line.starts_with("         ")) {
                block.push('\n');
                block.push_str(line);
            }
        }
        let refreshes = blocks.len();
        let mut errors = Vec::new();
        if out.status.code() != Some(0) || !stdout.contains(&want) || refreshes < 2 {
            errors.push(format!(
                "{}: expected {refreshes} ≥ 2 refresh lines with {want:?}, got:\n{stdout}",
                py.name
            ));
        }
        // Default mode is advise: every refresh line carries the model's advice.
        if blocks.iter().any(|b| !b.contains("advice ")) {
            errors.push(format!("{}: a refresh without the advice:\n{stdout}", py.name));
        }
        if let Some(wide) = stdout.lines().find(|l| l.chars().count() > 80) {
            errors.push(format!("{}: a line wider than 80 columns: {wide:?}", py.name));
        }
        if !stdout.contains("neurogc summary (ran ") {
            errors.push(format!("{}: no closing summary:\n{stdout}", py.name));
        }
        errors
    });
}

/// The GC state the controller's model reads: generations 1 and 2's counts and, except on the
/// incremental collector (3.14.0–3.14.4) and 3.16+, `long_lived_total`/`long_lived_pending`, against what the interpreter itself says while it
/// holds still after a full collection (`len(gc.get_objects(2))`, `gc.get_count()`).
#[test]
fn the_old_generation_is_read_as_the_interpreter_counts_it() {
    for_each_python(|py| {
        let target = py.command(&["--seconds", "0.5", "--still", "--linger", "1.5"]);
        let (lines, err_lines) =
            match launched(py, &["--json", "--interval", "0.2", "--duration", "120"], &target) {
                Ok(out) => out,
                Err(e) => return e,
            };
        let report = report_of(&err_lines);
        let version: Vec<u32> =
            report["version"].as_str().unwrap().split('.').map_while(|p| p.parse().ok()).collect();
        let keeps_counters = match version[..] {
            [3, minor, micro, ..] => minor <= 13 || (minor == 14 && micro >= 5) || minor == 15,
            _ => false,
        };
        let samples: Vec<&Value> =
            lines.iter().filter(|l| l["type"] == "window").map(|l| &l["sample"]).collect();
        let old = report["old_generation"].as_i64().unwrap();
        let counts = &report["counts"];
        if keeps_counters {
            let want = serde_json::json!([old, 0]);
            let older = serde_json::json!([counts[1], counts[2]]);
            if !samples.iter().any(|s| s["long_lived"] == want && s["older_counts"] == older) {
                let seen: Vec<String> =
                    samples.iter().map(|s| format!("{} {}", s["long_lived"], s["older_counts"])).collect();
                return vec![format!(
                    "{}: no window read long_lived {want} and counts {older}; read {seen:?}",
                    py.name
                )];
            }
        } else if let Some(s) = samples.iter().find(|s| s.get("long_lived").is_some()) {
            return vec![format!("{}: long_lived read where the build keeps none: {s}", py.name)];
        }
        Vec::new()
    });
}

/// The application's own gc.freeze() and gc.unfreeze(), read from the permanent generation's
/// list head with every sample: what advise mode and the learned model's training recordings
/// know of a freeze that is not neurogc's. Free-threaded builds keep no such list, and 3.12 keeps
/// immortal objects in it too: nothing read there.
#[test]
fn the_applications_own_freeze_is_read_from_memory() {
    for_each_python(|py| {
        let target = py.command(&["--seconds", "0.3", "--freeze-cycle", "0.8"]);
        let (lines, err_lines) =
            match launched(py, &["--json", "--interval", "0.2", "--duration", "120"], &target) {
                Ok(out) => out,
                Err(e) => return e,
            };
        let report = report_of(&err_lines);
        let read: Vec<&Value> =
            lines.iter().filter(|l| l["type"] == "window").map(|l| &l["sample"]["frozen"]).collect();
        if py.free_threaded || report["version"].as_str().is_some_and(|v| v.starts_with("3.12.")) {
            return match read.iter().find(|f| !f.is_null()) {
                Some(f) => {
                    vec![format!("{}: frozen read as {f} where the list says nothing of a freeze", py.name)]
                }
                None => Vec::new(),
            };
        }
        // Each phase lasts four windows; the reading changes with it, and only with it.
        let mut seen: Vec<bool> = Vec::new();
        for f in read.iter().filter_map(|f| f.as_bool()) {
            if seen.last() != Some(&f) {
                seen.push(f);
            }
        }
        let want = vec![false, true, false];
        if seen != want {
            return vec![format!("{}: frozen read as {seen:?} (windows {read:?}), want {want:?}", py.name)];
        }
        Vec::new()
    });
}
