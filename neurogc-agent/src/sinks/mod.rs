//! What consumes windows and collections for people and machines: the live view and its text
//! rules, the record stream, line-safe standard output, the Prometheus exporter and `top`.
//!
//! One target's run (observe, advise, act, record) hands every record and every window to its
//! sinks (`TargetSink`): the record stream (`--json`, `--record`) and the live view. Fleet mode's
//! sinks see many targets at once (`fleet::Sink`).
pub mod live;
pub mod metrics;
pub mod output;
pub mod records;
pub mod top;
pub mod view;

use std::io;

use neurogc_trace::{Record, Summary};

use crate::session::{aggregate::Aggregate, features::Window};

/// A window as a person reads it: what it measured, the totals since attach, why the GC state
/// is not read yet, where its collections started, and advise/act mode's last decision.
#[derive(Clone, Copy)]
pub struct Shown<'a> {
    pub window: &'a Window,
    pub agg: &'a Aggregate,
    pub lost: u64,
    pub note: Option<&'a str>,
    pub trigger: Option<&'a str>,
    pub decision: Option<&'a str>,
}

/// A consumer of one target's run. Every method has a default that ignores what it is given.
pub trait TargetSink {
    /// Each record of the run, in order.
    fn record(&mut self, _rec: &Record) -> io::Result<()> {
        Ok(())
    }
    /// A batch of records is complete: write out what is due.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// A window closed (its records follow).
    fn window(&mut self, _shown: &Shown) -> io::Result<()> {
        Ok(())
    }
    /// Text asked for now (advise mode's recommendation on SIGUSR1): whether it was shown.
    fn note(&mut self, _text: &str) -> io::Result<bool> {
        Ok(false)
    }
    /// The run's summary, before its record (`ended`: how a launched command ended); whether
    /// it was shown to a person.
    fn summary(&mut self, _summary: &Summary, _lost: u64, _ended: Option<&str>) -> io::Result<bool> {
        Ok(false)
    }
    /// The run is over: nothing follows.
    fn close(&mut self) -> io::Result<()> {
        Ok(())
    }
}
