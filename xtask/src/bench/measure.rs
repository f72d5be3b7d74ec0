//! What every benchmark measures with: a process's CPU time and memory from /proc, child
//! resource usage, a local HTTP GET, lines of a child's output, the machine's CPU model, and
//! the median. The `bench_*` modules use these and nothing of each other's runners.
use std::{
    io::{BufRead, BufReader},
    process::Child,
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

/// CPU time of every thread of `pid` so far (schedstat: nanoseconds, not clock ticks).
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A `/proc/PID/status` field in KiB (`"VmRSS:"`, `"VmHWM:"`); None once the process is gone.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field)?.split_whitespace().next()?.parse().ok())
}

/// The body of `GET path` from a local HTTP server (a workload or the agent's `/metrics`);
/// an error unless the status is 200.
pub fn http_get(port: u16, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    anyhow::ensure!(body.split_whitespace().nth(1) == Some("200"), "bad answer: {body:.80}");
    Ok(body.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// The CPU's model name, for the reports' machine line.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("model name\t: ").map(str::to_owned)))
        .unwrap_or_default()
}

/// Reads `child`'s stream on a thread; the channel gets each line, and the stream is drained to
/// the end so the writer never blocks.
pub fn lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

pub fn wait_for(rx: &mpsc::Receiver<String>, needle: &str, what: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return Ok(line),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    bail!("{what}: never printed {needle:?}")
}

/// wait4: exit plus the child's own CPU time and peak RSS.
pub fn wait_rusage(child: &mut Child) -> Result<(f64, i64)> {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as i32;
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        bail!("wait4({pid}): {}", std::io::Error::last_os_error());
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((secs(usage.ru_utime) + secs(usage.ru_stime), usage.ru_maxrss))
}

/// The geometric mean of ratios (1 for none).
pub fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

/// A splitmix64 stream: which draws a sample seed takes (the same on every machine and in
/// every build, so a seed named in a result takes the draws it took then), and the noise
/// floors' simulated rounds.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal deviate (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        (-2.0 * self.unit().ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Two configurations measured round by round, interleaved: the geometric mean of their ratios
/// (`a[i] / b[i]`, round `i` against round `i`) and its 90% interval (Student's t over the ln
/// ratios). A machine's drift between rounds falls on both sides of each ratio; a family is
/// credibly worse only where the whole interval is above 1. None under two usable pairs.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    let (mean, var, n) = ln_mean_var(
        a.iter()
            .zip(b)
            .filter(|(x, y)| x.is_finite() && y.is_finite() && **x > 0.0 && **y > 0.0)
            .map(|(x, y)| x / y),
    )?;
    // Two-sided 90%: t at 0.95 for n - 1 degrees of freedom.
    const T95: [f64; 10] = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812];
    let t = T95.get(n - 2).copied().unwrap_or(1.645);
    let half = t * (var / n as f64).sqrt();
    Some((mean.exp(), (mean - half).exp(), (mean + half).exp()))
}

/// The mean and sample variance of the ln of the finite positive values, and how many there
/// were: scores and their ratios spread multiplicatively. None under two.
pub fn ln_mean_var(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64, usize)> {
    let ln: Vec<f64> = values.into_iter().filter(|x| x.is_finite() && *x > 0.0).map(f64::ln).collect();
    let n = ln.len();
    if n < 2 {
        return None;
    }
    let mean = ln.iter().sum::<f64>() / n as f64;
    let var = ln.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, var, n))
}

/// "1 run", "5 runs".
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    use super::paired_ratio;

    #[test]
    fn a_paired_ratio_sees_through_drift_between_rounds() {
        // The machine slows down round by round; b is 10% slower in every round.
        let a = [10.0, 12.0, 15.0, 19.0, 24.0];
        let b: Vec<f64> = a.iter().map(|x| x * 1.1).collect();
        let (geo, lo, hi) = paired_ratio(&a, &b).unwrap();
        assert!((geo - 1.0 / 1.1).abs() < 1e-9 && (hi - lo).abs() < 1e-9, "{geo} {lo} {hi}");
        // Noise both ways: the interval spans 1, so neither is credibly worse.
        let (geo, lo, hi) = paired_ratio(&[4.4, 4.5, 4.3, 4.6], &[4.5, 4.2, 4.4, 4.3]).unwrap();
        assert!(lo < 1.0 && hi > 1.0 && geo > 1.0, "{geo} {lo} {hi}");
        assert_eq!(paired_ratio(&[1.0], &[2.0]), None);
    }
}
