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

/// `VmHWM` and `VmRSS` of this process, KiB.
pub(crate) fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}
