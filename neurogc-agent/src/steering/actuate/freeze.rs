//! neurogc's `gc.freeze()` in the target and its undo, both queued as pending calls: the undo is
//! placed first and owed from the moment the freeze is queued.
use super::*;

/// How long a freeze or its undo waits to be queued, and then to run.
pub(super) const ACTION_WAIT: Duration = Duration::from_secs(2);
/// How often the exit program's queue expectations are refreshed while a freeze is owed.
pub(super) const REARM: Duration = Duration::from_secs(1);

/// neurogc's freeze: the placed undo stub while one is owed, and the queue program that
/// would run it.
#[derive(Default)]
pub(super) struct Freezer {
    pub(super) undo: Option<Injection>,
    pub(super) queue: Vec<Step>,
    /// Frozen and undone once (or failed): not again.
    pub(super) spent: bool,
}

/// What an undo did, in words; `collect`: the stub runs the thawed heap's first full collection.
pub(super) fn undo_detail(queued: bool, ran: bool, collect: bool) -> String {
    let then = if collect && queued { "; a full collection follows it" } else { "" };
    match (queued, ran) {
        (_, true) => format!("neurogc's gc.freeze() undone{then}"),
        (true, false) => {
            format!("gc.unfreeze() is queued and runs when the main thread next runs Python{then}")
        }
        (false, _) => {
            "gc.unfreeze() could not be queued yet (the queue is busy or the main thread blocked)".to_owned()
        }
    }
}

impl Worker {
    /// `gc.freeze()` in the target: the undo (the guard's unfreeze()) is placed first, and owed
    /// from the moment the freeze is queued; the freeze stub then runs on the main thread.
    /// `[collect, reset]`: a full collection before it, after it (`Command::Freeze`).
    pub(super) fn freeze(
        &mut self,
        f: &Fields,
        ours: [i64; 3],
        r: Record,
        fz: &mut Freezer,
        [collect, reset]: [bool; 2],
        objects: Option<i64>,
    ) -> Result<()> {
        let t = Instant::now();
        let layout =
            PendingLayout::for_interpreter(&self.plan.interpreter).context("no pending-call layout")?;
        let (plan, mem) = (&self.plan, &self.mem);
        let custodian = self.custodian.as_mut().expect("custodian");
        let undo = Injection::place(plan, mem, custodian, &inject::unfreeze_stub(false))?;
        let exit = [f.restore_steps(&[ours]), r.release_steps()].concat();
        let code = inject::freeze_stub(collect, objects.is_none(), reset);
        // Queued again while the guard finds a collection running (the call ran inside one,
        // from a gc.callbacks function or a finalizer, where gc.collect() does nothing).
        let (mut count, mut injection) = (0, None);
        let (busy_at_start, mut queued_times) = (r.busy(&self.mem)?, 0u32);
        while count == 0 && t.elapsed() <= ACTION_WAIT {
            let busy = r.busy(&self.mem)?;
            let custodian = self.custodian.as_mut().expect("custodian");
            // Once the call has run inside a collection it is queued again at once, without
            // the quarter second that tells a running main thread: the collection it ran in has
            // just ended. Waiting had it land in the next one, every time, on the training
            // benchmark (GC 80% of its time in 300 ms full collections, timed by gc.callbacks).
            let main_running = queued_times > 0;
            let queued = loop {
                let with = Queueing { exit: exit.clone(), then: Some(&undo), main_running, gc: f.state };
                match Injection::try_queue(plan, mem, custodian, layout, &code, with)? {
                    Ok(injection) => break Some(injection),
                    Err(_) if t.elapsed() > ACTION_WAIT => break None,
                    Err(_) => std::thread::sleep(RETRY),
                }
            };
            let Some(queued) = queued else { break };
            queued_times += 1;
            let ran = Instant::now();
            count = r.frozen(&self.mem)?;
            let mut again = false;
            while count == 0 && !again && ran.elapsed() < ACTION_WAIT {
                std::thread::sleep(Duration::from_millis(1));
                count = r.frozen(&self.mem)?;
                again = r.busy(&self.mem)? != busy;
            }
            if count == 0 && !again {
                injection = Some(queued);
                break;
            }
            custodian.run(queued.retire_steps())?;
        }
        if count == 0 && injection.is_none() {
            self.custodian().run(undo.retire_steps())?;
            self.arm(f, &[ours], Some(r), fz)?;
            let inside = r.busy(&self.mem)?.wrapping_sub(busy_at_start);
            let detail = match (queued_times, inside) {
                (0, _) => format!(
                    "not frozen: the call could not be queued within {ACTION_WAIT:?} ({})",
                    inject::main_thread_state(self.plan.pid)
                ),
                (n, 0) => format!(
                    "not frozen: the call was queued {} and did not run within {ACTION_WAIT:?} ({})",
                    crate::text::plural(n as u64, "time"),
                    inject::main_thread_state(self.plan.pid)
                ),
                (n, inside) => format!(
                    "not frozen: the call was queued {} and ran only inside collections ({} of \
                     them) within {ACTION_WAIT:?}",
                    crate::text::plural(n as u64, "time"),
                    inside
                ),
            };
            self.emit(Event::Freeze { outcome: "not-frozen", count: None, latency: t.elapsed(), detail });
            return Ok(());
        }
        fz.undo = Some(undo);
        if let Some(injection) = injection {
            // Not run yet: disarmed, so it cannot freeze later behind the agent's back (the undo
            // stays owed all the same, in case it was already running).
            self.custodian().run(injection.disarm_steps())?;
            count = r.frozen(&self.mem)?;
        }
        self.arm(f, &[ours], Some(r), fz)?;
        let frozen = count > 0;
        // The record holds the guard's count only where it was asked to take one.
        let (count, about) = match objects {
            Some(n) if frozen => (n.max(1), "about "),
            _ => (count, ""),
        };
        self.emit(Event::Freeze {
            outcome: if frozen { "frozen" } else { "not-frozen" },
            count: Some(count),
            latency: t.elapsed(),
            detail: if frozen {
                let first = if collect { "gc.collect(), then " } else { "" };
                let then = if reset { ", then gc.collect()" } else { "" };
                format!(
                    "{first}gc.freeze(): {about}{count} objects moved to the permanent \
                     generation{then}"
                )
            } else {
                format!(
                    "not frozen: the main thread did not run the call within {ACTION_WAIT:?} ({})",
                    inject::main_thread_state(self.plan.pid)
                )
            },
        });
        Ok(())
    }

