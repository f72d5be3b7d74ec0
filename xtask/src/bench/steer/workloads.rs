//! What the steering benchmark runs: the configurations (CPython's defaults, the fixed recipes,
//! the agent in each mode) and the workload families, with the command that starts each.
use super::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Config {
    /// CPython's defaults
    Defaults,
    /// The static recipe: gc.freeze() after warm-up and 50000/20/20
    Static,
    /// GC disabled (a bound, not a recommendation)
    GcOff,
    /// gc.freeze() alone after warm-up (an oracle candidate)
    Freeze,
    /// gc.freeze() and threshold0 5,000 after warm-up (an oracle candidate)
    #[value(name = "freeze-5k")]
    Freeze5k,
    /// gc.freeze() and threshold0 20,000 after warm-up (an oracle candidate)
    #[value(name = "freeze-20k")]
    Freeze20k,
    /// The agent observing (its cost)
    Observe,
    /// The agent steering with the learned model
    Act,
    /// The agent steering on the analytic model alone, `--model none` (the ablation)
    Rules,
}

pub const CONFIGS: [Config; 9] = [
    Config::Defaults,
    Config::Static,
    Config::GcOff,
    Config::Freeze,
    Config::Freeze5k,
    Config::Freeze20k,
    Config::Observe,
    Config::Act,
    Config::Rules,
];

/// The fixed recipes the best per workload is chosen from after the fact (the oracle).
pub const RECIPES: [Config; 5] =
    [Config::Defaults, Config::Static, Config::Freeze, Config::Freeze5k, Config::Freeze20k];

