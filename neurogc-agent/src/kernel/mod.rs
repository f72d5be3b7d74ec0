//! The kernel half as the agent sees it: the eBPF object loaded once, each target armed on it
//! through per-PID uprobe perf events.
pub mod census;
pub mod perf_breakpoint;
pub mod perf_uprobe;
pub mod probes;
