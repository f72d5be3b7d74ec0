//! The one hot path of reading: a "gc" record exactly as the writer lays it out (serde_json,
//! fields in declaration order, no spaces). Ten million of them must read in seconds, and serde's
//! field matching was most of that time. Anything that does not match the layout byte for byte —
//! another writer's spacing, a field order, a number out of range — returns None, and the
//! caller reads the line with serde instead, so this can only ever be faster, never different.
use crate::record::Collection;

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn lit(&mut self, l: &[u8]) -> Option<()> {
        let end = self.i + l.len();
        (self.s.get(self.i..end)? == l).then(|| self.i = end)
    }

    fn uint(&mut self) -> Option<u64> {
        let start = self.i;
        let mut v: u64 = 0;
        while let Some(&b @ b'0'..=b'9') = self.s.get(self.i) {
            v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        // serde_json never writes leading zeros; "0" alone is fine.
        (digits > 0 && (digits == 1 || self.s[start] != b'0')).then_some(v)
    }

    fn int(&mut self) -> Option<i64> {
        if self.lit(b"-").is_some() {
            let v = self.uint()?;
            // −i64::MAX at most: i64::MIN is left to serde.
            return i64::try_from(v).ok().map(|v| -v);
        }
        i64::try_from(self.uint()?).ok()
    }
}

pub fn collection(line: &[u8]) -> Option<Collection> {
    let mut c = Cursor { s: line, i: 0 };
    c.lit(br#"{"type":"gc","ts_ns":"#)?;
    let ts_ns = c.uint()?;
    c.lit(br#","pid":"#)?;
    let pid = u32::try_from(c.uint()?).ok()?;
    c.lit(br#","tid":"#)?;
    let tid = u32::try_from(c.uint()?).ok()?;
    c.lit(br#","gen":"#)?;
    let r#gen = i8::try_from(c.int()?).ok()?;
    c.lit(br#","duration_ns":"#)?;
    let duration_ns = c.uint()?;
    c.lit(br#","collected":"#)?;
    let collected = c.int()?;
    c.lit(br#","uncollectable":"#)?;
    let uncollectable = c.int()?;
    let stack = match c.lit(br#","stack":"#) {
        Some(()) => Some(u32::try_from(c.uint()?).ok()?),
        None => None,
    };
    let running = match c.lit(br#","running":"#) {
        Some(()) => Some(u32::try_from(c.uint()?).ok()?),
        None => None,
    };
    let halted = match c.lit(br#","halted":"#) {
        Some(()) => Some(u32::try_from(c.uint()?).ok()?),
        None => None,
    };
    c.lit(b"}")?;
    (c.i == line.len()).then_some(Collection {
        ts_ns,
        pid,
        tid,
        r#gen,
        duration_ns,
        collected,
        uncollectable,
        stack,
        running,
        halted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    fn serde(line: &[u8]) -> Option<Collection> {
        serde_json::from_slice(line).ok()
    }

    #[test]
    fn agrees_with_serde_on_what_the_writer_writes() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0, 1, 9, 10, u64::MAX, i64::MAX as u64, u32::MAX as u64];
        for i in 0..20_000 {
            let pick = |r: u64| if i % 4 == 0 { edges[(r % 7) as usize] } else { r >> (r % 64) };
            let c = Collection {
                ts_ns: pick(next()),
                pid: pick(next()) as u32,
                tid: pick(next()) as u32,
                r#gen: (next() % 256) as u8 as i8,
                duration_ns: pick(next()),
                collected: pick(next()) as i64,
                uncollectable: if i % 5 == 0 { i64::MIN } else { -(pick(next()) as i64 >> 1) },
                stack: (i % 3 == 0).then(|| pick(next()) as u32),
                running: (i % 7 == 0).then(|| pick(next()) as u32),
                halted: (i % 11 == 0).then(|| pick(next()) as u32),
            };
            let line = serde_json::to_vec(&Record::Gc(c)).unwrap();
            let fast = collection(&line);
            assert!(fast.is_none() || fast == Some(c), "{}", String::from_utf8_lossy(&line));
            // i64::MIN is the only value the fast path leaves to serde.
            assert_eq!(fast.is_some(), c.uncollectable != i64::MIN && c.collected != i64::MIN);
        }
    }

    #[test]
    fn anything_off_layout_falls_back() {
        let ok = br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0}"#;
        assert!(collection(ok).is_some());
        let with_stack = br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0,"stack":7}"#;
        assert_eq!(collection(with_stack).unwrap().stack, Some(7));
        let running = br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0,"stack":7,"running":4,"halted":2}"#;
        assert_eq!(
            collection(running).map(|c| (c.stack, c.running, c.halted)),
            Some((Some(7), Some(4), Some(2)))
        );
        for bad in [
            &br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0} "#[..],
            br#"{"type":"gc","ts_ns":05,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0}"#,
            br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":300,"duration_ns":9,"collected":3,"uncollectable":0}"#,
            br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":-9,"collected":3,"uncollectable":0}"#,
            br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3}"#,
            br#"{"type":"gc", "ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0}"#,
            br#"{"type":"gc","ts_ns":99999999999999999999,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0}"#,
            br#"{"type":"gc","ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0,"stack":99999999999}"#,
        ] {
            assert_eq!(collection(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        // What serde accepts of those, the reader still gets through serde.
        assert!(serde(br#"{"type":"gc", "ts_ns":5,"pid":1,"tid":2,"gen":0,"duration_ns":9,"collected":3,"uncollectable":0}"#).is_some());
    }
}
