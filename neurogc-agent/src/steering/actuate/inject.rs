//! Getting python-hook into the target with memory writes only: no ptrace stop, no file.
//!
//! The agent queues `PyRun_SimpleString(stub)` on the main thread's pending-call queue exactly as
//! `Py_AddPendingCall` would (slot, then the one write that publishes it, then the eval-breaker
//! flag; layouts in `interp::pending`), and the interpreter runs it at its next safe point. The
//! stub (python-hook/boot.py inside a `try`) lives in the unused tail of the last page of a
//! writable segment of an ELF file the target maps: mapped, zeroed, and used by nothing. It binds
//! one name in `__main__` for an instant and deletes it; it looks up no global, so shadowed
//! builtins cannot break it, and it cannot raise (a pending call that returns -1 without an
//! exception set would kill the target with SystemError). It fetches the hook over the agent's
//! socket, which the agent accepts the moment it arrives: the main thread is held for about a
//! millisecond (2 s at most, should the agent be stopped right then).
//!
//! The custodian makes every write, so a SIGKILL of the agent cannot tear the queue. If the hook
//! never connects, disarming writes one NUL over the stub's first byte: the queued call then
//! runs an empty string, whenever it runs.
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::custodian::{Custodian, Step};
use crate::{
    interp::{
        AttachPlan,
        cpython::GcStateLocation,
        layout::GcState,
        pending::{self, IdleQueue, NotIdle, PendingLayout},
        process,
    },
    memory::ProcMem,
};

const BOOT: &str = include_str!("../../../../python-hook/boot.py");
const ACTION: &str = include_str!("../../../../python-hook/action.py");
/// The stub's fixed beginning: how a region holding one (live, or disarmed by a NUL over its
/// first byte) is recognised.
const STUB_HEAD: &str = "try:\n import builtins as _neurogc\n";
/// The freeze and unfreeze stubs' beginning: not the boot stub's, so a page tail one of them was
/// left in (the custodian queues the unfreeze and exits) never reads as an agent's pending hook.
const ACTION_HEAD: &str = "try:\n import builtins as _neurogc_act\n";

/// The Python literal for `text` (ASCII only).
fn py_literal(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Python source made small enough for a page tail: blank lines, comments and three of every
/// four spaces of indentation go.
fn compact(source: &str) -> String {
    source
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("    ", " ")
        .replace(", ", ",")
        .replace(" = ", "=")
        .replace(" == ", "==")
}

/// `code` run in a namespace of its own by a statement that cannot raise and binds one name in
/// `__main__` (the one `head` imports builtins as) for an instant.
fn wrap(head: &str, code: &str) -> String {
    let name = head.trim_end().rsplit(' ').next().unwrap_or("_neurogc");
    format!(
        "{head} {name}.exec({}, {{'__builtins__': {name}}})\nexcept:\n pass\ntry:\n del {name}\nexcept:\n pass\n",
        py_literal(code)
    )
}

/// The code the pending call runs: the boot code, with the socket name and the agent's uid as
/// the target sees it.
pub fn stub(socket_name: &str, agent_uid: u32) -> String {
    let boot = compact(BOOT).replace("@NAME@", socket_name).replace("@UID@", &agent_uid.to_string());
    wrap(STUB_HEAD, &boot)
}

/// python-hook/action.py as a stub calling the fork guard's `freeze()`: after a full collection
/// where `collect`, counting the frozen heap where `count`, and with a full collection after it
/// where `reset` (the old generation's counters start again from the unfrozen heap).
pub fn freeze_stub(collect: bool, count: bool, reset: bool) -> String {
    let py = |b: bool| if b { "True" } else { "False" };
    let call = format!("freeze({}, {}, {})", py(collect), py(count), py(reset));
    wrap(ACTION_HEAD, &compact(ACTION).replace("@ACTION@", &call))
}

/// python-hook/action.py as a stub calling the fork guard's `unfreeze()`; `collect`: then
/// `gc.collect()`, through the guard's own reference to the module.
pub fn unfreeze_stub(collect: bool) -> String {
    let call = if collect { "unfreeze(); c.gc.collect()" } else { "unfreeze()" };
    wrap(ACTION_HEAD, &compact(ACTION).replace("@ACTION@", call))
}

/// Where the stub goes: a zeroed page tail past the end of a loaded segment, preferring
/// writable ones (then read-only data, then code: written through `/proc/PID/mem`, such a page
/// becomes the target's private copy, identical but for the tail).
fn find_slack(mem: &ProcMem, plan: &AttachPlan, len: usize) -> Result<u64> {
    use object::elf::{PF_W, PF_X};
    let proc = process::open(plan.pid)?;
    let files = process::mapped_files(&proc)?;
    let mapped = mapped_ranges(plan.pid)?;
    // The interpreter first; never the dynamic loader (its early malloc uses its page tail).
    let mut ordered: Vec<&process::MappedFile> = files.iter().filter(|f| f.path == plan.file).collect();
    ordered.extend(files.iter().filter(|f| {
        f.path != plan.file
            && !f.path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("ld-linux"))
    }));
    let mut tails = Vec::new();
    for file in ordered {
        let Ok(elf) = crate::interp::elf::Elf::open(&file.open_path) else { continue };
        let bias = file.base.wrapping_sub(elf.first_load_address() & !0xfff);
        for (end, flags) in elf.segment_ends() {
            let rank = if flags & PF_W != 0 {
                0
            } else if flags & PF_X == 0 {
                1
            } else {
                2
            };
            tails.push((rank, end.wrapping_add(bias)));
        }
    }
    tails.sort_by_key(|&(rank, _)| rank);
    let mut busy = false;
    for (_, end) in tails {
        let start = (end + 15) & !15;
        let page_end = (end + 0xfff) & !0xfff;
        if start + len as u64 > page_end || !mapped.iter().any(|&(a, b)| a <= start && page_end <= b) {
            continue;
        }
        let Ok(now) = mem.read(start, len) else { continue };
        let head = STUB_HEAD.as_bytes();
        let disarmed = now[0] == 0 && now[1..head.len()] == head[1..];
        if now.iter().all(|&b| b == 0) || disarmed {
            return Ok(start);
        }
        busy |= now.starts_with(head);
    }
    if busy {
        crate::error::bail_user!(
            "another neurogc agent's hook injection is pending in process {}: one agent per process",
            plan.pid
        );
    }
    bail!("no unused page tail of {len} bytes in the loaded segments of process {}", plan.pid)
}

