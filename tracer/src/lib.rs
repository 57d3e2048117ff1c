//! `tracer`: names the black holes on a Kubernetes node.
//!
//! The path of one event, from kernel hook to TUI row, in the order of its stages:
//!
//! 1. `kernel/`: loads and attaches the programs built from `tracer-ebpf`, hands out the ring
//!    buffer and the maps swept (DNS queries, handshakes given up, healthy counts).
//! 2. `stages/decode/`: ring-buffer bytes -> one typed event.
//! 3. `stages/flows.rs` (TCP) or `stages/dns/` (UDP DNS): events -> flows and findings, each with
//!    its verdict (`verdict.rs`).
//! 4. `stages/filter.rs`: `--dst` and `--port`.
//! 5. `stages/enrich/`: names, wall time, Service and backend -> the record (`record/`); a record
//!    that waits for a pod lookup waits in `stages/held.rs`.
//! 6. `sink/`: JSON lines, text, or a channel to the TUI.
//! 7. `tui/`: the rows of `incidents/`, live or from a recording (`replay.rs`).
//!
//! `stages/mod.rs` is that path for one record, shared by `live.rs` (the event loop) and
//! `bench/pipeline.rs`; `stats.rs` builds the `stats` record.
//!
//! What the stages ask: `identity/` names pods, Services, nodes and cgroups, and gives the
//! cluster-state verdicts; `conntrack/` reads the node's conntrack table (backends, destroy
//! events, stale NAT); `datapath/` reads the node's Service rules (kube-proxy's iptables,
//! nftables, IPVS; Cilium's maps, `cilium/`) and reports the entries no EndpointSlice backs
//! (`stale_datapath`); `netns.rs` names namespaces.
//!
//! Beside the path: `metrics/` turns the records into Prometheus metrics (`--metrics`); `sweep/`
//! reads them back from Prometheus for the whole cluster (`tracer sweep`); `demo/` builds black
//! holes in namespaces of its own and traces them (`tracer demo`); `bench/` holds the hidden
//! benchmarks (`cargo xtask bench`). `args.rs` holds each command's options; `main.rs` and
//! `cli.rs` (the binary) parse them.
#![allow(
    clippy::missing_errors_doc,
    clippy::missing_panics_doc,
    clippy::must_use_candidate,
    reason = "the library of one binary, public for its integration tests; its errors are read by users, not callers"
)]

pub mod addr_text;
pub mod args;
pub mod bench;
pub mod cilium;
pub mod clock;
pub mod conntrack;
pub mod datapath;
pub mod demo;
pub mod fs_type;
pub mod identity;
pub mod incidents;
pub mod kernel;
pub mod live;
pub mod metrics;
pub mod netns;
#[cfg(test)]
pub mod reader_fuzz;
pub mod record;
pub mod replay;
pub mod serde_text;
pub mod sink;
pub mod stages;
pub mod stats;
pub mod sweep;
pub mod tui;
pub mod verdict;
