//! The kernel half, loaded once per agent, and the targets armed on it. Each target is an entry
//! of the `TARGETS` map plus its own per-PID uprobe perf events (never one system-wide uprobe: it
//! would trap every Python process on the host and raise its USDT semaphores). Disarming closes
//! the begin probes first, so no collection is left half-seen, then removes the entry.
use std::os::fd::{AsFd, OwnedFd};

use anyhow::{Context, Result};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, RingBuf},
    programs::{RawTracePoint, UProbe},
};
use neurogc_common::{GlobalConfig, RING_BYTES, TargetConfig, counter};

use crate::{
    error::bail_user,
    interp::{AttachPlan, Sites},
    kernel::perf_uprobe::{self, UprobeLink},
};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/neurogc-probes"));

const UPROBE_PROGRAMS: [&str; 3] = ["gc_begin", "gc_end", "gc_return"];

pub struct Kernel {
    pub ring: RingBuf<MapData>,
    counters: PerCpuArray<MapData, u64>,
    targets: HashMap<MapData, u32, TargetConfig>,
    pub(super) ebpf: Ebpf,
}

/// One process's probes. Hand it back to [`Kernel::disarm`]; dropped otherwise, its perf events
/// still close (the kernel removes the breakpoints) but its map entry stays until overwritten.
pub struct Armed {
    pub pid: i32,
    // Field order is drop order: begin probes go first.
    _begin: Vec<UprobeLink>,
    _end: Vec<UprobeLink>,
}

impl Kernel {
    pub fn load() -> Result<Kernel> {
        anyhow::ensure!(
            !OBJECT.is_empty(),
            "this neurogc-agent was built with AYA_BUILD_SKIP=1 and carries no eBPF programs: rebuild it without"
        );
        // Wake the agent early only when a quarter of the ring is used; it drains on a timer.
        let global = GlobalConfig { wakeup_bytes: RING_BYTES / 4, _pad: 0 };
        let mut ebpf = match EbpfLoader::new().override_global("CONFIG", &global, true).load(OBJECT) {
            Ok(ebpf) => ebpf,
            Err(err)
                if format!("{err:?}").contains("EPERM")
                    || format!("{err:?}").contains("PermissionDenied") =>
            {
                bail_user!("loading eBPF programs was refused ({err}): run neurogc-agent as root (sudo)")
            }
            Err(err) => return Err(err).context("loading neurogc's eBPF programs"),
        };
        for name in UPROBE_PROGRAMS {
            let prog: &mut UProbe = ebpf
                .program_mut(name)
                .with_context(|| format!("eBPF program {name} missing from the object"))?
                .try_into()?;
            prog.load().with_context(|| format!("loading eBPF program {name}"))?;
        }
        let map =
            |ebpf: &mut Ebpf, name: &str| ebpf.take_map(name).with_context(|| format!("{name} map missing"));
        Ok(Kernel {
            ring: RingBuf::try_from(map(&mut ebpf, "EVENTS")?)?,
            counters: PerCpuArray::try_from(map(&mut ebpf, "COUNTERS")?)?,
            targets: HashMap::try_from(map(&mut ebpf, "TARGETS")?)?,
            ebpf,
        })
    }

    /// Fleet mode's discovery: every execve on the host from now on, as `ExecEvent`s. It also
    /// drops a traced process's configuration at its exec (see the eBPF program).
    pub fn watch_execs(&mut self) -> Result<RingBuf<MapData>> {
        let prog: &mut RawTracePoint = self
            .ebpf
            .program_mut("process_exec")
            .context("eBPF program process_exec missing from the object")?
            .try_into()?;
        prog.load().context("loading eBPF program process_exec")?;
        // The link lives as long as the program, that is as long as the agent.
        prog.attach("sched_process_exec").context("attaching to sched_process_exec")?;
        let execs = self.ebpf.take_map("EXECS").context("EXECS map missing")?;
        Ok(RingBuf::try_from(execs)?)
    }

