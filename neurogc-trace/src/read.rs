//! Reads a trace: a `.ngc` recording (zstd frames of JSON lines) or a plain `--json` stream,
//! told apart by the zstd magic number. Nothing in the input can make it panic or grow without
//! bound: lines and blocks have a size limit, and every failure is a [`TraceError`] that names the
//! byte or line where it happened.
//!
//! A recording that ends inside a block (recorder killed, disk full) reads up to its last
//! complete block and says so in [`TraceReader::truncated`]; a block that is damaged anywhere
//! else is an error, since what follows it cannot be trusted to be in order.
use std::{fmt, io::Read};

use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

use crate::{
    fast,
    record::{Collection, FORMAT, Record},
};

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The agent's lines are a few KiB at most (the attach line lists the feature names).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// A block holds about `write::BLOCK_BYTES` of lines; anything much larger was not written by us.
pub const MAX_BLOCK_BYTES: usize = 16 << 20;
const CHUNK: usize = 256 << 10;

#[derive(Debug)]
pub enum TraceError {
    Io(std::io::Error),
    /// The input is not a neurogc trace, or is damaged: the text says where and why.
    Invalid(String),
    /// Written by a newer neurogc.
    Newer(u32),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Io(e) => write!(f, "{e}"),
            TraceError::Invalid(why) => f.write_str(why),
            TraceError::Newer(v) => write!(
                f,
                "written in trace format {v} by a newer neurogc; this one reads formats 1 to {FORMAT}: upgrade neurogc-agent to read it"
            ),
        }
    }
}

impl std::error::Error for TraceError {}

impl From<std::io::Error> for TraceError {
    fn from(e: std::io::Error) -> Self {
        TraceError::Io(e)
    }
}

fn invalid<T>(why: String) -> Result<T, TraceError> {
    Err(TraceError::Invalid(why))
}

pub struct TraceReader<R: Read> {
    input: R,
    raw: Vec<u8>,
    /// Unconsumed input is raw[pos..len].
    pos: usize,
    len: usize,
    eof: bool,
    /// Bytes of input consumed before raw[0].
    offset: u64,
    zstd: Option<Decoder<'static>>,
    /// Decoded text waiting to be split into lines: text[at..].
    text: Vec<u8>,
    at: usize,
    line: u64,
    attached: bool,
    truncated: Option<String>,
    /// Lines that are not the agent's (a target's own output in launch mode) or of a record type
    /// this build does not know.
    pub skipped: u64,
}

/// What the records are: a `.ngc` recording or JSON lines.
pub fn is_recording(first_bytes: &[u8]) -> bool {
    first_bytes.starts_with(&ZSTD_MAGIC)
}

impl<R: Read> TraceReader<R> {
    pub fn new(mut input: R) -> Result<Self, TraceError> {
        let mut raw = vec![0; CHUNK];
        let mut len = 0;
        while len < 4 {
            match input.read(&mut raw[len..])? {
                0 => break,
                n => len += n,
            }
        }
        if len == 0 {
            return invalid("the file is empty: not a neurogc trace".to_owned());
        }
        let zstd = if is_recording(&raw[..len]) { Some(Decoder::new()?) } else { None };
        Ok(TraceReader {
            input,
            raw,
            pos: 0,
            len,
            eof: false,
            offset: 0,
            zstd,
            text: Vec::new(),
            at: 0,
            line: 0,
            attached: false,
            truncated: None,
            skipped: 0,
        })
    }

    pub fn is_recording(&self) -> bool {
        self.zstd.is_some()
    }

    /// Why the input ended early, once [`TraceReader::next`] has returned `None`.
    pub fn truncated(&self) -> Option<&str> {
        self.truncated.as_deref()
    }