fn mapped_ranges(pid: i32) -> Result<Vec<(u64, u64)>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(maps
        .lines()
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
        })
        .collect())
}

/// The agent's uid as the target sees it (its user namespace may map root elsewhere, or not at all).
pub fn agent_uid_in(pid: i32) -> u32 {
    let map = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).unwrap_or_default();
    for line in map.lines() {
        let v: Vec<u64> = line.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if let [inside, outside, count] = v[..]
            && outside == 0
            && count > 0
        {
            return inside as u32;
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/overflowuid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65534)
}

/// A queued (or about to be queued) stub.
pub struct Injection {
    pub region: u64,
    stub: Vec<u8>,
}

/// What a queued call comes with: the exit program that covers the agent's death from before
/// the first write, the call queued once this one has run, whether the main thread is known to
/// run Python (it has just run a call of ours), which spares the check that it does, and the
/// GC state whose young count is zeroed with the queueing.
pub struct Queueing<'a> {
    pub exit: Vec<Step>,
    pub then: Option<&'a Injection>,
    pub main_running: bool,
    pub gc: GcState,
}

/// Why the injection is not queued yet; the caller waits and tries again.
pub enum Deferred {
    Queue(NotIdle),
    MainThreadIdle(String),
}

impl Injection {
    /// Steps that make a queued stub harmless: a NUL over its first byte (one byte, so a
    /// consumer reading it concurrently sees the whole stub or an empty string).
    pub fn disarm_steps(&self) -> Vec<Step> {
        vec![Step::replace(self.region, &self.stub[..1], &[0])]
    }

    /// Once the hook runs, the stub is no longer read: give the page tail its zeros back.
    pub fn retire_steps(&self) -> Vec<Step> {
        vec![Step::replace(self.region, &self.stub, &vec![0; self.stub.len()])]
    }

    /// Writes `code` into an unused page tail without queueing it: a stub to queue later, maybe
    /// by the custodian once the agent is gone.
    pub fn place(
        plan: &AttachPlan,
        mem: &ProcMem,
        custodian: &mut Custodian,
        code: &str,
    ) -> Result<Injection> {
        let mut stub = code.as_bytes().to_vec();
        stub.push(0);
        let region = find_slack(mem, plan, stub.len())?;
        let now = mem.read(region, stub.len())?;
        anyhow::ensure!(
            custodian.run_atomic(vec![Step::replace(region, &now, &stub)])?,
            "the page tail at {region:#x} changed while the stub was written"
        );
        Ok(Injection { region, stub })
    }

