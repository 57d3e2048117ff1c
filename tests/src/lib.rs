//! Root-only integration tests of the tracer against the real kernel.
//!
//! - `testbed`: network namespaces, veth pairs, listeners and nft rules the tests build and remove.
//!   No namespace has a route out: all test traffic stays inside them.
//! - `cluster_bed`: node namespaces on one fabric, each with a pod bridge and routes to the others'
//!   pods: a small cluster for the cluster-wide tests.
//! - `prometheus`: a real Prometheus scraping the tracers, and its HTTP API.
//! - `tmux`: a real terminal for the TUI.
//! - `api_fixture`: a stand-in Kubernetes API (not a real one) that lists a kubectl-format snapshot or
//!   scripted list/watch replies; the tracer's own watch tests include it too.
//! - `kernel_facts`: the running kernel's release and tracepoints, read without the tracer.
//! - `kernel_maps`: what a running tracer holds in its kernel maps (through `bpftool`).
//! - `socket_lb`: a miniature socket-level load balancer (a raw connect4 program) for one cgroup.
//! - `cilium_lb`: the same, filling maps with Cilium's pinned names and layouts as Cilium's does.
//! - `tracer`: runs the real `tracer` binary (`TRACER_BIN`, set by `cargo xtask test`) and reads the
//!   JSON records it emits.
pub mod api_fixture;
pub mod cilium_lb;
pub mod cluster_bed;
pub mod kernel_facts;
pub mod kernel_maps;
pub mod prometheus;
pub mod socket_lb;
pub mod temp_file;
pub mod testbed;
pub mod tmux;
pub mod tracer;
