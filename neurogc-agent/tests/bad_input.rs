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
    let out = agent().args(["--pid", NO_SUCH_PID]).output().unwrap();
    assert_user_error(&out, &[NO_SUCH_PID, "no process"]);
}

#[test]
fn a_process_root_may_not_read_says_why_without_asking_for_root() {
    // PID 1 here (and in CI) is the VM's init, which the kernel protects from this agent; in a
    // container it is the container's init, and not a CPython interpreter. Either way: one
    // clear line, exit code 2, and never "needs root" to an agent that runs as root.
    let out = agent().args(["--pid", "1", "--duration", "1"]).output().unwrap();
    assert_user_error(&out, &["process 1 ("]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("needs root") && !stderr.contains("must run as root"), "{stderr}");
}

#[test]
fn every_help_fits_80_columns() {
    for sub in [&[][..], &["record"], &["report"], &["replay"], &["fleet"], &["top"]] {
        for flag in ["--help", "-h"] {
            let out = agent().args(sub).arg(flag).output().unwrap();
            assert!(out.status.success(), "{sub:?} {flag}");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.lines().count() > 5, "{sub:?} {flag}: {text}");
            if let Some(wide) = text.lines().find(|l| l.chars().count() > 80) {
                panic!("{sub:?} {flag}: a line wider than 80 columns: {wide:?}");
            }
            // -h is the short help: a screen, the rest is --help's.
            if flag == "-h" {
                assert!(text.lines().count() <= 40, "{sub:?} -h: {} lines: {text}", text.lines().count());
            }
            // Each example on one line: none wrapped onto the next.
            let examples =
                text.lines().skip_while(|l| *l != "Examples:").skip(1).take_while(|l| !l.is_empty());
            for l in examples {
                assert!(l.starts_with("  ") && l.contains("neurogc-agent"), "{sub:?} {flag}: {l:?}");
            }
        }
    }
}

#[test]
fn a_negative_number_is_out_of_range_not_a_flag() {
    // clap's own answer was a tip to write `-- -5`, which here would make -5 the command.
    for args in [&["-d", "-5"][..], &["--pid", "-3"], &["top", "-i", "-1"]] {
        let out = agent().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(args[args.len() - 1]) && !stderr.contains("tip:"), "{args:?}: {stderr}");
    }
}

#[test]
fn no_process_given_names_both_ways_to_give_one() {
    // clap named `--pid <PID>` alone as required, with a usage that made it look needed beside
    // a command to launch.
    for args in [&[][..], &["record", "-o", "t.ngc"], &["--mode", "observe"]] {
        let out = agent().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("-- COMMAND") && stderr.contains("(--pid <PID> | -- <COMMAND>...)"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains('\x1b') && out.stdout.is_empty(), "{args:?}: {stderr}");
    }
}