    /// The writes that queue this (placed) stub on `queue`, all or nothing.
    pub fn enqueue_steps(&self, plan: &AttachPlan, queue: &IdleQueue) -> Result<Vec<Step>> {
        Ok(super::enqueue::enqueue_steps(queue, run_address(plan)?, self.region))
    }

    /// Queues the stub if the queue is idle (and, on 3.8–3.12, the main thread is running: their
    /// eval breaker is shared by every thread, which keep checking it until the main thread runs
    /// the call). The exit program covers the agent's death from before the first write: `exit`
    /// and a disarm of this stub, then `then` queued once this call has run.
    pub fn try_queue(
        plan: &AttachPlan,
        mem: &ProcMem,
        custodian: &mut Custodian,
        layout: PendingLayout,
        code: &str,
        with: Queueing,
    ) -> Result<std::result::Result<Injection, Deferred>> {
        let Queueing { exit, then, main_running, gc } = with;
        let queue = match idle_queue(plan, mem, layout, main_running)? {
            Ok(q) => q,
            Err(deferred) => return Ok(Err(deferred)),
        };
        let run = run_address(plan)?;
        let mut stub = code.as_bytes().to_vec();
        stub.push(0);
        let region = find_slack(mem, plan, stub.len())?;
        let injection = Injection { region, stub };
        let after = match then {
            Some(next) => next.enqueue_steps(plan, &queue.after_one())?,
            None => Vec::new(),
        };
        // Armed for the agent's death before anything is written.
        custodian.on_exit_then_queue([exit, injection.disarm_steps()].concat(), after)?;
        let now = mem.read(region, injection.stub.len())?;
        let mut steps = vec![Step::replace(region, &now, &injection.stub)];
        // The call allocates (the boot code imports `_socket` and builds the fork guard: 200-250
        // objects on 3.11; an action a few), and each allocation counts toward threshold0. Where
        // the young list is long and its count sits just under the threshold (objects dying as
        // fast as they come: a deallocation anywhere counts against the young generation), the
        // call would run the application's young collection over all of it from neurogc's code
        // (an evaluation draw replacing cache entries: 233 ms at attach, where its own never
        // ran). Zeroed as a young collection leaves it, the count puts the application's next
        // young collection off by at most one threshold's worth of allocations. A free-threaded
        // build's count can be negative (frees are subtracted in per-thread batches): zero
        // there would bring the collection forward, so only a positive count is zeroed.
        if gc.read_settings_in(mem)?.counts[0] > 0 {
            steps.push(Step::write(gc.young_count_address(), &0i32.to_le_bytes()));
        }
        steps.extend(super::enqueue::enqueue_steps(&queue, run, region));
        // false: the queue moved between our read and the custodian's check: try again later.
        Ok(match custodian.run_atomic(steps)? {
            true => Ok(injection),
            false => Err(Deferred::Queue(NotIdle::Busy(1))),
        })
    }
}

fn run_address(plan: &AttachPlan) -> Result<u64> {
    let elf = plan.reopen()?;
    elf.symbol_address("PyRun_SimpleString")
        .map(|a| a + plan.bias)
        .with_context(|| format!("{} does not export PyRun_SimpleString", plan.file.display()))
}

/// The main thread's pending-call queue as it is now.
pub fn read_queue(
    plan: &AttachPlan,
    mem: &ProcMem,
    layout: PendingLayout,
) -> Result<std::result::Result<IdleQueue, NotIdle>> {
    let runtime = plan.interpreter.runtime + plan.bias;
    let main_ptr = match plan.gc.map(|g| g.location) {
        Some(GcStateLocation::MainInterpreter { main_ptr, .. }) => Some(main_ptr),
        _ => None,
    };
    IdleQueue::read(mem, layout, runtime, main_ptr)
}

/// The main thread's pending-call queue, if a call can be queued on it now.
pub fn idle_queue(
    plan: &AttachPlan,
    mem: &ProcMem,
    layout: PendingLayout,
    main_running: bool,
) -> Result<std::result::Result<IdleQueue, Deferred>> {
    let queue = match read_queue(plan, mem, layout)? {
        Ok(q) => q,
        Err(not_idle) => return Ok(Err(Deferred::Queue(not_idle))),
    };
    if !main_running
        && matches!(layout.breaker, pending::Breaker::Int(_))
        && let Some(why) = main_thread_blocked(plan.pid)
    {
        return Ok(Err(Deferred::MainThreadIdle(why)));
    }
    Ok(Ok(queue))
}

/// On 3.8–3.12 a call is queued only once the main thread has used CPU lately: a main thread
/// blocked in a system call would leave every other thread tripping the shared eval breaker.
fn main_thread_blocked(pid: i32) -> Option<String> {
    let before = process::main_thread_cpu_ns(pid)?;
    std::thread::sleep(Duration::from_millis(250));
    let after = process::main_thread_cpu_ns(pid)?;
    (after == before).then(|| main_thread_state(pid))
}

