//! The target as /proc shows it. Files are opened through `/proc/PID/map_files/…`, which names
//! the very inode the process mapped, whatever mount namespace or chroot it lives in.
use std::path::PathBuf;

use anyhow::{Context, Result};
use procfs::process::{MMapPath, Process};

use crate::error::bail_user;

#[derive(Debug, Clone)]
pub struct MappedFile {
    /// The path as the target's own mount namespace names it (for messages only).
    pub path: PathBuf,
    /// A path the agent can open, and hand to perf_event_open, that resolves to the same inode.
    pub open_path: PathBuf,
    /// Start of the mapping of file offset 0.
    pub base: u64,
    /// (device, inode): the same file whatever path or namespace names it.
    pub dev: (i32, i32),
    pub inode: u64,
}

impl MappedFile {
    /// The file, held open. A map_files name lasts only as long as its mapping's bounds, and
    /// the dynamic loader maps a library whole before it maps its segments over that mapping:
    /// a name read from the map a moment ago may be gone (a census started at launch met
    /// ENOENT in CI). The same inode's first mapping is then looked up again, for a few ms.
    pub fn open(&self, pid: i32) -> Result<std::fs::File> {
        let mut path = self.open_path.clone();
        for _ in 0..20 {
            match std::fs::File::open(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                opened => return opened.with_context(|| format!("opening {}", path.display())),
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            let now = mapped_files(&open(pid)?)?;
            match now.into_iter().find(|m| m.dev == self.dev && m.inode == self.inode) {
                Some(m) => path = m.open_path,
                None => anyhow::bail!("{} is no longer mapped", self.path.display()),
            }
        }
        anyhow::bail!("{} was remapped throughout 100 ms", self.path.display())
    }
}

/// A `stat` line's fields after the command name (state first), which may itself hold spaces
/// and parentheses.
pub fn after_comm(stat: &str) -> Option<&str> {
    Some(stat.rsplit_once(") ")?.1)
}

/// The main thread's `stat` line.
pub fn main_thread_stat(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat")).ok()
}

/// The main thread's time on a CPU so far, in nanoseconds: from `schedstat` where the kernel
/// keeps it (every wake-up counts), else from `stat`'s user and system ticks. A main thread
/// serving 200 requests a second from `time.sleep` used under one 10 ms tick in a quarter
/// second, and read as blocked on ticks alone (an evaluation draw's freeze was never queued).
pub fn main_thread_cpu_ns(pid: i32) -> Option<u64> {
    if let Some([ns, ..]) = schedstat(std::path::Path::new(&format!("/proc/{pid}/task/{pid}"))) {
        return Some(ns);
    }
    let stat = main_thread_stat(pid)?;
    let f: Vec<&str> = after_comm(&stat)?.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux ABI that exposes it to /proc.
    Some(ticks * 10_000_000)
}

/// A thread's `schedstat` (`task`: its /proc/PID/task/TID directory), where the kernel keeps
/// one: time on a CPU and time waiting for one (ns), and how many times it was put on one.
pub fn schedstat(task: &std::path::Path) -> Option<[u64; 3]> {
    let s = std::fs::read_to_string(task.join("schedstat")).ok()?;
    let mut f = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some([f.next()??, f.next()??, f.next()??])
}

/// Running (not gone, not a zombie waiting to be reaped).
pub fn exists(pid: i32) -> bool {
    pid > 0
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| after_comm(&s).is_some_and(|rest| !rest.starts_with('Z')))
}

