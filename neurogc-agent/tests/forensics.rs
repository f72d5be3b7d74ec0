//! Offline forensics: `record`, `report` (text, JSON, HTML, Perfetto) and `replay`, against real
//! recordings of every interpreter of the manifest, and against files damaged on purpose.
mod common;

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::{Duration, Instant},
};

use common::*;
use neurogc_trace::{
    Actuation, Attach, Collection, FrameDef, Record, Sample, StackDef, StackStatus, TraceReader, TraceWriter,
    Window,
};
use serde_json::Value;

/// A directory only root can write (the agent refuses to create files anywhere else).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("forensics-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn records(path: &Path) -> (Vec<Record>, Option<String>) {
    let mut r = TraceReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next().unwrap() {
        out.push(rec);
    }
    (out, r.truncated().map(str::to_owned))
}

fn collections(records: &[Record]) -> Vec<Collection> {
    records.iter().filter_map(|r| if let Record::Gc(c) = r { Some(*c) } else { None }).collect()
}

fn report_json(trace: &Path, extra: &[&str]) -> (Value, Output) {
    let out = agent().arg("report").arg(trace).arg("--json").args(extra).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (v, out)
}

/// Nearest-rank quantile of sorted values.
fn rank(sorted: &[u64], q: f64) -> usize {
    ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1
}

/// hdrhistogram keeps 3 significant digits and may pick a neighbouring rank: the report's
/// figure must lie within those bounds of the exact one.
fn near(report_ns: u64, sorted: &[u64], q: f64) -> bool {
    let i = rank(sorted, q);
    let lo = sorted[i.saturating_sub(1)] as f64 * 0.999;
    let hi = sorted[(i + 1).min(sorted.len() - 1)] as f64 * 1.001 + 1.0;
    (lo..=hi).contains(&(report_ns as f64))
}

