//! Finds the GC state in the live process and proves the layout before anything trusts it:
//! `generation0` must point at the first generation's list head, and every list head must be
//! linked both ways (`head->next->prev == head`). A random offset satisfies neither. Free-threaded
//! builds link no lists: there the unused heads must be zero and the flags flags.
use anyhow::{Result, bail};
use neurogc_common::{RING_COUNTERS_AT, RING_RECORD_BYTES, StatsLocator};

use super::cpython::{GcLayout, GcStateLocation, Interpreter, StatsAt};
use crate::memory::{ProcMem, i32_at, i64_at, read_bytes, read_u64, u64_at};

const GEN_STRIDE: u64 = 24;
/// `_gc_prev` keeps two flag bits in its low bits (3.8+).
const PREV_MASK: u64 = !3;

/// A located, validated GC state.
#[derive(Debug, Clone, Copy)]
pub struct GcState {
    pub address: u64,
    /// Offset of `generations[0]` (its list head) from `address`.
    pub generations: u64,
    /// Offset of `long_lived_total` (see `GcLayout::long_lived`).
    pub long_lived: Option<u64>,
    /// A free-threaded build's state: threads enter the collector at once (see `events::Counted`).
    pub free_threaded: bool,
    /// Offset of the permanent generation's list head, where the layout has one and it was
    /// found linked.
    pub permanent: Option<u64>,
}

/// Thresholds and counts, read from memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GcSettings {
    pub thresholds: [i32; 3],
    /// Per generation: net allocations (gen0), collections of the younger generation (1, 2).
    pub counts: [i32; 3],
    /// `long_lived_total` and `long_lived_pending`, where the build has them and they are
    /// plausible.
    pub long_lived: Option<[i64; 2]>,
    /// Whether `gc.freeze()` has left objects in the permanent generation (its head links to
    /// something else than itself), where the layout locates it. Not how many: counting them
    /// walks the list, as `gc.get_freeze_count()` does.
    pub frozen: Option<bool>,
}

/// The GC state's location in the running process, link-time addresses already biased.
#[derive(Debug, Clone, Copy)]
pub struct GcLocator {
    pub location: GcStateLocation,
    pub layout: GcLayout,
}

impl GcLocator {
    pub fn new(interp: &Interpreter, bias: u64) -> Option<GcLocator> {
        let location = match interp.gc_state_location()? {
            GcStateLocation::Static { address } => GcStateLocation::Static { address: address + bias },
            GcStateLocation::MainInterpreter { main_ptr, gc_offset } => {
                GcStateLocation::MainInterpreter { main_ptr: main_ptr + bias, gc_offset }
            }
        };
        Some(GcLocator { location, layout: interp.gc_layout()? })
    }

    /// What the eBPF program follows to read `generation_stats[]` on every collection.
    pub fn stats_locator(&self) -> StatsLocator {
        let at = match self.layout.stats {
            StatsAt::Inline(at) => at,
            StatsAt::Rings { pointer, .. } => pointer,
        };
        let (base_ptr, offset) = match self.location {
            GcStateLocation::Static { address } => (0, address + at),
            GcStateLocation::MainInterpreter { main_ptr, gc_offset } => (main_ptr, gc_offset + at),
        };
        let mut loc = StatsLocator { base_ptr, offset, enabled: 1, ..Default::default() };
        if let Some(rings) = self.layout.stats.rings() {
            loc.ring = 1;
            for (g, (index, items, slots)) in rings.into_iter().enumerate() {
                (loc.ring_index[g], loc.ring_items[g], loc.ring_slots[g]) =
                    (index as u32, items as u32, slots);
            }
        }
        loc
    }

