//! The one record type. The live `--json` stream, the `.ngc` recording, `report`, `replay` and
//! training (training/train.py) all speak it: one JSON object per record, tagged by `"type"`.
//!
//! Compatibility: fields are only ever added, with a default, so every older recording still
//! reads; a change that cannot be read that way bumps [`FORMAT`], and a reader refuses a trace
//! whose `attach` record declares a newer format than its own.
use serde::{Deserialize, Serialize};

/// The trace format this build writes and the newest it reads. Recordings made before the field
/// existed (plain `--json` streams of the first agents) are format 1.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Record {
    /// First record of every stream: what was observed, by what, how.
    Attach(Box<Attach>),
    /// One garbage collection.
    Gc(Collection),
    /// One feature window (closes every `--interval`).
    Window(Window),
    /// What the policy decided at the end of a window (advise and act modes).
    Decision(Decision),
    /// What the actuator did (act mode): hook ready, thresholds applied, restored, …
    Actuation(Actuation),
    /// Last record when the agent stopped in order (absent when it was killed).
    Summary(Summary),
    /// A Python frame that a stack refers to, written once per stream before its first use.
    Frame(FrameDef),
    /// A Python stack that collections refer to (`Collection::stack`), written once per stream
    /// before its first use.
    Stack(StackDef),
    /// Threads a free-threaded collection halted (`Collection::halted`), written once per
    /// stream before its first use.
    Threads(ThreadsDef),
    /// What one sampled collection freed, by type (`--census`).
    Census(Census),
}

/// The `"type"` of each variant above, in order: a reader skips records of any other type (a
/// newer agent's) and refuses a known type it cannot parse.
pub const TAGS: [&str; 10] =
    ["attach", "gc", "window", "decision", "actuation", "summary", "frame", "stack", "threads", "census"];

/// The garbage one collection freed, by type: the objects in its list of garbage as the
/// collector began to free them (`--census`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Census {
    /// When the collection began (ns since the Unix epoch).
    pub ts_ns: u64,
    pub tid: u32,
    /// The generation the collector was asked for (-1: its own choice, 3.13+).
    pub arg_gen: i64,
    /// Objects walked.
    pub objects: u64,
    /// The walk ran over the whole of the garbage, from its first object to its end (false:
    /// the types are a sample: a clear the census does not probe came first, or the walk
    /// stopped at its bound).
    pub complete: bool,
    /// Most objects first.
    pub types: Vec<CensusType>,
    /// How long the census's walk held the collecting thread, in ns: what it added to that
    /// collection's pause (0 in records from before it was measured).
    #[serde(default)]
    pub walk_ns: u64,
}

/// A type among a census's garbage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CensusType {
    /// The type's name as it gives it (`tp_name`: "Tok", "function", "collections.OrderedDict").
    pub name: String,
    pub objects: u64,
    /// Basic size plus items, summed.
    pub bytes: u64,
    /// Instances of a Python class whose attributes the census read (up to 16 a census).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sampled: u64,
    /// Attributes of those instances that point to an object of the same garbage: where a
    /// weakref or a `del` breaks the cycle. Most instances first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<CensusEdge>,
}

/// An attribute of a class's instances that points back into the garbage ("`Tok.parent` →
/// `Tok`"), and in how many of the sampled instances it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CensusEdge {
    /// The attribute or slot's name.
    pub attr: String,
    /// The type of the object it points to.
    pub to: String,
    pub instances: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A set of threads, interned: `id` is unique in its stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadsDef {
    pub id: u32,
    /// Native thread ids (host namespace), ascending.
    pub tids: Vec<u32>,
}

/// One frame of a Python stack, interned: `id` is unique in its stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameDef {
    pub id: u32,
    /// The code's qualified name (3.11+; its plain name before), e.g. `Cache.put`.
    pub name: String,
    pub file: String,
    /// 0 when the instruction has no line.
    pub line: u32,
}

/// How a stack copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StackStatus {
    Complete,
    /// Deeper than the kernel copies: the innermost frames are kept.
    Truncated,
    /// No thread state: the interpreter was starting or finalising.
    NoThread,
    /// A pointer could not be read: the frames read up to it are kept.
    ReadFailed,
}

/// A Python stack, interned: `id` is unique in its stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackDef {
    pub id: u32,
    /// Frame ids, innermost (the frame running when the collection began) first.
    pub frames: Vec<u32>,
    pub status: StackStatus,
}

