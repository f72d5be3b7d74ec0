//! Kernel half of neurogc. Deliberately dumb: note when a collection begins (time, stats snapshot,
//! probe argument), and when it ends emit one `GcEvent` with the stats difference. Everything that
//! needs judgement (which generation it was, what to show) happens in the agent.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

#[cfg(target_arch = "bpf")]
mod probes;

#[cfg(not(target_arch = "bpf"))]
fn main() {}