    /// Ok(None): the interpreter is not initialised yet (launch mode), try again later.
    pub fn locate(&self, pid: i32) -> Result<Option<GcState>> {
        let address = match self.location {
            GcStateLocation::Static { address } => address,
            GcStateLocation::MainInterpreter { main_ptr, gc_offset } => match read_u64(pid, main_ptr)? {
                0 => return Ok(None),
                interp => interp + gc_offset,
            },
        };
        let gc = read_bytes(pid, address, self.layout.size as usize)?;
        let generations = match self.layout.gen0_ptr {
            Some(off) => match u64_at(&gc, off as usize) {
                0 => return Ok(None),
                ptr => ptr.wrapping_sub(address),
            },
            None => self.layout.generations,
        };
        if self.layout.gen0_ptr.is_some() && generations != 20 && generations != 24 {
            bail!("generation0 points {generations:#x} bytes into the GC state (expected 20 or 24)");
        }
        if self.layout.lists {
            linked_heads(pid, address + generations)?;
        } else {
            unlinked_state(&gc, generations)?;
        }
        match self.layout.stats {
            StatsAt::Inline(at) => {
                for g in 0..3 {
                    let off = (at + g * 24) as usize;
                    plausible(g, [i64_at(&gc, off), i64_at(&gc, off + 8), i64_at(&gc, off + 16)])?;
                }
            }
            StatsAt::Rings { pointer, .. } => {
                check_rings(pid, u64_at(&gc, pointer as usize), &self.layout.stats)?
            }
        }
        // Only gc.freeze() and gc.unfreeze() relink it, under the GIL: a head read as not linked
        // is a layout not as measured, and the reading goes without it.
        let permanent = self.layout.permanent.filter(|&at| linked(pid, address + at));
        Ok(Some(GcState {
            address,
            generations,
            long_lived: self.layout.long_lived,
            free_threaded: !self.layout.lists,
            permanent,
        }))
    }
}

/// The generations' list heads, linked both ways (`head->next->prev == head`). During a
/// collection `_gc_prev` holds reference counts, not pointers, and lists are spliced: the caller
/// retries a failed check on a later drain (collections last µs to ms) rather than sleeping
/// here, on the loop that drains the ring buffer.
fn linked_heads(pid: i32, first: u64) -> Result<()> {
    for i in 0..3u64 {
        let head = first + i * GEN_STRIDE;
        if !linked(pid, head) {
            bail!("generation {i} list head at {head:#x} is not a linked list head");
        }
    }
    Ok(())
}

/// `head->next->prev == head`: a list head (an empty one links to itself).
fn linked(pid: i32, head: u64) -> bool {
    read_u64(pid, head).and_then(|next| read_u64(pid, next + 8)).is_ok_and(|prev| prev & PREV_MASK == head)
}

/// A free-threaded build's state: no list is linked (the three heads and `generation0` stay
/// zero), `enabled` and `collecting` are flags, thresholds are not negative and counts not far
/// below zero (the per-thread batches subtract frees too). A random offset holds pointers or
/// other numbers there.
fn unlinked_state(gc: &[u8], generations: u64) -> Result<()> {
    let (g, stride) = (generations as usize, GEN_STRIDE as usize);
    // The three heads (next, prev), then `generation0` right after the generations.
    let heads = (0..3).flat_map(|i| [g + i * stride, g + i * stride + 8]).chain([g + 3 * stride]);
    if let Some(at) = heads.into_iter().find(|&at| u64_at(gc, at) != 0) {
        bail!(
            "free-threaded GC state: {at:#x} holds {:#x} where an unused list head is zero",
            u64_at(gc, at)
        );
    }
    for (name, at) in [("enabled", 12), ("collecting", 200)] {
        let v = i32_at(gc, at);
        if !(0..=1).contains(&v) {
            bail!("free-threaded GC state: `{name}` holds {v}, not a flag");
        }
    }
    for i in 0..3 {
        let (threshold, count) = (i32_at(gc, g + i * stride + 16), i32_at(gc, g + i * stride + 20));
        if threshold < 0 || count < -(1 << 30) {
            bail!("free-threaded GC state: generation {i} holds threshold {threshold}, count {count}");
        }
    }
    Ok(())
}

fn plausible(g: u64, counters: [i64; 3]) -> Result<()> {
    if counters.iter().any(|v| !(0..1 << 48).contains(v)) {
        bail!("generation {g}'s stats hold implausible counters {counters:?}");
    }
    Ok(())
}