    /// Refills `raw` once its input is used up; false at the end of the input.
    fn refill(&mut self) -> Result<bool, TraceError> {
        if self.pos < self.len {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        self.offset += self.len as u64;
        self.pos = 0;
        self.len = loop {
            match self.input.read(&mut self.raw) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        };
        self.eof = self.len == 0;
        Ok(!self.eof)
    }

    /// The next whole zstd frame's text into `self.text`; false at the end.
    fn next_block(&mut self) -> Result<bool, TraceError> {
        self.text.clear();
        self.at = 0;
        let start = self.offset + self.pos as u64;
        let mut begun = false;
        loop {
            if !self.refill()? {
                if begun {
                    self.truncated = Some(format!(
                        "the recording ends inside the block that starts at byte {start} (the recorder was killed, or the disk filled): read up to the last complete block"
                    ));
                }
                return Ok(false);
            }
            let decoder = self.zstd.as_mut().expect("zstd input");
            let mut inb = InBuffer::around(&self.raw[self.pos..self.len]);
            // Decoded straight into the text buffer's spare room: no copy.
            self.text.reserve(CHUNK);
            let filled = self.text.len();
            let mut outb = OutBuffer::around_pos(&mut self.text, filled);
            let hint = decoder.run(&mut inb, &mut outb).or_else(|e| {
                invalid(format!(
                    "the block at byte {start} is damaged ({e}): the file was changed after it was written"
                ))
            })?;
            begun |= inb.pos() > 0;
            self.pos += inb.pos();
            if self.text.len() > MAX_BLOCK_BYTES {
                return invalid(format!(
                    "the block at byte {start} holds more than {MAX_BLOCK_BYTES} bytes: not a neurogc recording"
                ));
            }
            if hint == 0 {
                return Ok(true);
            }
        }
    }

    /// The next line (without its newline), or None at the end.
    fn next_line(&mut self) -> Result<Option<(usize, usize)>, TraceError> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.text[self.at..]) {
                let line = (self.at, self.at + i);
                self.at += i + 1;
                self.line += 1;
                if i > MAX_LINE_BYTES {
                    return invalid(format!(
                        "line {}: longer than {MAX_LINE_BYTES} bytes: not a neurogc trace",
                        self.line
                    ));
                }
                return Ok(Some(line));
            }
            if self.zstd.is_some() {
                if self.at < self.text.len() {
                    // Every block ends with a newline: the writer only seals whole lines.
                    return invalid(format!(
                        "a block ending near line {} stops mid-line: not a neurogc recording",
                        self.line
                    ));
                }
                if !self.next_block()? {
                    return Ok(None);
                }
                continue;
            }
            // JSON lines: keep what is left of the current line, read more.
            self.text.drain(..self.at);
            self.at = 0;
            if self.text.len() > MAX_LINE_BYTES {
                return invalid(format!(
                    "line {}: longer than {MAX_LINE_BYTES} bytes: not a neurogc trace",
                    self.line + 1
                ));
            }
            if !self.refill()? {
                if self.text.is_empty() {
                    return Ok(None);
                }
                // A last line without its newline: the writer was stopped mid-line.
                self.truncated = Some(format!(
                    "the last line ({}) is incomplete (the agent was killed?): ignored",
                    self.line + 1
                ));
                self.text.clear();
                return Ok(None);
            }
            self.text.extend_from_slice(&self.raw[self.pos..self.len]);
            self.pos = self.len;
        }
    }

    /// The next record, or None at the end (then see [`TraceReader::truncated`]).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Record>, TraceError> {
        while let Some((a, b)) = self.next_line()? {
            let line = &self.text[a..b];
            let n = self.line;
            if line.is_empty() || line[0] != b'{' {
                if std::str::from_utf8(line).is_err() {
                    return invalid(format!("line {n}: not text (a binary file?): not a neurogc trace"));
                }
                self.skipped += 1; // the target's own output, in a launch-mode stream
                continue;
            }
            if line.starts_with(br#"{"type":"attach","#) {
                // The format first: a newer attach record may not parse as this build's.
                #[derive(serde::Deserialize)]
                struct Format {
                    format: Option<u32>,
                }
                if let Ok(Format { format: Some(v) }) = serde_json::from_slice(line)
                    && v > FORMAT
                {
                    return Err(TraceError::Newer(v));
                }
            }
            let record = if line.starts_with(br#"{"type":"gc","#) {
                // Most records are collections: the writer's exact layout is read directly, and
                // anything else (other spacing, field order, a bad number) goes through serde.
                match fast::collection(line) {
                    Some(c) => Ok(Record::Gc(c)),
                    None => serde_json::from_slice::<Collection>(line).map(Record::Gc),
                }
            } else {
                serde_json::from_slice::<Record>(line)
            };
            let record = match record {
                Ok(r) => r,
                Err(e) => match serde_json::from_slice::<serde_json::Value>(line) {
                    // Valid JSON of a type this build does not know, or not the agent's at all.
                    Ok(v) if v.get("type").is_none_or(|t| !is_known(t)) => {
                        self.skipped += 1;
                        continue;
                    }
                    _ => return invalid(format!("line {n}: not a neurogc record ({e})")),
                },
            };
            match (&record, self.attached) {
                (Record::Attach(_), _) => self.attached = true,
                (_, false) => {
                    return invalid(format!(
                        "line {n}: a record before the attach record: not a neurogc trace, or its beginning is missing"
                    ));
                }
                _ => {}
            }
            return Ok(Some(record));
        }
        if !self.attached {
            // A recording cut inside its first block is still a recording: say so, not "not one".
            if self.truncated.is_some() {
                return invalid(
                    "the recording ends inside its first block (the recorder was killed, or the disk filled, before it wrote one whole block of records): nothing in it can be read".to_owned(),
                );
            }
            return invalid(
                "no attach record: not a neurogc trace (record one with `neurogc-agent record`)".to_owned(),
            );
        }
        Ok(None)
    }
}