    /// Arms the probes on `plan`'s process: its configuration first, then the end probes, then
    /// the begin probes (a begin without its end would leave a collection half-seen).
    pub fn arm(&mut self, plan: &AttachPlan) -> Result<Armed> {
        let config = TargetConfig {
            stats: plan.gc.map(|g| g.stats_locator()).unwrap_or_default(),
            begin_arg: plan.begin_arg,
            end_arg: plan.end_arg,
            stack: plan.stack.unwrap_or_default(),
        };
        let pid = plan.pid as u32;
        self.targets.insert(pid, config, 0).context("adding the target to the TARGETS map (is it full?)")?;
        let (end_sites, begin_sites) = plan.source.sites();
        let armed = self.attach_all(&end_sites, plan).and_then(|end| {
            let begin = self.attach_all(&begin_sites, plan)?;
            Ok(Armed { pid: plan.pid, _begin: begin, _end: end })
        });
        if armed.is_err() {
            let _ = self.targets.remove(&pid);
        }
        armed
    }

    pub fn disarm(&mut self, armed: Armed) {
        let pid = armed.pid as u32;
        drop(armed);
        let _ = self.targets.remove(&pid);
    }

    fn attach_all(&self, sites: &Sites, plan: &AttachPlan) -> Result<Vec<UprobeLink>> {
        let prog: &UProbe = self
            .ebpf
            .program(sites.program)
            .with_context(|| format!("eBPF program {} missing", sites.program))?
            .try_into()?;
        let fd = prog.fd()?.as_fd();
        sites
            .points
            .iter()
            .map(|&(offset, semaphore)| {
                perf_uprobe::attach(fd, &plan.open_path, offset, semaphore, plan.pid, sites.retprobe)
            })
            .collect()
    }

    fn counter(&self, index: u32) -> u64 {
        self.counters.get(&index, 0).map(|per_cpu| per_cpu.iter().sum()).unwrap_or(0)
    }

    /// Events the kernel could not hand over because the ring buffer was full (all targets).
    pub fn lost(&self) -> u64 {
        self.counter(counter::LOST)
    }

    /// End probes with no begin (armed in the middle of a collection).
    pub fn unpaired(&self) -> u64 {
        self.counter(counter::UNPAIRED)
    }
}

/// One ring buffer record as the kernel wrote it, a `GcEvent`, an `ExecEvent` or a `CensusDone` (None when it is
/// too short to be one).
pub fn record<T: aya::Pod>(item: &[u8]) -> Option<T> {
    // SAFETY: the length is checked; read_unaligned copes with the ring's 8-byte alignment, and
    // every bit pattern is a valid `Pod`.
    (item.len() >= std::mem::size_of::<T>())
        .then(|| unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) })
}

/// A duplicate of a ring buffer's fd, for the loop to wait on while the map itself stays with
/// its owner (the same open file: readiness is shared).
pub fn ring_fd(ring: &RingBuf<MapData>) -> Result<OwnedFd> {
    ring.as_fd().try_clone_to_owned().context("duplicating a ring buffer fd")
}

/// The kernel half armed on a single process (`--pid`, launch mode). Dropping it disarms.
pub struct Probes {
    armed: Option<Armed>,
    pub kernel: Kernel,
}

impl Probes {
    pub fn arm(plan: &AttachPlan) -> Result<Probes> {
        let mut kernel = Kernel::load()?;
        let armed = kernel.arm(plan)?;
        Ok(Probes { armed: Some(armed), kernel })
    }

    pub fn ring(&mut self) -> &mut RingBuf<MapData> {
        &mut self.kernel.ring
    }

    pub fn lost(&self) -> u64 {
        self.kernel.lost()
    }

    pub fn unpaired(&self) -> u64 {
        self.kernel.unpaired()
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        if let Some(armed) = self.armed.take() {
            self.kernel.disarm(armed);
        }
    }
}
