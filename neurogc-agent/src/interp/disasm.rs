//! Finds the collector in builds stripped of `.symtab` and built without USDT (python.org's slim
//! images, manylinux): the collector is `static`, but `PyGC_Collect` is exported and calls it.
//! Its code is decoded with iced-x86 and its direct callees are sorted out:
//!
//! - exported functions and PLT stubs are not the collector (it is `static`);
//! - `invoke_gc_callback` is called twice (start and stop phases), the collector once;
//! - the collector's second argument is the generation, `NUM_GENERATIONS - 1` = 2 (`mov esi, 2`).
//!
//! A callee called once with `esi = 2` is the collector with its documented calling convention
//! (3.9–3.13); failing that, the only local callee called once is a clone whose convention gcc
//! changed (3.8's `collect.constprop.0`): its arguments are not read, only timed. Anything else is
//! refused rather than guessed. Verified against `.symtab` on every unstripped build the tests
//! have (`tests/observe.rs`).
use std::collections::BTreeMap;

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind, Register};

use super::{cpython::TSTATE_INTERP, elf::Elf};

/// The exported function that calls the collector on every version neurogc knows.
pub const ENTRY: &str = "PyGC_Collect";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collector {
    /// Link-time address.
    pub address: u64,
    /// Called as `collector(tstate, generation, …)`: the generation argument can be read.
    pub documented_args: bool,
}

/// The function whose code starts `code` (at `address`) takes a thread state in %rdi: among its
/// first straight-line instructions it loads `tstate->interp` (`mov reg, [rdi+16]`) before
/// anything writes %rdi. How a free-threaded collector, or a clone gcc made of it (3.13t's
/// `gc_collect_main.constprop.0` begins so), is checked before its first argument is read as
/// the collecting thread's state.
pub fn loads_interp_from_first_arg(code: &[u8], address: u64) -> bool {
    let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
    for ins in decoder.iter().take(32) {
        if ins.mnemonic() == Mnemonic::Mov
            && ins.op_count() == 2
            && ins.op0_kind() == OpKind::Register
            && ins.op1_kind() == OpKind::Memory
            && ins.memory_base() == Register::RDI
            && ins.memory_index() == Register::None
            && ins.memory_displacement64() == TSTATE_INTERP
        {
            return true;
        }
        let writes_rdi = ins.op_count() > 0
            && ins.op0_kind() == OpKind::Register
            && ins.op0_register().full_register() == Register::RDI;
        if writes_rdi || ins.flow_control() != FlowControl::Next {
            return false;
        }
    }
    false
}

#[derive(Debug, Default)]
struct Callee {
    calls: u32,
    /// Every call set `esi` to 2 just before.
    generation_two: bool,
}

