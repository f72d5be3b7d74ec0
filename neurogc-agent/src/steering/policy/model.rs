//! The learned model of the collector, run by ONNX Runtime (`ort`, loaded at run time: nothing
//! is linked at build time, so the agent builds and observes without the library).
//!
//! Model contract (docs/controller.md, "The learned model and its contract"): the model corrects the analytic model's predictions
//! (`predict`) with what it learned from many processes' recorded checks.
//! - input `candidates`, float32 `[N, F]`: one row per candidate action, the features named by
//!   `predict::FEATURES` (F of them), N any (one call per window scores every candidate).
//! - output `correction`, float32 `[N, 4]`: ln(measured / predicted) expected for the GC share
//!   and generations 0, 1 and 2's pauses.
//! - metadata: `neurogc.contract` = "corrector/1", `neurogc.features` (the feature names, comma
//!   separated, in order: they must be this agent's), `neurogc.class` (what kind of model).
use std::path::Path;

use anyhow::{Context, Result, bail};
use ort::{
    environment::Environment,
    ep,
    session::{Session, builder::GraphOptimizationLevel},
    value::Tensor,
};

use super::predict::{Correction, FEATURE_COUNT, FEATURES};
use crate::error::bail_user;

/// Models are small (the default is a few KiB); anything larger than this is not one of ours.
const MAX_MODEL_BYTES: u64 = 64 << 20;

/// The trained default model, so the main job needs no file (see models/MODEL_CARD.md).
pub const DEFAULT_MODEL: &[u8] = include_bytes!("../../../../models/default.onnx");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionProvider {
    Cpu,
    /// CUDA, falling back to the CPU (with the reason logged) when it cannot be used
    Cuda,
}

/// The contract this agent speaks (see the module's documentation).
pub const CONTRACT: &str = "corrector/1";

/// The most candidates one call scores (the controller's grid holds a few hundred at most).
const MAX_ROWS: usize = 1024;

pub struct Model {
    session: Session,
    /// The model's kind, from its metadata ("linear", "MLP", …).
    pub class: String,
    /// What actually runs the model ("CPU", or "CUDA").
    pub provider: &'static str,
    /// "embedded", or the path it was loaded from.
    pub source: String,
    /// Of the model's bytes: two recordings name the same model only if this matches.
    pub digest: String,
}

/// ONNX Runtime's shared library: $ORT_DYLIB_PATH, else next to the agent's executable.
fn runtime_library() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent().unwrap_or(Path::new(".")).join("libonnxruntime.so")
}

/// ONNX Runtime's errors carry builders that are not Send: keep their message only.
fn ort<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> Result<T> {
    r.map_err(|e| anyhow::anyhow!("{e}"))
}

/// Loads ONNX Runtime once per process (it allows one environment, ever).
fn init_runtime() -> Result<&'static Environment> {
    static INIT: std::sync::OnceLock<Result<Environment, String>> = std::sync::OnceLock::new();
    let result = INIT.get_or_init(|| {
        let lib = runtime_library();
        if !lib.exists() {
            return Err(format!(
                "ONNX Runtime library not found at {}: run `cargo xtask setup` (it fetches onnxruntime 1.31 \
                 from PyPI), set ORT_DYLIB_PATH, or use --mode observe",
                lib.display()
            ));
        }
        let builder = ort::init_from(&lib).map_err(|e| {
            format!(
                "cannot load ONNX Runtime from {}: {e} (a 1.17+ libonnxruntime.so is needed)",
                lib.display()
            )
        })?;
        // Off twice: own_env keeps the runtime from starting its client, this keeps it from logging.
        builder
            .with_name("neurogc")
            .with_telemetry(false)
            .build()
            .map_err(|e| format!("starting ONNX Runtime: {e}"))
    });
    match result {
        Ok(env) => Ok(env),
        Err(msg) => bail_user!("{msg}"),
    }
}

