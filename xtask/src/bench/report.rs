//! `cargo xtask bench report`: `neurogc-agent report` on a 10-million-collection trace, wall time
//! and peak RSS (target: ≤ 5 s and ≤ 200 MiB), for the recording and for the same records as a
//! plain --json stream.
//!
//! The trace is synthetic but shaped like a real service's: three generations (≈ 89/10/1 %),
//! log-normal-ish pauses, two threads, a window a second, a threshold change a third of the way
//! in, and a Python stack on every collection (2,000 stacks of 5–30 of 300 frames). It is written with the agent's own writer, so its size per collection is what a recording
//! of that workload costs on disk.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result};
use neurogc_trace::{
    Attach, Collection, FrameDef, Record, Sample, StackDef, StackStatus, TraceWriter, Window, features::NAMES,
};

use crate::{bench::measure::wait_rusage, build_release_agent, workspace_root};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Distinct frames and stacks in the synthetic traces.
const FRAMES: u32 = 300;
const STACKS: u32 = 2000;

fn write_trace(path: &Path, n: u64, json: bool) -> Result<u64> {
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut w = if json { TraceWriter::json_lines(file) } else { TraceWriter::zstd(file)? };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let t0 = 1_790_000_000_000_000_000u64;
    let sample = |ts_ns: u64, t: i64, rss: u64| Sample {
        ts_ns,
        thresholds: Some([t, 10, 10]),
        count0: Some(123),
        rss_bytes: rss,
        cpu_ns: ts_ns - t0,
        freeze_count: None,
        older_counts: None,
        long_lived: None,
        frozen: None,
        runq_ns: None,
        runs: None,
    };
    w.write(&Record::Attach(Box::new(Attach {
        format: neurogc_trace::FORMAT,
        pid: 31337,
        python: "3.12.8".into(),
        probe: "usdt".into(),
        mode: "observe".into(),
        schema: 1,
        features: NAMES.iter().map(|s| (*s).to_owned()).collect(),
        sample: sample(t0, 700, 200 << 20),
        build: None,
        host: Some("bench".into()),
        agent: Some("synthetic".into()),
        interval_s: Some(1.0),
        model: None,
        guard: None,
        age_s: None,
    })))?;
    // Python stacks as a live agent interns them: frames, then stacks of 5 to 30 of them (some
    // truncated or empty), each written once before the collections that use them.
    for id in 0..FRAMES {
        w.write(&Record::Frame(FrameDef {
            id,
            name: format!("Service.handler_{}", id % 40),
            file: format!("/srv/app/module_{}.py", id % 12),
            line: 10 + id * 7 % 400,
        }))?;
    }
    for id in 0..STACKS {
        let depth = 5 + rng.next() % 26;
        let status = match id % 50 {
            0 => StackStatus::Truncated,
            1 => StackStatus::NoThread,
            _ => StackStatus::Complete,
        };
        let frames = if status == StackStatus::NoThread {
            Vec::new()
        } else {
            (0..depth).map(|_| (rng.next() % u64::from(FRAMES)) as u32).collect()
        };
        w.write(&Record::Stack(StackDef { id, frames, status }))?;
    }
    let (mut ts, mut window_start, mut in_window) = (t0, t0, [0u64; 3]);
    for i in 0..n {
        let u = rng.unit();
        let g: i8 = if u < 0.01 {
            2
        } else if u < 0.11 {
            1
        } else {
            0
        };
        let base = [30_000.0, 250_000.0, 8_000_000.0][g as usize];
        // Log-normal-ish: e^(N(0, 0.5)) from the sum of three uniforms.
        let z = (rng.unit() + rng.unit() + rng.unit() - 1.5) * 2.0;
        let duration_ns = (base * (0.5 * z).exp()) as u64;
        ts += 200_000 + rng.next() % 1_600_000;
        w.write(&Record::Gc(Collection {
            ts_ns: ts,
            pid: 31337,
            tid: if rng.next().is_multiple_of(8) { 31338 } else { 31337 },
            r#gen: g,
            duration_ns,
            collected: (rng.next() % 2000) as i64,
            uncollectable: 0,
            stack: Some((rng.next() % u64::from(STACKS)) as u32),
            running: None,
            halted: None,
        }))?;
        in_window[g as usize] += 1;
        ts += duration_ns;
        if ts - window_start >= 1_000_000_000 {
            let t = if i > n / 3 { 5000 } else { 700 };
            let mut features = vec![0.0; NAMES.len()];
            features[neurogc_trace::features::index("alloc_per_s").expect("a feature")] =
                1.0e6 + (rng.next() % 100_000) as f64;
            w.write(&Record::Window(Window {
                schema: 1,
                start_ns: window_start,
                end_ns: ts,
                collections: in_window,
                features,
                sample: sample(ts, t, (200 << 20) + (i / 1000) * 4096),
                runq_share: None,
                runs_per_s: None,
                carried_ns: None,
            }))?;
            window_start = ts;
            in_window = [0; 3];
        }
        if i.is_multiple_of(4096) {
            w.flush_due()?;
        }
    }
    w.seal()?;
    Ok(std::fs::metadata(path)?.len())
}

