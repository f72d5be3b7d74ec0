//! Standard output that never splits a line. In launch mode the target inherits the agent's
//! stdout, so both write to one pipe or file: a write of at most PIPE_BUF bytes is never
//! interleaved with another's, so lines go out in whole-line chunks of at most that size, and a
//! recorded `--json` stream stays parseable whatever the target prints.
use std::io::{self, Write};

/// POSIX guarantees atomic pipe writes up to PIPE_BUF (4096 on Linux).
const CHUNK: usize = 4096;

pub struct LineWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> LineWriter<W> {
    pub fn new(inner: W) -> Self {
        LineWriter { inner, buf: Vec::with_capacity(2 * CHUNK) }
    }

    /// Writes out the complete lines, in chunks that end at a newline and fit in CHUNK bytes
    /// (a single line longer than CHUNK goes out alone). `all`: the last line too, even unfinished.
    fn drain(&mut self, all: bool) -> io::Result<()> {
        while !self.buf.is_empty() {
            let window = &self.buf[..self.buf.len().min(CHUNK)];
            let end = match window.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => match self.buf.iter().position(|&b| b == b'\n') {
                    Some(i) => i + 1,
                    None if all => self.buf.len(),
                    None => return Ok(()),
                },
            };
            if !all && end == self.buf.len() && self.buf.len() < CHUNK {
                return Ok(()); // keep collecting until a chunk is worth a write
            }
            self.inner.write_all(&self.buf[..end])?;
            self.buf.drain(..end);
        }
        Ok(())
    }
}

impl<W: Write> Write for LineWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.drain(false)?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain(true)?;
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the size and content of every write the inner writer receives.
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            self.0.push(data.to_vec());
            Ok(data.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_write_is_whole_lines_within_pipe_buf() {
        let mut w = LineWriter::new(Writes(Vec::new()));
        let line = format!("{{\"type\":\"gc\",\"pad\":\"{}\"}}\n", "x".repeat(97));
        for _ in 0..500 {
            // serde_json writes a line in several pieces
            let (a, b) = line.as_bytes().split_at(40);
            w.write_all(a).unwrap();
            w.write_all(b).unwrap();
        }
        w.flush().unwrap();
        let writes = &w.inner.0;
        assert!(writes.len() > 10);
        for chunk in writes {
            assert!(chunk.len() <= CHUNK && chunk.ends_with(b"\n"), "chunk of {} bytes", chunk.len());
        }
        assert_eq!(writes.concat(), line.repeat(500).into_bytes());
    }
}