/// Waits up to `within` for the process to be gone (exited, or a zombie): one that is exiting
/// lets its memory go (its image reads nothing) a moment before /proc shows it, and a read
/// that failed then is its exit, not an error (the demo's target, read as it ended, printed one).
pub fn wait_gone(pid: i32, within: std::time::Duration) {
    let start = std::time::Instant::now();
    while exists(pid) && start.elapsed() < within {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The main thread is stopped (SIGSTOP, or a debugger's stop): it runs no code until resumed.
pub fn stopped(pid: i32) -> bool {
    main_thread_stat(pid).is_some_and(|s| after_comm(&s).is_some_and(|rest| rest.starts_with(['T', 't'])))
}

/// A tracer or a stop holding the target, in words: nothing neurogc does moves it on.
pub fn held_by_other(pid: i32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let tracer = status.lines().find_map(|l| l.strip_prefix("TracerPid:")).map(str::trim).unwrap_or("0");
    if tracer != "0" {
        return Some(format!("it is traced by {} (a debugger?)", describe(tracer.parse().unwrap_or(0))));
    }
    stopped(pid).then(|| "it is stopped (SIGSTOP or a debugger)".to_owned())
}

pub fn open(pid: i32) -> Result<Process> {
    if !exists(pid) {
        bail_user!("no process with PID {pid} (it is not running, or not in this PID namespace)");
    }
    Process::new(pid).with_context(|| format!("opening /proc/{pid}"))
}

/// `/proc/PID/stat`'s start time (field 22, clock ticks since boot): with the PID, it names one
/// process forever.
pub fn start_ticks(stat: &str) -> Option<u64> {
    // The 20th field after the comm.
    after_comm(stat)?.split_whitespace().nth(19)?.parse().ok()
}

/// How long the process has been running, in seconds.
pub fn age_s(pid: i32) -> Option<f64> {
    let start = start_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let uptime: f64 =
        std::fs::read_to_string("/proc/uptime").ok()?.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (hz > 0.0).then(|| (uptime - start as f64 / hz).max(0.0))
}

/// Short description for messages: `1234 (python3.11)`.
pub fn describe(pid: i32) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    format!("{pid} ({})", comm.trim())
}

/// Why the kernel refuses this agent (root: the agent refuses to start otherwise) another
/// process's memory map, as far as it can tell.
fn why_denied(pid: i32) -> String {
    // ptrace access needs the target's capabilities to be a subset of the caller's (or
    // CAP_SYS_PTRACE over its user namespace), past Yama and any security module.
    let caps = |pid: &str, field: &str| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find_map(|l| l.strip_prefix(field))?;
        u64::from_str_radix(line.trim(), 16).ok()
    };
    let missing = match (caps(&pid.to_string(), "CapPrm:"), caps("self", "CapEff:")) {
        (Some(theirs), Some(ours)) => theirs & !ours,
        _ => 0,
    };
    let mut why = "neurogc-agent runs as root, but the kernel refuses it access to this process".to_owned();
    if missing != 0 {
        let names: Vec<String> = (0..64).filter(|b| missing >> b & 1 == 1).map(cap_name).collect();
        why += &format!(
            " (it holds {}, which this agent lacks, or a security module protects it)",
            names.join(", ")
        );
    } else {
        why += " (another user namespace, Yama's ptrace_scope or a security module such as AppArmor or \
                 SELinux protects it)";
    }
    why
}

/// A capability's name (capability(7)), by bit.
fn cap_name(bit: u32) -> String {
    const NAMES: [&str; 41] = [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ];
    NAMES.get(bit as usize).map_or_else(|| format!("capability {bit}"), |n| format!("CAP_{n}"))
}

/// Every file mapped by the process, once each, in address order.
pub fn mapped_files(process: &Process) -> Result<Vec<MappedFile>> {
    let pid = process.pid;
    let maps = match process.maps() {
        Ok(maps) => maps,
        Err(procfs::ProcError::PermissionDenied(_)) => {
            bail_user!("cannot read process {}'s memory map: {}", describe(pid), why_denied(pid))
        }
        Err(e) => return Err(e).with_context(|| format!("reading /proc/{pid}/maps")),
    };
    let mut out: Vec<MappedFile> = Vec::new();
    for map in maps.iter() {
        let MMapPath::Path(path) = &map.pathname else { continue };
        if map.offset != 0 || out.iter().any(|m| m.inode == map.inode) {
            continue;
        }
        out.push(MappedFile {
            path: path.clone(),
            open_path: PathBuf::from(format!(
                "/proc/{pid}/map_files/{:x}-{:x}",
                map.address.0, map.address.1
            )),
            base: map.address.0,
            dev: map.dev,
            inode: map.inode,
        });
    }
    Ok(out)
}

/// The inode of the executable, to tell it apart from libraries among the mappings.
pub fn exe_inode(pid: i32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/exe")).ok().map(|m| m.ino())
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, Write};

    /// A mapping's bounds change after the map was read (the loader's split, here an
    /// mprotect of its last page): the file still opens, through its new name.
    #[test]
    fn a_mapped_file_opens_after_its_mapping_is_split() {
        let dir = std::env::temp_dir().join(format!("neurogc-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("three-pages");
        std::fs::write(&data, vec![7u8; 3 * 4096]).unwrap();
        let code = "import ctypes, mmap, sys\n\
            f = open(sys.argv[1], 'rb')\n\
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n\
            print('ready', flush=True)\n\
            sys.stdin.readline()\n\
            libc = ctypes.CDLL(None, use_errno=True)\n\
            libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n\
            base = int(open('/proc/self/maps').read().split(sys.argv[1])[0].splitlines()[-1].split('-')[0], 16)\n\
            assert libc.mprotect(base + 8192, 4096, 0) == 0\n\
            print('split', flush=True)\n\
            sys.stdin.readline()\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", code, data.to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        let pid = child.id() as i32;
        let before = super::mapped_files(&super::open(pid).unwrap()).unwrap();
        let file = before.into_iter().find(|m| m.path == data).expect("the file is mapped");
        writeln!(stdin).unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "split");
        assert!(!file.open_path.exists(), "the split renamed the mapping");
        let mut opened = file.open(pid).expect("reopened by inode");
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut opened, &mut bytes).unwrap();
        assert_eq!(bytes.len(), 3 * 4096);
        drop(stdin);
        child.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
