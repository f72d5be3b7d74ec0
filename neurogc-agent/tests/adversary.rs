//! Another local user against act mode (workloads/tests/adversary.py, run under an unprivileged
//! account the test creates): planted symlinks and FIFOs at the paths earlier versions used,
//! connecting to the agent's socket while it injects, squatting its name once released. None of
//! it may reach the target, a root-owned file, or the hook's code.
mod common;

use std::{
    os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::Value;

const USER: &str = "neurogc-adversary";

fn adversary_ids() -> (u32, u32) {
    if !Command::new("id").arg(USER).stdout(Stdio::null()).status().unwrap().success() {
        let ok = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
            .status()
            .expect("useradd (passwd package)");
        assert!(ok.success(), "useradd {USER} failed");
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, USER]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (id("-u"), id("-g"))
}

#[test]
fn another_user_can_neither_hijack_nor_disturb_an_injection() {
    let (uid, gid) = adversary_ids();
    let sentinel = std::env::temp_dir().join(format!("neurogc-sentinel-{}", std::process::id()));
    std::fs::write(&sentinel, b"root's secret\n").unwrap();
    std::fs::set_permissions(&sentinel, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (dir, script) = readable_copy("workloads/tests/adversary.py");
    let mut adversary = Command::new("setpriv")
        .args([format!("--reuid={uid}"), format!("--regid={gid}"), "--clear-groups".into()])
        .arg("/usr/bin/python3")
        .arg(&script)
        .args(["8", &sentinel.to_string_lossy()])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux)");
    std::thread::sleep(Duration::from_millis(700)); // its traps are set
    for name in ["debian-bookworm-3.11", "debian-sid-3.14"] {
        let py = python(name);
        let mut t = Target::start(
            &py,
            &py.script_command("target.py", &["busy", "--seconds", "3", "--cycles"], true),
            &[],
        );
        let (mut agent, mut out, mut err) = act_agent(t.pid, &fixture("prefer-5000.onnx"), &[]);
        decision_applied(&mut out, &py.name);
        signal(agent.id(), "-TERM");
        wait_exit(&mut agent, 20, &py.name);
        let original = t.original.clone();
        let found = finished_clean(&py.name, &mut t, &original);
        assert!(found.is_empty(), "{found:?}");
        let refused =
            err.rest(1).iter().filter(|l| l.contains("refused a connection to the hook socket")).count();
        eprintln!("{}: the agent refused {refused} connections", py.name);
    }
    let status = wait_exit(&mut adversary, 30, "adversary");
    assert!(status.success());
    let mut lines = Lines::new(adversary.stdout.take().unwrap());
    let report: Value = serde_json::from_str(&lines.wait_for("names_seen", 5, "adversary")).unwrap();
    eprintln!("adversary: {report}");
    assert!(report["planted"].as_u64().unwrap() > 0, "{report}");
    assert!(
        report["names_seen"].as_u64().unwrap() > 0,
        "the adversary never saw the socket: the test proves nothing"
    );
    // A name can be bound again once the agent has let go of it; nothing may still connect there
    // (and the boot code would not talk to another uid if it did).
    assert_eq!(report["lured"], 0, "a target connected to another user's socket: {report}");
    assert_eq!(report["bytes_received"], 0, "the hook's code went to another user: {report}");
    let meta = std::fs::metadata(&sentinel).unwrap();
    assert_eq!(std::fs::read(&sentinel).unwrap(), b"root's secret\n");
    assert_eq!((meta.uid(), meta.mode() & 0o777), (0, 0o600), "the root-owned file was chowned or chmodded");
    let _ = std::fs::remove_file(&sentinel);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A copy of the repository's `file` the second user can read wherever the checkout is (a clone
/// under `/root` is mode 700), in a directory of root's made here: `create` fails on anything
/// already at that path, a planted link included, so nothing another user placed is followed.
fn readable_copy(file: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("neurogc-adversary-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir); // an earlier run's, with this pid
    std::fs::DirBuilder::new().mode(0o755).create(&dir).expect("a fresh directory for the script");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap(); // past umask
    let copy = dir.join(Path::new(file).file_name().unwrap());
    std::fs::copy(repo_root().join(file), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).unwrap();
    (dir, copy)
}