fn format_one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attach {
    #[serde(default = "format_one")]
    pub format: u32,
    pub pid: i32,
    /// CPython version, e.g. "3.12.8".
    pub python: String,
    /// "usdt" or "uprobe".
    pub probe: String,
    /// "observe", "advise" or "act".
    pub mode: String,
    /// Feature schema of the window records (see the agent's features module).
    pub schema: u32,
    pub features: Vec<String>,
    /// The target when observation began: opens the first window.
    pub sample: Sample,
    /// The interpreter build: its file, and whether it is free-threaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Build>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// "neurogc-agent 0.1.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Window length, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardConfig>,
    /// How long the target had been running at `sample` (s, from /proc), where known: a
    /// process attached to ran before the first window, and the controller reads its first
    /// windows so; replay reads them as the live agent did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The file holding `_PyRuntime`: the executable, or libpython.
    pub file: String,
    pub free_threaded: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// "embedded" or the path given with --model.
    pub source: String,
    /// FNV-1a 64 of the model file, hex: tells two models apart.
    pub digest: String,
    pub provider: String,
    /// Recordings before the corrector contract: the policy model's action list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<[i64; 3]>,
    /// The model's class, as its metadata names it ("none": the analytic model alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

/// The guardrails' settings and the budgets: what the agent's guard runs with, and what the
/// attach record says it ran with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardConfig {
    pub min: [i64; 3],
    pub max: [i64; 3],
    /// Memory budget: RSS may grow this fraction over its value when neurogc first changed
    /// anything (recordings before budgets called it `max_rss_growth`, measured from attach).
    #[serde(alias = "max_rss_growth")]
    pub memory_budget: f64,
    /// Memory budget in its absolute form: RSS in bytes (takes the place of the fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// Pause budget: the longest collection allowed in a window, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_budget_ns: Option<u64>,
    /// GC budget: the share of wall time in collections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_budget: Option<f64>,
    /// Without `gc_budget`: the GC share may be no worse than in the windows before neurogc's
    /// first change.
    #[serde(default)]
    pub gc_at_attach: bool,
    /// `gc.freeze()` may be used (never where the application froze anything itself), once the
    /// agent has watched this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_after_s: Option<f64>,
    pub allow_disable: bool,
    /// The learned model's corrections count in full from attach (`--model-weight full`), rather
    /// than earning their weight in the process.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_full_weight: bool,
}

/// What a decision looked at: the numbers the budgets are held against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// The longest pause in the window (ms) and its generation.
    pub pause_max_ms: f64,
    pub pause_gen: u8,
    /// GC share of wall time over the last 10 windows.
    pub gc_share: f64,
    pub rss_mib: f64,
    /// The RSS the memory budget allows (absent before neurogc changed anything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_limit_mib: Option<f64>,
    /// The budgets in force: the longest pause (ms) and the GC share (absent: none set, or
    /// the GC share at attach not measured yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_budget_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_budget: Option<f64>,
}

/// What the controller's model predicts an action brings over the next minute.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// The longest pause predicted (ms) and its generation.
    pub pause_max_ms: f64,
    pub pause_gen: u8,
    pub gc_share: f64,
    /// What the action costs in memory over the application's own settings (MiB).
    pub memory_mib: f64,
    /// When the next full collection is due (s), where the GC state tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_full_s: Option<f64>,
}

/// The model of the collector checked against a window: what it predicted, one window before,
/// for the action that was then in force through this window, and what the window measured. The
/// features are the learned model's inputs for that prediction: these checks are its training
/// data (`replay --json` writes them for any recording).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `features` in the order of the model contract's `neurogc.features`.
    pub features: Vec<f32>,
    /// Where the thresholds changed at the start of this window: the features of the action in
    /// force before, from the same state (the learned model corrects the difference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<f32>>,
    /// Predicted by the analytic model with its online correction, before the learned one:
    /// GC share, then the pause (ns) of generations 0, 1 and 2 where they run.
    pub predicted: [f64; 4],
    /// Measured, in the same order; a pause only where that generation ran.
    pub measured: [Option<f64>; 4],
    /// The memory side (absent in traces before 2026-12-07): a change's outcome in RSS shows
    /// over the windows it stays in force, so training reads it from this check and the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<CheckMemory>,
}

/// What the analytic model predicted an action keeps in memory over the application's own
/// settings (the decision's `observed` says what RSS the window ended at).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CheckMemory {
    /// For the action in force through the window (MiB).
    pub predicted_mib: f64,
    /// For the action before it, where the window began with a change (MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_mib: Option<f64>,
}

/// What a change did, a few windows after it: the same measures before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The change this is the effect of (its decision's ts_ns) and its description.
    pub of_ts_ns: u64,
    pub change: String,
    /// Longest pause per window, averaged over the windows before / after (ms).
    pub pause_max_ms: [f64; 2],
    pub gc_share: [f64; 2],
    pub rss_mib: [f64; 2],
}

