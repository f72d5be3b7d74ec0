//! The garbage census's kernel side (`census_breakpoint` and `census_clear` in the eBPF object):
//! loaded on first use, attached to the target's `tp_clear` functions only while a census is
//! armed, and closed as soon as the census's record arrives. Hardware breakpoints where they
//! can be had (closed at once), uprobes otherwise (0.1 s each to close). Every hit costs the
//! target a trap (one per cycle broken), so they are never left on: a census costs its one walk
//! and the traps until the agent has closed them.
use std::{
    os::fd::{AsFd, OwnedFd},
    path::Path,
};

use anyhow::{Context, Result};
use aya::{
    maps::{Array, HashMap, MapData, RingBuf},
    programs::{PerfEvent, UProbe},
};
use neurogc_common::{CensusArm, CensusCount, CensusKey, CensusObject, CensusSample};

use crate::kernel::{
    perf_breakpoint,
    perf_uprobe::{self, UprobeLink},
    probes::Kernel,
};

pub struct CensusProbe {
    armed_map: HashMap<MapData, u32, CensusArm>,
    types: HashMap<MapData, CensusKey, CensusCount>,
    objects: Array<MapData, CensusObject>,
    samples: Array<MapData, CensusSample>,
    /// One `CensusDone` per census.
    pub ring: RingBuf<MapData>,
    /// The breakpoints or uprobes of the census armed now (none between censuses), the process
    /// it is of, and since when.
    links: Vec<Link>,
    armed: Option<(i32, std::time::Instant)>,
    /// Hardware breakpoints can be had (their program loaded, and none refused yet).
    breakpoints: bool,
}

/// Where a census's program runs: a `tp_clear` function, by its file offset (for a uprobe)
/// and its run-time address (for a breakpoint).
#[derive(Debug, Clone, Copy)]
pub struct Site {
    pub offset: u64,
    pub addr: u64,
}

