//! `tracer`: names the black holes on a Kubernetes node.
//!
//! The path of one event, in file order:
//! `kernel/` (load, attach, ring buffer) -> `decode.rs` (bytes -> event) -> `flows.rs` (events ->
//! flows) -> `verdict.rs` (the verdict and its sentence) -> `enrich.rs` (names, wall time) ->
//! `filter.rs` -> `sink/` (JSON lines, text). `live.rs` wires them; this file only parses the CLI.
mod bench_pipeline;
mod cli;
mod clock;
mod decode;
mod enrich;
mod filter;
mod flows;
mod kernel;
mod live;
mod netns;
mod record;
mod sink;
mod verdict;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let cli::Command::BenchPipeline(args) = &cli.command {
        return match bench_pipeline::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("tracer: error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tracer: error: cannot start the event loop: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        cli::Command::Trace(args) => runtime.block_on(live::run(args)),
        cli::Command::BenchPipeline(_) => Ok(()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracer: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
