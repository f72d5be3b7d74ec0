//! The Prometheus sink: fleet sessions' collections and windows as metrics, served on
//! `--metrics-addr` by a thread of its own (a scrape never waits on, nor delays, the loop that
//! drains the ring buffer; prometheus-client's metrics are atomics shared by both).
//!
//! Names follow OpenTelemetry's CPython semantic conventions as Prometheus translates them
//! (`cpython.gc.collections` → `cpython_gc_collections_total`), with label `generation`; the
//! pause histogram, GC share and thresholds are neurogc's own, under the same prefix. With
//! `python_names`, prometheus_client's `python_gc_*` counters are exported too.
use std::{
    collections::HashMap,
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicI64, AtomicU64},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use neurogc_trace::Collection;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

use crate::fleet::{Sink, Target};

/// Pause buckets, seconds: 100 µs to 5 s, 1-2.5-5 steps. Young collections take tens of µs to a
/// few ms and full ones up to seconds: the JVM's coarse buckets would put them all in one.
pub const PAUSE_BUCKETS: [f64; 15] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// Who a series belongs to. Exited processes' series are removed, so cardinality is bounded by
/// the processes alive (and by `--max-targets`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    pub pid: u32,
    pub comm: String,
    pub python_version: String,
    pub container_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GenLabels {
    #[prometheus(flatten)]
    target: TargetLabels,
    generation: String,
}

/// A type among a process's garbage (`--census`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabels {
    #[prometheus(flatten)]
    target: TargetLabels,
    r#type: String,
}

/// Types of a process's garbage with a label of their own, the first met (a census lists its
/// types most objects first); every later one counts as "other". A type given its label late
/// starts from 0, and "other" keeps what it counted before: every series only grows.
const GARBAGE_TYPES: usize = 10;

type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily = Family<GenLabels, Histogram, fn() -> Histogram>;

fn pause_histogram() -> Histogram {
    Histogram::new(PAUSE_BUCKETS)
}

/// The three counters under one naming scheme.
struct Counters {
    collections: Family<GenLabels, Counter>,
    collected: Family<GenLabels, Counter>,
    uncollectable: Family<GenLabels, Counter>,
}

impl Counters {
    fn register(registry: &mut Registry, names: [(&str, &str); 3]) -> Counters {
        let mut family = |(name, help): (&str, &str)| {
            let f = Family::<GenLabels, Counter>::default();
            registry.register(name, help, f.clone());
            f
        };
        Counters {
            collections: family(names[0]),
            collected: family(names[1]),
            uncollectable: family(names[2]),
        }
    }

    fn handles(&self, labels: &GenLabels) -> [Counter; 3] {
        [&self.collections, &self.collected, &self.uncollectable].map(|f| f.get_or_create_owned(labels))
    }

    fn remove(&self, labels: &GenLabels) {
        for f in [&self.collections, &self.collected, &self.uncollectable] {
            f.remove(labels);
        }
    }
}

/// One generation's series of one process, looked up once (handles share the registry's values).
struct GenSeries {
    counters: Vec<[Counter; 3]>,
    duration: Histogram,
}

struct Series {
    labels: TargetLabels,
    /// 0, 1, 2 from the start (so that rate() sees them begin at 0); "unknown" only once a
    /// collection's generation could not be told.
    gens: [Option<GenSeries>; 4],
    /// The garbage types with a series of their own (`GARBAGE_TYPES`), "other" among them.
    garbage: Vec<String>,
}

pub struct Exporter {
    registry: Arc<Registry>,
    /// OpenTelemetry's names, then prometheus_client's when asked for.
    counters: Vec<Counters>,
    duration: HistogramFamily,
    gc_share: Family<TargetLabels, FloatGauge>,
    thresholds: Family<GenLabels, Gauge<i64, AtomicI64>>,
    targets: Gauge<i64, AtomicI64>,
    lost: Counter,
    garbage: Family<TypeLabels, Counter>,
    series: HashMap<(i32, u64), Series>,
}

