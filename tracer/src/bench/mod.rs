//! The hidden benchmark commands `cargo xtask bench` runs (`tracer bench-*`), each measuring the
//! code the tracer runs, side by side in one run.
//!
//! - `pipeline.rs`: kernel records per second through the stages (`stages/`), on one core.
//! - `cluster_model.rs`: the memory and build time of the cluster model of a large cluster.
//! - `cluster_api.rs`: what list+watch of a large cluster costs the API server and the tracer.
//! - `metrics.rs`: the cost of `--metrics` and of a scrape.
pub mod cluster_api;
pub mod cluster_model;
pub mod metrics;
pub mod pipeline;
