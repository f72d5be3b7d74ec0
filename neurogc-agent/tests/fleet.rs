//! Fleet mode against real processes and a real Prometheus: a Debian build (USDT), a Debian
//! build in a chroot with its own pid and mount namespaces, and a build stripped of `.symtab`
//! and USDT started after the agent — all found, each counted exactly as its own gc.callbacks
//! counts, scraped by Prometheus (Debian's package, started here on loopback) and queried through
//! its HTTP API; an exited process's series go; an agent restart duplicates no series.
mod common;

use std::{
    collections::BTreeMap,
    io::{Read, Write},
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// A cgroup named the way containerd names a container's, so that the agent reads a container
/// id off it; only the test's own processes live in it (`--include container=ID`).
struct Cgroup {
    path: PathBuf,
    parent: PathBuf,
    id: String,
}

impl Cgroup {
    fn new() -> Cgroup {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        let root = mounts
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
            })
            .expect("a cgroup2 mount");
        // Unique per test (they run in parallel) and per test process.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seed = (u64::from(std::process::id()) << 8 | n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let id = format!("{seed:016x}").repeat(4);
        let parent = root.join(format!("neurogc-fleet-test-{}-{n}", std::process::id()));
        let path = parent.join(format!("cri-containerd-{id}.scope"));
        std::fs::create_dir_all(&path).unwrap();
        Cgroup { path, parent, id }
    }

    /// `argv` started inside this cgroup (it joins before exec, so it is there from its first
    /// instruction).
    fn spawn(&self, argv: &[String], env: &[(&str, &str)]) -> Child {
        use std::os::unix::process::CommandExt;
        let procs = self.path.join("cgroup.procs");
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped());
        // SAFETY: only async-signal-safe work between fork and exec (open, write, close).
        unsafe {
            cmd.pre_exec(move || std::fs::write(&procs, b"0"));
        }
        cmd.spawn().unwrap_or_else(|e| panic!("spawning {argv:?}: {e}"))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
        let _ = std::fs::remove_dir(&self.parent);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// `name{labels} value` lines of an exposition, as (name, labels, value).
fn samples(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels
                .trim_end_matches('}')
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
                .collect();
            Some((name.to_owned(), labels, value.parse().ok()?))
        })
        .collect()
}

/// The agent's own value of `name` for `pid` and generation `g`.
fn agent_value(port: u16, name: &str, pid: i32, g: usize) -> Option<f64> {
    let text = http_get(port, "/metrics")?;
    samples(&text).into_iter().find_map(|(n, l, v)| {
        (n == name && l.get("pid") == Some(&pid.to_string()) && l.get("generation") == Some(&g.to_string()))
            .then_some(v)
    })
}

fn agent_counts(port: u16, pid: i32) -> Option<[f64; 3]> {
    let mut out = [0.0; 3];
    for (g, slot) in out.iter_mut().enumerate() {
        *slot = agent_value(port, "cpython_gc_collections_total", pid, g)?;
    }
    Some(out)
}

