//! `cargo xtask bench draws`: steering judged on a distribution, not on the families it was tuned
//! on. Each draw is one seed of workloads/generated/draw.py (a service judged on its p99, or a
//! batch job on its total time). For each draw the oracle is the best fixed recipe
//! (`steer::RECIPES`), measured once per draw, interpreter and run length, and cached, since it
//! does not depend on neurogc, among the recipes that keep the promises act is held to
//! (`oracle::admissible`: peak RSS within the default memory budget, no pause much longer than
//! the defaults'; a better recipe left out so is named in the report);
//! then rounds of CPython's defaults, act mode and the oracle's recipe run interleaved (the grid
//! chooses the recipe; its score is measured again beside act; where it took longer than the
//! defaults there for the same steps, the defaults stand as the oracle).
//! The report gives the distribution of act / oracle, the draws where act is worse than the
//! defaults (in its score or, for a service, in the time its steps took), and peak RSS over the
//! memory budget (15% over the defaults' peak and at least 16 MiB, the agent's default budget).
//!
//! Two seed pools: the tuning pool (1-999) may be looked at while the controller is built; the
//! evaluation pool (1000-1999) is only sampled, `--sample-seed` choosing which draws.
use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context, Result};
use neurogc_trace::{Record, TraceReader};
use serde_json::{Value, json};

mod noise;

use crate::{
    bench::{
        measure::{SplitMix, cpu_model, median},
        oracle::{self, GC_MATTERS_MS, rss_bound},
        steer::{self, Config, RECIPES},
    },
    build_release_agent, workspace_root,
};

/// Worse than the defaults by more than this counts as harm.
const HARM: f64 = 1.05;

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Pool {
    /// Seeds 1-999: may be looked at while tuning
    Tuning,
    /// Seeds 1000-1999: sampled to judge, never tuned on
    Evaluation,
}

impl Pool {
    fn seeds(self) -> std::ops::Range<u64> {
        match self {
            Pool::Tuning => 1..1000,
            Pool::Evaluation => 1000..2000,
        }
    }
}

pub struct Options {
    pub pool: Pool,
    /// Draws to run; `seeds` instead names them.
    pub sample: usize,
    pub sample_seed: u64,
    pub seeds: Vec<u64>,
    pub rounds: usize,
    pub seconds: f64,
    pub warmup: f64,
    pub python: PathBuf,
    pub out: PathBuf,
    pub half_speed: bool,
    /// A third arm: act on the analytic model alone (`--model none`).
    pub ablate: bool,
    /// A third arm: act by another build of the agent (its executable), as the build under
    /// test is run: what this build earns over that one.
    pub against: Option<PathBuf>,
    /// Only measure and cache the oracles.
    pub oracles_only: bool,
}

/// One measured run of a draw: its score (p99 ms for a service, total s for a batch job), peak
/// RSS (MiB) and full collections.
#[derive(Clone, Copy, Debug)]
struct Score {
    value: f64,
    peak_rss_mib: f64,
    full: u64,
    longest_ms: f64,
    /// The measured part's length (s): what a run's steps are calibrated by (not cached).
    total_s: f64,
    /// Whether the agent changed anything in the target (a threshold move or a freeze); an act
    /// run that did not collected as the defaults do (not cached).
    acted: bool,
    /// What the agent did to the target, in order ("applied 5000/10/10", "frozen"), as a
    /// fingerprint (`fingerprint`; 0 for nothing): two agent arms that did the same in every
    /// round behaved alike, and their ratio is noise (not cached).
    actions: u64,
}

impl Score {
    fn kept(&self) -> oracle::Kept {
        oracle::Kept { peak_rss_mib: self.peak_rss_mib, longest_ms: self.longest_ms }
    }

    fn json(&self) -> Value {
        // The measured part's length is a closed-loop service's throughput beside its p99 (null
        // where it was read from the cache).
        json!({"value": self.value, "peak_rss_mib": self.peak_rss_mib, "full": self.full, "longest_ms": self.longest_ms, "acted": self.acted, "total_s": self.total_s})
    }

    fn from_json(v: &Value) -> Option<Score> {
        Some(Score {
            value: v["value"].as_f64()?,
            peak_rss_mib: v["peak_rss_mib"].as_f64()?,
            full: v["full"].as_u64()?,
            longest_ms: v["longest_ms"].as_f64()?,
            total_s: f64::NAN,
            acted: false,
            actions: 0,
        })
    }
}