#[test]
fn all_is_the_fleet_wherever_it_stands() {
    // The README's `neurogc-agent --all …`; after another option clap offered "--allow-disable".
    let out = agent().args(["--mode", "observe", "--all"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("neurogc-agent fleet") && !stderr.contains("allow-disable"), "{stderr}");
    let out = agent().args(["--metrics-addr", "nonsense", "--all"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nonsense") && !stderr.contains("allow-disable"), "{stderr}");
}

/// Within pid_max, and not running in any test run.
const NO_SUCH_PID: &str = "4194303";

/// clap's refusals: exit code 2, a message naming the flag and the value, nothing on stdout, and
/// never a panic (`--interval 1e300` once reached `Duration::from_secs_f64` and panicked).
fn assert_refused(args: &[&str], mention: &str) {
    let started = std::time::Instant::now();
    let out = agent().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked") && stderr.contains(mention), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{args:?} took {:?}", started.elapsed());
}

#[test]
fn every_numeric_flag_is_range_checked() {
    let cases: [(&str, &[&str]); 10] = [
        ("--interval", &["0", "-1", "1e300", "1e-10", "nan", "inf", "3601", "x", ""]),
        ("--census", &["0", "0.5", "-1", "3601", "nan", "inf", "x", ""]),
        ("--duration", &["0", "-5", "1e300", "nan", "-inf", "31536001"]),
        ("--pid", &["0", "-1", "4194305", "99999999999", "x", "1.5"]),
        ("--memory-budget", &["0", "-1%", "1001%", "nan", "inf", "1e300", "8MiB", "2TiB", "5MB", "x%"]),
        ("--pause-budget", &["0ms", "10", "50us", "11s", "nan ms", "-1ms", "on", ""]),
        ("--gc-budget", &["0%", "0.01%", "51%", "nan", "-1%", "x"]),
        ("--freeze-after", &["-1", "86401", "nan", "inf", "x"]),
        ("--threshold-min", &["1,2", "1,2,3,4", "-1,2,2", "2147483648,1,1", "a,b,c", ""]),
        ("--threshold-max", &["1,2", "1,2,3,4", "-1,2,2", "9e99,1,1", ",,"]),
    ];
    for (flag, values) in cases {
        for value in values {
            let mut args = vec![format!("{flag}={value}")];
            if flag != "--pid" {
                args.extend(["--pid".to_owned(), NO_SUCH_PID.to_owned()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_refused(&args, flag);
        }
    }
    assert_refused(
        &["--pid", NO_SUCH_PID, "--threshold-min", "5000,10,10", "--threshold-max", "1000,10,10"],
        "must not exceed the maximum",
    );
}

/// Property: whatever string a numeric flag gets, the agent ends with exit code 2 (the value is
/// refused, or it is valid and the PID does not exist), quickly, and never panics.
#[test]
fn any_value_of_a_numeric_flag_ends_cleanly() {
    const ALPHABET: &[&str] =
        &["0", "1", "7", "9", "-", "+", ".", "e", "E", "inf", "nan", ",", " ", "x", "00000000000000000000"];
    let flags = [
        "--interval",
        "--census",
        "--duration",
        "--memory-budget",
        "--pause-budget",
        "--gc-budget",
        "--freeze-after",
        "--threshold-min",
        "--threshold-max",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..350 {
        let flag = flags[i % flags.len()];
        let len = (next() % 8) as usize;
        let value: String = (0..len).map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize]).collect();
        let out = agent().arg(format!("{flag}={value}")).args(["--pid", NO_SUCH_PID]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}={value:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{flag}={value:?}: {stderr}");
    }
}

/// A model or a trace must be a regular file of bounded size: a FIFO never hangs the agent, a
/// device or a huge file never fills its memory, a directory or a binary file is named as such.
#[test]
fn model_and_trace_inputs_are_bounded_regular_files() {
    let dir = std::env::temp_dir().join(format!("neurogc-bad-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let sparse = dir.join("sparse");
    std::fs::File::create(&sparse).unwrap().set_len(2 << 30).unwrap();
    let binary = dir.join("binary");
    std::fs::write(&binary, [0xffu8, 0xfe, 0x00, 0x80, b'\n']).unwrap();
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    for (file, says) in [
        (path(&fifo), "is a FIFO"),
        ("/dev/zero".to_owned(), "is a device"),
        (path(&dir), "is a directory"),
        (path(&sparse), "longer than"),
        (path(&binary), "not text"),
    ] {
        assert_refused(&["replay", &file], says);
        assert_refused(&["report", &file], says);
    }
    // The model is read after the target is resolved: give it a live one.
    let mut target =
        Command::new("/usr/bin/python3").args(["-c", "import time; time.sleep(30)"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = target.id().to_string();
    for (file, says) in [
        (path(&fifo), "is a FIFO"),
        ("/dev/zero".to_owned(), "is a device"),
        (path(&dir), "is a directory"),
        (path(&sparse), "more than the 67108864"),
    ] {
        let out = agent().args(["--pid", &pid, "--mode", "advise", "--model", &file]).output().unwrap();
        assert_user_error(&out, &[says]);
    }
    let _ = target.kill();
    let _ = target.wait();
    let _ = std::fs::remove_dir_all(&dir);
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
fn python_stripped_of_symtab_without_usdt_and_without_exported_collector_entry() {
    let m = manifest();
    let fixture = &m["stripped"]["unobservable"];
    assert!(!fixture.is_null(), "the manifest has no unobservable fixture (pyenv 3.11 missing?)");
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
    assert_user_error(
        &out,
        &[
            library,
            "CPython 3.11",
            "neither USDT",
            "gc_collect_main",
            "stripped",
            "PyGC_Collect is not exported",
        ],
    );
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

/// Fleet mode's and the live view's flags: refused with exit code 2 before anything is loaded.
#[test]
fn fleet_flags_are_checked() {
    for args in [
        &["fleet", "--max-targets", "0"][..],
        &["fleet", "--max-targets", "4097"],
        &["top", "--max-targets=-1"],
        &["fleet", "--interval", "0"],
        &["fleet", "--duration", "nan"],
    ] {
        assert_refused(args, args[1].split('=').next().unwrap());
    }
    assert_refused(&["fleet", "--include", "gunicorn"], "KEY=PATTERN");
    assert_refused(&["fleet", "--exclude", "user=root"], "unknown key");
    assert_refused(&["fleet", "--include", "comm="], "1 to 4096 characters");
    assert_refused(&["fleet", "--metrics-addr", "localhost"], ":9464");
    assert_refused(&["fleet", "--metrics-addr", ":99999"], ":9464");
    assert_refused(&["fleet", "--python-gc-names"], "--metrics-addr");
    assert_refused(&["--all", "--sort", "p99"], "--sort");
    // A port another program holds: one line, and the agent loads nothing.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = agent().args(["fleet", "--metrics-addr", &addr, "--duration", "5"]).output().unwrap();
    assert_user_error(&out, &[&addr, "cannot listen", "another exporter"]);
    // The live view needs a terminal.
    let out = agent().args(["top", "--duration", "5"]).stdout(std::process::Stdio::piped()).output().unwrap();
    assert_user_error(&out, &["top draws on a terminal", "fleet --metrics-addr"]);
}