/// A census's attachment; dropping it detaches.
enum Link {
    Uprobe(#[allow(dead_code)] UprobeLink),
    Breakpoint(#[allow(dead_code)] OwnedFd),
}

/// A thread's debug registers: the busiest sites get breakpoints, the rest none.
pub const BREAKPOINTS_PER_THREAD: usize = 4;
/// Threads given breakpoints, the main thread first: a collection runs on the thread that
/// allocates, which in most services is one of a few.
const MAX_THREADS: usize = 16;

impl Kernel {
    /// Loads the census programs and takes their maps.
    pub fn census(&mut self) -> Result<CensusProbe> {
        let prog: &mut UProbe = self
            .ebpf
            .program_mut("census_clear")
            .context("eBPF program census_clear missing from the object")?
            .try_into()?;
        prog.load().context("loading eBPF program census_clear")?;
        let breakpoints = match self.ebpf.program_mut("census_breakpoint").map(<&mut PerfEvent>::try_from) {
            Some(Ok(prog)) => prog
                .load()
                .map_err(|err| {
                    tracing::info!("--census: uprobes, not breakpoints: loading census_breakpoint: {err}")
                })
                .is_ok(),
            _ => false,
        };
        let mut map = |name: &str| self.ebpf.take_map(name).with_context(|| format!("{name} map missing"));
        Ok(CensusProbe {
            armed_map: HashMap::try_from(map("CENSUS_ARMED")?)?,
            types: HashMap::try_from(map("CENSUS_TYPES")?)?,
            objects: Array::try_from(map("CENSUS_OBJECTS")?)?,
            samples: Array::try_from(map("CENSUS_SAMPLES")?)?,
            ring: RingBuf::try_from(map("CENSUS_RING")?)?,
            links: Vec::new(),
            armed: None,
            breakpoints,
        })
    }

    /// The census program's uprobes at `sites` in `file`, for `pid` only.
    fn census_uprobes(&self, file: &Path, sites: &[Site], pid: i32) -> Result<Vec<Link>> {
        let prog: &UProbe =
            self.ebpf.program("census_clear").context("eBPF program census_clear missing")?.try_into()?;
        let fd = prog.fd()?.as_fd();
        sites
            .iter()
            .map(|s| perf_uprobe::attach(fd, file, s.offset, 0, pid, false).map(Link::Uprobe))
            .collect()
    }

    /// Breakpoints at the busiest `sites` in `pid`'s threads (`MAX_THREADS`). A thread that
    /// exited meanwhile is skipped, one whose registers are taken (a debugger's) keeps those it
    /// got; an error before any breakpoint was had is returned (uprobes then serve).
    fn census_breakpoints(&self, sites: &[Site], pid: i32) -> Result<Vec<Link>> {
        let prog: &PerfEvent = self
            .ebpf
            .program("census_breakpoint")
            .context("eBPF program census_breakpoint missing")?
            .try_into()?;
        let fd = prog.fd()?.as_fd();
        let mut links = Vec::new();
        for tid in threads(pid)? {
            for site in sites.iter().take(BREAKPOINTS_PER_THREAD) {
                match perf_breakpoint::attach(fd, site.addr, tid) {
                    Ok(bp) => links.push(Link::Breakpoint(bp)),
                    Err(err) if err.raw_os_error() == Some(libc::ESRCH) => break,
                    Err(err) if links.is_empty() => {
                        anyhow::bail!("a breakpoint at {:#x} in thread {tid}: {err}", site.addr)
                    }
                    Err(_) => break,
                }
            }
        }
        Ok(links)
    }
}

impl CensusProbe {
    /// Arms a census of `pid`'s next collection (one begun from now): the entry first, then
    /// breakpoints (else uprobes) at its `tp_clear` functions (`sites`, busiest first, in
    /// `file`). `arm`: from when (monotonic ns), how its instances' attributes are reached
    /// (`census_values`), how long its walk may take. One process that refuses breakpoints (a
    /// debugger holding its registers) turns this agent to uprobes for every census after.
    pub fn arm(
        &mut self,
        kernel: &Kernel,
        pid: i32,
        file: &Path,
        sites: &[Site],
        arm: CensusArm,
    ) -> Result<()> {
        self.armed_map.insert(pid as u32, arm, 0).context("arming a census (CENSUS_ARMED)")?;
        let started = std::time::Instant::now();
        let mut links = Err(anyhow::anyhow!("no breakpoints"));
        if self.breakpoints {
            links = kernel.census_breakpoints(sites, pid);
            if let Err(err) = &links {
                tracing::info!("--census: uprobes from now on: {err:#}");
                self.breakpoints = false;
            }
        }
        if links.is_err() {
            links = kernel.census_uprobes(file, sites, pid);
        }
        match links {
            Ok(links) => {
                tracing::debug!("census: {} attached in {:?}", links.len(), started.elapsed());
                self.links = links;
                self.armed = Some((pid, std::time::Instant::now()));
                Ok(())
            }
            Err(err) => {
                let _ = self.armed_map.remove(&(pid as u32));
                Err(err)
            }
        }
    }

    /// The process a census is armed for (its breakpoints or probes attached), and since when. One at a time:
    /// the walk's objects and samples have one place each (`CENSUS_OBJECTS`, `CENSUS_SAMPLES`).
    pub fn armed(&self) -> Option<(i32, std::time::Instant)> {
        self.armed
    }

    /// Each census done since last asked (one per arming).
    pub fn done(&mut self) -> Vec<neurogc_common::CensusDone> {
        std::iter::from_fn(|| self.ring.next().map(|item| crate::kernel::probes::record(&item)))
            .flatten()
            .collect()
    }

    /// Closes the breakpoints or probes and drops the arming, census done or not. Breakpoints
    /// close at once. A uprobe's close takes about 0.1 s here, and the kernel takes them one at
    /// a time; until its turn a probe stays, and every cycle the target breaks there pays a
    /// trap (closed on the loop's thread, a census a second cost a cycle-heavy loop 30%, and the
    /// loop waited 0.5 s): they are closed on a thread of their own, busiest first.
    pub fn disarm(&mut self, pid: i32) {
        let _ = self.armed_map.remove(&(pid as u32));
        if self.armed.is_some_and(|(armed, _)| armed != pid) {
            return;
        }
        self.armed = None;
        let links = std::mem::take(&mut self.links);
        if links.is_empty() {
            return;
        }
        // Breakpoints close at once, here; uprobes on a thread of their own (without one to be
        // had, the closure is dropped here: closed on this one, waiting).
        let started = std::time::Instant::now();
        let uprobes: Vec<Link> = links.into_iter().filter(|l| matches!(l, Link::Uprobe(_))).collect();
        tracing::debug!("census: breakpoints closed in {:?}", started.elapsed());
        if uprobes.is_empty() {
            return;
        }
        let _ = std::thread::Builder::new().name("census-close".into()).spawn(move || {
            for link in uprobes {
                drop(link);
            }
        });
    }

    /// The last census's first `walked` objects, and its first `samples` instances copied.
    pub fn walked(&self, walked: u32, samples: u32) -> (Vec<CensusObject>, Vec<CensusSample>) {
        let objects = (0..walked).filter_map(|i| self.objects.get(&i, 0).ok()).collect();
        let samples = (0..samples).filter_map(|i| self.samples.get(&i, 0).ok()).collect();
        (objects, samples)
    }

    /// `pid`'s tallies (type address, count), taken out of the map.
    pub fn take(&mut self, pid: i32) -> Vec<(u64, CensusCount)> {
        let keys: Vec<CensusKey> =
            self.types.keys().filter_map(Result::ok).filter(|k| k.pid == pid as u32).collect();
        keys.into_iter()
            .filter_map(|k| {
                let count = self.types.get(&k, 0).ok();
                let _ = self.types.remove(&k);
                Some((k.ty, count?))
            })
            .collect()
    }
}

/// `pid`'s threads, the main thread first, at most `MAX_THREADS`.
fn threads(pid: i32) -> Result<Vec<i32>> {
    let dir = format!("/proc/{pid}/task");
    let mut tids: Vec<i32> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {dir}"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_by_key(|&t| (t != pid, t));
    tids.truncate(MAX_THREADS);
    Ok(tids)
}
