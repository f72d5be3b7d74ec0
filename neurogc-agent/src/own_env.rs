//! The agent's own environment: what it sets for itself before any thread starts, and keeps
//! from the command it launches (that command must see the environment the user gave it).
use std::{ffi::OsString, process::Command, sync::OnceLock};

/// Microsoft's ONNX Runtime builds (the PyPI wheel the agent loads) start a telemetry client with
/// the runtime: it writes a device id and an event database under `$HOME/.cache/Microsoft` and
/// queues events for upload. An agent on other people's machines does neither. The runtime reads
/// this variable when it starts, before `DisableTelemetryEvents` could be called.
const ORT_TELEMETRY_OFF: &str = "ORT_DISABLE_TELEMETRY";

/// The user's own value, if any, before the agent set its own.
static USERS: OnceLock<Option<OsString>> = OnceLock::new();

/// Called first in `main`, while the process has one thread (setting the environment is only
/// sound then).
pub fn settle() {
    USERS.get_or_init(|| std::env::var_os(ORT_TELEMETRY_OFF));
    // SAFETY: no other thread exists yet, so none reads the environment concurrently.
    unsafe { std::env::set_var(ORT_TELEMETRY_OFF, "1") };
}

/// Gives a launched command the user's environment back.
pub fn for_child(cmd: &mut Command) {
    match USERS.get() {
        Some(Some(value)) => cmd.env(ORT_TELEMETRY_OFF, value),
        Some(None) => cmd.env_remove(ORT_TELEMETRY_OFF),
        None => cmd,
    };
}
