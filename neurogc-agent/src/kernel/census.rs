//! The garbage census's kernel side (`census_clear` in the eBPF object): loaded on first use,
//! its uprobes attached to the target's `tp_clear` functions only while a census is armed, and
//! closed as soon as the census's record arrives. Every hit of a `tp_clear` probe costs the
//! target a trap (about 0.8 µs, one per cycle broken: shared/notes), so the probes are never
//! left on: a census costs its one walk and the traps until the agent has closed them.
use std::{os::fd::AsFd, path::Path};

use anyhow::{Context, Result};
use aya::{
    maps::{Array, HashMap, MapData, RingBuf},
    programs::UProbe,
};
use neurogc_common::{CensusArm, CensusCount, CensusKey, CensusObject, CensusSample};

use crate::kernel::{
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
    /// The uprobes of the census armed now (none between censuses), the process it is of, and
    /// since when.
    links: Vec<UprobeLink>,
    armed: Option<(i32, std::time::Instant)>,
}

impl Kernel {
    /// Loads the census program and takes its maps.
    pub fn census(&mut self) -> Result<CensusProbe> {
        let prog: &mut UProbe = self
            .ebpf
            .program_mut("census_clear")
            .context("eBPF program census_clear missing from the object")?
            .try_into()?;
        prog.load().context("loading eBPF program census_clear")?;
        let mut map = |name: &str| self.ebpf.take_map(name).with_context(|| format!("{name} map missing"));
        Ok(CensusProbe {
            armed_map: HashMap::try_from(map("CENSUS_ARMED")?)?,
            types: HashMap::try_from(map("CENSUS_TYPES")?)?,
            objects: Array::try_from(map("CENSUS_OBJECTS")?)?,
            samples: Array::try_from(map("CENSUS_SAMPLES")?)?,
            ring: RingBuf::try_from(map("CENSUS_RING")?)?,
            links: Vec::new(),
            armed: None,
        })
    }

    /// The census program's uprobes at `offsets` in `file`, for `pid` only.
    fn census_links(&self, file: &Path, offsets: &[u64], pid: i32) -> Result<Vec<UprobeLink>> {
        let prog: &UProbe =
            self.ebpf.program("census_clear").context("eBPF program census_clear missing")?.try_into()?;
        let fd = prog.fd()?.as_fd();
        offsets.iter().map(|&offset| perf_uprobe::attach(fd, file, offset, 0, pid, false)).collect()
    }
}

impl CensusProbe {
    /// Arms a census of `pid`'s next collection (one begun from now): the entry first, then the
    /// probes on its `tp_clear` functions (`offsets` in `file`). `arm`: from when (monotonic
    /// ns), and how its instances' attributes are reached (`census_values`).
    pub fn arm(
        &mut self,
        kernel: &Kernel,
        pid: i32,
        file: &Path,
        offsets: &[u64],
        arm: CensusArm,
    ) -> Result<()> {
        self.armed_map.insert(pid as u32, arm, 0).context("arming a census (CENSUS_ARMED)")?;
        match kernel.census_links(file, offsets, pid) {
            Ok(links) => {
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

    /// The process a census is armed for (its probes attached), and since when. One at a time:
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

    /// Closes the probes and drops the arming, census done or not. Each close takes about 0.1 s
    /// here, and the kernel takes them one at a time; until its turn a probe's breakpoint
    /// stays, and every cycle the target breaks there pays a trap (closed on the loop's thread,
    /// a census a second cost a cycle-heavy loop 30%, and the loop waited 0.5 s). They are
    /// closed on a thread of their own, in the order they were attached: the busiest first.
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
        // Without a thread to be had, the closure is dropped here: closed on this one, waiting.
        let _ = std::thread::Builder::new().name("census-close".into()).spawn(move || {
            for link in links {
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