/// What the main thread is doing, in words, for messages.
pub fn main_thread_state(pid: i32) -> String {
    if let Some(held) = process::held_by_other(pid) {
        return held;
    }
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan")).unwrap_or_default();
    let syscall = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/syscall")).unwrap_or_default();
    let nr = syscall.split_whitespace().next().and_then(|n| n.parse::<i64>().ok());
    match nr {
        Some(nr) if nr >= 0 => format!(
            "its main thread is blocked in the {} system call{}",
            syscall_name(nr),
            if wchan.is_empty() || wchan == "0" { String::new() } else { format!(" ({wchan})") }
        ),
        _ => "its main thread is not running Python code".to_owned(),
    }
}

fn syscall_name(nr: i64) -> String {
    let name = match nr {
        0 => "read",
        7 => "poll",
        23 => "select",
        34 => "pause",
        35 => "nanosleep",
        43 => "accept",
        61 => "wait4",
        202 => "futex",
        230 => "clock_nanosleep",
        232 => "epoll_wait",
        270 => "pselect6",
        271 => "ppoll",
        281 => "epoll_pwait",
        288 => "accept4",
        441 => "epoll_pwait2",
        _ => return format!("#{nr}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stub_is_small_and_binds_nothing_but_one_name() {
        let s = stub("neurogc-0123456789abcdef0123456789abcdef", 0);
        assert!(s.starts_with(STUB_HEAD));
        assert!(s.len() < 700, "{} bytes: it must fit an unused page tail", s.len());
        assert!(s.is_ascii());
        // Exactly one statement binds a name in __main__, and it is deleted again.
        assert_eq!(s.matches("_neurogc").count(), 4, "{s}");
        assert!(s.contains("\\0neurogc-0123456789abcdef0123456789abcdef"));
        for s in [
            freeze_stub(true, true, true),
            freeze_stub(false, false, false),
            unfreeze_stub(false),
            unfreeze_stub(true),
        ] {
            assert!(s.starts_with(ACTION_HEAD) && !s.starts_with(STUB_HEAD), "{s}");
            assert!(s.len() < 700 && s.is_ascii(), "{} bytes", s.len());
            assert_eq!(s.matches("_neurogc_act").count(), 4, "{s}");
        }
    }

    #[test]
    fn the_actions_call_the_guard_of_the_hooks_own_protocol() {
        // A guard another protocol's agent left is not this one's: its freeze() does otherwise.
        let hook = include_str!("../../../../python-hook/neurogc_hook.py");
        let protocol = hook.lines().find_map(|l| l.strip_prefix("PROTOCOL = ")).expect("PROTOCOL");
        assert!(ACTION.contains(&format!("get(\"protocol\") == {protocol}:")), "{ACTION}");
        assert!(hook.contains(&format!("_MAGIC = b\"NG{protocol}\"")));
        // And the agent's own copies: what it accepts as the hook's answer, and the record's
        // magic it checks before any write.
        assert_eq!(super::super::channel::PROTOCOL, protocol);
        assert_eq!(super::super::record::RECORD_MAGIC, format!("NG{protocol}").as_bytes());
    }

    #[test]
    fn a_main_thread_that_sleeps_between_requests_is_running_and_one_asleep_for_good_is_not() {
        // A light service's main thread: 200 requests a second, each a few microseconds of
        // work after a 5 ms sleep; it uses far less than a clock tick in the quarter second.
        let spawn = |code: &str| {
            let child = std::process::Command::new("python3").args(["-c", code]).spawn().expect("python3");
            std::thread::sleep(Duration::from_millis(300));
            child
        };
        let mut light = spawn("import time\nwhile True:\n    time.sleep(0.005)\n    sum(range(20))");
        let mut asleep = spawn("import time\ntime.sleep(60)");
        let (running, blocked) =
            (main_thread_blocked(light.id() as i32), main_thread_blocked(asleep.id() as i32));
        for c in [&mut light, &mut asleep] {
            c.kill().ok();
            c.wait().ok();
        }
        assert_eq!(running, None);
        let why = blocked.expect("blocked");
        assert!(why.contains("clock_nanosleep") || why.contains("select"), "{why}");
    }

    #[test]
    fn literals_escape_what_python_would_read_differently() {
        assert_eq!(py_literal("a'b\\c\nd\0"), "'a\\'b\\\\c\\nd\\0'");
    }
}
