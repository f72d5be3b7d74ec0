//! Errors the user can act on (bad PID, not Python, no permission, a build with no probes):
//! printed as one line and exit code 2. Anything else is a failure of the agent (exit 1).
use std::fmt;

#[derive(Debug)]
pub struct UserError(pub String);

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

/// `bail_user!("...", args)`: return a [`UserError`] from a function returning `anyhow::Result`.
macro_rules! bail_user {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::error::UserError(format!($($arg)*))))
    };
}
pub(crate) use bail_user;

pub const EXIT_USER: i32 = 2;
pub const EXIT_FAILURE: i32 = 1;

/// Exit code for an error chain: 2 when any link is a [`UserError`].
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.chain().any(|e| e.is::<UserError>()) { EXIT_USER } else { EXIT_FAILURE }
}

/// The reader of our output went away (`| head -1`): a filter stops quietly then. A write of
/// serde_json's (a JSON record straight to the output) carries the same error inside its own.
pub fn output_closed(err: &anyhow::Error) -> bool {
    let gone = Some(std::io::ErrorKind::BrokenPipe);
    err.downcast_ref::<std::io::Error>().map(std::io::Error::kind) == gone
        || err.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind) == gone
}
