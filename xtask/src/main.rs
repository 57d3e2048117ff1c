//! `cargo xtask`: what is not a plain build.
//! - `setup`: installs what building and testing need, when missing (pinned nightly with rust-src,
//!   bpf-linker against that nightly's LLVM, Debian packages the tests use). Quick when present.
//! - `run -- ARGS`: setup, release build, run the tracer with ARGS.
//! - `test`: setup, unit tests, then the root-only integration tests against the real kernel, one
//!   process per test with a time limit (`integration.rs`).
//! - `dist`: the static binary users copy onto a node; `image`: an OCI image of it.
//! - `kernels [--kernel K]`: the kernel matrix alone: the real-kernel scenarios on the host and in
//!   VMs booting Debian's 5.10, 6.1 and 6.12 kernels (root).
//! - `clippy`: lints for the host crates and the eBPF crate.
//! - `bench [--quick] [--api-only]`: what the tracer costs next to no tracer, `conntrack -E` and
//!   bpftrace (root); what one tracer asks of the Kubernetes API server (`bench_api.rs`).
//! - `soak --minutes N`: the tracer for N minutes under mixed load, with the API server and
//!   Prometheus misbehaving on a schedule (`soak.rs`, root; not in CI).
//!
//! `api_fixture` is the tests crate's fake API server, included as a module.
#[path = "../../tests/src/api_fixture/mod.rs"]
#[allow(
    dead_code,
    reason = "shared with the tests crate and the tracer's tests, which use the rest"
)]
mod api_fixture;
mod arch;
mod bench;
mod bench_api;
mod clippy;
mod dist;
mod image;
mod integration;
mod kernels;
mod run;
mod setup;
mod shell;
mod soak;
mod static_pie;
mod test;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install toolchains, bpf-linker and the Debian packages the tests use, if missing.
    Setup,
    /// Build (release) and run the tracer; arguments after `--` go to the tracer.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run every test: unit tests, then the root-only kernel integration tests.
    Test {
        /// Only integration tests whose name contains this.
        filter: Option<String>,
        /// Each integration test fails, named, when it runs longer than this (seconds).
        #[arg(long, value_name = "SECONDS", default_value_t = integration::TIME_LIMIT.as_secs())]
        time_limit: u64,
    },
    /// A statically linked tracer (musl, eBPF object embedded) in target/dist/.
    Dist(dist::DistArgs),
    /// An OCI image of the static tracer, built offline, saved as an OCI archive in target/dist/.
    Image,
    /// The kernel matrix: the real-kernel scenarios on the host and in qemu VMs booting Debian's
    /// 5.10, 6.1 and 6.12 kernels, with kernel × scenario and kernel × capability tables (root).
    Kernels(kernels::KernelsArgs),
    /// Boot a kernel of the matrix (`--kernel 6.12`) with the host's root shared read-only and run
    /// a shell script in it; prints the console. For trying the tracer on another kernel by hand.
    Vm {
        #[arg(long, default_value = "6.12")]
        kernel: String,
        /// The script to run in the guest (after the mounts a node has).
        script: std::path::PathBuf,
    },
    /// Clippy on host crates and on the eBPF crate.
    Clippy,
    /// Benchmark on a namespace test bed: connect-rate cost vs no tracer and peers, kernel cost,
    /// completeness, pipeline throughput, memory under a SYN flood, detection latency (root).
    Bench(Box<bench::BenchArgs>),
    /// The tracer for N minutes under mixed load, with the fake API server and Prometheus
    /// misbehaving on a schedule: RSS slope, records lost, requests made (root; not in CI).
    Soak(soak::SoakArgs),
    /// Internal to `bench`: holds a share of the SYN flood (one process per 19k sockets).
    #[command(hide = true)]
    BenchFloodWorker { ns: String, port: u16, count: u64 },
    /// Internal to `bench`: the run counts inside the VM booting another kernel.
    #[command(hide = true)]
    BenchGuest(bench::GuestArgs),
    /// Internal to `dist`: the linker of a static-pie where rustc links a fixed-address executable.
    #[command(hide = true)]
    LinkStaticPie {
        linker: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Setup => setup::all(),
        Command::Run { args } => run::run(&args),
        Command::Test { filter, time_limit } => test::all(
            filter.as_deref(),
            std::time::Duration::from_secs(time_limit),
        ),
        Command::Dist(args) => dist::run_dist(&args),
        Command::Image => image::run_image(),
        Command::Kernels(args) => test::kernels(&args),
        Command::Vm { kernel, script } => kernels::boot_script(&kernel, &script),
        Command::Clippy => clippy::all(),
        Command::Bench(args) if args.api_only => bench_api::run_alone(args.quick),
        Command::Bench(args) => bench::run(&args),
        Command::Soak(args) => soak::run(&args),
        Command::BenchFloodWorker { ns, port, count } => bench::flood_worker(&ns, port, count),
        Command::BenchGuest(args) => bench::guest_run(&args),
        Command::LinkStaticPie { linker, args } => static_pie::link(&linker, &args),
    }
}
