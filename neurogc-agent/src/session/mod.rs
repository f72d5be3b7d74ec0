//! What every observed process carries, whatever the mode: the proof of its GC state's layout,
//! and the events that wait for it. Decoding an event needs to know whether the layout is
//! trusted, so events are held (in order) until it is proven or refuted: each is decoded the same
//! way whatever the timing.
pub mod aggregate;
pub mod census;
pub mod closing;
pub mod cycle;
pub mod drive;
pub mod events;
pub mod features;
pub mod garbage;
pub mod halted;
pub mod stacks;
use neurogc_common::GcEvent;
use neurogc_trace::Collection;

use crate::{
    interp::{
        layout::{GcLocator, GcState},
        process,
    },
    session::events::Clock,
};

pub enum GcStatus {
    /// Layout unknown for this build: probe arguments only.
    Unknown,
    /// Not proven yet: the interpreter is not initialised (launch mode), or it was collecting
    /// when we looked (its lists are rewired during a collection).
    Pending {
        locator: GcLocator,
        failures: u32,
    },
    Located(GcState),
    Invalid(String),
}

/// Failed validations (one single-shot check per drain, ≈ 100 ms apart) before the layout is
/// declared wrong: a check fails while a collection rewires the lists, so a wrong layout is the
/// only way to fail 50 times running while the target runs.
const MAX_VALIDATION_FAILURES: u32 = 50;

impl GcStatus {
    pub fn refresh(&mut self, pid: i32) {
        let GcStatus::Pending { locator, failures } = self else { return };
        *self = match locator.locate(pid) {
            Ok(Some(state)) => GcStatus::Located(state),
            Ok(None) => return,
            // Gone before we could look (a very short-lived target): stay unproven.
            Err(_) if !process::exists(pid) => return,
            // Stopped in a collection, its lists stay mid-rewiring until it runs again: that
            // proves nothing about the layout.
            Err(_) if process::stopped(pid) => return,
            Err(_) if *failures + 1 < MAX_VALIDATION_FAILURES => {
                *failures += 1;
                return;
            }
            Err(err) => {
                tracing::warn!(
                    "GC state of process {pid} failed validation, reporting probe arguments only: {err:#}"
                );
                GcStatus::Invalid(format!("{err:#}"))
            }
        };
    }

    pub fn pending(&self) -> bool {
        matches!(self, GcStatus::Pending { .. })
    }

    pub fn trusted(&self) -> bool {
        matches!(self, GcStatus::Located(_))
    }

    pub fn state(&self) -> Option<GcState> {
        match self {
            GcStatus::Located(state) => Some(*state),
            _ => None,
        }
    }

    pub fn note(&self) -> Option<String> {
        const FALLBACK: &str =
            "each collection's generation and freed count are the probe's alone, unchecked";
        match self {
            GcStatus::Unknown => Some(format!("GC state layout unknown for this build: {FALLBACK}")),
            GcStatus::Invalid(why) => Some(format!("GC state failed validation ({why}): {FALLBACK}")),
            _ => None,
        }
    }
}

/// At most this many events wait for the GC state to be proven (≈ 12 MB).
const MAX_HELD: usize = 100_000;

/// One process's events on their way to becoming collections.
pub struct Decoder {
    pid: i32,
    pub gc: GcStatus,
    /// Events read but not decoded yet (while the GC state is being proven).
    held: Vec<GcEvent>,
    /// Attached to a running interpreter (not caught at exec or launched): its GC state exists
    /// from the start, so it is looked for at once and on every window.
    attached: bool,
    /// Free-threaded builds: the collections counted so far, by the interpreter's totals.
    counted: events::Counted,
}

impl Decoder {
    pub fn new(pid: i32, locator: Option<GcLocator>, attached: bool) -> Decoder {
        let mut gc = match locator {
            Some(locator) => GcStatus::Pending { locator, failures: 0 },
            None => GcStatus::Unknown,
        };
        if attached {
            gc.refresh(pid);
        }
        Decoder { pid, gc, held: Vec::new(), attached, counted: Default::default() }
    }

    pub fn push(&mut self, ev: GcEvent) {
        self.held.push(ev);
    }

    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// After a drain: whether the held events can be released now. The GC state can only be
    /// found once the interpreter exists: an event (`received`) proves it does.
    pub fn settle(&mut self, received: bool) -> bool {
        if self.gc.pending() && received {
            self.gc.refresh(self.pid);
        }
        !self.gc.pending() || self.held.len() >= MAX_HELD
    }

    /// Once per window: a target that does not collect sends no event to prompt a retry.
    /// True when the layout got settled now (release the held events).
    pub fn retry(&mut self) -> bool {
        if !(self.attached && self.gc.pending()) {
            return false;
        }
        self.gc.refresh(self.pid);
        !self.gc.pending()
    }

    /// The process has had time to start: from now on its GC state is looked for every window,
    /// as for a process attached to while running.
    pub fn assume_started(&mut self) {
        self.attached = true;
    }

    /// The held events, decoded, each with the kernel's event it came from (its stack); calls
    /// that collected nothing are dropped.
    pub fn release<E>(
        &mut self,
        clock: &Clock,
        mut each: impl FnMut(Collection, &GcEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        let trusted = self.gc.trusted();
        let concurrent = self.gc.state().is_some_and(|s| s.free_threaded);
        for raw in std::mem::take(&mut self.held) {
            let counted = concurrent.then_some(&mut self.counted);
            if let Some(c) = events::decode(&raw, trusted, counted, clock) {
                each(c, &raw)?;
            }
        }
        Ok(())
    }
}
