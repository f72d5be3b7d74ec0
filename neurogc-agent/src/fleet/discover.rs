//! Which processes fleet mode watches, and how each resolves to an attach plan. Interpreter files
//! are parsed once per (device, inode), whatever process or container maps them: a node running
//! fifty copies of one image's python parses its ELF once.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use wildmatch::WildMatch;

use crate::interp::{self, AttachPlan, Build, ProbeChoice, cpython::Interpreter, elf::Elf, process};

/// `KEY=PATTERN`: comm, cgroup path or container id; `*` and `?` are wildcards.
#[derive(Debug, Clone)]
pub struct Rule {
    pub key: RuleKey,
    pub pattern: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKey {
    Comm,
    Cgroup,
    Container,
}

impl Rule {
    fn matches(&self, who: &Identity) -> bool {
        let value = match self.key {
            RuleKey::Comm => &who.comm,
            RuleKey::Cgroup => &who.cgroup,
            RuleKey::Container => &who.container_id,
        };
        WildMatch::new(&self.pattern).matches(value)
    }
}

/// A process is watched when it matches some include (or there are none) and no exclude.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub include: Vec<Rule>,
    pub exclude: Vec<Rule>,
}

impl Filter {
    pub fn admits(&self, who: &Identity) -> bool {
        (self.include.is_empty() || self.include.iter().any(|r| r.matches(who)))
            && !self.exclude.iter().any(|r| r.matches(who))
    }
}

/// What the labels and filters say about a process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub pid: i32,
    pub comm: String,
    /// The cgroup v2 path (`0::…` line), or the first line's path on v1.
    pub cgroup: String,
    /// The container runtime's 64-hex id found in the cgroup path; empty outside containers.
    pub container_id: String,
    /// Start time in clock ticks since boot: with the PID, names one process forever.
    pub start: u64,
}

impl Identity {
    pub fn read(pid: i32) -> Option<Identity> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let comm = stat.rsplit_once(") ")?.0.split_once(" (")?.1.to_owned();
        let start = crate::interp::process::start_ticks(&stat)?;
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let cgroup = cgroups
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .or_else(|| cgroups.lines().next().and_then(|l| l.splitn(3, ':').nth(2)))
            .unwrap_or_default()
            .to_owned();
        let container_id = container_id(&cgroup).unwrap_or_default().to_owned();
        Some(Identity { pid, comm, cgroup, container_id, start })
    }
}

/// The last run of exactly 64 hex digits in a cgroup path: how docker (`/docker/ID`,
/// `docker-ID.scope`), containerd (`cri-containerd-ID.scope`), CRI-O (`crio-ID.scope`) and
/// podman (`libpod-ID.scope`) name a container's cgroup.
pub fn container_id(cgroup: &str) -> Option<&str> {
    cgroup.split(|c: char| !c.is_ascii_hexdigit()).rfind(|run| run.len() == 64)
}

/// Every process on the host now (the /proc scan).
pub fn all_pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// What one interpreter file turned out to be.
#[derive(Clone)]
enum Parsed {
    /// The file could not be opened (why): its process cannot be told apart.
    Unopenable(String),
    /// Not an interpreter; `needs_libpython`: a python executable whose interpreter is in a
    /// libpython the dynamic loader maps after the exec.
    NotPython {
        needs_libpython: bool,
    },
    Python(Arc<Build>),
    /// CPython, but not observable (unsupported version, no probes): the reason, for the user.
    Refused(String),
}

/// (device, inode) of an interpreter file.
type FileKey = ((i32, i32), u64);

#[derive(Clone, Default)]
pub struct BuildCache {
    by_inode: Arc<Mutex<HashMap<FileKey, Parsed>>>,
}

/// How resolving one process went.
pub enum Resolution {
    Plan(Box<AttachPlan>),
    /// Not a CPython interpreter (silently ignored).
    NotPython,
    /// CPython that cannot be observed: reported once, then left alone.
    Refused(String),
    /// Its mappings cannot be read (gone, or protected from this agent): not known to be Python.
    Unreadable(String),
}