fn wait_until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {secs}s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Prometheus {
    fn start(target_port: u16) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("neurogc-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: neurogc\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .expect("prometheus (Debian's package; .ci/run installs it)");
        wait_until(30, "prometheus ready", || http_get(port, "/-/ready"));
        Prometheus { child, port, dir }
    }

    /// An instant query's result vector: (labels, value).
    fn query(&self, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let body = http_get(self.port, &format!("/api/v1/query?query={enc}")).expect("prometheus query");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{q}: {v}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let labels = r["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect();
                (labels, r["value"][1].as_str().unwrap().parse().unwrap())
            })
            .collect()
    }

    /// Waits until Prometheus's latest sample of `q` equals `want` (it scrapes every second).
    fn wait_value(&self, q: &str, want: f64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.query(q);
            if got.len() == 1 && got[0].1 == want {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: Prometheus has {got:?} for {q}, the agent {want}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One workload (cycles.py --wait): its host PID, its stdin, its lines.
struct Workload {
    name: String,
    child: Child,
    pid: i32,
    out: Lines,
}

impl Workload {
    fn start(
        cg: &Cgroup,
        name: &str,
        argv: Vec<String>,
        env: &[(&str, &str)],
        in_container: bool,
    ) -> Workload {
        let mut child = cg.spawn(&argv, env);
        let mut out = Lines::new(child.stdout.take().unwrap());
        out.wait_for("ready", 30, name);
        let pid = if in_container {
            let p = child.id() as i32;
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children"))
                .unwrap()
                .split_whitespace()
                .next()
                .expect("unshare's child")
                .parse()
                .unwrap()
        } else {
            child.id() as i32
        };
        Workload { name: name.to_owned(), child, pid, out }
    }

    /// Lets it run, then returns its own report (it lingers afterwards, collecting nothing).
    fn run(&mut self) -> Value {
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
        let line = self.out.wait_for("baseline_collections", 60, &self.name);
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        kill(&mut self.child);
        // unshare --kill-child takes its child along.
    }
}

fn start_agent(agent_port: u16, cg: &Cgroup) -> (Child, Lines) {
    let mut child = agent()
        .args(["fleet", "--metrics-addr", &format!("127.0.0.1:{agent_port}"), "--interval", "0.5"])
        .args(["--include", &format!("container={}", cg.id)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = Lines::new(child.stderr.take().unwrap());
    (child, err)
}

fn workload_args() -> Vec<&'static str> {
    vec!["--wait", "--iterations", "60000", "--manual", "5000", "--linger", "120"]
}

#[test]
fn fleet_finds_every_python_counts_each_exactly_and_prometheus_scrapes_it() {
    let m = manifest();
    let cg = Cgroup::new();
    let debian = python("debian-bookworm-3.11");
    let chrooted = python("debian-trixie-3.13");
    let free_threaded = python("source-3.13t");
    let stripped = &m["stripped"];
    assert!(!stripped.is_null(), "the manifest has no stripped fixture (pyenv 3.11 missing?)");
    let args = workload_args();

    // Two processes before the agent: found by its /proc scan.
    let mut a = Workload::start(&cg, "debian 3.11", debian.command(&args), &[], false);
    let mut b = Workload::start(
        &cg,
        "trixie 3.13 in a pid+mount namespace",
        chrooted.container_command(&args),
        &[],
        true,
    );
    // A free-threaded build: its threads enter the collector at once.
    let mut d = Workload::start(&cg, "free-threaded 3.13t", free_threaded.command(&args), &[], false);
    let agent_port = free_port();
    let prometheus = Prometheus::start(agent_port);
    let (mut agent_child, mut agent_err) = start_agent(agent_port, &cg);
    for w in [&a, &b, &d] {
        wait_until(20, &format!("{} attached", w.name), || agent_counts(agent_port, w.pid));
    }
    // One after: found at its exec, without USDT or .symtab.
    let argv: Vec<String> = stripped["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .chain(std::iter::once(repo_root().join("workloads/tests/cycles.py").to_string_lossy().into_owned()))
        .chain(args.iter().map(|s| s.to_string()))
        .collect();
    let env: Vec<(String, String)> = stripped["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let exec_at = Instant::now();
    let mut c = Workload::start(&cg, "stripped pyenv 3.11, started after the agent", argv, &env, false);
    let attached_in = wait_until(10, "the stripped build attached", || {
        agent_counts(agent_port, c.pid).map(|_| exec_at.elapsed())
    });
    eprintln!("stripped build attached {attached_in:?} after its exec");

    let mut errors = Vec::new();
    for w in [&mut a, &mut b, &mut c, &mut d] {
        // The workload waits for "go": nothing collects, so this is the count at "go".
        let before = agent_counts(agent_port, w.pid).unwrap();
        let before_collected: Vec<f64> = (0..3)
            .map(|g| agent_value(agent_port, "cpython_gc_collected_objects_total", w.pid, g).unwrap())
            .collect();
        let report = w.run();
        let want: Vec<f64> = (0..3).map(|g| report["collections"][g].as_f64().unwrap()).collect();
        let want_collected: Vec<f64> = (0..3).map(|g| report["collected"][g].as_f64().unwrap()).collect();
        // Everything the workload did is in the ring once it reported: two windows drain it.
        std::thread::sleep(Duration::from_millis(1200));
        let after = agent_counts(agent_port, w.pid).unwrap();
        for g in 0..3 {
            let seen = after[g] - before[g];
            let collected = agent_value(agent_port, "cpython_gc_collected_objects_total", w.pid, g).unwrap()
                - before_collected[g];
            let hist = agent_value(agent_port, "cpython_gc_duration_seconds_count", w.pid, g).unwrap();
            if seen != want[g] || collected != want_collected[g] || hist != after[g] {
                errors.push(format!(
                    "{}: gen{g}: agent counted {seen} collections ({collected} collected, histogram {hist} of {}), gc.callbacks {} ({})",
                    w.name, after[g], want[g], want_collected[g]
                ));
            }
            // Prometheus scraped the same: the histogram's count is the workload's own count.
            let q = format!("cpython_gc_duration_seconds_count{{pid=\"{}\",generation=\"{g}\"}}", w.pid);
            prometheus.wait_value(&q, after[g], &w.name);
        }
        // The free-threaded collector runs fewer (its threshold grows with the live heap).
        let least = if w.name.starts_with("free-threaded") { 10.0 } else { 50.0 };
        assert!(
            want[0] > least && want[2] > 0.0,
            "{}: too few collections to prove anything: {want:?}",
            w.name
        );
    }
    // Labels: the container id read off the cgroup, the version, the comm.
    let series = prometheus.query(&format!("cpython_gc_time_share{{container_id=\"{}\"}}", cg.id));
    let pids: Vec<String> = series.iter().map(|(l, _)| l["pid"].clone()).collect();
    for w in [&a, &b, &c, &d] {
        assert!(pids.contains(&w.pid.to_string()), "{} has no GC share series: {series:?}", w.name);
    }
    let versions: Vec<&str> = series.iter().map(|(l, _)| l["python_version"].as_str()).collect();
    assert!(versions.contains(&"3.11.2") && versions.contains(&"3.11.7"), "{versions:?}");
    assert!(versions.iter().any(|v| v.starts_with("3.13.")), "{versions:?}");
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));

    // The Grafana dashboard's queries run on this Prometheus and find these series.
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "30s")
                .replace("$container", &cg.id)
                .replace("$comm", ".*");
            let got = prometheus.query(&expr);
            assert!(!got.is_empty(), "dashboard panel {:?}: {expr} finds nothing", panel["title"]);
        }
    }

    // An exited process's series go, from the agent and then from Prometheus (stale).
    let gone = a.pid;
    drop(a);
    wait_until(10, "the exited process's series dropped by the agent", || {
        let text = http_get(agent_port, "/metrics")?;
        (!text.contains(&format!("pid=\"{gone}\""))).then_some(())
    });
    wait_until(20, "the exited process's series stale in Prometheus", || {
        prometheus.query(&format!("cpython_gc_collections_total{{pid=\"{gone}\"}}")).is_empty().then_some(())
    });

    // A restarted agent exports the same series, once each.
    signal(agent_child.id(), "-TERM");
    assert!(wait_exit(&mut agent_child, 20, "agent").success(), "{:?}", agent_err.rest(1));
    let (mut agent_child, _err) = start_agent(agent_port, &cg);
    for w in [&b, &c, &d] {
        wait_until(20, &format!("{} attached again", w.name), || agent_counts(agent_port, w.pid));
    }
    std::thread::sleep(Duration::from_secs(3));
    let dups = prometheus.query("count by (pid, generation) (cpython_gc_collections_total) > 1");
    assert!(dups.is_empty(), "duplicate series after a restart: {dups:?}");
    let per_pid = prometheus
        .query(&format!("count by (pid) (cpython_gc_collections_total{{container_id=\"{}\"}})", cg.id));
    assert_eq!(per_pid.len(), 3, "series of exited or foreign processes after the restart: {per_pid:?}");
    assert!(per_pid.iter().all(|(_, n)| *n == 3.0), "one series per generation: {per_pid:?}");

    // A SIGKILLed fleet agent leaves nothing behind: the USDT semaphores it raised go back to 0
    // with its file descriptors, and the processes run on.
    let binary = chrooted.usdt_binary().unwrap();
    assert_eq!(semaphores(b.pid, &binary), [1, 1], "armed: the kernel raised the semaphores");
    signal(agent_child.id(), "-KILL");
    wait_exit(&mut agent_child, 20, "agent");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(semaphores(b.pid, &binary), [0, 0], "semaphores left raised by a SIGKILLed agent");
    assert!(alive(b.pid) && alive(c.pid) && alive(d.pid), "a SIGKILLed agent took a process with it");
}

/// The capabilities deploy/daemonset.yaml grants, as `setpriv --bounding-set` names them.
fn daemonset_capabilities() -> Vec<String> {
    let yaml = std::fs::read_to_string(repo_root().join("deploy/daemonset.yaml")).unwrap();
    let mut caps = Vec::new();
    let mut in_add = false;
    for line in yaml.lines().map(str::trim) {
        if line.starts_with('#') {
            continue;
        }
        if line == "add:" {
            in_add = true;
        } else if in_add && let Some(cap) = line.strip_prefix("- ") {
            caps.push(cap.to_lowercase());
        } else if in_add {
            in_add = false;
        }
    }
    caps
}

/// Whether an agent restricted to `caps` (root, but only these in its bounding set) observes
/// `pid` within a few seconds.
fn observes_with(caps: &[String], cg: &Cgroup, pid: i32) -> bool {
    let port = free_port();
    let bounding = format!("-all,{}", caps.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(","));
    let mut child = Command::new("setpriv")
        .arg(format!("--bounding-set={bounding}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_neurogc-agent"))
        .args(["fleet", "--metrics-addr", &format!("127.0.0.1:{port}"), "--duration", "8"])
        .args(["--include", &format!("container={}", cg.id)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut seen = false;
    while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        if agent_counts(port, pid).is_some() {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    kill(&mut child);
    seen
}

/// The DaemonSet's capabilities are enough, and each one is needed: the agent runs with exactly
/// that bounding set, then with each one left out, against a process of another user.
#[test]
fn daemonset_capabilities_are_sufficient_and_each_is_needed() {
    let caps = daemonset_capabilities();
    assert!(caps.len() >= 3, "no capabilities read from deploy/daemonset.yaml: {caps:?}");
    let cg = Cgroup::new();
    let py = python("debian-bookworm-3.11");
    // Another user's process: reading its maps and memory takes the ptrace capability.
    let mut argv =
        vec!["setpriv".to_owned(), "--reuid=65534".into(), "--regid=65534".into(), "--clear-groups".into()];
    let script = std::env::temp_dir().join(format!("neurogc-caps-{}.py", std::process::id()));
    std::fs::copy(repo_root().join("workloads/tests/cycles.py"), &script).unwrap();
    argv.extend(py.argv.iter().cloned());
    argv.extend([script.to_string_lossy().into_owned(), "--wait".into(), "--seconds".into(), "60".into()]);
    let mut w = Workload::start(&cg, "nobody's debian 3.11", argv, &[], false);
    writeln!(w.child.stdin.as_mut().unwrap(), "go").unwrap();
    assert!(observes_with(&caps, &cg, w.pid), "the DaemonSet's capabilities {caps:?} do not suffice");
    for (i, cap) in caps.iter().enumerate() {
        let fewer: Vec<String> =
            caps.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| c.clone()).collect();
        assert!(!observes_with(&fewer, &cg, w.pid), "{cap} is not needed: the agent observed without it");
    }
    let _ = std::fs::remove_file(&script);
}

/// The live view on a real terminal (a pty from `script`, 80 columns): it lists a Python process
/// with its numbers, changes its sort on `s` and quits on `q`, leaving the alternate screen.
#[test]
fn top_lists_python_processes_and_quits_on_q() {
    let cg = Cgroup::new();
    let py = python("debian-bookworm-3.11");
    let mut w = Workload::start(&cg, "debian 3.11", py.command(&["--wait", "--seconds", "30"]), &[], false);
    writeln!(w.child.stdin.as_mut().unwrap(), "go").unwrap();
    let shell = format!(
        "stty cols 80 rows 24; exec {} top --interval 0.5 --include container={}",
        env!("CARGO_BIN_EXE_neurogc-agent"),
        cg.id
    );
    let mut top = Command::new("script")
        .args(["-qfec", &shell, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut screen = top.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut raw = Vec::new();
        let _ = screen.read_to_end(&mut raw);
        raw
    });
    std::thread::sleep(Duration::from_secs(4));
    top.stdin.as_mut().unwrap().write_all(b"s").unwrap();
    std::thread::sleep(Duration::from_secs(1));
    top.stdin.as_mut().unwrap().write_all(b"q").unwrap();
    let status = wait_exit(&mut top, 10, "top after q");
    let raw = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    assert!(status.success(), "top exited {status:?}: {raw}");
    assert!(raw.contains("\x1b[?1049h") && raw.contains("\x1b[?1049l"), "alternate screen entered and left");
    // Redraws send only the cells that changed: look for whole words, not whole lines.
    for needle in [
        "neurogc top",
        &w.pid.to_string(),
        "python3.11",
        "3.11.2",
        "FULL P99",
        "HISTORY",
        "longest",
        "↑↓ chart",
    ] {
        assert!(raw.contains(needle), "{needle:?} not drawn: {raw:?}");
    }
}

#[test]
fn fleet_and_top_end_quietly_when_their_reader_goes_away() {
    // `neurogc-agent fleet 2>&1 | head -1`: every log line after the first meets a pipe with
    // no reader (here, the first too). The agent runs its course and ends 0, with no panic.
    let mut fleet = agent()
        .args(["fleet", "--duration", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop((fleet.stdout.take(), fleet.stderr.take()));
    let status = wait_exit(&mut fleet, 30, "fleet with its output closed");
    assert_eq!(status.code(), Some(0), "fleet ended {status:?}");
    // `top | head -1`: its output is no terminal, which it needs: the usage error, said once,
    // and exit 2 (not a panic), with standard error read or closed alike.
    let out = agent().arg("top").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = out;
    drop(out.stdout.take());
    let out = out.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("top draws on a terminal") && stderr.lines().count() == 1, "{stderr}");
    let mut top = agent().arg("top").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop((top.stdout.take(), top.stderr.take()));
    let status = wait_exit(&mut top, 30, "top with its output closed");
    assert_eq!(status.code(), Some(2), "top ended {status:?}");
}

/// A process that execs a new program is re-resolved: its old probes go (the kernel drops its
/// configuration at the exec), the new image is found and counted exactly.
#[test]
fn a_process_that_execs_is_observed_again() {
    let cg = Cgroup::new();
    let py = python("debian-bookworm-3.11");
    let cycles = repo_root().join("workloads/tests/cycles.py");
    let exec_into = format!(
        "import gc, os, sys\nfor i in range(3000):\n    a = []; a.append(a)\ngc.collect()\nprint('ready', flush=True)\nsys.stdin.readline()\nos.execv(sys.executable, [sys.executable, {cycles:?}, '--wait', '--iterations', '40000', '--linger', '60'])\n",
        cycles = cycles.to_string_lossy()
    );
    let mut argv = py.argv.clone();
    argv.extend(["-c".to_owned(), exec_into]);
    let mut w = Workload::start(&cg, "debian 3.11 before its exec", argv, &[], false);
    let port = free_port();
    let (mut agent_child, mut err) = start_agent(port, &cg);
    err.wait_for(&format!("observing {}", w.pid), 20, "agent");
    writeln!(w.child.stdin.as_mut().unwrap(), "exec").unwrap();
    w.out.wait_for("ready", 30, "cycles.py after the exec");
    err.wait_for("exec'd a new program", 10, "agent");
    err.wait_for(&format!("observing {}", w.pid), 10, "agent, after the exec");
    let before = wait_until(10, "series after the exec", || agent_counts(port, w.pid));
    let report = w.run();
    std::thread::sleep(Duration::from_millis(1200));
    let after = agent_counts(port, w.pid).unwrap();
    for g in 0..3 {
        assert_eq!(
            after[g] - before[g],
            report["collections"][g].as_f64().unwrap(),
            "gen{g} after the exec: agent {before:?} → {after:?}, the target {}",
            report["collections"]
        );
    }
    signal(agent_child.id(), "-TERM");
    wait_exit(&mut agent_child, 20, "agent");
}

/// SIGKILL of the fleet agent at random moments (seeded, printed) and at aimed ones (right after
/// it armed a process, while it arms them): every process keeps running, its USDT semaphores are
/// back to 0, and it finishes its work with correct counts of its own.
#[test]
fn fleet_agent_killed_at_any_moment_leaves_every_process_as_it_was() {
    let rng = Rng::from_env("NEUROGC_TORTURE_SEED");
    let cg = Cgroup::new();
    let pys = [python("debian-bookworm-3.11"), python("debian-trixie-3.13")];
    let args = ["--wait", "--seconds", "25", "--threads", "1"];
    let mut ws: Vec<Workload> = pys
        .iter()
        .map(|py| Workload::start(&cg, &py.name, py.container_command(&args), &[], py.in_container()))
        .collect();
    for w in &mut ws {
        writeln!(w.child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let binaries: Vec<_> = pys.iter().map(|p| p.usdt_binary().unwrap()).collect();
    for trial in 0..8 {
        let port = free_port();
        let (mut agent_child, mut err) = start_agent(port, &cg);
        // Even trials: aimed just after the agent said it armed a process; odd: uniformly
        // within its first 1.5 s (start-up, scan, resolving, arming, running).
        if trial % 2 == 0 {
            err.wait_for("observing", 20, "agent");
        } else {
            std::thread::sleep(Duration::from_millis(rng.next() % 1500));
        }
        signal(agent_child.id(), "-KILL");
        wait_exit(&mut agent_child, 20, "agent");
        std::thread::sleep(Duration::from_millis(100));
        for (w, binary) in ws.iter().zip(&binaries) {
            assert!(alive(w.pid), "trial {trial}: {} died with the agent", w.name);
            assert_eq!(
                semaphores(w.pid, binary),
                [0, 0],
                "trial {trial}: {} has raised semaphores left",
                w.name
            );
        }
    }
    for w in &mut ws {
        let line = w.out.wait_for("baseline_collections", 60, &w.name);
        let report: Value = serde_json::from_str(&line).unwrap();
        assert!(report["collections"][0].as_i64().unwrap() > 100, "{}: {report}", w.name);
        assert!(
            wait_exit(&mut w.child, 10, &w.name).success(),
            "{} did not finish its work cleanly after 8 killed agents",
            w.name
        );
    }
}

/// Fleet mode's garbage census: a process leaving cycles of known kinds (3:1:1, `Tok` 60% of
/// the objects) gets `cpython_gc_garbage_objects_total{type}` series that read its mix, under
/// a bounded set of labels; they go when it exits.
#[test]
fn fleet_exports_what_each_process_garbage_is() {
    let cg = Cgroup::new();
    let py = python("debian-bookworm-3.11");
    let mut argv = py.argv.clone();
    argv.extend([py.script("garbage_mix.py"), "8".to_owned()]);
    let port = free_port();
    let mut agent_child = agent()
        .args(["fleet", "--census", "1", "--metrics-addr", &format!("127.0.0.1:{port}"), "--interval", "0.5"])
        .args(["--include", &format!("container={}", cg.id)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = Lines::new(agent_child.stderr.take().unwrap());
    wait_until(20, "the agent's metrics", || http_get(port, "/metrics"));
    let mut child = cg.spawn(&argv, &[]);
    let pid = child.id().to_string();
    err.wait_for(&format!("observing {pid}"), 20, "agent");
    let mut out = Lines::new(child.stdout.take().unwrap());
    let truth: Value = serde_json::from_str(&out.wait_for("truth", 30, "garbage_mix.py")).unwrap();
    let garbage = || -> Option<BTreeMap<String, f64>> {
        let text = http_get(port, "/metrics")?;
        let by_type: BTreeMap<String, f64> = samples(&text)
            .into_iter()
            .filter(|(n, l, _)| n == "cpython_gc_garbage_objects_total" && l.get("pid") == Some(&pid))
            .map(|(_, l, v)| (l["type"].clone(), v))
            .collect();
        // Three censuses at least: what start-up freed is a small part of it by then.
        (by_type.get("Tok").copied().unwrap_or(0.0) > 1500.0).then_some(by_type)
    };
    let by_type = wait_until(30, "Tok in the garbage series", garbage);
    let total: f64 = by_type.values().sum();
    let share = by_type["Tok"] / total;
    let want = truth["truth"]["Tok"].as_f64().unwrap();
    assert!((share - want).abs() <= 0.05, "Tok {share:.3} of the garbage, truth {want:.3}: {by_type:?}");
    assert!(by_type.contains_key("Node"), "{by_type:?}");
    assert!(by_type.len() <= 11, "labels unbounded: {by_type:?}");
    wait_exit(&mut child, 30, "garbage_mix.py");
    wait_until(10, "series gone after the exit", || {
        let text = http_get(port, "/metrics")?;
        (!text.contains(&format!("pid=\"{pid}\""))).then_some(())
    });
    signal(agent_child.id(), "-TERM");
    wait_exit(&mut agent_child, 20, "agent");
}
