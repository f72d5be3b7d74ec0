//! The ONNX model behind decisions, run by ONNX Runtime (`ort`, loaded at run time: nothing is
//! linked at build time, so the agent builds and observes without the library).
//!
//! Model contract (README, "Model contract"):
//! - input `features`, float32 `[1, H, F]`: the last H windows' feature vectors (schema
//!   `features::SCHEMA`, F = `features::COUNT`), oldest first, in the units the agent emits.
//! - output `scores`, float32 `[1, K]`: one score per action; the agent takes the highest.
//! - metadata: `neurogc.schema` (= SCHEMA), `neurogc.history` (= H), `neurogc.actions`
//!   ("t0,t1,t2;t0,t1,t2;…", K threshold triples).
use std::{collections::VecDeque, path::Path};

use anyhow::{Context, Result, bail};
use ort::{
    environment::Environment,
    ep,
    memory::Allocator,
    session::{Session, builder::GraphOptimizationLevel},
    value::Tensor,
};

use crate::{bail_user, features};

/// Models are small (the default is a few KiB); anything larger than this is not one of ours.
const MAX_MODEL_BYTES: u64 = 64 << 20;

/// The trained default model, so the main job needs no file (see models/MODEL_CARD.md).
pub const DEFAULT_MODEL: &[u8] = include_bytes!("../../../models/default.onnx");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionProvider {
    Cpu,
    /// CUDA, falling back to the CPU (with the reason logged) when it cannot be used
    Cuda,
}

pub struct Model {
    session: Session,
    history: usize,
    pub actions: Vec<[i64; 3]>,
    windows: VecDeque<Vec<f32>>,
    /// The input tensor, allocated once and rewritten in place every window.
    input: Tensor<f32>,
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
        builder.with_name("neurogc").build().map_err(|e| format!("starting ONNX Runtime: {e}"))
    });
    match result {
        Ok(env) => Ok(env),
        Err(msg) => bail_user!("{msg}"),
    }
}

fn parse_actions(text: &str) -> Result<Vec<[i64; 3]>> {
    text.split(';')
        .map(|triple| {
            let v: Vec<i64> = triple.split(',').map(|x| x.trim().parse()).collect::<Result<_, _>>()?;
            <[i64; 3]>::try_from(v).map_err(|v| anyhow::anyhow!("action {v:?} is not a threshold triple"))
        })
        .collect()
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
        let schema: u32 = custom("neurogc.schema")?.parse().context("neurogc.schema")?;
        if schema != features::SCHEMA {
            bail!("it was made for feature schema {schema}, this agent computes schema {}", features::SCHEMA);
        }
        let history: usize = custom("neurogc.history")?.parse().context("neurogc.history")?;
        let actions = parse_actions(&custom("neurogc.actions")?).context("neurogc.actions")?;
        anyhow::ensure!((1..=64).contains(&history), "history {history} out of range");
        anyhow::ensure!(!actions.is_empty(), "no actions");
        drop(meta);
        let input =
            session.inputs().iter().find(|i| i.name() == "features").context("no input named features")?;
        let shape: Vec<i64> =
            input.dtype().tensor_shape().context("input is not a tensor")?.iter().copied().collect();
        if shape.len() != 3 || shape[1] != history as i64 || shape[2] != features::COUNT as i64 {
            bail!("input features has shape {shape:?}, expected [1, {history}, {}]", features::COUNT);
        }
        let output =
            session.outputs().iter().find(|o| o.name() == "scores").context("no output named scores")?;
        let shape: Vec<i64> =
            output.dtype().tensor_shape().context("output is not a tensor")?.iter().copied().collect();
        if shape.len() != 2 || shape[1] != actions.len() as i64 {
            bail!("output scores has shape {shape:?}, expected [1, {}]", actions.len());
        }
        let input = ort(Tensor::<f32>::new(&Allocator::default(), [1usize, history, features::COUNT]))?;
        let mut model = Model {
            session,
            history,
            actions,
            windows: VecDeque::new(),
            input,
            provider,
            source: String::new(),
            digest: String::new(),
        };
        // The first run of a session is slow (allocations, kernel selection): pay it at load time.
        model.score(&[0.0; features::COUNT])?;
        model.windows.clear();
        Ok(model)
    }

    /// Adds a window and scores the actions on the last H windows (the oldest window is repeated
    /// while fewer than H exist).
    pub fn score(&mut self, features: &[f64]) -> Result<Vec<f32>> {
        self.windows.push_back(features.iter().map(|&x| x as f32).collect());
        while self.windows.len() > self.history {
            self.windows.pop_front();
        }
        let (_, input) = self.input.extract_tensor_mut();
        let missing = self.history - self.windows.len();
        for (i, row) in input.chunks_exact_mut(features::COUNT).enumerate() {
            row.copy_from_slice(&self.windows[i.saturating_sub(missing)]);
        }
        let outputs = ort(self.session.run(::ort::inputs!["features" => &self.input]))?;
        let (_, scores) = ort(outputs["scores"].try_extract_tensor::<f32>())?;
        anyhow::ensure!(scores.iter().all(|s| s.is_finite()), "the model produced non-finite scores");
        Ok(scores.to_vec())
    }

    /// The action with the highest score for this window (the next in the model's history), and
    /// every action's score.
    pub fn propose(&mut self, features: &[f64]) -> Result<([i64; 3], Vec<f32>)> {
        let scores = self.score(features)?;
        let best = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i);
        Ok((self.actions[best], scores))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_actions;

    #[test]
    fn actions_metadata() {
        assert_eq!(parse_actions("700,10,10;5000,20,10").unwrap(), vec![[700, 10, 10], [5000, 20, 10]]);
        assert!(parse_actions("700,10").is_err());
        assert!(parse_actions("a,b,c").is_err());
    }
}
