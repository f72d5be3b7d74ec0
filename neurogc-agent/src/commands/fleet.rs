//! `fleet` and `top`: every Python process on the host, observe-only, into the sinks asked for.
use anyhow::Result;

use crate::{
    fleet,
    options::FleetOutput,
    sinks::{metrics, top},
};

/// Fleet mode and its live view: every Python process on the host, observe-only.
pub fn run(opts: fleet::Options, output: FleetOutput) -> Result<()> {
    super::require_root()?;
    crate::wait::hold_stop_signals()?;
    let (quit_tx, quit_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut sinks: Vec<Box<dyn fleet::Sink>> = Vec::new();
    match output {
        FleetOutput::Metrics { addr: Some(addr), python_names } => {
            let listener = metrics::bind(addr)?;
            let exporter = metrics::Exporter::new(python_names);
            exporter.serve(listener)?;
            tracing::info!("Prometheus metrics at http://{addr}/metrics");
            sinks.push(Box::new(exporter));
        }
        FleetOutput::Metrics { addr: None, .. } => tracing::warn!(
            "no --metrics-addr: processes are observed and logged only (`top` shows them live)"
        ),
        FleetOutput::Top(sort) => sinks.push(Box::new(top::Top::start(sort, quit_tx)?)),
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(fleet::run(opts, sinks, quit_rx))
}
