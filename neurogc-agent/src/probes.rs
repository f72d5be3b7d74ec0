//! Loads the kernel half and arms it on one process. Dropping `Probes` disarms everything
//! (begin probes first, so no collection is left half-seen).
use std::os::fd::AsFd;

use anyhow::{Context, Result};
use aya::{
    Ebpf, EbpfLoader,
    maps::{MapData, PerCpuArray, RingBuf},
    programs::UProbe,
};
use neurogc_common::{ProbeConfig, RING_BYTES, counter};

use crate::{
    bail_user,
    perf_uprobe::{self, UprobeLink},
    target::{AttachPlan, Sites},
};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/neurogc-probes"));

pub struct Probes {
    // Field order is drop order: begin probes go first.
    _begin: Vec<UprobeLink>,
    _end: Vec<UprobeLink>,
    pub ring: RingBuf<MapData>,
    counters: PerCpuArray<MapData, u64>,
    _ebpf: Ebpf,
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut UProbe> {
    let prog: &mut UProbe = ebpf
        .program_mut(name)
        .with_context(|| format!("eBPF program {name} missing from the object"))?
        .try_into()?;
    prog.load().with_context(|| format!("loading eBPF program {name}"))?;
    Ok(prog)
}

fn attach_all(ebpf: &mut Ebpf, sites: &Sites, plan: &AttachPlan) -> Result<Vec<UprobeLink>> {
    let prog = program(ebpf, sites.program)?;
    let fd = prog.fd()?.as_fd();
    sites
        .points
        .iter()
        .map(|&(offset, semaphore)| {
            perf_uprobe::attach(fd, &plan.open_path, offset, semaphore, plan.pid, sites.retprobe)
        })
        .collect()
}

impl Probes {
    pub fn arm(plan: &AttachPlan) -> Result<Probes> {
        anyhow::ensure!(
            !OBJECT.is_empty(),
            "this neurogc-agent was built with AYA_BUILD_SKIP=1 and carries no eBPF programs: rebuild it without"
        );
        let config = ProbeConfig {
            tgid: plan.pid as u32,
            // Wake the agent early only when a quarter of the ring is used; it drains on a timer.
            wakeup_bytes: RING_BYTES / 4,
            stats: plan.gc.map(|g| g.stats_locator()).unwrap_or_default(),
            begin_arg: plan.begin_arg,
            end_arg: plan.end_arg,
        };
        let mut ebpf = match EbpfLoader::new().override_global("CONFIG", &config, true).load(OBJECT) {
            Ok(ebpf) => ebpf,
            Err(err)
                if format!("{err:?}").contains("EPERM")
                    || format!("{err:?}").contains("PermissionDenied") =>
            {
                bail_user!("loading eBPF programs was refused ({err}): run neurogc-agent as root (sudo)")
            }
            Err(err) => return Err(err).context("loading neurogc's eBPF programs"),
        };
        // End probes first: a begin without its end would leave a collection half-seen.
        let (end_sites, begin_sites) = plan.source.sites();
        let end = attach_all(&mut ebpf, &end_sites, plan)?;
        let begin = attach_all(&mut ebpf, &begin_sites, plan)?;
        let ring = RingBuf::try_from(ebpf.take_map("EVENTS").context("EVENTS map missing")?)?;
        let counters = PerCpuArray::try_from(ebpf.take_map("COUNTERS").context("COUNTERS map missing")?)?;
        Ok(Probes { _begin: begin, _end: end, ring, counters, _ebpf: ebpf })
    }

    fn counter(&self, index: u32) -> u64 {
        self.counters.get(&index, 0).map(|per_cpu| per_cpu.iter().sum()).unwrap_or(0)
    }

    /// Events the kernel could not hand over because the ring buffer was full.
    pub fn lost(&self) -> u64 {
        self.counter(counter::LOST)
    }

    /// End probes with no begin (armed in the middle of a collection).
    pub fn unpaired(&self) -> u64 {
        self.counter(counter::UNPAIRED)
    }
}
