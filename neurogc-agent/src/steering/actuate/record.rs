//! The fork guard's record in the target, read and written only after it is found and checked.
use super::*;

/// The fork guard's record: the buffer of a 64-byte bytearray the hook created (layout in
/// python-hook/neurogc_hook.py). Found from the object's `id()` and checked before any write:
/// its type must be `PyByteArray_Type`, its size 64 and its buffer must start with the magic.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
    buffer: u64,
}

/// `PyVarObject` then `ob_alloc`, `ob_bytes`, `ob_start`: the same in every 3.8–3.15 default
/// build; each `header_extra` later on a free-threaded one.
const BYTEARRAY_TYPE: u64 = 8;
const BYTEARRAY_SIZE: u64 = 16;
const BYTEARRAY_START: u64 = 40;
const RECORD_LEN: i64 = 64;
pub(super) const RECORD_MAGIC: &[u8; 4] = b"NG11";

impl Record {
    pub(super) fn locate(mem: &ProcMem, plan: &AttachPlan, id: u64) -> Result<Record> {
        let elf = plan.reopen()?;
        let bytearray_type = elf
            .symbol_address("PyByteArray_Type")
            .map(|a| a + plan.bias)
            .context("the interpreter does not export PyByteArray_Type")?;
        let extra = plan.interpreter.header_extra();
        let object = mem.read(id, (48 + extra) as usize)?;
        let (ty, size, buffer) = (
            crate::memory::u64_at(&object, (BYTEARRAY_TYPE + extra) as usize),
            crate::memory::i64_at(&object, (BYTEARRAY_SIZE + extra) as usize),
            crate::memory::u64_at(&object, (BYTEARRAY_START + extra) as usize),
        );
        anyhow::ensure!(
            ty == bytearray_type && size == RECORD_LEN,
            "the hook's record at {id:#x} is not a {RECORD_LEN}-byte bytearray (type {ty:#x}, size {size})"
        );
        anyhow::ensure!(
            mem.read(buffer, 4)? == RECORD_MAGIC,
            "the hook's record at {buffer:#x} lacks its magic"
        );
        Ok(Record { buffer })
    }

    pub(super) fn triple(t: [i64; 3]) -> Vec<u8> {
        t.iter().flat_map(|&v| Fields::bytes(v)).collect()
    }

    pub(super) fn original(&self, mem: &ProcMem) -> Result<[i64; 3]> {
        let b = mem.read(self.buffer + 40, 12)?;
        Ok([0, 1, 2].map(|i| i64::from(crate::memory::i32_at(&b, 4 * i))))
    }

    /// Non-zero once neurogc's freeze ran (the guard's count where it was asked for one, else 1);
    /// 0: not frozen by neurogc.
    pub(super) fn frozen(&self, mem: &ProcMem) -> Result<i64> {
        Ok(i64::from(u32::from_le_bytes(mem.read(self.buffer + 52, 4)?.try_into().expect("4 bytes"))))
    }

    /// How many times the guard's freeze() found a collection running and did nothing.
    pub(super) fn busy(&self, mem: &ProcMem) -> Result<u32> {
        Ok(u32::from_le_bytes(mem.read(self.buffer + 60, 4)?.try_into().expect("4 bytes")))
    }

    /// The undo (the guard's unfreeze()) ran.
    pub(super) fn undone(&self, mem: &ProcMem) -> Result<bool> {
        Ok(mem.read(self.buffer + 56, 4)? != [0; 4])
    }

    /// Marks the record as steered by this agent, with the application's values.
    pub(super) fn activate_steps(&self, agent: u32, original: [i64; 3], now: [i64; 3]) -> Vec<Step> {
        vec![
            Step::expect(self.buffer, RECORD_MAGIC),
            Step::write(
                self.buffer + 16,
                &[Self::triple(now), Self::triple(now), Self::triple(original)].concat(),
            ),
            Step::write(self.buffer + 56, &[0; 4]),
            Step::write(self.buffer + 8, &agent.to_le_bytes()),
            Step::write(self.buffer + 4, &1u32.to_le_bytes()),
        ]
    }

    /// The values neurogc may have in force: `a` and `b` (the old and the new during a change).
    pub(super) fn values_steps(&self, a: [i64; 3], b: [i64; 3]) -> Vec<Step> {
        vec![
            Step::expect(self.buffer, RECORD_MAGIC),
            Step::write(self.buffer + 16, &[Self::triple(a), Self::triple(b)].concat()),
        ]
    }

    pub(super) fn release_steps(&self) -> Vec<Step> {
        vec![Step::replace(self.buffer + 4, &1u32.to_le_bytes(), &0u32.to_le_bytes())]
    }
}
