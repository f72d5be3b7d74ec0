//! Deciding thresholds: the ONNX model scores actions, the guard turns the best one into a
//! (possibly no-op) change.
pub mod guard;
pub mod model;