impl Model {
    /// `path` None: the embedded default model.
    pub fn load(path: Option<&Path>, provider: ExecutionProvider) -> Result<Model> {
        let env = init_runtime()?;
        let what = path.map_or_else(|| "the embedded default model".to_owned(), |p| p.display().to_string());
        let bytes = match path {
            Some(p) => crate::input::read_regular(p, "model", MAX_MODEL_BYTES)?,
            None => DEFAULT_MODEL.to_vec(),
        };
        let (session, used) = match provider {
            ExecutionProvider::Cpu => (Self::session(env, &bytes, false), "CPU"),
            ExecutionProvider::Cuda => match Self::session(env, &bytes, true) {
                Ok(s) => (Ok(s), "CUDA"),
                Err(err) => {
                    tracing::warn!(
                        "CUDA execution provider unavailable, running the model on the CPU: {err:#}"
                    );
                    (Self::session(env, &bytes, false), "CPU")
                }
            },
        };
        let session = match session {
            Ok(s) => s,
            Err(err) => bail_user!("{what} is not a valid ONNX model: {err:#}"),
        };
        match Self::check_contract(session, used) {
            Ok(mut model) => {
                model.source = path.map_or_else(|| "embedded".to_owned(), |p| p.display().to_string());
                model.digest = neurogc_trace::record::digest(&bytes);
                Ok(model)
            }
            Err(err) => bail_user!("{what} does not follow neurogc's model contract: {err:#}"),
        }
    }

    fn session(env: &Environment, bytes: &[u8], cuda: bool) -> Result<Session> {
        let builder = ort(Session::builder(env))?;
        let builder = ort(builder.with_optimization_level(GraphOptimizationLevel::Level3))?;
        // One window a second: latency, not throughput; no spinning threads beside the target.
        let builder = ort(builder.with_intra_threads(1))?;
        let mut builder = ort(builder.with_inter_threads(1))?;
        if cuda {
            builder =
                ort(builder.with_execution_providers([ep::CUDA::default().build().error_on_failure()]))?;
        }
        ort(builder.commit_from_memory(bytes))
    }

    fn check_contract(session: Session, provider: &'static str) -> Result<Model> {
        let meta = ort(session.metadata())?;
        let custom = |key: &str| meta.custom(key).with_context(|| format!("metadata {key} missing"));
        let contract = custom("neurogc.contract")?;
        if contract != CONTRACT {
            bail!("it follows contract {contract:?}, this agent speaks {CONTRACT:?}");
        }
        let names = custom("neurogc.features")?;
        if names != FEATURES.join(",") {
            bail!("it was trained on features [{names}], this agent computes [{}]", FEATURES.join(","));
        }
        let class = custom("neurogc.class")?;
        drop(meta);
        let shape_of = |io: Option<&ort::value::ValueType>, what: &str| -> Result<Vec<i64>> {
            Ok(io.with_context(|| format!("no {what}"))?.tensor_shape().context("not a tensor")?.to_vec())
        };
        let input = session.inputs().iter().find(|i| i.name() == "candidates").map(|i| i.dtype());
        let shape = shape_of(input, "input named candidates")?;
        if shape.len() != 2 || shape[1] != FEATURE_COUNT as i64 {
            bail!("input candidates has shape {shape:?}, expected [N, {FEATURE_COUNT}]");
        }
        let output = session.outputs().iter().find(|o| o.name() == "correction").map(|o| o.dtype());
        let shape = shape_of(output, "output named correction")?;
        if shape.len() != 2 || shape[1] != 4 {
            bail!("output correction has shape {shape:?}, expected [N, 4]");
        }
        let mut model = Model { session, class, provider, source: String::new(), digest: String::new() };
        // The first run of a session is slow (allocations, kernel selection): pay it at load time.
        model.correct(&[[0.0; FEATURE_COUNT]; 1])?;
        Ok(model)
    }

    /// Every candidate's correction, in one call.
    pub fn correct(&mut self, rows: &[[f32; FEATURE_COUNT]]) -> Result<Vec<Correction>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        anyhow::ensure!(rows.len() <= MAX_ROWS, "{} candidates, at most {MAX_ROWS} are scored", rows.len());
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        let input = ort(Tensor::from_array(([rows.len(), FEATURE_COUNT], flat)))?;
        let outputs = ort(self.session.run(::ort::inputs!["candidates" => input]))?;
        let (shape, k) = ort(outputs["correction"].try_extract_tensor::<f32>())?;
        anyhow::ensure!(
            shape.len() == 2 && shape[0] as usize == rows.len() && shape[1] == 4,
            "the model answered shape {shape:?} for {} candidates",
            rows.len()
        );
        anyhow::ensure!(k.iter().all(|x| x.is_finite()), "the model produced non-finite corrections");
        Ok(k.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect())
    }
}
