//! One observed process's drain → decode cycle, the same in every mode: its events held until
//! its GC state is proven or refuted, then decoded into collections in order, each with its
//! stack named. Single-target and fleet mode both run it; they differ only in how much of the
//! stack they keep (`Detail`) and in what consumes the records it yields.
use neurogc_trace::{Record, StackCounts};

use crate::{
    interp::AttachPlan,
    session::{
        Decoder,
        events::Clock,
        halted,
        stacks::{self, Resolver},
    },
};

/// How much of each collection's context the cycle keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Whole stacks and halted threads, interned into frame, stack and threads records (one
    /// target: its records and report).
    Records,
    /// Only the innermost frame, counted for the window's top trigger (a fleet's many targets:
    /// no records, memory bounded by a small cache of code objects).
    Leaves,
}

pub struct Cycle {
    /// The decoder itself, reached directly: its events, GC state, retries and held events.
    pub dec: Decoder,
    detail: Detail,
    /// Names the frames of each collection's stack (builds whose stacks are read).
    stacks: Option<Resolver>,
    /// The sets of threads free-threaded collections halted.
    halted: halted::Interner,
}

impl Cycle {
    /// `attached`: the interpreter was running before we looked (not launched, not caught at
    /// its exec), so its GC state exists and is looked for at once.
    pub fn new(plan: &AttachPlan, attached: bool, detail: Detail) -> Cycle {
        let max_codes = match detail {
            Detail::Records => stacks::MAX_CODES,
            Detail::Leaves => stacks::MAX_CODES_FLEET,
        };
        Cycle {
            dec: Decoder::new(plan.pid, plan.gc, attached),
            detail,
            stacks: plan
                .stack
                .and(plan.code)
                .map(|(layout, code_type)| Resolver::new(plan.pid, layout, code_type, max_codes)),
            halted: Default::default(),
        }
    }

    /// The held events as records, in order: with `Detail::Records`, the frame, stack and
    /// threads records a collection refers to come before its `gc` record. Stops at the first
    /// error `each` returns.
    pub fn release<E>(
        &mut self,
        clock: &Clock,
        mut each: impl FnMut(Record) -> Result<(), E>,
    ) -> Result<(), E> {
        let Cycle { dec, detail, stacks, halted } = self;
        dec.release(clock, |mut collection, raw| {
            match detail {
                Detail::Leaves => {
                    if let Some(resolver) = stacks.as_mut() {
                        resolver.count_leaf(raw);
                    }
                }
                Detail::Records => {
                    let mut written = Ok(());
                    let mut emit = |rec: Record| {
                        if written.is_ok() {
                            written = each(rec);
                        }
                    };
                    if let Some(resolver) = stacks.as_mut() {
                        collection.stack = resolver.resolve(raw, &mut emit);
                    }
                    collection.halted = halted.resolve(raw, &mut emit);
                    written?;
                }
            }
            each(Record::Gc(collection))
        })
    }

    /// A window closed: where most of its collections started, with their share of them. Code
    /// objects cached are checked against the target again on their first use in the next.
    pub fn close_window(&mut self) -> Option<(String, f64)> {
        let resolver = self.stacks.as_mut()?;
        resolver.new_window();
        resolver.take_top()
    }

    /// How the stacks read so far resolved (builds whose stacks are read).
    pub fn stack_counts(&self) -> Option<StackCounts> {
        self.stacks.as_ref().map(|r| r.counts)
    }
}
