//! Deciding what to change, in three rooms: the model of the collector predicts what each
//! action brings (`predict`; the ONNX model's proposal is one of the actions, `model`), the
//! controller chooses (`controller`), and the budgets say what holds (`budgets`).
pub mod budgets;
pub mod controller;
pub mod model;
pub mod predict;

use std::path::PathBuf;

/// The model and guard settings, live, recorded or replayed alike.
#[derive(Clone)]
pub struct Policy {
    /// None: the embedded default model.
    pub model: Option<PathBuf>,
    pub ep: model::ExecutionProvider,
    pub guard: budgets::GuardConfig,
}