fn is_known(tag: &serde_json::Value) -> bool {
    crate::record::TAGS.iter().any(|k| tag == k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        record::{Attach, Sample},
        write::TraceWriter,
    };

    fn attach(format: u32) -> Record {
        Record::Attach(Box::new(Attach {
            format,
            pid: 7,
            python: "3.12.8".into(),
            probe: "usdt".into(),
            mode: "observe".into(),
            schema: 1,
            features: vec![],
            sample: Sample {
                ts_ns: 1,
                thresholds: None,
                count0: None,
                rss_bytes: 0,
                cpu_ns: 0,
                freeze_count: None,
                older_counts: None,
                long_lived: None,
                frozen: None,
                runq_ns: None,
                runs: None,
            },
            build: None,
            host: None,
            agent: None,
            interval_s: None,
            model: None,
            guard: None,
            age_s: None,
        }))
    }

    fn gc(i: u64) -> Record {
        Record::Gc(Collection {
            ts_ns: 1_000 + i * 977,
            pid: 7,
            tid: 7,
            r#gen: (i % 3) as i8,
            duration_ns: 20_000 + i % 1000,
            collected: (i % 50) as i64,
            uncollectable: 0,
            stack: None,
            running: None,
            halted: None,
        })
    }

    fn recording(n: u64, blocks: u64) -> Vec<u8> {
        let mut w = TraceWriter::zstd(Vec::new()).unwrap();
        w.write(&attach(FORMAT)).unwrap();
        for i in 0..n {
            w.write(&gc(i)).unwrap();
            if (i + 1) % (n / blocks) == 0 {
                w.seal().unwrap();
            }
        }
        w.seal().unwrap();
        std::mem::take(w.get_mut())
    }

    fn read_all(bytes: &[u8]) -> Result<(Vec<Record>, Option<String>), TraceError> {
        let mut r = TraceReader::new(bytes)?;
        let mut out = Vec::new();
        while let Some(rec) = r.next()? {
            out.push(rec);
        }
        Ok((out, r.truncated().map(str::to_owned)))
    }

    #[test]
    fn what_is_written_is_read_back_in_order() {
        let bytes = recording(10_000, 10);
        let (records, truncated) = read_all(&bytes).unwrap();
        assert_eq!(truncated, None);
        assert_eq!(records.len(), 10_001);
        assert_eq!(records[0], attach(FORMAT));
        assert!(records[1..].iter().enumerate().all(|(i, r)| *r == gc(i as u64)));
    }

    #[test]
    fn a_cut_anywhere_keeps_every_complete_block_before_it() {
        let bytes = recording(3_000, 3);
        let full = read_all(&bytes).unwrap().0.len();
        for cut in (1..bytes.len()).step_by(97) {
            let (records, truncated) = match read_all(&bytes[..cut]) {
                Ok(r) => r,
                // Too short to hold the attach record's block: refused as a cut recording, not
                // as something else, and not a panic.
                // (Under 4 bytes not even zstd's magic number is there to tell.)
                Err(TraceError::Invalid(why)) => {
                    assert!(cut < 4 || why.contains("ends inside its first block"), "cut {cut}: {why}");
                    continue;
                }
                Err(e) => panic!("cut at {cut}: {e}"),
            };
            assert!(records.len() < full);
            // Blocks hold 1 attach + 1000 collections, then 1000: only whole blocks come back.
            assert!(records.len() == 1 || (records.len() - 1) % 1000 == 0, "cut {cut}: {}", records.len());
            assert!(truncated.is_some(), "cut {cut}");
        }
    }

    #[test]
    fn damage_in_the_middle_is_an_error_that_says_where() {
        let mut bytes = recording(3_000, 3);
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        match read_all(&bytes) {
            Err(TraceError::Invalid(why)) => assert!(why.contains("damaged"), "{why}"),
            other => panic!("{:?}", other.map(|(r, t)| (r.len(), t))),
        }
    }

    #[test]
    fn newer_formats_are_refused_and_older_lines_read() {
        let mut w = TraceWriter::json_lines(Vec::new());
        w.write(&attach(FORMAT + 1)).unwrap();
        w.seal().unwrap();
        assert!(matches!(read_all(w.get_mut()), Err(TraceError::Newer(v)) if v == FORMAT + 1));
        let text = "hello from the target\n{\"type\":\"attach\",\"pid\":7,\"python\":\"3.12.8\",\"probe\":\"usdt\",\
            \"mode\":\"observe\",\"schema\":1,\"features\":[],\"sample\":{\"ts_ns\":1,\"thresholds\":null,\
            \"count0\":null,\"rss_bytes\":0,\"cpu_ns\":0,\"freeze_count\":null}}\n{\"type\":\"future-thing\"}\n{\"x\":1}\n";
        let mut r = TraceReader::new(text.as_bytes()).unwrap();
        assert_eq!(r.next().unwrap(), Some(attach(1)));
        assert_eq!(r.next().unwrap(), None);
        assert_eq!(r.skipped, 3);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        for bad in
            [&b""[..], b"\x00\x01\x02", b"{not json}\n", b"[1,2]\n", &[0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0]]
        {
            assert!(read_all(bad).is_err() || read_all(bad).unwrap().0.is_empty(), "{bad:?}");
        }
        let gc_first = serde_json::to_string(&gc(1)).unwrap() + "\n";
        assert!(
            matches!(read_all(gc_first.as_bytes()), Err(TraceError::Invalid(w)) if w.contains("before the attach"))
        );
    }
}