    /// Swaps the undo owed for one that also runs the thawed heap's first full collection: the
    /// new stub is placed and owed by the exit program before the plain one is retired, so the
    /// agent's death at any point leaves one of them owed. Where no page tail is free, the plain
    /// undo stays, and the application's own full collection frees what the freeze kept.
    pub(super) fn undo_with_collection(
        &mut self,
        f: &Fields,
        ours: [i64; 3],
        r: Option<Record>,
        fz: &mut Freezer,
    ) -> Result<()> {
        let Some(plain) = fz.undo.take() else { return Ok(()) };
        let (plan, mem) = (&self.plan, &self.mem);
        let custodian = self.custodian.as_mut().expect("custodian");
        match Injection::place(plan, mem, custodian, &inject::unfreeze_stub(true)) {
            Ok(thaw) => {
                fz.undo = Some(thaw);
                self.arm(f, &[ours], r, fz)?;
                self.custodian().run(plain.retire_steps())?;
            }
            Err(e) => {
                tracing::warn!("act mode: neurogc's freeze is undone without its collection: {e:#}");
                fz.undo = Some(plain);
            }
        }
        Ok(())
    }

    /// Queues the undo of neurogc's freeze and waits (bounded) for it to run: (queued, ran).
    pub(super) fn unfreeze(&mut self, undo: &Injection, r: Record) -> Result<(bool, bool)> {
        let t = Instant::now();
        let layout =
            PendingLayout::for_interpreter(&self.plan.interpreter).context("no pending-call layout")?;
        // No wait for the main thread to use CPU (as for the hook): a server's main thread idles in
        // select() between requests, and the undo is owed now. Queued regardless, as the
        // custodian would queue it, it runs when the main thread next runs Python.
        loop {
            if let Ok(queue) = inject::read_queue(&self.plan, &self.mem, layout)? {
                let steps = undo.enqueue_steps(&self.plan, &queue)?;
                if self.custodian().run_atomic(steps)? {
                    break;
                }
            }
            if t.elapsed() > ACTION_WAIT {
                return Ok((false, false));
            }
            std::thread::sleep(RETRY);
        }
        let ran = Instant::now();
        while ran.elapsed() < ACTION_WAIT {
            if r.undone(&self.mem)? {
                self.custodian().run(undo.retire_steps())?;
                return Ok((true, true));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok((true, false))
    }
}
