//! The commands: one live target (observe, advise, act; attached or launched), the fleet, and
//! `replay`. What `main` dispatches to; nothing below imports from here.
use anyhow::Result;

pub mod fleet;
pub mod launch;
pub mod live;
pub mod observe;
pub mod replay;

pub fn require_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        crate::error::bail_user!(
            "neurogc-agent must run as root: it loads eBPF programs and reads the target's memory (try sudo)"
        );
    }
    Ok(())
}
