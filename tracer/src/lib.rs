//! `tracer`: names the black holes on a Kubernetes node.
//!
//! The path of one event, in file order:
//! `kernel/` (load, attach, ring buffer, the DNS maps swept) -> `decode.rs` (bytes -> event) ->
//! `flows.rs` (TCP events -> flows) or `dns/` (queries -> findings) -> `verdict.rs` (the verdict
//! and its sentence) -> `enrich/` (names, wall time, Service and backend) -> `filter.rs` ->
//! `record/` (the typed records) -> `sink/` (JSON lines, text, a channel to the TUI).
//! `pipeline.rs` is that path for one record; `live.rs` runs it in the event loop; `stats.rs` builds
//! the `stats` record; `service_view.rs` keeps each Service's verdicts over a window.
//!
//! `incidents/` is the ranked model of what the records say, shared by `tui/` (fed live through
//! `sink/channel.rs` or from a recording by `replay.rs`) and `tui/summary.rs`.
//! `identity/` names pods, Services, nodes and cgroups, and gives the cluster-state verdicts.
//! `metrics/` turns the records into Prometheus metrics (`--metrics`); `sweep.rs` reads them back
//! from Prometheus for the whole cluster (`tracer sweep`).
//! `conntrack/` reads the node's conntrack table: backends, destroy events, stale NAT.
//! `datapath/` reads the node's Service rules (kube-proxy's iptables, nftables, IPVS) and reports
//! the entries no EndpointSlice backs (`stale_datapath`).
//! `demo/` builds a black hole in namespaces of its own and traces it (`tracer demo`).
//! `args.rs` holds each command's options; `main.rs` and `cli.rs` (the binary) parse them.
//! `bench_pipeline.rs`, `bench_cluster_model.rs`, `bench_cluster_api.rs` and `bench_metrics.rs` are hidden benchmarks
//! (`cargo xtask bench`).
#![allow(
    clippy::missing_errors_doc,
    clippy::missing_panics_doc,
    clippy::must_use_candidate,
    reason = "the library of one binary, public for its integration tests; its errors are read by users, not callers"
)]

pub mod addr_text;
pub mod args;
pub mod bench_cluster_api;
pub mod bench_cluster_model;
pub mod bench_metrics;
pub mod bench_pipeline;
pub mod cilium;
pub mod clock;
pub mod conntrack;
pub mod datapath;
pub mod decode;
pub mod demo;
pub mod dns;
pub mod enrich;
pub mod filter;
pub mod flows;
pub mod fs_type;
pub mod held;
pub mod identity;
pub mod incidents;
pub mod kernel;
pub mod live;
pub mod metrics;
pub mod netns;
pub mod pipeline;
#[cfg(test)]
pub mod reader_fuzz;
pub mod record;
pub mod replay;
pub mod route_check;
pub mod serde_text;
pub mod service_view;
pub mod sink;
pub mod stats;
pub mod sweep;
pub mod tui;
pub mod verdict;
