//! Input the agent cannot work with: one clear line on stderr, exit code 2, target untouched.
mod common;

use std::process::{Command, Output};

use common::*;

fn assert_user_error(out: &Output, must_mention: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit code for {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected, got {stderr}");
    assert!(lines[0].starts_with("neurogc-agent: error: "), "{stderr}");
    for word in must_mention {
        assert!(lines[0].contains(word), "{word:?} missing from {stderr}");
    }
    assert!(out.stdout.is_empty(), "nothing on stdout for an error");
}

#[test]
fn pid_that_does_not_exist() {
    let out = agent().args(["--pid", "999999999"]).output().unwrap();
    assert_user_error(&out, &["999999999", "no process"]);
}

#[test]
fn process_that_is_not_python() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let out = agent().args(["--pid", &pid]).output().unwrap();
    let still_running = alive(sleeper.id() as i32);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_user_error(&out, &[&pid, "sleep", "not a CPython interpreter"]);
    assert!(still_running, "the target must survive the agent's refusal");
}

#[test]
fn python_stripped_of_symtab_and_without_usdt() {
    let m = manifest();
    let fixture = &m["stripped"];
    assert!(!fixture.is_null(), "the manifest has no stripped fixture (pyenv 3.11 missing?)");
    let argv: Vec<&str> = fixture["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]).args(["-c", "import time; time.sleep(30)"]);
    for (k, v) in fixture["env"].as_object().unwrap() {
        cmd.env(k, v.as_str().unwrap());
    }
    let mut target = cmd.spawn().unwrap();
    // Give the dynamic loader time to map the stripped libpython.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = agent().args(["--pid", &target.id().to_string()]).output().unwrap();
    let still_running = alive(target.id() as i32);
    let _ = target.kill();
    let _ = target.wait();
    let library = fixture["library"].as_str().unwrap();
    assert_user_error(&out, &[library, "CPython 3.11", "neither USDT", "gc_collect_main", "stripped"]);
    assert!(still_running, "the target must survive the agent's refusal");

    // Launch mode refuses the same build, and does not leave the process it started behind.
    let mut cmd = agent();
    cmd.arg("--").args(&argv).args(["-c", "pass"]);
    for (k, v) in fixture["env"].as_object().unwrap() {
        cmd.env(k, v.as_str().unwrap());
    }
    assert_user_error(&cmd.output().unwrap(), &[library, "neither USDT"]);
}

#[test]
fn forced_probe_kind_the_build_lacks() {
    let py = python("pyenv-");
    let out = agent().args(["--probe", "usdt", "--"]).args(&py.argv).args(["-c", "pass"]).output().unwrap();
    assert_user_error(&out, &["no USDT probes", "--probe auto"]);
}

#[test]
fn command_that_does_not_exist_or_is_not_python() {
    assert_user_error(&agent().args(["--", "/nonexistent/python3"]).output().unwrap(), &["cannot run"]);
    assert_user_error(
        &agent().args(["--", "/bin/true"]).output().unwrap(),
        &["/bin/true", "before a CPython interpreter started"],
    );
}

#[test]
fn corrupt_or_foreign_trace() {
    let dir = std::env::temp_dir().join(format!("neurogc-bad-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let truncated = dir.join("truncated.jsonl");
    std::fs::write(&truncated, "{\"type\":\"attach\",\"schema\":1,\"sample\":{\"ts_ns\":1,\"thresholds\":null,\"count0\":null,\"rss_bytes\":0,\"cpu_ns\":0,\"freeze_count\":null}}\n{\"type\":\"gc\",\"gen\":0,\"dur").unwrap();
    assert_user_error(
        &agent().arg("--replay").arg(&truncated).output().unwrap(),
        &["truncated.jsonl:2", "not a neurogc JSON line"],
    );
    let headless = dir.join("headless.jsonl");
    std::fs::write(&headless, "{\"type\":\"gc\",\"gen\":0,\"duration_ns\":5,\"collected\":1}\n").unwrap();
    assert_user_error(&agent().arg("--replay").arg(&headless).output().unwrap(), &["before the attach line"]);
    assert_user_error(
        &agent().args(["--replay", "/nonexistent/trace.jsonl"]).output().unwrap(),
        &["cannot open trace"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}