/// 3.15's rings: each index names a record of its ring, and that record is the newest (its
/// cumulative `collections` is the ring's largest), with plausible counters.
fn check_rings(pid: i32, rings: u64, stats: &StatsAt) -> Result<()> {
    let layout = stats.rings().expect("a rings layout");
    let (last_index, _, _) = layout[2];
    let buf = read_bytes(pid, rings, last_index as usize + 1)?;
    for (g, (index_at, items_at, slots)) in layout.into_iter().enumerate() {
        let index = i32::from(buf[index_at as usize] as i8);
        if !(0..slots as i32).contains(&index) {
            bail!("generation {g}'s stats ring index {index} is not one of its {slots} records");
        }
        let record = |i: u64| {
            let at = (items_at + i * RING_RECORD_BYTES + RING_COUNTERS_AT) as usize;
            [i64_at(&buf, at), i64_at(&buf, at + 8), i64_at(&buf, at + 16)]
        };
        let newest = record(index as u64);
        plausible(g as u64, newest)?;
        if (0..u64::from(slots)).any(|i| record(i)[0] > newest[0]) {
            bail!("generation {g}'s stats ring index {index} does not name its newest record");
        }
    }
    Ok(())
}

impl GcState {
    /// `generations[g].threshold`: with the young count, the only fields an actuator may write.
    pub fn threshold_address(&self, generation: usize) -> u64 {
        self.address + self.generations + generation as u64 * GEN_STRIDE + 16
    }

    /// `generations[0].count`: the allocations (less deallocations) since the last young
    /// collection. Zeroed, as a young collection leaves it, before a call neurogc queues (see
    /// `Injection::try_queue`).
    pub fn young_count_address(&self) -> u64 {
        self.threshold_address(0) + 4
    }

    /// Bytes from `address` that hold the generations, the long-lived counters and the
    /// permanent generation's `next`: one read.
    fn span(&self) -> usize {
        let generations = self.generations + 3 * GEN_STRIDE;
        let counters = self.long_lived.map_or(generations, |at| generations.max(at + 16));
        self.permanent.map_or(counters, |at| counters.max(at + 8)) as usize
    }

    pub fn read_settings(&self, pid: i32) -> Result<GcSettings> {
        self.settings_from(&read_bytes(pid, self.address, self.span())?)
    }

    /// The same, through a descriptor bound to the image whose layout was validated.
    pub fn read_settings_in(&self, mem: &ProcMem) -> Result<GcSettings> {
        self.settings_from(&mem.read(self.address, self.span())?)
    }

    fn settings_from(&self, buf: &[u8]) -> Result<GcSettings> {
        let at = |g: u64, field: u64| i32_at(buf, (self.generations + g * GEN_STRIDE + 16 + field) as usize);
        // Counters a collection is reading or rewriting are still plain integers; anything out
        // of range means the layout is not what it seemed, and the reading is dropped.
        let long_lived = self.long_lived.and_then(|off| {
            let v = [i64_at(buf, off as usize), i64_at(buf, off as usize + 8)];
            v.iter().all(|x| (0..1 << 40).contains(x)).then_some(v)
        });
        let frozen = self.permanent.map(|at| u64_at(buf, at as usize) != self.address + at);
        Ok(GcSettings {
            thresholds: [at(0, 0), at(1, 0), at(2, 0)],
            counts: [at(0, 4), at(1, 4), at(2, 4)],
            long_lived,
            frozen,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 3.13.5t's GC state as read from a live process: zero list heads and `generation0`,
    /// `enabled` 1, thresholds 2000/10/10, count0 −5120 (the per-thread batches subtract too).
    fn free_threaded_state() -> Vec<u8> {
        let mut gc = vec![0u8; 248];
        gc[12..16].copy_from_slice(&1i32.to_le_bytes());
        for (g, (t, c)) in [(2000i32, -5120i32), (10, 0), (10, 0)].into_iter().enumerate() {
            gc[24 + g * 24 + 16..24 + g * 24 + 20].copy_from_slice(&t.to_le_bytes());
            gc[24 + g * 24 + 20..24 + g * 24 + 24].copy_from_slice(&c.to_le_bytes());
        }
        gc
    }

    #[test]
    fn a_free_threaded_state_is_told_from_other_memory() {
        assert!(unlinked_state(&free_threaded_state(), 24).is_ok());
        // A linked head (a GIL build's state, or something else) is not one.
        let mut linked = free_threaded_state();
        linked[48..56].copy_from_slice(&0x7f00_1234_5678u64.to_le_bytes());
        assert!(unlinked_state(&linked, 24).is_err());
        // Nor is one whose `enabled` is not a flag, or whose threshold is negative.
        let mut flag = free_threaded_state();
        flag[12] = 7;
        assert!(unlinked_state(&flag, 24).is_err());
        let mut negative = free_threaded_state();
        negative[24 + 16..24 + 20].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(unlinked_state(&negative, 24).is_err());
    }
}
