//! Deciding what to change: the model of the collector predicts what each setting brings
//! (`predict`, the analytic model fitted to this process, corrected by the learned ONNX model,
//! `model`); each setting that has been in force keeps what it measured (`evidence`); the
//! controller weighs the settings worth considering (`candidates`) and chooses (`controller`);
//! the budgets say what holds (`budgets`), against what RSS measured of neurogc's settings
//! (`growth`); how far the learned model's corrections have come
//! true for this process weighs them (`trust`).
pub mod budgets;
pub mod candidates;
pub mod controller;
pub mod evidence;
pub mod growth;
pub mod model;
pub mod predict;
pub mod trust;

use std::path::PathBuf;

use anyhow::Result;

/// Which learned model corrects the analytic one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// The model embedded in the agent.
    Embedded,
    File(PathBuf),
    /// None: the analytic model alone, corrected online only (`--model none`, the ablation).
    Analytic,
}

/// The model and guard settings, live, recorded or replayed alike.
#[derive(Clone)]
pub struct Policy {
    pub model: ModelChoice,
    pub ep: model::ExecutionProvider,
    pub guard: budgets::GuardConfig,
}

impl Policy {
    /// The learned model, loaded (None for `--model none`).
    pub fn load_model(&self) -> Result<Option<model::Model>> {
        match &self.model {
            ModelChoice::Embedded => model::Model::load(None, self.ep).map(Some),
            ModelChoice::File(p) => model::Model::load(Some(p), self.ep).map(Some),
            ModelChoice::Analytic => Ok(None),
        }
    }
}