#[test]
fn the_report_counts_what_the_workload_counted_itself() {
    for_each_python(|py| {
        let dir = scratch(&py.name);
        let trace = dir.join("run.ngc");
        let target = py.command(&["--seconds", "1", "--threads", "1", "--manual", "3000"]);
        let rec = agent()
            .args(["record", "-o"])
            .arg(&trace)
            .args(["--mode", "observe", "--interval", "0.25", "--duration", "120", "--"])
            .args(&target)
            .output()
            .unwrap();
        if !rec.status.success() {
            return vec![format!(
                "{}: record exited {:?}: {}",
                py.name,
                rec.status,
                String::from_utf8_lossy(&rec.stderr)
            )];
        }
        // In record mode the workload keeps the agent's standard output, next to the live view.
        let stdout: Vec<String> = String::from_utf8_lossy(&rec.stdout).lines().map(String::from).collect();
        let Some(own) = json_lines(&stdout).into_iter().find(|l| l.get("baseline_collections").is_some())
        else {
            return vec![format!("{}: no workload report in {stdout:?}", py.name)];
        };
        let (report, out) = report_json(&trace, &[]);
        let (recorded, truncated) = records(&trace);
        let _ = std::fs::remove_dir_all(&dir);
        if !out.status.success() {
            return vec![format!(
                "{}: report exited {:?}: {}",
                py.name,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )];
        }
        let mut errors = Vec::new();
        if truncated.is_some() || !matches!(recorded.last(), Some(Record::Summary(_))) {
            errors.push(format!("{}: recording incomplete: {truncated:?}", py.name));
        }
        let gcs = collections(&recorded);
        let mut total = 0;
        for g in 0..3usize {
            let want =
                own["collections"][g].as_i64().unwrap() + own["baseline_collections"][g].as_i64().unwrap();
            let want_collected =
                own["collected"][g].as_i64().unwrap() + own["baseline_collected"][g].as_i64().unwrap();
            let r = &report["generations"][g];
            let got = (r["collections"].as_i64().unwrap(), r["collected"].as_i64().unwrap());
            if got != (want, want_collected) || r["uncollectable"] != own["uncollectable"][g] {
                errors.push(format!(
                    "{}: gen{g}: report has {got:?} collections/collected and {} uncollectable, the workload counted ({want}, {want_collected}) and {}",
                    py.name, r["uncollectable"], own["uncollectable"][g]
                ));
            }
            total += want;
            let mut d: Vec<u64> = gcs.iter().filter(|c| c.r#gen == g as i8).map(|c| c.duration_ns).collect();
            d.sort_unstable();
            if d.is_empty() {
                continue;
            }
            for (key, q) in
                [("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99), ("p999_ns", 0.999), ("max_ns", 1.0)]
            {
                let v = r[key].as_u64().unwrap();
                if !near(v, &d, q) {
                    errors.push(format!(
                        "{}: gen{g} {key} {v} is not the recorded pauses' ({})",
                        py.name,
                        d[rank(&d, q)]
                    ));
                }
            }
        }
        if report["collections"] != total {
            errors.push(format!(
                "{}: report counts {} collections, the workload {total}",
                py.name, report["collections"]
            ));
        }
        // The ten longest pauses are exact: the recorded ones, longest first.
        let mut longest: Vec<u64> = gcs.iter().map(|c| c.duration_ns).collect();
        longest.sort_unstable_by(|a, b| b.cmp(a));
        let got: Vec<u64> = report["longest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["duration_ns"].as_u64().unwrap())
            .collect();
        if got[..] != longest[..got.len().min(10)] || got.len() != gcs.len().min(10) {
            errors.push(format!(
                "{}: longest pauses {got:?}, recorded {:?}",
                py.name,
                &longest[..10.min(longest.len())]
            ));
        }
        let pause_s: f64 = gcs.iter().map(|c| c.duration_ns as f64 / 1e9).sum();
        let share = report["gc_share"].as_f64().unwrap();
        let span = report["span_s"].as_f64().unwrap();
        if (share * span - pause_s).abs() > 1e-6 * pause_s.max(1.0) {
            errors.push(format!("{}: GC share {share} over {span} s is not {pause_s} s of pauses", py.name));
        }
        errors
    });
}

/// SIGKILL at random moments of a recording (seeded: NEUROGC_FORENSICS_SEED reproduces a run):
/// whatever was sealed reads back, and the report runs on it.
#[test]
fn a_recorder_killed_at_any_moment_leaves_a_readable_file() {
    let rng = Rng::from_env("NEUROGC_FORENSICS_SEED");
    let next = || rng.next();
    for_each_python(|py| {
        let dir = scratch(&format!("kill-{}", py.name));
        let trace = dir.join("killed.ngc");
        // Killed within its first 3 s, aimed at the first second (before any timed block) half the time.
        let kill_after =
            Duration::from_millis(if next() % 2 == 0 { 50 + next() % 950 } else { 1000 + next() % 2000 });
        let target = py.command(&["--seconds", "4"]);
        let mut agent = agent()
            .args(["record", "-o"])
            .arg(&trace)
            .args(["--mode", "observe", "--"])
            .args(&target)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(kill_after);
        agent.kill().unwrap();
        let _ = agent.wait();
        // The workload ran on without the agent: let it finish (≤ 4 s) before the next one.
        std::thread::sleep(Duration::from_secs(4).saturating_sub(kill_after) + Duration::from_millis(300));
        let what = format!("{} killed after {kill_after:?}", py.name);
        let size = std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0);
        let (report, out) = report_json(&trace, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let mut errors = Vec::new();
        match out.status.code() {
            // Killed before it created the file.
            Some(2) if !trace.exists() => {}
            // Whole (0), or cut inside a block (2: the report of the part read, and a line
            // saying so).
            Some(code @ (0 | 2)) if report != Value::Null => {
                if code == 2 && !stderr.contains("is incomplete") {
                    errors.push(format!("{what}: report exited 2 without saying the trace is cut: {stderr}"));
                }
                let (recorded, _) = records(&trace);
                let gcs = collections(&recorded).len() as u64;
                if report["collections"] != gcs {
                    errors.push(format!(
                        "{what}: report counts {} of the {gcs} readable collections",
                        report["collections"]
                    ));
                }
                if report["summary"] != Value::Null {
                    errors.push(format!("{what}: a summary record from a killed recorder?"));
                }
            }
            // Killed before its attach record was written: the file is empty, and says so.
            Some(2) if size == 0 && stderr.contains("empty") => {}
            other => errors.push(format!("{what}: report exited {other:?} on a {size}-byte file: {stderr}")),
        }
        let _ = std::fs::remove_dir_all(&dir);
        errors
    });
}

fn sample(ts_ns: u64, rss_mib: u64, t0: i64) -> Sample {
    Sample {
        ts_ns,
        thresholds: Some([t0, 10, 10]),
        count0: Some(5),
        rss_bytes: rss_mib << 20,
        cpu_ns: ts_ns / 2,
        freeze_count: None,
        older_counts: None,
        long_lived: None,
        frozen: None,
        runq_ns: None,
        runs: None,
    }
}

/// The attach record of the synthetic traces: process 4242, CPython 3.12.8 (USDT), 1 s windows.
fn attach(mode: &str, features: Vec<String>, first: Sample) -> Record {
    Record::Attach(Box::new(Attach {
        format: neurogc_trace::FORMAT,
        pid: 4242,
        python: "3.12.8".into(),
        probe: "usdt".into(),
        mode: mode.into(),
        schema: 1,
        features,
        sample: first,
        build: None,
        host: Some("test".into()),
        agent: None,
        interval_s: Some(1.0),
        model: None,
        guard: None,
        age_s: None,
    }))
}

/// A synthetic recording: `n` collections over two threads and all three generations, a window
/// a second, and a threshold change halfway.
fn synthetic(path: &Path, n: u64, json: bool) -> Vec<Collection> {
    let file = std::fs::File::create(path).unwrap();
    let mut w = if json { TraceWriter::json_lines(file) } else { TraceWriter::zstd(file).unwrap() };
    let t0 = 1_700_000_000_000_000_000u64;
    let features: Vec<String> = (0..25).map(|i| format!("f{i}")).collect();
    w.write(&attach("observe", features, sample(t0, 100, 700))).unwrap();
    let mut out = Vec::new();
    let step = 120_000_000_000 / n; // two minutes
    let mut window_start = t0;
    for i in 0..n {
        let r#gen = if i % 100 == 99 {
            2
        } else if i % 10 == 9 {
            1
        } else {
            0
        };
        let c = Collection {
            ts_ns: t0 + i * step,
            pid: 4242,
            tid: if i % 3 == 0 { 4243 } else { 4242 },
            r#gen,
            // The last collection is a 350 ms pause: longer than the report's time buckets.
            duration_ns: if i == n - 1 { 350_000_000 } else { [40_000, 400_000, 9_000_000][r#gen as usize] }
                + (i * 7919) % 10_000,
            collected: (i % 17) as i64,
            uncollectable: 0,
            stack: None,
            running: None,
            halted: None,
        };
        w.write(&Record::Gc(c)).unwrap();
        out.push(c);
        let now = c.ts_ns + c.duration_ns;
        if now.saturating_sub(window_start) >= 1_000_000_000 {
            let t = if now - t0 > 60_000_000_000 { 5000 } else { 700 };
            w.write(&Record::Window(Window {
                schema: 1,
                start_ns: window_start,
                end_ns: now,
                collections: [1, 0, 0],
                features: vec![0.0; 25],
                sample: sample(now, 100, t),
                runq_share: None,
                runs_per_s: None,
                carried_ns: None,
            }))
            .unwrap();
            window_start = now;
        }
    }
    w.seal().unwrap();
    out
}

#[test]
fn the_perfetto_export_has_one_slice_per_collection() {
    let dir = scratch("perfetto");
    let (trace, export) = (dir.join("t.ngc"), dir.join("t.perfetto.json"));
    let gcs = synthetic(&trace, 5000, false);
    let (_, out) = report_json(&trace, &["--perfetto", export.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&export).unwrap()).expect("Perfetto JSON parses");
    let events = v["traceEvents"].as_array().unwrap();
    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(slices.len(), gcs.len());
    for (s, c) in slices.iter().zip(&gcs) {
        assert_eq!(
            (s["tid"].as_u64().unwrap(), s["args"]["generation"].as_i64().unwrap()),
            (u64::from(c.tid), i64::from(c.r#gen))
        );
        assert_eq!(s["args"]["collected"], c.collected);
        assert!((s["dur"].as_f64().unwrap() - c.duration_ns as f64 / 1e3).abs() < 1e-3);
    }
    // A named track per thread, and the threshold change marked.
    let names: Vec<&Value> = events.iter().filter(|e| e["name"] == "thread_name").collect();
    assert_eq!(names.len(), 2);
    assert!(events.iter().any(|e| e["ph"] == "i" && e["name"] == "thresholds 5000/10/10"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The page as headless Chromium draws it in a 1000-pixel-wide window: its pixels and the
/// samples per pixel.
fn screenshot(html: &Path, shot: &Path, height: u32) -> (Vec<u8>, usize) {
    screenshot_at(html, shot, 1000, height)
}

/// Headless Chromium's command.
fn chromium() -> &'static str {
    ["chromium-headless-shell", "chromium"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("headless Chromium (apt install chromium-headless-shell; .ci/run installs it)")
}

/// The same in a window `width` pixels wide.
fn screenshot_at(html: &Path, shot: &Path, width: u32, height: u32) -> (Vec<u8>, usize) {
    let run = Command::new(chromium())
        .args([
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            &format!("--window-size={width},{height}"),
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let decoder = png::Decoder::new(std::fs::File::open(shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (buf, info.color_type.samples())
}

/// What a reader sees of the page in a window `width` pixels wide, measured by headless
/// Chromium: the smallest text drawn (SVG text as scaled), the cells that hold a time and
/// wrapped, and the share of the shown flame graph's area no frame covers.
fn seen_at(html: &Path, width: u32) -> Value {
    const MEASURE: &str = r#"<script>
window.addEventListener('load', () => {
  const sizes = [];
  for (const el of document.querySelectorAll('body *')) {
    if (['SCRIPT', 'STYLE', 'title'].includes(el.tagName) || !el.getClientRects().length) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    const svg = el.ownerSVGElement;
    sizes.push([svg ? px * svg.getScreenCTM().a : px, el.textContent.trim().slice(0, 40)]);
  }
  sizes.sort((a, b) => a[0] - b[0]);
  const lines = el => { const r = document.createRange(); r.selectNodeContents(el); return r.getClientRects().length; };
  const wrapped = [...document.querySelectorAll('td')]
    .filter(td => /^\+[0-9.]+ s$/.test(td.textContent.trim()) && lines(td) > 1)
    .map(td => td.textContent);
  let blank = null;
  const fg = [...document.querySelectorAll('.fg svg')].find(s => s.getClientRects().length);
  if (fg) {
    const [, , w, h] = fg.getAttribute('viewBox').split(' ').map(Number);
    let covered = 0;
    for (const r of fg.querySelectorAll('g[data-x] rect')) {
      if (r.parentNode.style.display === 'none') continue;
      const y = +r.getAttribute('y');
      covered += Math.max(0, +r.getAttribute('width')) * Math.max(0, Math.min(h, y + +r.getAttribute('height')) - y);
    }
    blank = 1 - covered / (w * h);
  }
  document.body.dataset.seen = JSON.stringify({smallest: sizes.slice(0, 5), wrapped, blank});
});
</script>"#;
    let page = std::fs::read_to_string(html).unwrap().replace("</body>", &format!("{MEASURE}</body>"));
    let measured = html.with_extension(format!("seen-{width}.html"));
    std::fs::write(&measured, page).unwrap();
    let run = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("--window-size={width},2000"))
        .arg(format!("file://{}", measured.display()))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let dom = String::from_utf8_lossy(&run.stdout);
    let seen =
        dom.split("data-seen=\"").nth(1).and_then(|t| t.split('"').next()).expect("the page measured itself");
    serde_json::from_str(&seen.replace("&quot;", "\"").replace("&amp;", "&")).unwrap()
}

/// At 1400 and 800 pixels: no text under 10 px, no time that wraps, and a flame graph (where
/// the page has one) mostly covered at first. At 800 px the charts' text was 7 px, "+25.068 s"
/// wrapped, and half the flame graph was blank under a few deep import stacks.
fn readable_at_both_widths(html: &Path) {
    for width in [1400, 800] {
        let seen = seen_at(html, width);
        let smallest = &seen["smallest"][0];
        assert!(smallest[0].as_f64().unwrap() >= 10.0, "{width} px: text at {smallest} ({seen})");
        assert_eq!(seen["wrapped"], serde_json::json!([]), "{width} px: {seen}");
        if let Some(blank) = seen["blank"].as_f64() {
            assert!(blank < 0.2, "{width} px: {:.0}% of the flame graph blank", blank * 100.0);
        }
    }
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let dir = scratch("html");
    let (trace, html, shot) = (dir.join("t.jsonl"), dir.join("r.html"), dir.join("shot.png"));
    synthetic(&trace, 20_000, true);
    let (report, out) = report_json(&trace, &["--html", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["threshold_changes"][0]["to"], serde_json::json!([5000, 10, 10]));
    let (buf, px) = screenshot(&html, &shot, 1400);
    let pixels: Vec<&[u8]> = buf.chunks(px).collect();
    // Every generation's colour is drawn (points and bars), not just declared.
    for hex in ["1f77b4", "ff7f0e", "d62728"] {
        let rgb: Vec<u8> = (0..3).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
        let n = pixels.iter().filter(|p| p[..3].iter().zip(&rgb).all(|(a, b)| a.abs_diff(*b) <= 8)).count();
        assert!(n > 200, "#{hex}: {n} pixels in the screenshot");
    }
    // Every plot's axis stays in its range: the GC share of wall time never passes 100%, even
    // where a pause is longer than the plot's time bucket.
    let page = std::fs::read_to_string(&html).unwrap();
    let share_plot =
        page.split("<h2>GC share of wall time</h2>").nth(1).unwrap().split("</svg>").next().unwrap();
    let ticks: Vec<f64> = share_plot
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next()?.strip_suffix('%')?.parse().ok())
        .collect();
    assert!(ticks.len() >= 4 && ticks.iter().all(|t| *t <= 100.0), "share ticks {ticks:?}");
    for section in ["Pause time by pause length", "Thresholds over time", "seconds since 2023-11-14"] {
        assert!(page.contains(section), "{section:?} missing from the page");
    }
    readable_at_both_widths(&html);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A trace whose findings can be checked against what it measured: a warm heap whose gen2
/// pauses dominate, a freeze by neurogc at +30 s, and the application raising threshold0 at
/// +60 s without the GC share moving.
fn measured_trace(path: &Path) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = TraceWriter::zstd(file).unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    let names = neurogc_trace::features::NAMES;
    let at = |name: &str| names.iter().position(|n| *n == name).unwrap();
    let features = names.iter().map(|n| (*n).to_owned()).collect();
    w.write(&attach("act", features, sample(t0, 100, 700))).unwrap();
    let second = 1_000_000_000u64;
    for s in 0..120u64 {
        let start = t0 + s * second;
        for k in 0..20 {
            let c = Collection {
                ts_ns: start + k * 40_000_000,
                pid: 4242,
                tid: 4242,
                r#gen: 0,
                duration_ns: 5_000_000,
                collected: 10,
                uncollectable: 0,
                stack: None,
                running: None,
                halted: None,
            };
            w.write(&Record::Gc(c)).unwrap();
        }
        if s % 10 == 5 {
            let c = Collection {
                ts_ns: start + 850_000_000,
                pid: 4242,
                tid: 4242,
                r#gen: 2,
                duration_ns: 600_000_000,
                collected: 1000,
                uncollectable: 0,
                stack: None,
                running: None,
                halted: None,
            };
            w.write(&Record::Gc(c)).unwrap();
        }
        if s == 30 {
            w.write(&Record::Actuation(Actuation {
                ts_ns: start + 990_000_000,
                event: "frozen".into(),
                thresholds: None,
                requested: None,
                latency_ns: None,
                restored: None,
                freeze_count: Some(800_000),
                detail: None,
            }))
            .unwrap();
        }
        let mut features = vec![0.0; names.len()];
        features[at("gc_share")] = 0.16;
        let t = if s >= 60 { 5000 } else { 700 };
        w.write(&Record::Window(Window {
            schema: 1,
            start_ns: start,
            end_ns: start + second,
            collections: [20, 0, u64::from(s % 10 == 5)],
            features,
            sample: sample(start + second, 100, t),
            runq_share: None,
            runs_per_s: None,
            carried_ns: None,
        }))
        .unwrap();
    }
    w.seal().unwrap();
}

#[test]
fn findings_agree_with_what_the_trace_measured() {
    let dir = scratch("findings");
    let trace = dir.join("t.ngc");
    measured_trace(&trace);
    let (report, out) = report_json(&trace, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let findings = report["findings"].as_array().unwrap();
    let by_id =
        |id: &str| findings.iter().find(|f| f["id"] == id).map(|f| f["text"].as_str().unwrap().to_owned());
    for f in findings {
        assert!(["info", "warning", "critical"].contains(&f["severity"].as_str().unwrap()), "{f}");
        assert!(!f["id"].as_str().unwrap().is_empty(), "{f}");
    }
    // Raising threshold0 was measured not to cut the GC share: no advice to raise it.
    let share = by_id("gc-share").expect("a gc-share finding");
    assert!(share.contains("did not cut it") && !share.contains("would cut"), "{share}");
    // neurogc froze the heap: the freeze is reported, and not recommended again.
    let gen2 = by_id("gen2-pauses").expect("a gen2-pauses finding");
    assert!(gen2.contains("neurogc froze 800000 objects") && !gen2.contains("gc.freeze()"), "{gen2}");
    assert_eq!(report["freezes"][0]["count"], 800_000);
    assert_eq!(report["freezes"][0]["event"], "frozen");
    // The terminal report fits 80 columns, and lists the freeze.
    let text = agent().arg("report").arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("neurogc's freezes") && text.contains("frozen    800000"), "{text}");
    if let Some(wide) = text.lines().find(|l| l.chars().count() > 80) {
        panic!("a line wider than 80 columns: {wide:?}\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report of a real recording of `code` (3.11, observe mode, quarter-second windows).
fn report_of(name: &str, code: &str) -> Value {
    report_of_in(name, code, &[])
}

/// The same, with `env` set for the interpreter.
fn report_of_in(name: &str, code: &str, env: &[(&str, &Path)]) -> Value {
    let dir = scratch(name);
    let trace = dir.join("t.ngc");
    record(&trace, &["--mode", "observe", "--interval", "0.25"], code, env);
    let (report, rep) = report_json(&trace, &[]);
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    report
}

/// Records the Python `code` into `trace` (3.11, launch mode, `args` before the command; a
/// minute at most), with `env` set for the interpreter.
fn record(trace: &Path, args: &[&str], code: &str, env: &[(&str, &Path)]) {
    let py = python("debian-bookworm-3.11");
    let out = agent()
        .args(["record", "-o"])
        .arg(trace)
        .args(args)
        .args(["--duration", "60", "--"])
        .args(&py.argv)
        .args(["-c", code])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The held-out families' third-party packages from PyPI (`cargo xtask test` installs them and
/// names the folder).
fn held_out_site() -> PathBuf {
    PathBuf::from(
        std::env::var("NEUROGC_HELDOUT_SITE")
            .expect("NEUROGC_HELDOUT_SITE names the held-out packages' folder (cargo xtask test sets it)"),
    )
}

#[test]
fn a_pypi_training_loops_sites_and_findings_read_as_its_code_is() {
    // micrograd (PyPI), code nobody here wrote: every operation's result keeps a closure that
    // refers back to it, so collections start in its operators, a few hundred a second, and a
    // training loop's RSS holds steady once its data is loaded.
    let site = held_out_site();
    let code = r#"
import random, time
from micrograd.nn import MLP
rng = random.Random(7)
data = [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(20_000)]
model = MLP(8, [16, 16, 1])
end = time.time() + 4
i = 0
while time.time() < end:
    batch = [data[(i * 8 + k) * 7919 % len(data)] for k in range(8)]
    loss = sum(((model(x) - 1.0) ** 2 for x in batch), start=0)
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data -= 0.01 * p.grad
    i += 1
"#;
    let report = report_of_in("micrograd", code, &[("PYTHONPATH", &site)]);
    let engine = std::fs::read_to_string(site.join("micrograd/engine.py")).unwrap();
    // A method's lines: from its `def` to the next method's.
    let lines: Vec<&str> = engine.lines().collect();
    let body = |method: &str| {
        let def = lines.iter().position(|l| l.starts_with(&format!("    def {method}(")))?;
        let end = (def + 1..lines.len()).find(|&i| lines[i].starts_with("    def ")).unwrap_or(lines.len());
        Some(def as u64 + 1..end as u64 + 1)
    };
    let sites = report["sites"].as_array().unwrap();
    let longest =
        report["generations"].as_array().unwrap().iter().filter_map(|g| g["max_ns"].as_u64()).max().unwrap();
    let in_engine: Vec<&Value> = sites
        .iter()
        .filter(|s| s["file"].as_str().is_some_and(|f| f.ends_with("micrograd/engine.py")))
        .collect();
    assert!(!in_engine.is_empty(), "no site in micrograd's engine: {sites:?}");
    let mut seen = std::collections::HashSet::new();
    for s in sites {
        let (name, file) = (s["name"].as_str().unwrap(), s["file"].as_str().unwrap());
        // One function, one row, at a line of its own (not line 0, the prologue's).
        assert!(seen.insert((name, file)), "{name} ({file}) listed twice: {sites:?}");
        if file.ends_with("micrograd/engine.py") && name.starts_with("Value.") {
            let method = name.rsplit('.').next().unwrap();
            let line = s["line"].as_u64().unwrap();
            assert!(body(method).is_some_and(|b| b.contains(&line)), "{s}: not in {method}");
        }
        // A site's p99 is never above its longest pause, nor that above the run's longest.
        let (p99, max) = (s["p99_ns"].as_u64().unwrap(), s["max_ns"].as_u64().unwrap());
        assert!(p99 <= max && max <= longest, "{s} (longest {longest})");
        // Young collections started here stand for the allocations made here: never "0" for a
        // site that started some (unknown, null, where threshold0 was not read yet: launch mode
        // reads the GC state once the interpreter has one).
        if s["collections"][0].as_u64() > Some(0) {
            assert!(s["allocations"].is_null() || s["allocations"].as_u64() > Some(0), "{s}");
        }
    }
    // A steady training loop is no leak.
    for f in report["findings"].as_array().unwrap() {
        assert!(f["id"] != "rss-growth" && !f["text"].as_str().unwrap().contains("leak"), "{f}");
    }
}

/// networkx (PyPI) with collections every few allocations: they start in the frozen import
/// machinery as it loads (whose place, "<frozen importlib._bootstrap>:1147", left no room for
/// its function's name), then in two files of one name each, algorithms/cluster.py beside
/// algorithms/bipartite/cluster.py and the same of matching.py. It sleeps at the end: a
/// function's frame is named while its process lives.
const ONE_NAME: &str = r#"
import gc, time
gc.set_threshold(30, 2, 2)
import networkx as nx
from networkx.algorithms import bipartite
gc.set_threshold(5, 50, 50)
G, top, kept = nx.complete_bipartite_graph(60, 60), range(60), []
end = time.time() + 2
while time.time() < end:
    kept += [nx.clustering(G), bipartite.clustering(G, top), nx.maximal_matching(G),
             bipartite.hopcroft_karp_matching(G, top)]
    if len(kept) > 400:
        kept = []
gc.set_threshold(700, 10, 10)
time.sleep(1)
"#;

#[test]
fn files_of_one_name_are_told_apart_and_no_name_is_cut() {
    let site = held_out_site();
    let dir = scratch("one-name");
    let (trace, html, folded) = (dir.join("t.ngc"), dir.join("t.html"), dir.join("t.folded"));
    record(&trace, &["--mode", "observe", "--interval", "0.25"], ONE_NAME, &[("PYTHONPATH", &site)]);
    let (report, rep) =
        report_json(&trace, &["--html", html.to_str().unwrap(), "--folded", folded.to_str().unwrap()]);
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    // The folded stacks keep whole paths: the names two of their files share.
    let folded = std::fs::read_to_string(&folded).unwrap();
    let paths: std::collections::HashSet<&str> =
        folded.split(" (").skip(1).filter_map(|f| f.rsplit_once(':').map(|(p, _)| p)).collect();
    let mut by_name: std::collections::HashMap<&str, usize> = Default::default();
    for p in paths.iter().filter(|p| p.starts_with('/')) {
        *by_name.entry(p.rsplit('/').next().unwrap()).or_default() += 1;
    }
    let shared: Vec<&str> = by_name.iter().filter(|(_, n)| **n > 1).map(|(f, _)| *f).collect();
    for name in ["cluster.py", "matching.py"] {
        assert!(shared.contains(&name), "no two {name} in the stacks: {shared:?}");
    }
    let sites = report["sites"].as_array().unwrap();
    let file = |s: &Value| s["file"].as_str().unwrap().to_owned();
    assert!(sites.iter().any(|s| file(s).starts_with("<frozen")), "no frozen module's site: {sites:?}");
    // The text names each site whole, at a tail of its file longer than the file's own name
    // where two files share it.
    let text = agent().arg("report").arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let table = text.split("where collections started").nth(1).unwrap().split("\n\n").next().unwrap();
    let places: Vec<(String, u64)> = table
        .split('(')
        .skip(1)
        .filter_map(|t| {
            let (place, line) = t.split(')').next()?.rsplit_once(':')?;
            Some((place.to_owned(), line.parse().ok()?))
        })
        .collect();
    for s in sites {
        let (name, file, line) = (s["name"].as_str().unwrap(), file(s), s["line"].as_u64().unwrap());
        assert!(table.contains(name), "{name} is not named whole:\n{table}");
        if file.is_empty() {
            continue;
        }
        let own = file.rsplit('/').next().unwrap();
        let told = places.iter().any(|(p, l)| {
            *l == line
                && (file == *p || file.ends_with(&format!("/{p}")))
                && (!shared.contains(&own) || p.contains('/'))
        });
        assert!(told, "{name} ({file}:{line}) has no telling place:\n{table}");
    }
    assert!(!table.contains('…'), "a name was cut:\n{table}");
    if let Some(wide) = text.lines().find(|l| l.chars().count() > 80) {
        panic!("a line wider than 80 columns: {wide:?}\n{text}");
    }
    // The page's flame graph and the longest pauses' stacks name those files as the table does.
    let page = std::fs::read_to_string(&html).unwrap();
    for name in shared {
        assert!(!page.contains(&format!("({name}:")), "a bare {name} on the page");
    }
    // Deep import stacks beside shallow ones: the flame graph is still mostly drawn on.
    readable_at_both_widths(&html);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Requests that leave cyclic garbage, for `churn(seconds)`.
const CHURN: &str = r#"
import time
class N:
    pass
def churn(seconds):
    end = time.time() + seconds
    while time.time() < end:
        a, b = N(), N()
        a.b, b.a = b, a
"#;

#[test]
fn rss_growth_is_found_after_warm_up_not_in_it() {
    // A cache that fills to ~100 MiB in its first second and then holds, while requests churn
    // cyclic garbage: warm-up, not a leak.
    // (The churn outlasts the fill by far, so that the trace's midpoint comes after it however
    // slowly other tests let the fill run.)
    let warm = format!("{CHURN}cache = [[i] * 8 for i in range(1_000_000)]\nchurn(5)\n");
    let report = report_of("warm", &warm);
    let findings = report["findings"].as_array().unwrap();
    assert!(!findings.iter().any(|f| f["id"] == "rss-growth"), "{findings:?}");
    // The report's GC share is the agent's own summary's: the same pauses over the same span.
    let (share, summary) =
        (report["gc_share"].as_f64().unwrap(), report["summary"]["gc_time_share"].as_f64().unwrap());
    assert!((share - summary).abs() <= 0.01 * summary, "report {share}, summary {summary}");
    // Steady for a while, then a list that keeps growing to the end: found, with the median
    // full collection. (All of the growth is in the second half, however the run is slowed.)
    let leak = format!(
        "{CHURN}churn(2)\nkept = []\nfor _ in range(16):\n    kept.append([[i] * 8 for i in range(60_000)])\n    churn(0.05)\n"
    );
    let report = report_of("leak", &leak);
    let findings = report["findings"].as_array().unwrap();
    let growth = findings.iter().find(|f| f["id"] == "rss-growth").unwrap_or_else(|| panic!("{findings:?}"));
    let text = growth["text"].as_str().unwrap();
    assert!(text.contains("after the first half") && text.contains("median full collection"), "{text}");
}

#[test]
fn stacks_become_sites_folded_stacks_and_a_flame_graph() {
    let dir = scratch("stacks");
    let (trace, folded, html) = (dir.join("t.ngc"), dir.join("t.folded"), dir.join("t.html"));
    let mut w = TraceWriter::zstd(std::fs::File::create(&trace).unwrap()).unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    w.write(&attach("observe", vec![], sample(t0, 100, 700))).unwrap();
    for (id, name, line) in [(0, "main", 9), (1, "cache_put", 3), (2, "render;page", 6)] {
        w.write(&Record::Frame(FrameDef { id, name: name.into(), file: "/srv/app.py".into(), line }))
            .unwrap();
    }
    w.write(&Record::Stack(StackDef { id: 0, frames: vec![1, 0], status: StackStatus::Complete })).unwrap();
    w.write(&Record::Stack(StackDef { id: 1, frames: vec![2, 0], status: StackStatus::Truncated })).unwrap();
    // cache_put starts 30 short gen0 collections, render 2 long gen2 ones.
    for i in 0..32u64 {
        let (r#gen, duration_ns, stack) = if i % 16 == 15 { (2, 200_000_000, 1) } else { (0, 50_000, 0) };
        let c = Collection {
            ts_ns: t0 + i * 300_000_000,
            pid: 4242,
            tid: 4242,
            r#gen,
            duration_ns,
            collected: 1,
            uncollectable: 0,
            stack: Some(stack),
            running: None,
            halted: None,
        };
        w.write(&Record::Gc(c)).unwrap();
    }
    w.seal().unwrap();
    let (report, out) =
        report_json(&trace, &["--folded", folded.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sites = report["sites"].as_array().unwrap();
    assert_eq!(
        (sites[0]["name"].as_str(), sites[0]["collections"][0].as_u64()),
        (Some("cache_put"), Some(30))
    );
    assert_eq!(
        (sites[1]["name"].as_str(), sites[1]["pause_ns"][2].as_u64()),
        (Some("render;page"), Some(400_000_000))
    );
    // 30 young collections at threshold0 700: 21,000 allocations estimated at cache_put.
    assert_eq!(sites[0]["allocations"], 21_000);
    assert_eq!(report["stacks"]["with"], 32);
    // Folded: outermost first, ';' inside a name replaced, a cut stack under [truncated].
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "[truncated];main (/srv/app.py:9);render:page (/srv/app.py:6) 2\nmain (/srv/app.py:9);cache_put (/srv/app.py:3) 30\n"
    );
    let run = agent()
        .arg("report")
        .arg(&trace)
        .args(["--folded", folded.to_str().unwrap(), "--weight", "pause"])
        .output()
        .unwrap();
    assert!(run.status.success());
    assert!(std::fs::read_to_string(&folded).unwrap().contains("render:page (/srv/app.py:6) 400000000\n"));
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("where collections started") && text.contains("cache_put (app.py:3)"), "{text}");
    // The flame graph: one per generation and one for all, each with the stacks' frames.
    let page = std::fs::read_to_string(&html).unwrap();
    for id in ["all", "g0", "g2"] {
        let graph = page
            .split(&format!("<div class=\"fg fg-{id}\">"))
            .nth(1)
            .unwrap()
            .split("</div>")
            .next()
            .unwrap();
        assert!(graph.starts_with("<svg") && graph.matches("<rect").count() >= 2, "{id}: {graph}");
    }
    // Drawn, not just declared: the shown graph's warm frames fill a visible area, across the
    // page's width at 1400 and at 800 pixels.
    let is_warm = |p: &[u8]| p[0] > 200 && (60..230).contains(&p[1]) && p[2] < 110;
    for width in [1400u32, 800] {
        let (buf, px) = screenshot_at(&html, &dir.join("shot.png"), width, 4000);
        let warm = buf.chunks(px).filter(|p| is_warm(p)).count();
        assert!(warm > 20_000, "{width} px: {warm} pixels of flame graph colour in the screenshot");
        let columns: Vec<usize> =
            buf.chunks(px).enumerate().filter(|(_, p)| is_warm(p)).map(|(i, _)| i % width as usize).collect();
        let (left, right) = (columns.iter().min().unwrap(), columns.iter().max().unwrap());
        assert!(
            (right - left) * 10 >= width as usize * 9,
            "{width} px: the flame graph spans {left}..{right}"
        );
    }
    // Its labels name the function and the file, not a path's first characters.
    let labels = page.split("<div class=\"fg fg-all\">").nth(1).unwrap().split("</svg>").next().unwrap();
    let texts: Vec<&str> =
        labels.split("<text").skip(1).filter_map(|t| t.split('>').nth(1)?.split('<').next()).collect();
    assert!(texts.contains(&"main (app.py:9)") && texts.contains(&"render;page (app.py:6)"), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("/srv")), "{texts:?}");
    // The sites, and the stack each longest pause started in, are on the page.
    assert!(
        page.contains("<h2>Where collections started</h2>") && page.contains("cache_put <small>(app.py:3)")
    );
    assert!(page.contains("render;page (app.py:6) ← main (app.py:9)"), "no stack beside the longest pauses");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_empty_and_future_traces_get_a_clear_error() {
    let dir = scratch("damaged");
    let good = dir.join("good.ngc");
    synthetic(&good, 30_000, false);
    let bytes = std::fs::read(&good).unwrap();
    let mut cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        ("empty", vec![], Some("empty")),
        ("random", (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(), Some("not")),
        ("headless", b"{\"type\":\"gc\",\"ts_ns\":1,\"pid\":1,\"tid\":1,\"gen\":0,\"duration_ns\":5,\"collected\":1,\"uncollectable\":0}\n".to_vec(), Some("before the attach record")),
        ("future", format!("{{\"type\":\"attach\",\"format\":{}}}\n", neurogc_trace::FORMAT + 1).into_bytes(), None),
        // Cut inside the last block: readable up to the block before, and the report says so.
        ("truncated", bytes[..bytes.len() - 10].to_vec(), None),
    ];
    let mut damaged = bytes.clone();
    damaged[bytes.len() / 2] ^= 0x40;
    cases.push(("damaged", damaged, Some("damaged")));
    for (name, content, says) in &cases {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        for cmd in ["report", "replay"] {
            let out = agent().arg(cmd).arg(&path).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            match (*name, says) {
                ("future", _) => {
                    assert_eq!(out.status.code(), Some(2), "{cmd} {name}: {stderr}");
                    assert!(stderr.contains("newer neurogc") && stderr.contains("upgrade"), "{stderr}");
                }
                ("truncated", _) => {
                    if cmd == "report" {
                        // The report of the part read, said first, and a status that says it
                        // is not the whole run (it exited 0, the cut found among the findings).
                        let stdout = String::from_utf8_lossy(&out.stdout);
                        assert_eq!(out.status.code(), Some(2), "{cmd} {name}: {stderr}");
                        assert!(stdout.lines().take(6).any(|l| l.starts_with("INCOMPLETE: ")), "{stdout}");
                        assert!(stdout.contains("collections"), "{stdout}");
                        assert!(stderr.contains("is incomplete") && stderr.lines().count() == 1, "{stderr}");
                    } else {
                        assert_eq!(out.status.code(), Some(0), "{cmd} {name}: {stderr}");
                        assert!(stderr.contains("last complete block"), "{stderr}");
                    }
                }
                (_, Some(says)) => {
                    assert_eq!(out.status.code(), Some(2), "{cmd} {name}: {stderr}");
                    assert!(stderr.contains(says) && stderr.lines().count() == 1, "{cmd} {name}: {stderr}");
                    assert!(!stderr.contains("panicked"), "{stderr}");
                }
                _ => unreachable!(),
            }
        }
    }
    // Cut inside its first block: no collection read, and none blamed on the process; a
    // generation with no collection shows no pauses ("0ns" in every column, before).
    let cut = dir.join("cut");
    {
        // As a recorder writes one: the attach record in a block of its own, sealed at once.
        let mut w = TraceWriter::zstd(std::fs::File::create(&cut).unwrap()).unwrap();
        let t0 = 1_700_000_000_000_000_000u64;
        w.write(&attach("observe", Vec::new(), sample(t0, 100, 700))).unwrap();
        w.seal().unwrap();
    }
    // Then a block of collections, cut halfway.
    let mut next = TraceWriter::zstd(Vec::new()).unwrap();
    for c in collections(&records(&good).0).iter().take(200) {
        next.write(&Record::Gc(*c)).unwrap();
    }
    next.seal().unwrap();
    let block = next.get_mut().clone();
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new().append(true).open(&cut).unwrap(),
        &block[..block.len() / 2],
    )
    .unwrap();
    let out = agent().arg("report").arg(&cut).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("No collection in the part of the trace that could be read"), "{stdout}");
    assert!(!stdout.contains("allocated too few") && !stdout.contains("pause histogram"), "{stdout}");
    assert!(!stdout.contains(" 0 ns") && !stdout.contains("0ns"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn outputs_are_never_written_through_links_or_into_other_users_files() {
    let dir = scratch("outputs");
    let trace = dir.join("t.ngc");
    synthetic(&trace, 100, false);
    let before = records(&trace).0;
    let link = dir.join("link.html");
    std::os::unix::fs::symlink("/etc/neurogc-must-not-exist", &link).unwrap();
    // A shared sticky directory, as /tmp is, holding another user's file, a link planted to
    // a file of this user's elsewhere, and a second name (hard link) of this user's file.
    let shared = dir.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let theirs = shared.join("theirs.html");
    std::fs::write(&theirs, "theirs").unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let mine = dir.join("mine.txt");
    std::fs::write(&mine, "mine").unwrap();
    std::fs::hard_link(&mine, shared.join("second-name.html")).unwrap();
    std::os::unix::fs::symlink(&mine, shared.join("planted.html")).unwrap();
    let report = |out: &Path, cwd: &Path| {
        agent().current_dir(cwd).arg("report").arg(&trace).arg("--html").arg(out).output().unwrap()
    };
    for (out, says) in [
        (link.clone(), "symbolic link".to_owned()),
        (shared.join("planted.html"), "symbolic link".to_owned()),
        (shared.join("second-name.html"), "is not this user's own".to_owned()),
        (trace.clone(), "is the trace being read".to_owned()),
    ] {
        let run = report(&out, &dir);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{}: {stderr}", out.display());
        assert!(stderr.contains(&says), "{says:?} missing: {stderr}");
    }
    // A relative name: the message names the real directory, not ".".
    let run = report(Path::new("theirs.html"), &shared);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("in {},", shared.display())), "{stderr}");
    assert!(stderr.contains("is not this user's own"), "{stderr}");
    assert!(!Path::new("/etc/neurogc-must-not-exist").exists());
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine");
    assert_eq!(records(&trace).0, before, "the trace is untouched");
    // A new file in the shared directory is created (as `report` needs no root), and this
    // user's own file there is written again.
    let fresh = shared.join("r.html");
    for round in ["created", "rewritten"] {
        let run = report(&fresh, &dir);
        assert!(run.status.success(), "{round}: {}", String::from_utf8_lossy(&run.stderr));
        let html = std::fs::read_to_string(&fresh).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"), "{round}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `report` says of an advise recording's advice, in JSON, text and HTML: the advice it
/// ends on, how often it changed, and no finding of its own that says otherwise.
fn reported_advice(trace: &Path, dir: &Path) -> (Value, String, String) {
    let html = dir.join("advice.html");
    let (report, out) = report_json(trace, &["--html", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = agent().arg("report").arg(trace).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let page = std::fs::read_to_string(&html).unwrap();
    // Another tuning than the recorded one, or a freeze where it said to keep the settings.
    for f in report["findings"].as_array().unwrap() {
        let f = f["text"].as_str().unwrap();
        assert!(!f.contains("raising threshold0") && !f.contains("gc.freeze() after"), "contradicts: {f}");
    }
    (report, text, page)
}

#[test]
fn a_report_shows_the_recorded_advice_and_no_finding_contradicts_it() {
    // The demo service's advise recording (cut before its summary): its advice turned five
    // times and ended on a freeze at 700/10/10, where the report said "raising threshold0
    // (now 700) usually cuts that".
    let dir = scratch("advice");
    let (report, text, page) = reported_advice(Path::new(&fixture("demo-advice.ngc")), &dir);
    let d = &report["decisions"];
    assert_eq!((d["count"].as_u64(), d["changes"].as_u64()), (Some(16), Some(5)), "{d}");
    let moves: Vec<&str> =
        d["moves"].as_array().unwrap().iter().map(|m| m["what"].as_str().unwrap()).collect();
    assert_eq!(moves.len(), 5);
    assert_eq!(moves[4], "700/10/10 + collect, freeze");
    let rec = d["recommendation"].as_str().unwrap();
    assert!(
        rec.contains("700/10/10 + collect, freeze") && rec.contains("its last decision, at +16.0 s"),
        "{rec}"
    );
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat(&text).contains("recorded advice (the advice changed 5 times in 16 windows)"), "{text}");
    assert!(flat(&text).contains("700/10/10 + collect, freeze"), "{text}");
    assert!(page.contains("<h2>Recorded advice</h2>") && page.contains("700/10/10 + collect, freeze"));
    // A recording with the agent's summary: its recommendation, word for word.
    let trace = dir.join("advise.ngc");
    let code = format!("{CHURN}cache = [[i] * 8 for i in range(300_000)]\nchurn(4)\n");
    record(&trace, &["--mode", "advise", "--interval", "0.5"], &code, &[]);
    let (report, text, page) = reported_advice(&trace, &dir);
    let said = report["summary"]["policy"]["recommendation"].as_str().expect("the summary's recommendation");
    assert_eq!(report["decisions"]["recommendation"].as_str(), Some(said));
    let first = said.lines().next().unwrap();
    assert!(flat(&text).contains(&flat(first)), "{first:?} not in\n{text}");
    let esc = first.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    assert!(page.contains(&esc), "{first:?} not on the page");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The decisions `replay --json` makes on the recording `name` in tests/fixtures.
#[test]
fn replay_counts_changes_of_advice_not_the_windows_it_stands() {
    // Advice repeats in every window's decision while it stands: replay said "would change the
    // thresholds 59 times (59 of 60 decisions)" of advice that changed about ten times.
    let changes = |decisions: &[Value]| {
        let mut last = None;
        let mut n = 0;
        for d in decisions {
            let now = (d["change"] == true).then(|| (d["thresholds"].clone(), d["freeze"].clone()));
            n += usize::from(now.is_some() && now != last);
            last = now;
        }
        n
    };
    let (recorded, _) = records(Path::new(&fixture("demo-advice.ngc")));
    let recorded: Vec<Value> = recorded
        .iter()
        .filter(|r| matches!(r, Record::Decision(_)))
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let standing = recorded.iter().filter(|d| d["change"] == true).count();
    let (advised, replayed) = (changes(&recorded), changes(&replayed_decisions("demo-advice.ngc")));
    assert!(advised < standing, "the fixture's advice stands over windows: {advised} of {standing}");
    let out = agent().arg("replay").arg(fixture("demo-advice.ngc")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    let times = |n: usize| match n {
        0 => "never".to_owned(),
        1 => "once".to_owned(),
        n => format!("{n} times"),
    };
    let said = format!("would recommend a change {} (the recorded run: {})", times(replayed), times(advised));
    assert!(text.contains(&said), "{said:?} not in {text}");
}

fn replayed_decisions(name: &str) -> Vec<Value> {
    replayed_decisions_of(Path::new(&fixture(name)))
}

/// The decisions `replay --json` makes on the recording at `path`.
fn replayed_decisions_of(path: &Path) -> Vec<Value> {
    let out = agent().arg("replay").arg(path).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    json_lines(&String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect::<Vec<_>>())
        .into_iter()
        .filter(|l| l["type"] == "decision")
        .collect()
}

#[test]
fn advice_on_the_demo_does_not_turn_over_with_a_windows_noise() {
    // The demo service's first 16 windows under advise mode (the embedded model, default
    // budgets), recorded on this project's VM on 2026-12-01. Its advice settles on "collect and
    // freeze" at 700/10/10 in window 4; in window 13 that setting's predicted GC share read a
    // hair over the budget, and the advice turned to 1,000/10/10 frozen for one window and back
    // (6-12 changes a minute on the live demo, where the target is 2). The standing advice is
    // left only where it credibly misses, as the setting in force is in act mode.
    let advice: Vec<String> = replayed_decisions("demo-advice.ngc")
        .iter()
        .map(|d| d["what"].as_str().unwrap_or("stay").to_owned())
        .collect();
    assert_eq!(advice.len(), 16, "{advice:?}");
    let first = advice.iter().position(|a| a != "stay").expect("some advice");
    let changes = advice[first..].windows(2).filter(|w| w[0] != w[1]).count();
    assert!(changes <= 2, "{changes} changes after the first advice: {advice:?}");
    assert_eq!(advice.last().map(String::as_str), Some("700/10/10 + collect, freeze"), "{advice:?}");
}

#[test]
fn a_frozen_twin_is_judged_by_the_pause_odds_this_process_measured() {
    // Evaluation draw 1524 of the workload generator (a 135k-object heap still growing, 50
    // requests a second), recorded in act mode on 2026-12-01 (build e373b19, default budgets).
    // Its 77 ms full collections were due within the horizon at every unfrozen setting, so the
    // pause budget was missed everywhere but frozen; the settings it measured were over the
    // budget in fewer windows than the model gave them, yet their frozen twins were judged on
    // the model's odds alone (the side nothing frozen had calibrated), several times as often
    // over: it never froze, where freeze + 5,000 took 0.3x its p99. Replayed, the frozen
    // setting holds every budget and is the advice.
    let decisions = replayed_decisions("draw-1524-act.jsonl");
    let what: Vec<&str> = decisions.iter().map(|d| d["what"].as_str().unwrap_or("stay")).collect();
    assert!(decisions.len() >= 20, "{what:?}");
    let first = what.iter().position(|w| w.ends_with("+ collect, freeze")).expect("a freeze advised");
    assert!(first <= 10, "first advised in window {first}: {what:?}");
    let reason = decisions[first]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("frozen holds every budget"), "{reason}");
}

#[test]
fn replay_shows_what_the_learned_model_did_and_where_decisions_differ() {
    // The demo's advice recording replayed under a model that corrects every setting (at full
    // weight, as advice earns it none): each decision that weighed a setting says what the model
    // moved there, and the decisions that differ from the recorded ones are marked and listed.
    let trace = fixture("demo-advice.ngc");
    let replay = |args: &[&str]| {
        let out = agent().arg("replay").arg(&trace).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let model = fixture("prefer-5000.onnx");
    let with = ["--model", model.as_str(), "--model-weight", "full"];
    let decisions: Vec<Value> =
        json_lines(&replay(&[&with[..], &["--json"]].concat()).lines().map(String::from).collect::<Vec<_>>())
            .into_iter()
            .filter(|l| l["type"] == "decision")
            .collect();
    let weighed: Vec<&Value> = decisions.iter().filter(|d| d["model"]["moved"].is_object()).collect();
    assert!(weighed.len() >= 8, "{} of {} decisions weighed a setting", weighed.len(), decisions.len());
    for d in &weighed {
        assert_eq!(d["model"]["weight"], 1.0, "{d}");
        let share = &d["model"]["moved"]["gc_share"];
        assert!(share[0].as_f64().unwrap() > 0.0 && share[1].as_f64().unwrap() > 0.0, "{d}");
        if d["change"] == true {
            // A move names the setting it moved to.
            let to = d["thresholds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join("/");
            assert!(d["model"]["moved"]["setting"].as_str().unwrap().starts_with(&to), "{d}");
        }
    }
    // Somewhere the model moved a prediction by 5% or more.
    let moved = |d: &&Value| {
        let s = &d["model"]["moved"]["gc_share"];
        (s[1].as_f64().unwrap() / s[0].as_f64().unwrap()).ln().abs() > 0.05
    };
    assert!(weighed.iter().any(moved), "{weighed:?}");
    let text = replay(&with);
    assert!(text.contains("the model (weight 1.00) moved "), "{text}");
    let marked = text.lines().filter(|l| l.ends_with(" *")).count();
    let listed = text
        .lines()
        .skip_while(|l| !l.starts_with("decided otherwise than recorded (*) at "))
        .collect::<Vec<_>>()
        .join(" ")
        .matches(" s")
        .count();
    assert!(marked >= 1 && marked == listed, "{marked} marked, {listed} listed: {text}");
    // A report of decisions that say what the model did gives its weight and its largest move.
    let dir = scratch("replay-model");
    let replayed = dir.join("replayed.jsonl");
    std::fs::write(&replayed, replay(&[&with[..], &["--json"]].concat())).unwrap();
    let report = agent().arg("report").arg(&replayed).output().unwrap();
    let report = String::from_utf8_lossy(&report.stdout);
    let section = report.split("\nthe learned model\n").nth(1).expect("a section on the model");
    let section = section.replace("\n    ", " ");
    let n = weighed.len();
    assert!(section.starts_with(&format!("  in {n} decisions, weighed in {n}, weight 1.00")), "{report}");
    assert!(section.contains("most at +") && section.contains("the model (weight 1.00) moved "), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
    // The analytic model alone: nothing said of a learned one.
    let alone = replay(&["--model", "none", "--json"]);
    assert!(!alone.contains("\"model\":{\"weight"), "{alone}");
    assert!(!replay(&["--model", "none"]).contains("the model ("));
}

#[test]
fn replay_reads_a_process_attached_to_as_the_live_agent_did() {
    // The live agent reads a process it attached to by its age (from /proc): one that has run
    // for minutes has a warm heap, and a freeze need not wait out --freeze-after (5 s) of
    // watching. The attach record carries that age to replay. Draw 1524's recording, told the
    // process had run 600 s, is advised a freeze in its first windows; told nothing (recorded
    // by a build before the field), only once 5 s have been watched, as a launched process.
    let dir = scratch("replay-age");
    let recorded = std::fs::read_to_string(fixture("draw-1524-act.jsonl")).unwrap();
    let (first, rest) = recorded.split_once('\n').unwrap();
    let mut attach: Value = serde_json::from_str(first).unwrap();
    assert!(attach.get("age_s").is_none(), "{attach}");
    attach["age_s"] = 600.0.into();
    let aged = dir.join("aged.jsonl");
    std::fs::write(&aged, format!("{attach}\n{rest}")).unwrap();
    let first_freeze = |decisions: Vec<Value>| {
        decisions.iter().position(|d| d["what"].as_str().is_some_and(|w| w.ends_with("+ collect, freeze")))
    };
    let unaged = first_freeze(replayed_decisions("draw-1524-act.jsonl")).expect("a freeze advised");
    let aged = first_freeze(replayed_decisions_of(&aged)).expect("a freeze advised");
    assert!(aged <= 2 && unaged >= 4, "first advised in window {aged} aged, {unaged} unaged");
}

#[test]
fn report_and_replay_end_quietly_when_their_reader_goes_away() {
    // `neurogc-agent report t.ngc | head -1`: the reader goes away (here before the first line,
    // so that every write meets a pipe with no reader, whatever the timing). A filter stops
    // quietly then; both printed "error: Broken pipe (os error 32)" and exited 1.
    let trace = fixture("demo-advice.ngc");
    for args in [&["report"][..], &["replay"][..], &["replay", "--json"][..]] {
        let mut child = agent()
            .args(args)
            .arg(&trace)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "{args:?}: {:?}, stderr {stderr:?}", out.status);
    }
}

#[test]
fn replay_runs_a_model_over_recorded_windows() {
    let dir = scratch("replay");
    let trace = dir.join("t.ngc");
    synthetic(&trace, 2000, false);
    let started = Instant::now();
    let out = agent()
        .arg("replay")
        .arg(&trace)
        .args(["--json", "--model", &fixture("prefer-5000.onnx"), "--model-weight", "full"])
        .args(["--gc-budget", "0.1%"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines =
        json_lines(&String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect::<Vec<_>>());
    let decisions: Vec<&Value> = lines.iter().filter(|l| l["type"] == "decision").collect();
    let windows = lines.iter().filter(|l| l["type"] == "window").count();
    assert_eq!(decisions.len(), windows);
    assert!(windows >= 100, "{windows} windows replayed in {:?}", started.elapsed());
    // Replay advises (nothing is applied): through the first minute (700/10/10 in force, a GC
    // share around the 0.1% budget) the advice is the model's preference in most windows (those
    // where the budget is missed); none carries a measured effect. From 5000/10/10 it may advise
    // a next step where the budget is still missed.
    let changes: Vec<&&Value> = decisions.iter().filter(|d| d["change"] == true).collect();
    assert!(changes.len() * 8 >= windows * 3, "{} changes in {windows} windows", changes.len());
    let mut in_force = Value::Null;
    for l in &lines {
        if l["type"] == "window" {
            in_force = l["sample"]["thresholds"].clone();
        } else if l["type"] == "decision" && l["change"] == true {
            assert!(l.get("effect").is_none(), "{l}");
            if in_force == serde_json::json!([700, 10, 10]) {
                assert_eq!(l["thresholds"], serde_json::json!([5000, 10, 10]), "{l}");
            }
        }
    }
    // Every window from the third checks the last one's prediction, with the model's inputs.
    for d in decisions.iter().skip(2) {
        assert_eq!(d["check"]["features"].as_array().map(Vec::len), Some(24), "{d}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording that fills its disk stops the agent with the reason (exit 1), leaves a file that
/// reads up to its last complete block.
#[test]
fn a_full_disk_ends_the_recording_cleanly() {
    let py = python("debian-bookworm-3.11");
    let dir = scratch("full");
    let small = dir.join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "neurogc-full"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount a 256 KiB tmpfs");
    let trace = small.join("full.ngc");
    let out = agent()
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--mode", "observe", "--duration", "60", "--"])
        .args(py.command(&["--seconds", "8", "--threshold", "100"]))
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (report, rep) = report_json(&trace, &[]);
    let _ = Command::new("umount").arg(&small).status();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    // The disk filled mid-block, or between blocks: the report of what was written, and status
    // 2 where it is cut.
    let rep_err = String::from_utf8_lossy(&rep.stderr);
    assert!(
        rep.status.success() || (rep.status.code() == Some(2) && rep_err.contains("is incomplete")),
        "{rep_err}"
    );
    assert!(report["collections"].as_u64().unwrap() > 0, "{report}");
}