const GENERATIONS: [&str; 4] = ["0", "1", "2", "unknown"];

fn generation(g: i8) -> usize {
    if (0..=2).contains(&g) { g as usize } else { 3 }
}

fn gen_labels(target: &TargetLabels, g: usize) -> GenLabels {
    GenLabels { target: target.clone(), generation: GENERATIONS[g].to_owned() }
}

fn gen_series(
    counters: &[Counters],
    duration: &HistogramFamily,
    target: &TargetLabels,
    g: usize,
) -> GenSeries {
    let labels = gen_labels(target, g);
    GenSeries {
        counters: counters.iter().map(|c| c.handles(&labels)).collect(),
        duration: duration.get_or_create_owned(&labels),
    }
}

fn key(t: &Target) -> (i32, u64) {
    (t.who.pid, t.who.start)
}

impl Exporter {
    pub fn new(python_names: bool) -> Exporter {
        let mut registry = Registry::default();
        let mut counters = vec![Counters::register(
            &mut registry,
            [
                ("cpython_gc_collections", "Collections of the cyclic garbage collector, by generation"),
                ("cpython_gc_collected_objects", "Objects collected (freed) by the cyclic garbage collector"),
                (
                    "cpython_gc_uncollectable_objects",
                    "Objects the cyclic garbage collector found uncollectable",
                ),
            ],
        )];
        if python_names {
            counters.push(Counters::register(
                &mut registry,
                [
                    ("python_gc_collections", "Number of times this generation was collected"),
                    ("python_gc_objects_collected", "Objects collected during gc"),
                    ("python_gc_objects_uncollectable", "Uncollectable objects found during GC"),
                ],
            ));
        }
        let duration = HistogramFamily::new_with_constructor(pause_histogram);
        registry.register_with_unit(
            "cpython_gc_duration",
            "Pause of each collection (the world is stopped), measured from outside by eBPF",
            Unit::Seconds,
            duration.clone(),
        );
        let gc_share = Family::<TargetLabels, FloatGauge>::default();
        registry.register(
            "cpython_gc_time_share",
            "Share of wall time spent collecting over the last window (0 to 1)",
            gc_share.clone(),
        );
        let thresholds = Family::<GenLabels, Gauge<i64, AtomicI64>>::default();
        registry.register(
            "cpython_gc_threshold",
            "Collection threshold in force (gc.get_threshold()), read from the process's memory",
            thresholds.clone(),
        );
        let garbage = Family::<TypeLabels, Counter>::default();
        registry.register(
            "cpython_gc_garbage_objects",
            "Objects in the garbage of the collections censused (--census: one collection per period), \
             by type; a process's first 10 types have a label of their own, the rest are \"other\"",
            garbage.clone(),
        );
        let targets = Gauge::<i64, AtomicI64>::default();
        registry.register("neurogc_targets", "Python processes observed now", targets.clone());
        let lost = Counter::default();
        registry.register(
            "neurogc_lost_events",
            "Collections the kernel could not hand to the agent (its ring buffer was full), all targets",
            lost.clone(),
        );
        Exporter {
            registry: Arc::new(registry),
            counters,
            duration,
            gc_share,
            thresholds,
            targets,
            lost,
            garbage,
            series: HashMap::new(),
        }
    }

    /// Serves `/metrics` on `listener` from a thread of its own, for as long as the agent runs.
    pub fn serve(&self, listener: TcpListener) -> Result<()> {
        let registry = Arc::clone(&self.registry);
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    if let Err(err) = answer(stream, &registry) {
                        tracing::debug!("metrics request: {err:#}");
                    }
                }
            })
            .context("starting the metrics thread")?;
        Ok(())
    }
}