/// How long a process caught at exec may take to map a libpython it needs.
const LOADER_WAIT: Duration = Duration::from_secs(1);

impl BuildCache {
    fn parsed(&self, file: &process::MappedFile) -> Parsed {
        let key = (file.dev, file.inode);
        if let Some(p) = self.by_inode.lock().expect("cache lock").get(&key) {
            return p.clone();
        }
        let parsed = match Elf::open(&file.open_path) {
            // Gone, not ELF or not ours to open: not remembered (the next process may differ).
            Err(err) => return Parsed::Unopenable(format!("{err:#}")),
            Ok(elf) => match Interpreter::identify(&elf, &file.path.to_string_lossy()) {
                None => Parsed::NotPython {
                    needs_libpython: elf.needed().iter().any(|n| n.starts_with("libpython3")),
                },
                Some(interp) => {
                    match interp::inspect(&elf, interp, &file.path.display().to_string(), ProbeChoice::Auto) {
                        Ok(build) => Parsed::Python(Arc::new(build)),
                        Err(err) => Parsed::Refused(format!("{err:#}")),
                    }
                }
            },
        };
        self.by_inode.lock().expect("cache lock").insert(key, parsed.clone());
        parsed
    }

    /// Resolves `pid`. A process caught at its exec may not have mapped its libpython yet (the
    /// dynamic loader runs after the exec): when its executable needs one, wait for it.
    pub fn resolve(&self, pid: i32, at_exec: bool) -> Resolution {
        let deadline = std::time::Instant::now() + LOADER_WAIT;
        loop {
            let mut needs_libpython = false;
            let files = match interp::candidates(pid) {
                Ok(files) => files,
                Err(err) => return Resolution::Unreadable(format!("{err:#}")),
            };
            for file in files {
                match self.parsed(&file) {
                    Parsed::Python(build) => {
                        return Resolution::Plan(Box::new(AttachPlan::new(pid, file, &build)));
                    }
                    Parsed::Refused(why) => return Resolution::Refused(why),
                    Parsed::Unopenable(why) => return Resolution::Unreadable(why),
                    Parsed::NotPython { needs_libpython: needs } => needs_libpython |= at_exec && needs,
                }
            }
            if !needs_libpython || std::time::Instant::now() >= deadline {
                return Resolution::NotPython;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn container_ids_of_the_common_runtimes() {
        for path in [
            format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b.slice/cri-containerd-{ID}.scope"
            ),
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}"),
            format!("/machine.slice/libpod-{ID}.scope/container"),
            format!("/kubepods/besteffort/pod0f0e/crio-{ID}.scope"),
        ] {
            assert_eq!(container_id(&path), Some(ID), "{path}");
        }
        assert_eq!(container_id("/user.slice/user-0.slice/session-3.scope"), None);
        assert_eq!(container_id(&format!("/x/{ID}0")), None, "65 digits is not an id");
    }

    #[test]
    fn include_and_exclude_rules() {
        let who = Identity { comm: "gunicorn".into(), container_id: ID.into(), ..Default::default() };
        let rule = |key, p: &str| Rule { key, pattern: p.into() };
        assert!(Filter::default().admits(&who));
        let f = Filter { include: vec![rule(RuleKey::Comm, "gunic*")], exclude: vec![] };
        assert!(f.admits(&who));
        let f = Filter { include: vec![rule(RuleKey::Comm, "celery")], exclude: vec![] };
        assert!(!f.admits(&who));
        let f = Filter { include: vec![], exclude: vec![rule(RuleKey::Container, "0123*")] };
        assert!(!f.admits(&who));
        let f = Filter { include: vec![], exclude: vec![rule(RuleKey::Cgroup, "*kubepods*")] };
        assert!(f.admits(&who), "an empty cgroup path matches no pattern but *");
    }
}