/// Small traces of the same shape, to start the fuzzer from.
pub fn seed_corpus(dir: &Path) -> Result<()> {
    write_trace(&dir.join("seed.ngc"), 300, false)?;
    write_trace(&dir.join("seed.jsonl"), 300, true)?;
    Ok(())
}

struct Run {
    wall_s: f64,
    rss_mib: f64,
}

fn report(agent: &Path, trace: &Path, extra: &[&str]) -> Result<Run> {
    let started = Instant::now();
    let mut child = Command::new(agent)
        .arg("report")
        .arg(trace)
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .context("running neurogc-agent report")?;
    let (_, rss_kib) = wait_rusage(&mut child)?;
    Ok(Run { wall_s: started.elapsed().as_secs_f64(), rss_mib: rss_kib as f64 / 1024.0 })
}

pub fn run(collections: u64, rounds: usize) -> Result<()> {
    let agent = build_release_agent()?;
    let dir: PathBuf = workspace_root().join("target/bench-report");
    std::fs::create_dir_all(&dir)?;
    let ngc = dir.join("trace.ngc");
    let jsonl = dir.join("trace.jsonl");
    // Writing them takes minutes in xtask's debug build: kept for the next run of the same size.
    let stamp = dir.join("traces.stamp");
    let want = format!("{collections} collections with stacks, format {}", neurogc_trace::FORMAT);
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(&want) {
        let started = Instant::now();
        write_trace(&ngc, collections, false)?;
        write_trace(&jsonl, collections, true)?;
        std::fs::write(&stamp, &want)?;
        eprintln!("bench: wrote the traces in {:.1} s", started.elapsed().as_secs_f64());
    }
    let (ngc_bytes, jsonl_bytes) = (std::fs::metadata(&ngc)?.len(), std::fs::metadata(&jsonl)?.len());
    let html = dir.join("report.html");
    let html_arg = html.to_string_lossy().into_owned();
    let folded = dir.join("stacks.folded");
    let folded_arg = folded.to_string_lossy().into_owned();
    let cases: [(&str, &Path, Vec<&str>); 5] = [
        ("recording, text", &ngc, vec![]),
        ("recording, --json", &ngc, vec!["--json"]),
        ("recording, --html", &ngc, vec!["--html", &html_arg]),
        ("recording, --folded", &ngc, vec!["--folded", &folded_arg, "--weight", "pause"]),
        ("--json stream, text", &jsonl, vec![]),
    ];
    let mut runs: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
    // Interleaved: every case once per round.
    for _ in 0..rounds {
        for (i, (_, trace, extra)) in cases.iter().enumerate() {
            runs[i].push(report(&agent, trace, extra)?);
        }
    }
    println!("\nneurogc report benchmark · {collections} collections · {rounds} rounds, interleaved");
    println!(
        "recording: {:.1} MiB ({:.1} bytes/collection) · the same as --json lines: {:.1} MiB ({:.0} bytes/collection)\n",
        ngc_bytes as f64 / 1048576.0,
        ngc_bytes as f64 / collections as f64,
        jsonl_bytes as f64 / 1048576.0,
        jsonl_bytes as f64 / collections as f64
    );
    println!("{:<24} {:>12} {:>12} {:>14}", "input", "wall s (med)", "wall s (max)", "peak RSS MiB");
    for ((label, _, _), r) in cases.iter().zip(&runs) {
        let mut walls: Vec<f64> = r.iter().map(|r| r.wall_s).collect();
        walls.sort_by(f64::total_cmp);
        let rss = r.iter().map(|r| r.rss_mib).fold(0.0, f64::max);
        println!("{label:<24} {:>12.2} {:>12.2} {rss:>14.1}", walls[walls.len() / 2], walls[walls.len() - 1]);
    }
    println!("\ntarget: ≤ 5 s and ≤ 200 MiB on the recording");
    Ok(())
}
