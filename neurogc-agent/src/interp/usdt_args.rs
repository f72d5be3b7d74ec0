//! USDT argument specs (`-4@%esi`, `8@-16(%rbp)`, `-4@$5`) decoded into the `ArgSpec` the eBPF
//! program understands. Only x86_64 is supported, as is the rest of neurogc.
use anyhow::{Result, bail};
use neurogc_common::{ARG_CONST, ARG_MEM, ARG_REG, ArgSpec};

/// Index of each register in the kernel's x86_64 `struct pt_regs` (an array of u64).
const PT_REGS: [(&str, u32); 17] = [
    ("r15", 0),
    ("r14", 1),
    ("r13", 2),
    ("r12", 3),
    ("bp", 4),
    ("bx", 5),
    ("r11", 6),
    ("r10", 7),
    ("r9", 8),
    ("r8", 9),
    ("ax", 10),
    ("cx", 11),
    ("dx", 12),
    ("si", 13),
    ("di", 14),
    ("ip", 16),
    ("sp", 19),
];

/// `%eax`, `%ax`, `%al`, `%rax`, `%r8d`, `%sil`… → pt_regs index.
fn register_index(reg: &str) -> Option<u32> {
    let r = reg.strip_prefix('%')?;
    // r8..r15 with optional d/w/b suffix.
    if let Some(num) = r.strip_prefix('r').map(|s| s.trim_end_matches(['d', 'w', 'b']))
        && num.parse::<u32>().is_ok()
    {
        return PT_REGS.iter().find(|(n, _)| *n == format!("r{num}")).map(|(_, i)| *i);
    }
    let base = match r {
        "al" | "ah" => "ax",
        "bl" | "bh" => "bx",
        "cl" | "ch" => "cx",
        "dl" | "dh" => "dx",
        "sil" => "si",
        "dil" => "di",
        "bpl" => "bp",
        "spl" => "sp",
        _ => r.trim_start_matches(['r', 'e']),
    };
    PT_REGS.iter().find(|(n, _)| *n == base).map(|(_, i)| *i)
}

/// Decodes the `index`-th argument of a note's argument string.
pub fn parse_arg(args: &str, index: usize) -> Result<ArgSpec> {
    let Some(spec) = args.split_whitespace().nth(index) else {
        bail!("USDT argument {index} missing in {args:?}");
    };
    let Some((size, loc)) = spec.split_once('@') else { bail!("bad USDT argument {spec:?}") };
    let size: i32 = size.parse().map_err(|_| anyhow::anyhow!("bad USDT argument size in {spec:?}"))?;
    if ![1, 2, 4, 8].contains(&size.unsigned_abs()) {
        bail!("unsupported USDT argument size in {spec:?}");
    }
    let mut out = ArgSpec { size, ..Default::default() };
    if let Some(value) = loc.strip_prefix('$') {
        out.kind = ARG_CONST;
        out.disp = value.parse().map_err(|_| anyhow::anyhow!("bad USDT constant in {spec:?}"))?;
    } else if let Some((disp, rest)) = loc.split_once('(') {
        let reg = rest.strip_suffix(')').unwrap_or(rest);
        out.kind = ARG_MEM;
        out.disp = if disp.is_empty() {
            0
        } else {
            disp.parse().map_err(|_| anyhow::anyhow!("bad displacement in {spec:?}"))?
        };
        out.reg = register_index(reg).ok_or_else(|| anyhow::anyhow!("unknown register in {spec:?}"))?;
    } else {
        out.kind = ARG_REG;
        out.reg = register_index(loc).ok_or_else(|| anyhow::anyhow!("unknown register in {spec:?}"))?;
    }
    Ok(out)
}

/// The first integer argument of a function (System V: %rdi) and so on.
pub fn call_arg(index: usize, size: i32) -> ArgSpec {
    const ORDER: [&str; 6] = ["%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9"];
    ArgSpec { kind: ARG_REG, size, reg: register_index(ORDER[index]).expect("known"), ..Default::default() }
}

/// A function's return value (%rax).
pub fn return_value() -> ArgSpec {
    ArgSpec { kind: ARG_REG, size: -8, reg: register_index("%rax").expect("known"), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_forms_gcc_emits() {
        let a = parse_arg("-4@%esi -8@%rax", 0).unwrap();
        assert_eq!((a.kind, a.size, a.reg), (ARG_REG, -4, 13));
        let b = parse_arg("-4@%esi -8@%rax", 1).unwrap();
        assert_eq!((b.kind, b.size, b.reg), (ARG_REG, -8, 10));
        let c = parse_arg("8@-16(%rbp)", 0).unwrap();
        assert_eq!((c.kind, c.reg, c.disp), (ARG_MEM, 4, -16));
        let d = parse_arg("-4@112(%rsp)", 0).unwrap();
        assert_eq!((d.kind, d.reg, d.disp), (ARG_MEM, 19, 112));
        let e = parse_arg("-4@$-1", 0).unwrap();
        assert_eq!((e.kind, e.disp), (ARG_CONST, -1));
        assert_eq!(parse_arg("-4@%r12d", 0).unwrap().reg, 3);
        assert_eq!(parse_arg("1@%dil", 0).unwrap().reg, 14);
    }

    #[test]
    fn rejects_what_it_cannot_decode() {
        assert!(parse_arg("-4@%xmm0", 0).is_err());
        assert!(parse_arg("3@%eax", 0).is_err());
        assert!(parse_arg("-4@%eax", 1).is_err());
        assert!(parse_arg("garbage", 0).is_err());
    }
}
