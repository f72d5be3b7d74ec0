//! `report --perfetto`: Chrome trace-event JSON (the format ui.perfetto.dev and chrome://tracing
//! open). One complete ("X") slice per collection on its thread's track, with generation,
//! collected and uncollectable as args; threshold changes as instant events and RSS as a
//! counter track. A collection with a Python stack carries it as its `stack` arg (innermost
//! frame first). Timestamps are microseconds since the Unix epoch, so the slices line up with
//! other traces of the same machine. Written as the trace is read: memory stays flat.
use std::{
    collections::{BTreeSet, HashMap},
    io::Write,
};

use anyhow::Result;
use neurogc_trace::Record;
use serde_json::json;

pub struct Writer<W: Write> {
    out: W,
    pid: i32,
    threads: BTreeSet<u32>,
    thresholds: Option<[i64; 3]>,
    first: bool,
    /// Frame labels, and each stack's arg already as a JSON string (written once per stack).
    frames: HashMap<u32, String>,
    stacks: HashMap<u32, String>,
}

/// ns since the epoch as µs, exactly (a JSON number with three decimals).
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W) -> Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ms\",\"traceEvents\":[")?;
        Ok(Writer {
            out,
            pid: 0,
            threads: BTreeSet::new(),
            thresholds: None,
            first: true,
            frames: HashMap::new(),
            stacks: HashMap::new(),
        })
    }

    /// Separates events: a JSON array takes no trailing comma.
    fn next(&mut self) -> Result<()> {
        self.out.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        Ok(())
    }

    fn event(&mut self, v: &serde_json::Value) -> Result<()> {
        self.next()?;
        serde_json::to_writer(&mut self.out, v)?;
        Ok(())
    }

    pub fn add(&mut self, record: &Record) -> Result<()> {
        match record {
            Record::Attach(a) => {
                self.pid = a.pid;
                self.thresholds = a.sample.thresholds;
                let name = format!("CPython {} (pid {})", a.python, a.pid);
                self.event(
                    &json!({"name": "process_name", "ph": "M", "pid": a.pid, "args": {"name": name}}),
                )?;
            }
            Record::Frame(f) => {
                let at = if f.file.is_empty() { String::new() } else { format!(" ({}:{})", f.file, f.line) };
                self.frames.insert(f.id, format!("{}{at}", f.name));
            }
            Record::Stack(st) => {
                let named: Vec<&str> = st
                    .frames
                    .iter()
                    .map(|id| self.frames.get(id).map_or("[unknown]", String::as_str))
                    .collect();
                let text = serde_json::to_string(&named.join("\n"))?;
                self.stacks.insert(st.id, text);
            }
            Record::Gc(c) => {
                self.threads.insert(c.tid);
                self.next()?;
                // Written by hand: this is the hot path, millions of times.
                write!(
                    self.out,
                    "{{\"name\":\"gc gen{g}\",\"cat\":\"gc\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},\"tid\":{},\
                     \"args\":{{\"generation\":{g},\"collected\":{},\"uncollectable\":{}",
                    micros(c.ts_ns),
                    micros(c.duration_ns),
                    c.pid,
                    c.tid,
                    c.collected,
                    c.uncollectable,
                    g = c.r#gen,
                )?;
                if let Some(stack) = c.stack.and_then(|id| self.stacks.get(&id)) {
                    write!(self.out, ",\"stack\":{stack}")?;
                }
                self.out.write_all(b"}}")?;
            }
            Record::Window(w) => {
                let (pid, ts) = (self.pid, micros(w.end_ns));
                let rss = w.sample.rss_bytes as f64 / 1048576.0;
                self.event(&json!({"name": "RSS (MiB)", "ph": "C", "pid": pid, "ts": raw(&ts), "args": {"rss": rss}}))?;
                if let Some(t) = w.sample.thresholds
                    && self.thresholds.is_some_and(|old| old != t)
                {
                    let name = format!("thresholds {}", crate::sinks::view::thresholds(t));
                    self.event(
                        &json!({"name": name, "ph": "i", "s": "p", "pid": pid, "tid": pid, "ts": raw(&ts)}),
                    )?;
                }
                self.thresholds = w.sample.thresholds.or(self.thresholds);
            }
            _ => {}
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<()> {
        for tid in std::mem::take(&mut self.threads) {
            let name =
                if tid as i32 == self.pid { "main thread".to_owned() } else { format!("thread {tid}") };
            self.event(&json!({"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid, "args": {"name": name}}))?;
        }
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(())
    }
}

/// A number given as exact text.
fn raw(text: &str) -> serde_json::Value {
    serde_json::Value::Number(text.parse().unwrap_or_else(|_| serde_json::Number::from(0)))
}
