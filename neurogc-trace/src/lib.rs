//! neurogc's record type and trace format, shared by the agent (which writes and reads it), the
//! reader's fuzz target, and training (which reads the same JSON lines from Python).
mod fast;
pub mod features;
pub mod read;
pub mod record;
pub mod write;

pub use read::{TraceError, TraceReader};
pub use record::*;
pub use write::TraceWriter;
