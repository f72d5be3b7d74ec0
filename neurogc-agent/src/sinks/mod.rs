//! What consumes windows and collections for people and machines: the live view and its text
//! rules, line-safe standard output, the Prometheus exporter and `top`.
pub mod live;
pub mod metrics;
pub mod output;
pub mod top;
pub mod view;