impl Config {
    pub fn label(self) -> &'static str {
        match self {
            Config::Defaults => "CPython defaults",
            Config::Static => "static recipe (freeze + 50000/20/20)",
            Config::GcOff => "GC disabled (bound)",
            Config::Freeze => "freeze alone",
            Config::Freeze5k => "freeze + threshold0 5000",
            Config::Freeze20k => "freeze + threshold0 20000",
            Config::Observe => "neurogc-agent --mode observe",
            Config::Act => "neurogc-agent --mode act",
            Config::Rules => "act, no learned model (--model none)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Config::Defaults => "defaults",
            Config::Static => "static",
            Config::GcOff => "gc-off",
            Config::Freeze => "freeze",
            Config::Freeze5k => "freeze-5k",
            Config::Freeze20k => "freeze-20k",
            Config::Observe => "observe",
            Config::Act => "act",
            Config::Rules => "rules",
        }
    }

    /// The workload's `--recipe` for this configuration (workloads/workload.py's RECIPES).
    pub fn recipe(self) -> &'static str {
        match self {
            Config::Static => "static",
            Config::GcOff => "gc-off",
            Config::Freeze | Config::Freeze5k | Config::Freeze20k => self.short(),
            _ => "none",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Workload {
    /// HTTP, ≈1.2M long-lived tracked objects, cyclic garbage per request
    Cache,
    /// Training-loop-like steps building autograd-like graphs over ≈0.9M long-lived objects
    Batch,
    /// HTTP, a small heap, cyclic garbage carrying 8 KiB untracked payloads
    Memory,
    /// HTTP whose load changes shape: steady, burst (3× garbage per request), idle, steady
    Phases,
    /// A memory-risky ETL batch: cyclic records holding untracked payloads over ≈0.6M-container
    /// reference tables (a tuning family)
    Etl,
    /// Held out: a bottle (PyPI) web application, ≈1M-container session state, acyclic
    /// per-request documents alive until rendered
    Web,
    /// Held out: training an MLP with micrograd (PyPI), a pure-Python autograd library whose
    /// every operation leaves a cycle, over a ≈0.45M-container dataset
    Autograd,
    /// Held out: graph analytics with networkx (PyPI) over a 60,000-node graph kept in memory
    Graph,
    /// Held out (written after the controller's rules, run once): a document search service, a
    /// ≈1.2M-container sortedcontainers index (PyPI), Jinja2-rendered (PyPI) acyclic result pages
    Docs,
}

pub const WORKLOADS: [Workload; 9] = [
    Workload::Cache,
    Workload::Batch,
    Workload::Memory,
    Workload::Phases,
    Workload::Etl,
    Workload::Web,
    Workload::Autograd,
    Workload::Graph,
    Workload::Docs,
];

/// The third-party packages of the held-out families, pinned; installed for any CPython 3 by
/// pip into a folder of their own (both are pure Python).
const HELD_OUT_PACKAGES: [&str; 5] =
    ["bottle==0.13.4", "micrograd==0.1.0", "networkx==3.4.2", "sortedcontainers==2.4.0", "jinja2==3.1.4"];

/// The folder the held-out families' packages are installed in (installed when missing).
pub fn held_out_site() -> Result<PathBuf> {
    crate::pythons::pip_site("heldout-site", Path::new("python3"), &HELD_OUT_PACKAGES)
}

/// One stretch of the measured load: its share of the run, rate relative to the workload's, path.
pub struct Phase {
    pub name: &'static str,
    pub share: f64,
    pub rate: f64,
    pub path: &'static str,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Cache => "cache",
            Workload::Batch => "batch",
            Workload::Memory => "memory",
            Workload::Phases => "phases",
            Workload::Etl => "etl",
            Workload::Web => "web",
            Workload::Autograd => "autograd",
            Workload::Graph => "graph",
            Workload::Docs => "docs",
        }
    }

    /// Written only to evaluate: never run while the controller was tuned.
    pub fn held_out(self) -> bool {
        matches!(self, Workload::Web | Workload::Autograd | Workload::Graph | Workload::Docs)
    }

    /// Steps the batch-like workloads run per second of `--seconds` (about that long under
    /// CPython's defaults on the benchmark machine).
    pub fn steps_per_s(self) -> f64 {
        match self {
            Workload::Autograd => 25.0,
            Workload::Graph => 100.0,
            Workload::Etl => 6000.0,
            _ => 500.0,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Workload::Cache => "cache service",
            Workload::Batch => "training-loop-like batch job",
            Workload::Memory => "memory risk",
            Workload::Phases => "phases",
            Workload::Etl => "memory-risky ETL batch (tuning)",
            Workload::Web => "web application on bottle (held out, PyPI)",
            Workload::Autograd => "micrograd training loop (held out, PyPI)",
            Workload::Graph => "networkx graph analytics (held out, PyPI)",
            Workload::Docs => "document search on sortedcontainers + Jinja2 (held out, PyPI)",
        }
    }

    pub fn is_batch(self) -> bool {
        matches!(self, Workload::Batch | Workload::Autograd | Workload::Graph | Workload::Etl)
    }

    pub(super) fn command(self, python: &Path, config: Config, site: &Path) -> Command {
        let mut c = Command::new("taskset");
        let script = match self {
            Workload::Batch => "workloads/tuning/batch_job.py",
            Workload::Etl => "workloads/tuning/etl_batch.py",
            Workload::Web => "workloads/heldout/web_service.py",
            Workload::Autograd => "workloads/heldout/autograd_train.py",
            Workload::Graph => "workloads/heldout/graph_batch.py",
            Workload::Docs => "workloads/heldout/docs_service.py",
            _ => "workloads/tuning/cache_service.py",
        };
        c.args(["-c", "0"])
            .arg(python)
            .arg(workspace_root().join(script))
            .args(["--recipe", config.recipe()]);
        match self {
            Workload::Memory => c.args(["--entries", "150000", "--garbage", "100", "--payload", "8192"]),
            Workload::Phases => c.args(["--entries", "250000", "--garbage", "200"]),
            Workload::Web | Workload::Autograd | Workload::Graph | Workload::Docs => {
                c.env("PYTHONPATH", site)
            }
            Workload::Cache | Workload::Batch | Workload::Etl => &mut c,
        };
        c
    }

    /// Requests per second at the load multiplier 1: below what the service sustains under CPython
    /// defaults on the benchmark machine (2 cores: every run served the offered rate without an
    /// error). The 50–70% of capacity is not measured: capacity itself is not.
    pub(super) fn rate(self) -> f64 {
        match self {
            Workload::Cache => 100.0,
            Workload::Memory => 150.0,
            Workload::Phases => 100.0,
            Workload::Web => 300.0,
            Workload::Docs => 150.0,
            Workload::Batch | Workload::Autograd | Workload::Graph | Workload::Etl => 0.0,
        }
    }

    pub fn phases(self) -> Vec<Phase> {
        let p = |name, share, rate, path| Phase { name, share, rate, path };
        match self {
            Workload::Phases => vec![
                p("steady", 0.35, 1.0, "/work"),
                p("burst", 0.25, 1.5, "/burst"),
                p("idle", 0.2, 0.0, "/work"),
                p("steady", 0.2, 1.0, "/work"),
            ],
            _ => vec![p("steady", 1.0, 1.0, "/work")],
        }
    }
}