/// The draws of a pool this run takes: `sample` of them, chosen by `sample_seed` (a splitmix64
/// walk over the pool, no repeats).
fn sample(pool: Pool, n: usize, seed: u64) -> Vec<u64> {
    let seeds: Vec<u64> = pool.seeds().collect();
    let mut walk = SplitMix(seed);
    let mut out = Vec::new();
    while out.len() < n.min(seeds.len()) {
        let s = seeds[(walk.next_u64() % seeds.len() as u64) as usize];
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn script() -> PathBuf {
    workspace_root().join("workloads/generated/draw.py")
}

fn describe(python: &Path, seed: u64) -> Result<Value> {
    let out =
        Command::new(python).arg(script()).args(["--seed", &seed.to_string(), "--describe"]).output()?;
    anyhow::ensure!(out.status.success(), "draw {seed}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// A draw as run: its interpreter, the agent, its seed, steps per run and whether it is a service.
struct Draw<'a> {
    python: &'a Path,
    agent: &'a Path,
    /// The build the third arm runs, where it is another build's.
    against: Option<&'a Path>,
    seed: u64,
    steps: u64,
    service: bool,
}

/// One run of `draw` in `config`: its steps (requests, or a batch job's steps) after `warmup` s;
/// the agent attached (act) as the workload says it is ready, `warmup` s before the measured part.
fn run_once(draw: &Draw, config: Config, warmup: f64, jsonl: &Path) -> Result<Score> {
    let Draw { python, agent, against, seed, steps, service } = *draw;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0"]).arg(python).arg(script()).args([
        "--seed",
        &seed.to_string(),
        "--recipe",
        config.recipe(),
    ]);
    let mut child: Child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().context("starting the draw")?;
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    anyhow::ensure!(line.trim() == "ready", "draw {seed} did not start: {line:?}");
    // The third arm run by another build is that build's act, flags and all.
    let (agent, config) = match (config, against) {
        (Config::Rules, Some(other)) => (other, Config::Act),
        _ => (agent, config),
    };
    let observer = match steer::start_agent(agent, child.id(), config, jsonl, None) {
        Ok(o) => o,
        Err(e) => {
            steer::stop(None, child);
            return Err(e);
        }
    };
    writeln!(child.stdin.as_mut().context("stdin")?, "go {warmup} {steps}")?;
    let mut result = None;
    for l in (&mut stdout).lines() {
        let l = l?;
        if let Some(r) = l.strip_prefix("result ") {
            result = Some(serde_json::from_str::<Value>(r)?);
            break;
        }
    }
    steer::stop(observer, child);
    let r = result.with_context(|| format!("draw {seed} ({}) gave no result", config.short()))?;
    let mut lat: Vec<f64> = r["step_ms"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
    lat.sort_by(f64::total_cmp);
    // The longest pause of each generation since the measured part began (workload.stats()).
    let longest = (0..3).map(|g| r["pauses"][g][2].as_f64().unwrap_or(0.0) / 1e6).fold(0.0, f64::max);
    let actions = if matches!(config, Config::Act | Config::Rules) { actions(jsonl)? } else { Vec::new() };
    let acted = actions.iter().any(|a| a.starts_with("applied") || a == "frozen");
    Ok(Score {
        value: if service { steer::quantile(&lat, 0.99) } else { r["total_s"].as_f64().unwrap_or(f64::NAN) },
        peak_rss_mib: r["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        full: r["collections"][2].as_u64().unwrap_or(0),
        longest_ms: longest,
        total_s: r["total_s"].as_f64().unwrap_or(f64::NAN),
        acted,
        actions: fingerprint(&actions),
    })
}

/// What the agent's records say it did to the target, in order: moves applied ("applied
/// 5000/10/10"), freezes made and undone.
fn actions(jsonl: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(jsonl).with_context(|| format!("opening {}", jsonl.display()))?;
    let mut reader = TraceReader::new(BufReader::new(file))?;
    let mut out = Vec::new();
    while let Some(record) = reader.next()? {
        if let Record::Actuation(a) = record {
            match (a.event.as_str(), a.thresholds) {
                ("applied", t) => out.push(match t {
                    Some(t) => format!("applied {}/{}/{}", t[0], t[1], t[2]),
                    None => "applied".to_owned(),
                }),
                ("frozen" | "unfrozen", _) => out.push(a.event),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// FNV-1a over the actions in order (0 where there were none): equal for equal sequences.
fn fingerprint(actions: &[String]) -> u64 {
    if actions.is_empty() {
        return 0;
    }
    actions
        .iter()
        .flat_map(|a| a.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Whether two agent arms did the same to the target in every round: their scores differ by
/// the noise between runs alone.
fn alike(a: &[Score], b: &[Score]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.actions == y.actions)
}

/// Whether an agent arm changed the target in any round.
fn changed(arm: &[Score]) -> bool {
    arm.iter().any(|s| s.acted)
}

/// Whether an agent arm is worse than the defaults by more than `HARM`, where it changed
/// something: in its score, or, for a service, in the measured part's length (the brief's
/// harm is "in time or p99": a closed-loop service's length is its throughput, and an open-loop
/// one's grows only where it falls behind its arrivals). Medians of the rounds. One that
/// changed nothing in any round collected as the defaults did, and how far its score is from
/// theirs is noise (evaluation draw 1523, whose main thread slept where the hook is queued,
/// read 0.32x and 1.41x the defaults in two runs of the same sample), not harm.
fn harmed(arm: &[Score], defaults: &[Score], service: bool) -> bool {
    changed(arm) && (worse(arm, defaults, |s| s.value) || (service && slower(arm, defaults)))
}

/// Whether `arm`'s median of `f` is over the defaults' by more than `HARM`.
fn worse(arm: &[Score], defaults: &[Score], f: fn(&Score) -> f64) -> bool {
    let of = |v: &[Score]| median(v.iter().map(f).collect());
    !arm.is_empty() && !defaults.is_empty() && of(arm) > of(defaults) * HARM
}

/// Whether `arm` took longer than the defaults for the same steps by more than `HARM`.
fn slower(arm: &[Score], defaults: &[Score]) -> bool {
    worse(arm, defaults, |s| s.total_s)
}

/// The interpreter's version, for the cache's key (the oracle depends on the build).
fn version(python: &Path) -> Result<String> {
    let out = Command::new(python).args(["-c", "import sys; print(sys.version.split()[0])"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Draw `seed`'s oracle: steps per run (an open-loop service's from its rate; a batch job's and
/// a closed-loop service's calibrated under the defaults, to last about `seconds`) and every
/// fixed recipe's score, cached under target/bench-cache/draws (by interpreter version, run
/// length, speed and the draw script's digest).
fn oracle(opts: &Options, agent: &Path, seed: u64, desc: &Value) -> Result<(u64, Vec<(Config, Score)>)> {
    let service = desc["kind"] == "service";
    // A closed-loop service serves each request as the one before it ends, however fast: its
    // rate times the run length finished in 2-5 s (draws 1071, 1197, 1738 of the evaluation
    // pool), two to four windows, in which the agent had barely begun.
    let paced = service && desc["open_loop"].as_bool().unwrap_or(true);
    let by_rate = (desc["rate"].as_f64().unwrap_or(100.0) * opts.seconds) as u64;
    let digest: String = steer::report::sha256(&script()).chars().take(16).collect();
    let dir = workspace_root().join("target/bench-cache/draws").join(version(&opts.python)?);
    std::fs::create_dir_all(&dir)?;
    let speed = if opts.half_speed { "-half" } else { "" };
    let file = dir.join(format!("{seed}-{}s-{}w{speed}-{digest}.json", opts.seconds, opts.warmup));
    if let Ok(text) = std::fs::read_to_string(&file)
        && let Ok(v) = serde_json::from_str::<Value>(&text)
    {
        let steps = v["steps"].as_u64().unwrap_or(0);
        let scores: Vec<(Config, Score)> =
            RECIPES.iter().filter_map(|c| Some((*c, Score::from_json(&v["recipes"][c.short()])?))).collect();
        // A closed-loop service cached with its steps from its rate was calibrated the old way.
        let stale = service && !paced && steps == by_rate;
        if steps > 0 && scores.len() == RECIPES.len() && !stale {
            return Ok((steps, scores));
        }
    }
    let jsonl = opts.out.join("oracle.jsonl");
    let mut draw = Draw { python: &opts.python, agent, against: None, seed, steps: 50, service };
    draw.steps = if paced {
        by_rate
    } else {
        // Steps per second under the defaults, timed over at least 2 s of steps (a job whose
        // full collections come seconds apart runs its first steps faster than the rest).
        let mut s = run_once(&draw, Config::Defaults, 0.5, &jsonl)?;
        for _ in 0..3 {
            if s.total_s >= 2.0 {
                break;
            }
            draw.steps = (draw.steps as f64 * (2.5 / s.total_s.max(1e-3)).min(100.0)).ceil() as u64;
            s = run_once(&draw, Config::Defaults, 0.5, &jsonl)?;
        }
        ((draw.steps as f64 / s.total_s.max(1e-3)) * opts.seconds).clamp(20.0, 1e6) as u64
    };
    let mut scores = Vec::new();
    for c in RECIPES {
        scores.push((c, run_once(&draw, c, opts.warmup, &jsonl)?));
    }
    let steps = draw.steps;
    let recipes: serde_json::Map<String, Value> =
        scores.iter().map(|(c, s)| (c.short().to_owned(), s.json())).collect();
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&json!({"seed": seed, "steps": steps, "recipes": recipes}))?,
    )?;
    Ok((steps, scores))
}

/// Whether a recipe keeps the promises act is held to, against the defaults' run in the same
/// grid (`oracle::admissible`): it may be the oracle only then.
fn admissible(s: &Score, recipes: &[(Config, Score)]) -> bool {
    let Some(own) = defaults_of(recipes) else { return true };
    oracle::admissible(s.kept(), own.kept())
}

/// The defaults' score in a draw's grid.
fn defaults_of(recipes: &[(Config, Score)]) -> Option<&Score> {
    recipes.iter().find(|(c, _)| *c == Config::Defaults).map(|(_, s)| s)
}

struct DrawResult {
    seed: u64,
    desc: Value,
    /// The recipe the cached grid chose, and its score there.
    oracle: (Config, Score),
    /// A recipe the grid scored better that is not `admissible`, and the defaults' longest pause
    /// there (ms).
    left_out: Option<(Config, Score, f64)>,
    /// That recipe run again in the rounds, beside act (none where it is the defaults).
    oracle_again: Vec<Score>,
    defaults: Vec<Score>,
    act: Vec<Score>,
    /// The third arm (`--ablate`: act with `--model none`; `--against`: another build), where it
    /// ran.
    rules: Vec<Score>,
}

impl DrawResult {
    /// A service (judged on its p99, its length its throughput), not a batch job.
    fn service(&self) -> bool {
        self.desc["kind"] == "service"
    }
}

/// The third arm's names: in the log and the records' file names, as the results' key, in the
/// report's table, and what it is.
struct ThirdArm {
    short: &'static str,
    key: &'static str,
    label: &'static str,
    what: String,
}

impl Options {
    /// The third arm, where one runs: another build (`--against`) or the ablation (`--ablate`).
    fn third_arm(&self) -> Option<ThirdArm> {
        match (&self.against, self.ablate) {
            (Some(other), _) => Some(ThirdArm {
                short: "other",
                key: "other_build",
                label: "other build",
                what: format!("act by another build ({})", other.display()),
            }),
            (None, true) => Some(ThirdArm {
                short: Config::Rules.short(),
                key: "model_none",
                label: "model none",
                what: "the ablation, act on the analytic model alone (`--model none`)".to_owned(),
            }),
            (None, false) => None,
        }
    }
}

/// Another build to run as the third arm: an executable file, with ONNX Runtime where it
/// looks for it (act mode needs it, and would fail in every run instead).
fn check_against(other: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(other).with_context(|| format!("--against {}", other.display()))?;
    anyhow::ensure!(
        meta.is_file() && meta.permissions().mode() & 0o111 != 0,
        "--against {}: not an executable file (the path of a neurogc-agent build)",
        other.display()
    );
    let beside = other.parent().unwrap_or(Path::new(".")).join("libonnxruntime.so");
    if std::env::var_os("ORT_DYLIB_PATH").is_some() || beside.exists() {
        return Ok(());
    }
    // Named from the cache, not from beside this build's agent: that copy is made only once
    // the bench has built it, after this check.
    let cached = crate::setup::onnxruntime()?;
    anyhow::bail!(
        "--against {}: no libonnxruntime.so beside it and ORT_DYLIB_PATH unset; copy {} there, \
         or set ORT_DYLIB_PATH={}",
        other.display(),
        cached.display(),
        cached.display()
    )
}

pub fn run(opts: &Options) -> Result<()> {
    if let Some(other) = &opts.against {
        check_against(other)?;
    }
    let agent = build_release_agent()?;
    std::fs::create_dir_all(&opts.out)?;
    let seeds = if opts.seeds.is_empty() {
        sample(opts.pool, opts.sample, opts.sample_seed)
    } else {
        opts.seeds.clone()
    };
    let _spinner = steer::Spinner::start(opts.half_speed)?;
    let mut results = Vec::new();
    for &seed in &seeds {
        let desc = describe(&opts.python, seed)?;
        let service = desc["kind"] == "service";
        let (steps, recipes) = oracle(opts, &agent, seed, &desc)?;
        if opts.oracles_only {
            eprintln!("draws: {seed:>4} oracle cached ({steps} steps)");
            continue;
        }
        let best = *recipes
            .iter()
            .filter(|(_, s)| admissible(s, &recipes))
            .min_by(|a, b| a.1.value.total_cmp(&b.1.value))
            .context("no recipe")?;
        let left_out = *recipes.iter().min_by(|a, b| a.1.value.total_cmp(&b.1.value)).context("no recipe")?;
        let own_longest = defaults_of(&recipes).map_or(0.0, |s| s.longest_ms);
        let left_out = (left_out.1.value < best.1.value).then_some((left_out.0, left_out.1, own_longest));
        let draw = Draw {
            python: &opts.python,
            agent: &agent,
            against: opts.against.as_deref(),
            seed,
            steps,
            service,
        };
        let mut arms = vec![Config::Defaults, Config::Act];
        // The oracle's recipe runs again beside act: the cached grid only chooses it. A score
        // measured once in another run, as the best of six, is the luckiest of six draws of the
        // noise (evaluation draw 1020's defaults read 1.2 ms p99 in the grid and 9.1 ms in the
        // rounds beside act), and the brief's ratios are measured side by side.
        if best.0 != Config::Defaults {
            arms.push(best.0);
        }
        if opts.third_arm().is_some() {
            arms.push(Config::Rules);
        }
        let (mut defaults, mut act, mut rules, mut again) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..opts.rounds {
            // Each round starts with the next arm, so no arm always runs first or last.
            let mut order = arms.clone();
            order.rotate_left(round % arms.len());
            for c in order {
                let arm = match (c, opts.third_arm()) {
                    (Config::Rules, Some(third)) => third.short,
                    _ => c.short(),
                };
                // Every round's record is kept: a round that changed nothing is read beside one that did.
                let jsonl = opts.out.join(format!("rec-{seed}-{arm}-r{round}.jsonl"));
                let s = run_once(&draw, c, opts.warmup, &jsonl)?;
                eprintln!(
                    "draws: {seed:>4} round {round} {:<8} {} {:>9.3}  RSS {:>6.1} MiB  gen2 {:>3}  longest {:>7.1} ms",
                    arm,
                    if service { "p99 ms " } else { "total s" },
                    s.value,
                    s.peak_rss_mib,
                    s.full,
                    s.longest_ms
                );
                match c {
                    Config::Act => act.push(s),
                    Config::Rules => rules.push(s),
                    Config::Defaults => defaults.push(s),
                    _ => again.push(s),
                }
            }
        }
        results.push(DrawResult {
            seed,
            desc,
            oracle: best,
            left_out,
            oracle_again: again,
            defaults,
            act,
            rules,
        });
    }
    // Every run's numbers, for a report made again or read otherwise.
    let third_key = opts.third_arm().map_or("model_none", |t| t.key);
    let raw: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "seed": r.seed,
                "draw": r.desc,
                "oracle": {"recipe": r.oracle.0.short(), "score": r.oracle.1.json()},
                "left_out": r.left_out.as_ref().map(|(c, s, _)| json!({"recipe": c.short(), "score": s.json()})),
                "oracle_again": r.oracle_again.iter().map(Score::json).collect::<Vec<_>>(),
                "defaults": r.defaults.iter().map(Score::json).collect::<Vec<_>>(),
                "act": r.act.iter().map(Score::json).collect::<Vec<_>>(),
                third_key: r.rules.iter().map(Score::json).collect::<Vec<_>>(),
                // Whether act and the third arm did the same to the target in every round (the
                // report's "(alike)"), so that readers need not parse the report for it.
                "alike": (!r.rules.is_empty()).then(|| alike(&r.act, &r.rules)),
            })
        })
        .collect();
    std::fs::write(opts.out.join("results.json"), serde_json::to_string_pretty(&raw)?)?;
    let report = report(opts, &seeds, &results);
    std::fs::write(opts.out.join("report.md"), &report)?;
    crate::bench::write_stdout(&report)
}

fn report(opts: &Options, seeds: &[u64], results: &[DrawResult]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Steering on drawn workloads\n\n{} pool, draws {:?}; {} interleaved rounds of defaults, act \
         and the oracle's recipe (chosen by the cached grid, run again here), {} s measured after \
         {} s (the agent attached as each draw was ready){}; {}; python {}; act's model: the \
         embedded default (sha256 {}), which training cites by it.\n\n",
        match opts.pool {
            Pool::Tuning => "tuning",
            Pool::Evaluation => "evaluation",
        },
        seeds,
        opts.rounds,
        opts.seconds,
        opts.warmup,
        if opts.half_speed { ", half speed (a busy loop on the workload's CPU)" } else { "" },
        cpu_model(),
        opts.python.display(),
        steer::report::sha256(&workspace_root().join("models/default.onnx"))
    ));
    let third = opts.third_arm();
    out.push_str(&format!(
        "| draw | kind | heap | turnover | oracle (grid) | act / defaults | act / oracle | act / grid |{} peak RSS act / defaults | longest pause act / defaults |\n",
        third.as_ref().map_or(String::new(), |t| format!(" {} / oracle |", t.label))
    ));
    out.push_str(&format!(
        "|---|---|---|---|---|---|---|---|{}---|---|\n",
        if third.is_some() { "---|" } else { "" }
    ));
    // Where neither arm paused for a millisecond the collector cannot move a score much, and
    // the two arms' difference is noise: those draws are named, and the distribution is given
    // over the others too. (A pause of act's own where the defaults had none is not noise: an
    // undone freeze's first full collection, 111 ms, on evaluation draw 1006.)
    let (mut gc_regrets, mut grid_regrets) = (Vec::new(), Vec::new());
    let (mut regrets, mut harm, mut over, mut unchanged_draws) = (Vec::new(), 0, 0, 0);
    let floor: Vec<f64> = results.iter().filter_map(|r| noise::harm(&r.defaults, r.service())).collect();
    let (mut rules_regrets, mut rules_gc_regrets, mut rules_harm) = (Vec::new(), Vec::new(), 0);
    let mut slow_oracles = Vec::new();
    let mut spreads = Vec::new();
    let values = |arm: &[Score]| arm.iter().map(|s| s.value).collect::<Vec<_>>();
    for r in results {
        let d = median(values(&r.defaults));
        let a = median(values(&r.act));
        // The oracle measured here, beside act; the grid's figure as well (`grid`). A recipe
        // that took longer than the defaults for the same steps beside them, by more than act
        // may (`harmed`), keeps no promise act is held to, as one over the memory budget does
        // not (`admissible`: the grid's one run cannot tell, its lengths as noisy as 0.94x and
        // 1.5x the defaults' for the same recipe): the defaults stand as the oracle there.
        // Evaluation draw 1077 (a closed-loop service) read a p99 of 0.042 ms frozen at
        // 20,000 against the defaults' 0.131, and took 1.5x their time for the same requests.
        let slow = r.service() && slower(&r.oracle_again, &r.defaults);
        if slow {
            slow_oracles.push(r.seed);
        }
        // The recipe's rounds that stand as the oracle (none: the defaults), which the
        // distribution's noise floor reads too.
        let recipe = if slow { Vec::new() } else { values(&r.oracle_again) };
        let o = if recipe.is_empty() { d } else { median(recipe.clone()).min(d) };
        spreads.push(noise::Rounds { defaults: values(&r.defaults), recipe });
        let grid = if slow { d } else { r.oracle.1.value.min(d) };
        grid_regrets.push(a / grid);
        let rss_d = median(r.defaults.iter().map(|s| s.peak_rss_mib).collect());
        let rss_a = r.act.iter().map(|s| s.peak_rss_mib).fold(0.0, f64::max);
        let long_d = r.defaults.iter().map(|s| s.longest_ms).fold(0.0, f64::max);
        let long_a = r.act.iter().map(|s| s.longest_ms).fold(0.0, f64::max);
        let long_r = r.rules.iter().map(|s| s.longest_ms).fold(0.0, f64::max);
        regrets.push(a / o);
        let gc = long_d.max(long_a).max(long_r) >= GC_MATTERS_MS;
        if gc {
            gc_regrets.push(a / o);
        }
        let rules = (!r.rules.is_empty()).then(|| median(r.rules.iter().map(|s| s.value).collect()) / o);
        if let Some(x) = rules {
            rules_harm += usize::from(harmed(&r.rules, &r.defaults, r.service()));
            rules_regrets.push(x);
            if gc {
                rules_gc_regrets.push(x);
            }
        }
        let unchanged = !changed(&r.act);
        unchanged_draws += usize::from(unchanged);
        harm += usize::from(harmed(&r.act, &r.defaults, r.service()));
        over += usize::from(rss_a > rss_bound(rss_d));
        out.push_str(&format!(
            "| {}{} | {} | {} | {} | {} {:.3}{} | {:.2}x | {:.2}x | {:.2}x |{} {:.2}x | {:.0} / {:.0} ms |\n",
            r.seed,
            match (gc, unchanged) {
                (false, _) => " (noise)",
                (true, true) => " (unchanged)",
                (true, false) => "",
            },
            r.desc["kind"].as_str().unwrap_or("?"),
            r.desc["heap"],
            r.desc["turnover"].as_str().unwrap_or("?"),
            r.oracle.0.short(),
            r.oracle.1.value,
            if slow { " (slower)" } else { "" },
            a / d,
            a / o,
            a / grid,
            rules.map_or(String::new(), |x| {
                format!(" {x:.2}x{} |", if alike(&r.act, &r.rules) { " (alike)" } else { "" })
            }),
            rss_a / rss_d,
            long_a,
            long_d
        ));
    }
    let spread = |v: &[f64]| {
        let mut sorted = v.to_vec();
        sorted.sort_by(f64::total_cmp);
        format!(
            "median {:.2}, 90th percentile {:.2}, worst {:.2} ({} draws)",
            steer::quantile(&sorted, 0.5),
            steer::quantile(&sorted, 0.9),
            sorted.last().copied().unwrap_or(f64::NAN),
            sorted.len()
        )
    };
    out.push_str(&format!(
        "\nact / oracle: {}; where either arm pauses for {GC_MATTERS_MS} ms or more: {}; against the \
         grid's score (measured once, in another run, the best of six): {}. Worse than \
         the defaults by > 5% (in the score or, for a service, in the time its steps took): \
         {harm}, of the draws where act changed something ({} did not: \"(unchanged)\" where \
         it mattered); peak RSS over the default memory budget (the \
         defaults' peak + 15%, at least 16 MiB): {over}. (noise): neither arm paused for \
         {GC_MATTERS_MS} ms.\n",
        spread(&regrets),
        spread(&gc_regrets),
        spread(&grid_regrets),
        unchanged_draws
    ));
    if !floor.is_empty() {
        out.push_str(&format!(
            "\nThe harm count's noise floor: an arm identical to the defaults would read worse \
             than them by > 5% on about {:.1} of these {} draws (each draw's spread between the \
             defaults' own rounds).\n",
            floor.iter().sum::<f64>(),
            floor.len()
        ));
    }
    if let Some([median, p90, worst]) = noise::regret(&spreads) {
        out.push_str(&format!(
            "\nThe distribution's noise floor: an arm identical to the better of the defaults and \
             the oracle's recipe, run as many rounds, would read act / oracle median {median:.2}, \
             90th percentile {p90:.2}, worst {worst:.2} (typically: the medians of simulated \
             runs of these draws, each round drawn from the spread between the defaults' and the \
             recipe's own rounds).\n"
        ));
    }
    let left_out: Vec<String> = results
        .iter()
        .filter_map(|r| {
            let (c, s, own) = r.left_out.as_ref()?;
            Some(format!(
                "{} {} {:.3} (longest pause {:.0} ms, the defaults' {:.0}; peak RSS {:.0} MiB)",
                r.seed,
                c.short(),
                s.value,
                s.longest_ms,
                own,
                s.peak_rss_mib
            ))
        })
        .collect();
    if !left_out.is_empty() {
        out.push_str(&format!(
            "\nScored better by the grid but not the oracle (not keeping act's promises: {}): {}.\n",
            oracle::promises(),
            left_out.join("; ")
        ));
    }
    if !slow_oracles.is_empty() {
        out.push_str(&format!(
            "\nThe grid's recipe took longer than the defaults beside them, by more than 5%, for \
             the same steps (\"(slower)\"; a closed-loop service's throughput): the defaults \
             stand as the oracle there: {slow_oracles:?}.\n"
        ));
    }
    if let Some(ThirdArm { what, label, .. }) = &third {
        let alike: Vec<u64> = results
            .iter()
            .filter(|r| !r.rules.is_empty() && alike(&r.act, &r.rules))
            .map(|r| r.seed)
            .collect();
        // Act against the third arm round by round, every draw's rounds pooled: the oracle is
        // common to both, so this is act / oracle against theirs; and again without the draws
        // where the two did the same, whose ratios are noise alone.
        let paired = |skip_alike: bool| {
            let pairs: Vec<(f64, f64)> = results
                .iter()
                .filter(|r| !(skip_alike && alike.contains(&r.seed)))
                .flat_map(|r| r.act.iter().zip(&r.rules).map(|(a, b)| (a.value, b.value)))
                .collect();
            let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
            super::measure::paired_ratio(&a, &b).map_or("too few rounds".to_owned(), |(g, lo, hi)| {
                format!("{g:.3}x (90% interval {lo:.3}-{hi:.3}) over {} rounds", pairs.len())
            })
        };
        out.push_str(&format!(
            "\nAct / {label}, paired round by round over every draw: {}; without the alike draws: {}.\n",
            paired(false),
            paired(true)
        ));
        out.push_str(&format!(
            "\nThe third arm, {what}, run interleaved with the others: {label} / oracle: {}; \
             where either arm pauses for \
             {GC_MATTERS_MS} ms or more: {}. Worse than the defaults by > 5%: {rules_harm}, of \
             the draws where it changed something. \"(alike)\": it did to the target what act did, \
             in every round, so the two differ by noise alone: {} of {} draws{}.\n",
            spread(&rules_regrets),
            spread(&rules_gc_regrets),
            alike.len(),
            results.len(),
            if alike.is_empty() { String::new() } else { format!(" ({alike:?})") }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds of (score, length in s), by an arm that changed something (`acted`) or not.
    pub(super) fn timed(runs: &[(f64, f64)], acted: bool) -> Vec<Score> {
        runs.iter()
            .map(|&(value, total_s)| Score {
                value,
                peak_rss_mib: 0.0,
                full: 0,
                longest_ms: 0.0,
                total_s,
                acted,
                actions: 0,
            })
            .collect()
    }

    #[test]
    fn two_arms_are_alike_only_where_they_did_the_same_in_every_round() {
        let arm = |rounds: &[&[&str]]| -> Vec<Score> {
            rounds
                .iter()
                .map(|acts| Score {
                    actions: fingerprint(&acts.iter().map(|a| a.to_string()).collect::<Vec<_>>()),
                    ..timed(&[(1.0, 20.0)], !acts.is_empty())[0]
                })
                .collect()
        };
        let act = arm(&[&["applied 5000/10/10", "frozen"], &["frozen"]]);
        assert!(alike(&act, &arm(&[&["applied 5000/10/10", "frozen"], &["frozen"]])));
        // One round told apart is enough: so is a move to another setting, or none at all.
        assert!(!alike(&act, &arm(&[&["applied 5000/10/10", "frozen"], &["applied 2000/10/10"]])));
        assert!(!alike(&act, &arm(&[&[], &["frozen"]])));
        assert!(!alike(&act, &arm(&[&["applied 5000/10/10", "frozen"]])));
    }

    #[test]
    fn a_service_that_changed_something_is_harmed_by_time_as_by_p99() {
        let defaults = timed(&[(1.0, 20.0), (1.0, 20.0)], false);
        // Its p99 as the defaults', its steps 10% slower: harm for a service, none for a batch
        // job (whose score is its length: there, 1.0 says it was not slower).
        let slow = timed(&[(1.0, 22.0), (1.0, 22.0)], true);
        assert!(harmed(&slow, &defaults, true));
        assert!(!harmed(&slow, &defaults, false));
        // Within 5% in both: none.
        let close = timed(&[(1.04, 20.8), (1.04, 20.8)], true);
        assert!(!harmed(&close, &defaults, true));
        // A p99 10% worse: harm either way.
        let worse = timed(&[(1.1, 20.0), (1.1, 20.0)], true);
        assert!(harmed(&worse, &defaults, true) && harmed(&worse, &defaults, false));
        // An arm that changed nothing collected as the defaults did: its difference is noise.
        let unchanged = timed(&[(1.1, 22.0), (1.1, 22.0)], false);
        assert!(!harmed(&unchanged, &defaults, true));
        // The oracle's recipe beside the defaults: slower by the same rule.
        assert!(slower(&slow, &defaults) && !slower(&close, &defaults));
    }
}