/// Ok: the collector; Err: why it cannot be told (for the user).
pub fn collector(elf: &Elf) -> Result<Collector, String> {
    let (entry, size) = elf.exported_function(ENTRY).ok_or(format!("{ENTRY} is not exported"))?;
    let code = elf
        .read_at(entry, size.clamp(1, 4096) as usize)
        .ok_or(format!("{ENTRY}'s code is not in the file"))?;
    let text = elf.section_range(".text").ok_or("the file has no .text section")?;
    let exported = elf.exported_functions();
    let callees = direct_callees(code, entry);
    let local: BTreeMap<u64, &Callee> = callees
        .iter()
        .filter(|(target, _)| text.contains(target) && !exported.contains(target))
        .map(|(t, c)| (*t, c))
        .collect();
    let once = |documented: bool| -> Vec<u64> {
        local
            .iter()
            .filter(|(_, c)| c.calls == 1 && (!documented || c.generation_two))
            .map(|(t, _)| *t)
            .collect()
    };
    for documented_args in [true, false] {
        match once(documented_args)[..] {
            [address] => return Ok(Collector { address, documented_args }),
            [] => continue,
            _ if documented_args => continue,
            ref several => {
                return Err(format!(
                    "{ENTRY} calls {} local functions once each ({}): which one collects cannot be told",
                    several.len(),
                    several.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    Err(format!("{ENTRY} calls no local function once: the collector cannot be found from it"))
}

/// Direct calls (and tail jumps out of the function) by target, with the value `esi` held.
fn direct_callees(code: &[u8], entry: u64) -> BTreeMap<u64, Callee> {
    let end = entry + code.len() as u64;
    let mut decoder = Decoder::with_ip(64, code, entry, DecoderOptions::NONE);
    let mut esi: Option<u64> = None;
    let mut out: BTreeMap<u64, Callee> = BTreeMap::new();
    for insn in &mut decoder {
        if insn.is_invalid() {
            break;
        }
        let writes_esi = insn.op_count() > 0
            && insn.op0_kind() == OpKind::Register
            && matches!(insn.op0_register(), Register::ESI | Register::RSI);
        if writes_esi {
            esi = match insn.code() {
                Code::Mov_r32_imm32 | Code::Mov_rm32_imm32 | Code::Mov_rm64_imm32 => Some(insn.immediate(1)),
                Code::Xor_r32_rm32 | Code::Xor_rm32_r32 if insn.op1_register() == insn.op0_register() => {
                    Some(0)
                }
                _ => None,
            };
            continue;
        }
        let direct = insn.op_count() > 0 && insn.op0_kind() == OpKind::NearBranch64;
        let is_call = match insn.flow_control() {
            FlowControl::Call => direct,
            // A jump out of the function is a tail call.
            FlowControl::UnconditionalBranch => direct && !(entry..end).contains(&insn.near_branch_target()),
            _ => false,
        };
        if is_call {
            let callee = out.entry(insn.near_branch_target()).or_default();
            callee.generation_two = (callee.calls == 0 || callee.generation_two) && esi == Some(2);
            callee.calls += 1;
        }
        if insn.flow_control() == FlowControl::Call {
            // Calls clobber the argument registers.
            esi = None;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_that_loads_tstate_interp_takes_the_thread_state_first() {
        // 3.13.5t's gc_collect_main.constprop.0 (objdump of the test build): pushes, then
        // `mov rbx, [rdi+0x10]`.
        let clone = [
            0x41, 0x57, 0xba, 0x01, 0x00, 0x00, 0x00, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54, 0x55, 0x53, 0x48,
            0x81, 0xec, 0x88, 0x00, 0x00, 0x00, 0x48, 0x8b, 0x5f, 0x10,
        ];
        assert!(loads_interp_from_first_arg(&clone, 0x279a70));
        // The same with %rdi overwritten first (`mov edi, 1`): its first argument is gone.
        let mut clobbered = vec![0xbf, 0x01, 0x00, 0x00, 0x00];
        clobbered.extend(clone);
        assert!(!loads_interp_from_first_arg(&clobbered, 0x1000));
        // A call before the load: the function's state is not followed past it.
        let mut called = vec![0xe8, 0x00, 0x00, 0x00, 0x00];
        called.extend(clone);
        assert!(!loads_interp_from_first_arg(&called, 0x1000));
        // Another offset from %rdi is not `tstate->interp`.
        let mut other = clone;
        other[25] = 0x18;
        assert!(!loads_interp_from_first_arg(&other, 0x279a70));
    }

    /// pyenv 3.11.7's PyGC_Collect (objdump of the real build): two calls to
    /// invoke_gc_callback (edx = 2), one to gc_collect_main (esi = 2), PLT calls around them.
    #[test]
    fn the_collector_is_the_local_callee_called_once_with_generation_two() {
        let code: &[u8] = &[
            0xbe, 0x02, 0x00, 0x00, 0x00, // mov esi, 2 (to a callee called twice)
            0xe8, 0x0b, 0x00, 0x00, 0x00, // call 0x1015 (invoke_gc_callback)
            0xbe, 0x02, 0x00, 0x00, 0x00, // mov esi, 2
            0xe8, 0x16, 0x00, 0x00, 0x00, // call 0x102a (the collector)
            0xe8, 0xfc, 0xff, 0xff, 0xff, // call 0x1015 again
        ];
        let callees = direct_callees(code, 0x1000);
        let invoke = &callees[&0x1015];
        assert_eq!((invoke.calls, invoke.generation_two), (2, false));
        let collector = &callees[&0x102a];
        assert_eq!((collector.calls, collector.generation_two), (1, true));
    }

    /// On every unstripped build the tests have, what the dynamic symbols lead to is what
    /// `.symtab` names the collector (one of its clones on 3.8).
    #[test]
    fn found_from_exports_is_the_symtab_collector_on_every_unstripped_build() {
        let mut checked = Vec::new();
        for python in &crate::interp::test_pythons() {
            let exe = std::path::Path::new(python["argv"][0].as_str().unwrap());
            let Some(lib) = exe
                .parent()
                .and_then(|bin| std::fs::read_dir(bin.parent()?.join("lib")).ok())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".so.1.0")))
            else {
                continue;
            };
            let elf = Elf::open(&lib).unwrap();
            let interp = super::super::cpython::Interpreter::identify(&elf, &lib.to_string_lossy()).unwrap();
            let symtab: Vec<u64> = elf
                .functions()
                .iter()
                .filter(|f| {
                    interp.collector_names().iter().any(|base| super::super::is_collector(&f.name, base))
                })
                .map(|f| f.address)
                .collect();
            let found = collector(&elf).unwrap_or_else(|why| panic!("{}: {why}", lib.display()));
            assert!(
                symtab.contains(&found.address),
                "{}: found {found:x?}, .symtab has {symtab:x?}",
                lib.display()
            );
            assert_eq!(found.documented_args, interp.version.minor > 8, "{}", lib.display());
            checked.push(interp.version.to_string());
        }
        assert!(checked.len() >= 2, "too few unstripped builds in the manifest: {checked:?}");
    }

    #[test]
    fn a_register_overwritten_after_the_immediate_is_not_the_generation() {
        let code: &[u8] = &[
            0xbe, 0x02, 0x00, 0x00, 0x00, // mov esi, 2
            0x48, 0x8d, 0x74, 0x24, 0x38, // lea rsi, [rsp+0x38]
            0xe8, 0x00, 0x01, 0x00, 0x00, // call
        ];
        let callees = direct_callees(code, 0x1000);
        assert_eq!(callees.values().map(|c| (c.calls, c.generation_two)).collect::<Vec<_>>(), [(1, false)]);
    }
}