/// The target at one instant. Fields the agent could not read are absent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub thresholds: Option<[i64; 3]>,
    pub count0: Option<i64>,
    pub rss_bytes: u64,
    /// CPU time of all the target's threads so far.
    pub cpu_ns: u64,
    pub freeze_count: Option<i64>,
    /// Generations 1 and 2's counts: collections of the next younger generation since their own
    /// last one (how far each is from its threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_counts: Option<[i64; 2]>,
    /// `long_lived_total` (objects in the oldest generation after the last full collection) and
    /// `long_lived_pending` (promoted into it since), on builds that keep them (3.8–3.13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_lived: Option<[i64; 2]>,
    /// Whether the permanent generation holds objects (`gc.freeze()`'s, the application's or
    /// neurogc's), read from its list head where the layout places it (not free-threaded
    /// builds). `freeze_count` says how many where the act-mode hook has counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<bool>,
    /// Time its threads have waited for a CPU so far (schedstat's run-queue delay), where the
    /// kernel keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runq_ns: Option<u64>,
    /// Times its threads were put on a CPU so far (schedstat's third field): each wake-up is
    /// one, so a service that sleeps between requests counts about one a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    /// Start of the collection, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    /// 0, 1 or 2; −1 only when neither the GC state nor the probe told the generation.
    pub r#gen: i8,
    pub duration_ns: u64,
    pub collected: i64,
    /// −1 when unknown (no GC state: the probe reports collected + uncollectable together).
    pub uncollectable: i64,
    /// The stack of the thread that triggered it (a `StackDef` id), where the build's stacks
    /// can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u32>,
    /// Free-threaded builds: how many other threads were running Python (attached to the
    /// interpreter) when it began, each of which its stop-the-world halted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<u32>,
    /// Which: a `ThreadsDef` id (the first 16 of them), where `running` is more than 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub schema: u32,
    /// Start and end of the window (the end sample's timestamp).
    pub start_ns: u64,
    pub end_ns: u64,
    pub collections: [u64; 3],
    pub features: Vec<f64>,
    pub sample: Sample,
    /// The share of the window the target's threads spent waiting for a CPU (run-queue delay
    /// over the window's length), where both samples tell it. Not a feature: the schema, and
    /// what models were trained on, stay as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runq_share: Option<f64>,
    /// Times a second the target's threads were put on a CPU in the window (wake-ups, and
    /// switches between its threads), where both samples tell it. Not a feature either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_per_s: Option<f64>,
    /// The longest pause among the window's collections that began before it did (ns; 0 where
    /// none did), where the window was built from the collections themselves. A collection is
    /// read when it ends, whole, in the window it ends in; one that was running when the
    /// setting changed ran under the setting before. Not a feature either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub ts_ns: u64,
    /// The model's choice, after the guard.
    pub thresholds: [i64; 3],
    /// The guard let a change through.
    pub change: bool,
    /// Act mode: the change was handed to the actuator (its "actuation" record confirms it).
    pub requested: bool,
    pub reason: String,
    /// The change in one line: "700/10/10 -> 50000/20/20 + freeze".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// true: `gc.freeze()` with this change; false: neurogc's freeze undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<bool>,
    /// The budget that drove the decision: "memory", "pause" or "gc" (absent: the model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// A budget the guard could not hold because a higher one comes first, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Observed>,
    /// The model's score per action (the attach record lists the actions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<f32>,
    /// What the last change did, measured, reported once a few windows after it (act mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
    /// The chosen action's predicted effect (the change, or keeping what is in force).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Predicted>,
    /// The last window's prediction, checked against this window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Box<Check>>,
    /// Budgets ("memory", "pause", "gc") no action the controller considered was predicted to
    /// hold in this window (absent: each could be held, or nothing was predicted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unholdable: Vec<String>,
    /// What the learned model did to this decision (absent: `--model none`, or no setting was
    /// weighed in this window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelEffect>,
}

/// The learned model's part in a decision: the weight its corrections carried in this process,
/// and what they moved for the setting the decision weighed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelEffect {
    /// 0 to 1, earned as its corrections come true in this process; at 0 it was not asked.
    pub weight: f64,
    /// The setting weighed: the one moved to, or where nothing changed the best other (absent
    /// where there was none, or the weight was 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<ModelMoved>,
}

