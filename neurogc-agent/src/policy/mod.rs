//! Deciding thresholds: the ONNX model scores actions, the guard turns the best one into a
//! (possibly no-op) change.
pub mod guard;
pub mod model;

use std::path::PathBuf;

/// The model and guard settings, live, recorded or replayed alike.
#[derive(Clone)]
pub struct Policy {
    /// None: the embedded default model.
    pub model: Option<PathBuf>,
    pub ep: model::ExecutionProvider,
    pub guard: guard::GuardConfig,
}
