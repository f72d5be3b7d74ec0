//! `--replay FILE`: the feature windows of a recorded `--json` stream, recomputed by the same
//! `Windower` the live agent uses, printed as "window" lines. Equal to the recorded ones by
//! construction; the test suite checks it on real recordings.
use std::{
    io::{BufRead, BufReader, Read, Write},
    path::Path,
};

use anyhow::Result;
use serde::Deserialize;

use crate::{
    bail_user,
    events::Collection,
    features::{self, Sample, Windower},
};

#[derive(Deserialize)]
struct Line {
    /// Absent on lines that are not the agent's (the target's own JSON output, in launch mode).
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    schema: Option<u32>,
    #[serde(default)]
    sample: Option<Sample>,
    #[serde(default)]
    r#gen: Option<i8>,
    #[serde(default)]
    duration_ns: Option<u64>,
    #[serde(default)]
    collected: Option<i64>,
}

/// Largest trace read (a 10-million-collection recording is ≈ 1.2 GB of JSON lines).
const MAX_TRACE_BYTES: u64 = 64 << 30;
/// Longest line: the agent's own are a few KiB (the attach line lists the feature names).
const MAX_LINE_BYTES: u64 = 1 << 20;

pub fn run(path: &Path) -> Result<()> {
    let (file, _) = crate::input::open_regular(path, "trace", MAX_TRACE_BYTES)?;
    let mut windower: Option<Windower> = None;
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let mut windows = 0;
    let mut reader = BufReader::new(file);
    let mut raw = Vec::new();
    for n in 0.. {
        raw.clear();
        let read = (&mut reader).take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut raw);
        let at = || format!("{}:{}", path.display(), n + 1);
        match read {
            Ok(0) => break,
            Ok(_) if raw.len() as u64 > MAX_LINE_BYTES => {
                bail_user!("{}: a line longer than {MAX_LINE_BYTES} bytes: not a neurogc trace", at())
            }
            Ok(_) => {}
            Err(e) => bail_user!("reading trace {}: {e}", path.display()),
        }
        let Ok(line) = std::str::from_utf8(&raw) else {
            bail_user!("{}: not text (a binary file?): not a neurogc trace", at())
        };
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() || !line.starts_with('{') {
            continue; // the target's own output may be interleaved with the agent's
        }
        let parsed: Line = match serde_json::from_str(line) {
            Ok(l) => l,
            Err(e) => bail_user!("{}: not a neurogc JSON line ({e})", at()),
        };
        match parsed.kind.as_deref().unwrap_or_default() {
            "attach" => {
                if parsed.schema != Some(features::SCHEMA) {
                    bail_user!(
                        "{}: trace has feature schema {:?}, this agent computes {}",
                        at(),
                        parsed.schema,
                        features::SCHEMA
                    );
                }
                let Some(sample) = parsed.sample else {
                    bail_user!("{}: attach line without a sample", at())
                };
                windower = Some(Windower::new(sample));
            }
            "gc" => {
                let (Some(g), Some(d), Some(c)) = (parsed.r#gen, parsed.duration_ns, parsed.collected) else {
                    bail_user!("{}: gc line without gen/duration_ns/collected", at())
                };
                let Some(w) = windower.as_mut() else {
                    bail_user!("{}: gc line before the attach line", at())
                };
                w.record(&Collection {
                    kind: "gc",
                    ts_ns: 0,
                    pid: 0,
                    tid: 0,
                    r#gen: g,
                    duration_ns: d,
                    collected: c,
                    uncollectable: 0,
                });
            }
            "window" => {
                let Some(sample) = parsed.sample else {
                    bail_user!("{}: window line without a sample", at())
                };
                let Some(w) = windower.as_mut() else {
                    bail_user!("{}: window line before the attach line", at())
                };
                serde_json::to_writer(&mut out, &w.close(sample))?;
                writeln!(out)?;
                windows += 1;
            }
            _ => {}
        }
    }
    if windower.is_none() {
        bail_user!("{} has no attach line: record it with neurogc-agent --json", path.display());
    }
    out.flush()?;
    tracing::debug!("{windows} windows replayed");
    Ok(())
}