/// What the learned corrections, weighed, moved one setting's prediction by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMoved {
    /// "5000/10/10", "5000/10/10 frozen".
    pub setting: String,
    /// Its predicted GC share: the analytic model's, and as corrected.
    pub gc_share: [f64; 2],
    /// The factors (ln) applied to its predicted pauses of generations 0, 1 and 2 (the last to
    /// the first full collection after a freeze too).
    pub pause_ln: [f64; 3],
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actuation {
    pub ts_ns: u64,
    /// waiting, ready, applied, frozen, unfrozen, not-frozen, app-changed, failed or finished.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<[i64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<[i64; 3]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<bool>,
    /// frozen/unfrozen: objects in the permanent generation neurogc's freeze left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub pid: i32,
    pub python: String,
    pub probe: String,
    /// duration, SIGINT, SIGTERM, SIGHUP, target-exited, output-closed or act-failed.
    pub stopped: String,
    pub elapsed_s: f64,
    pub attach_ms: f64,
    pub collections: u64,
    pub gc_time_share: f64,
    pub lost_events: u64,
    pub unpaired_events: u64,
    pub generations: Vec<GenSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicySummary>,
    /// How the stacks of the collections went, where the build's stacks are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<StackCounts>,
}

/// Collections whose stack was not complete, per reason, and frames left unnamed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackCounts {
    pub complete: u64,
    /// Deeper than the kernel copies (the innermost frames are kept).
    pub truncated: u64,
    /// No thread state (interpreter start-up or finalisation).
    pub no_thread: u64,
    /// A pointer could not be read (the frames before it are kept).
    pub read_failed: u64,
    /// Frames whose code object could no longer be read when they were named (`[unknown]`).
    pub unresolved_frames: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseSummary {
    pub total: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenSummary {
    pub r#gen: i8,
    pub collections: u64,
    pub collected: i64,
    pub uncollectable: i64,
    pub pause_ns: PauseSummary,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySummary {
    pub mode: String,
    pub provider: String,
    pub decisions: u64,
    pub changes_applied: u64,
    pub inference_ns: LatencySummary,
    /// From the window's close (drain, sample, features, inference, guard) to the decision.
    pub window_to_decision_ns: LatencySummary,
    /// From the decision to the target's confirmation of a change (act mode).
    pub apply_ns: LatencySummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injection_ms: Option<f64>,
    /// Act mode: nothing neurogc set is left in the target (see `restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<bool>,
    /// Act mode: what the restore found and did, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
    /// Advise mode: the advice that stood at the end, and the Python that makes it so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<String>,
}

/// FNV-1a, 64 bits: a model's identity in the attach record (not a security measure).
pub fn digest(bytes: &[u8]) -> String {
    let h =
        bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_comes_first_and_names_the_variant() {
        let c = Collection {
            ts_ns: 5,
            pid: 1,
            tid: 2,
            r#gen: 1,
            duration_ns: 9,
            collected: 3,
            uncollectable: 0,
            stack: None,
            running: None,
            halted: None,
        };
        let line = serde_json::to_string(&Record::Gc(c)).unwrap();
        // The reader's fast path relies on this prefix.
        assert!(line.starts_with(r#"{"type":"gc","#), "{line}");
        assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), Record::Gc(c));
    }

    #[test]
    fn a_first_generation_attach_line_still_reads() {
        // As written by the agent before the format field existed.
        let old = r#"{"type":"attach","pid":7,"python":"3.12.8","probe":"usdt","mode":"observe","schema":1,
            "features":["gen0_per_s"],"sample":{"ts_ns":1,"thresholds":[700,10,10],"count0":3,
            "rss_bytes":100,"cpu_ns":5,"freeze_count":null}}"#;
        let Record::Attach(a) = serde_json::from_str(old).unwrap() else { panic!("not attach") };
        assert_eq!((a.format, a.pid, a.host), (1, 7, None));
    }

    #[test]
    fn window_features_come_back_bit_for_bit() {
        // replay compares recomputed windows with recorded ones by equality: parsing must be exact.
        let mut x = 0x853c_49e6_748f_ea9bu64;
        let features: Vec<f64> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                f64::from_bits(x >> 2) * if x & 1 == 0 { 1.0 } else { 1e-300 }
            })
            .filter(|f| f.is_finite())
            .collect();
        let sample = Sample {
            ts_ns: 1,
            thresholds: None,
            count0: None,
            rss_bytes: 0,
            cpu_ns: 0,
            freeze_count: None,
            older_counts: None,
            long_lived: None,
            frozen: None,
            runq_ns: None,
            runs: None,
        };
        let w = Record::Window(Window {
            schema: 1,
            start_ns: 0,
            end_ns: 1,
            collections: [0; 3],
            features,
            sample,
            runq_share: None,
            runs_per_s: None,
            carried_ns: Some(1_500_000),
        });
        let back: Record = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
    }
}