impl Sink for Exporter {
    fn attached(&mut self, t: &Target) {
        let labels = TargetLabels {
            pid: t.who.pid as u32,
            comm: t.who.comm.clone(),
            python_version: t.python.clone(),
            container_id: t.who.container_id.clone(),
        };
        let gens =
            std::array::from_fn(|g| (g < 3).then(|| gen_series(&self.counters, &self.duration, &labels, g)));
        self.series.insert(key(t), Series { labels, gens, garbage: Vec::new() });
    }

    fn collection(&mut self, t: &Target, c: &Collection) {
        let Some(series) = self.series.get_mut(&key(t)) else { return };
        let slot = &mut series.gens[generation(c.r#gen)];
        let g = match slot {
            Some(g) => g,
            None => slot.insert(gen_series(&self.counters, &self.duration, &series.labels, 3)),
        };
        for [collections, collected, uncollectable] in &g.counters {
            collections.inc();
            collected.inc_by(c.collected.max(0) as u64);
            uncollectable.inc_by(c.uncollectable.max(0) as u64);
        }
        g.duration.observe(c.duration_ns as f64 / 1e9);
    }

    fn window(&mut self, targets: &[&Target], lost: u64) -> Result<()> {
        for t in targets {
            let Some(series) = self.series.get(&key(t)) else { continue };
            self.gc_share.get_or_create(&series.labels).set(t.stats.gc_share);
            for (g, threshold) in t.stats.thresholds.into_iter().flatten().enumerate() {
                self.thresholds.get_or_create(&gen_labels(&series.labels, g)).set(i64::from(threshold));
            }
        }
        self.targets.set(targets.len() as i64);
        self.lost.inc_by(lost.saturating_sub(self.lost.get()));
        Ok(())
    }

    fn census(&mut self, t: &Target, c: &neurogc_trace::Census) {
        let Some(series) = self.series.get_mut(&key(t)) else { return };
        for ty in &c.types {
            let known = series.garbage.contains(&ty.name);
            let name = if known || series.garbage.len() < GARBAGE_TYPES {
                ty.name.clone()
            } else {
                "other".to_owned()
            };
            if !series.garbage.contains(&name) {
                series.garbage.push(name.clone());
            }
            let labels = TypeLabels { target: series.labels.clone(), r#type: name };
            self.garbage.get_or_create(&labels).inc_by(ty.objects);
        }
    }

    /// The process is gone (or no longer observed): every series of it goes.
    fn gone(&mut self, t: &Target) {
        let Some(series) = self.series.remove(&key(t)) else { return };
        for g in 0..GENERATIONS.len() {
            let labels = gen_labels(&series.labels, g);
            for c in &self.counters {
                c.remove(&labels);
            }
            self.duration.remove(&labels);
            self.thresholds.remove(&labels);
        }
        self.gc_share.remove(&series.labels);
        for name in series.garbage {
            self.garbage.remove(&TypeLabels { target: series.labels.clone(), r#type: name });
        }
        self.targets.set(self.series.len() as i64);
    }
}

/// Binds the metrics address before anything else is touched: a taken port is the user's to fix.
pub fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr).map_err(|err| {
        anyhow::Error::new(crate::error::UserError(format!(
            "cannot listen on --metrics-addr {addr}: {err} (is another exporter using the port?)"
        )))
    })
}

/// Requests are read for at most this long and 8 KiB: a slow or hostile client cannot hold the
/// server for longer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_REQUEST: usize = 8192;

fn answer(mut stream: TcpStream, registry: &Registry) -> Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut request = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = request.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, kind, body) = match (method, path) {
        (b"GET", b"/metrics") => {
            let mut text = String::with_capacity(64 * 1024);
            prometheus_client::encoding::text::encode(&mut text, registry)?;
            ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", text)
        }
        (b"GET", b"/") => {
            ("200 OK", "text/plain; charset=utf-8", "neurogc-agent: metrics at /metrics\n".into())
        }
        (b"GET", _) => ("404 Not Found", "text/plain; charset=utf-8", "not found: try /metrics\n".into()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET\n".into()),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    Ok(())
}
