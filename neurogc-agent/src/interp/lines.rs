//! Instruction offset → source line, for the three line-table formats of CPython 3.8–3.15
//! (Objects/lnotab_notes.txt and Objects/locations.md in CPython's source).
use super::frames::LineTable;

/// The line of the instruction at `offset` (bytes for 3.8–3.10, code units for 3.11+), or None
/// where the table gives it none.
pub fn line_at(table: LineTable, bytes: &[u8], firstlineno: i32, offset: u64) -> Option<u32> {
    let line = match table {
        LineTable::Lnotab => lnotab(bytes, firstlineno, offset),
        LineTable::Ranges310 => ranges(bytes, firstlineno, offset),
        LineTable::Locations => locations(bytes, firstlineno, offset)?,
    };
    u32::try_from(line).ok().filter(|l| *l > 0)
}

/// (address increment, signed line increment) pairs; the last line whose address is ≤ offset.
fn lnotab(bytes: &[u8], firstlineno: i32, offset: u64) -> i32 {
    let (mut line, mut addr) = (firstlineno, 0u64);
    for pair in bytes.chunks_exact(2) {
        addr += u64::from(pair[0]);
        if addr > offset {
            break;
        }
        line += i32::from(pair[1] as i8);
    }
    line
}

/// 3.10: (range length, signed line delta) pairs, −128 for "no line" in that range.
fn ranges(bytes: &[u8], firstlineno: i32, offset: u64) -> i32 {
    let (mut line, mut start) = (firstlineno, 0u64);
    for pair in bytes.chunks_exact(2) {
        let end = start + u64::from(pair[0]);
        let delta = pair[1] as i8;
        if delta != -128 {
            line += i32::from(delta);
        }
        if (start..end).contains(&offset) {
            return if delta == -128 { 0 } else { line };
        }
        start = end;
    }
    line
}

struct Bytes<'a> {
    b: &'a [u8],
    i: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> Option<u8> {
        let v = *self.b.get(self.i)?;
        self.i += 1;
        Some(v)
    }

    /// 6 bits per byte, bit 6 set when more follow.
    fn varint(&mut self) -> Option<u32> {
        let mut read = self.next()?;
        let mut val = u32::from(read & 63);
        let mut shift = 6;
        while read & 64 != 0 && shift < 32 {
            read = self.next()?;
            val |= u32::from(read & 63) << shift;
            shift += 6;
        }
        Some(val)
    }

    fn svarint(&mut self) -> Option<i32> {
        let v = self.varint()?;
        Some(if v & 1 != 0 { -((v >> 1) as i32) } else { (v >> 1) as i32 })
    }
}

/// 3.11+: entries of `(code << 3) | (length − 1)` with bit 7 set, each covering `length` code
/// units, followed by the form's operands.
fn locations(bytes: &[u8], firstlineno: i32, offset: u64) -> Option<i32> {
    let mut r = Bytes { b: bytes, i: 0 };
    let (mut line, mut addr) = (firstlineno, 0u64);
    while let Some(first) = r.next() {
        if first & 0x80 == 0 {
            return None; // not at an entry: a damaged table
        }
        let code = (first >> 3) & 15;
        let length = u64::from(first & 7) + 1;
        let mut has_line = true;
        match code {
            15 => has_line = false,
            14 => {
                line += r.svarint()?;
                for _ in 0..3 {
                    r.varint()?;
                }
            }
            13 => line += r.svarint()?,
            10..=12 => {
                line += i32::from(code) - 10;
                r.next()?;
                r.next()?;
            }
            _ => {
                r.next()?;
            }
        }
        if (addr..addr + length).contains(&offset) {
            return Some(if has_line { line } else { 0 });
        }
        addr += length;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_tables_place_instructions_on_their_lines() {
        // firstlineno 10: RESUME (short form, line +0), 2 units on line 11 (one-line form +1),
        // 3 units on line 14 (no-column form, +3), 1 unit with no location, then line 12 (long
        // form, −2, with end line and columns).
        let table = [
            0x80,
            0,
            0x80 | (11 << 3) | 1,
            4,
            9,
            0x80 | (13 << 3) | 2,
            6,
            0x80 | (15 << 3),
            0x80 | (14 << 3),
            5,
            0,
            1,
            1,
        ];
        let at = |u| line_at(LineTable::Locations, &table, 10, u);
        assert_eq!(
            [at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)],
            [Some(10), Some(11), Some(11), Some(14), Some(14), Some(14), None, Some(12)]
        );
        assert_eq!(at(8), None, "past the end");
    }

    #[test]
    fn older_tables_too() {
        // 3.8/3.9: line 5 from byte 0, 7 from byte 6, 6 from byte 10.
        let lnotab = [6, 2, 4, (-1i8) as u8];
        let at = |o| line_at(LineTable::Lnotab, &lnotab, 5, o);
        assert_eq!(
            [at(0), at(5), at(6), at(9), at(10), at(40)],
            [Some(5), Some(5), Some(7), Some(7), Some(6), Some(6)]
        );
        // 3.10: bytes 0–3 on line 3, 4–5 without a line, 6–9 on line 4.
        let ranges310 = [4, 0, 2, (-128i8) as u8, 4, 1];
        let at = |o| line_at(LineTable::Ranges310, &ranges310, 3, o);
        assert_eq!([at(0), at(3), at(4), at(6), at(9)], [Some(3), Some(3), None, Some(4), Some(4)]);
    }
}
