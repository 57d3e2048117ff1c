//! `tracer`: names the black holes on a Kubernetes node.
//!
//! The path of one event, in file order:
//! `kernel/` (load, attach, ring buffer) -> `decode.rs` (bytes -> event) -> `flows.rs` (events ->
//! flows) -> `verdict.rs` (the verdict and its sentence) -> `enrich.rs` (names, wall time) ->
//! `filter.rs` -> `sink/` (JSON lines, text, a channel to the TUI). `live.rs` wires them. `main.rs` parses the command line
//! (`cli.rs`, with each command's options in `args.rs`) and calls the command.
//!
//! `tui/` is the terminal UI, fed live through `sink/channel.rs` or from a recorded file by
//! `replay.rs`; `tui/summary.rs` prints its ranked table as text.
//! `identity/` names pods, Services, nodes and cgroups, and gives the cluster-state verdicts.
//! `dns/` follows UDP DNS queries (unanswered, refused, slow, stuck sockets).
//! `demo/` builds a black hole in namespaces of its own and traces it (`tracer demo`).
//! `conntrack/` names the Service and backend of a flow; `bench_pipeline.rs` is the hidden throughput
//! benchmark of the stages above (`cargo xtask bench`).
#![allow(
    clippy::missing_errors_doc,
    clippy::missing_panics_doc,
    clippy::must_use_candidate,
    reason = "the library of one binary, public for its integration tests; its errors are read by users, not callers"
)]

pub mod args;
pub mod bench_cluster_model;
pub mod bench_pipeline;
pub mod clock;
pub mod conntrack;
pub mod decode;
pub mod demo;
pub mod dns;
pub mod enrich;
pub mod filter;
pub mod flows;
pub mod fs_type;
pub mod identity;
pub mod incidents;
pub mod kernel;
pub mod live;
pub mod netns;
pub mod pipeline;
#[cfg(test)]
pub mod reader_fuzz;
pub mod record;
pub mod replay;
pub mod route_check;
pub mod service_view;
pub mod sink;
pub mod stats;
pub mod tui;
pub mod verdict;
