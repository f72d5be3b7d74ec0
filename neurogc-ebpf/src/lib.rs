//! Empty on purpose: the programs are the `neurogc-probes` binary (src/main.rs). This library
//! target exists so that neurogc-agent can name the crate as a build dependency, which makes
//! cargo rebuild the agent when the probes change.
#![no_std]
