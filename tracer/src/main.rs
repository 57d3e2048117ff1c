//! `tracer`: parses the command line and runs the command (the stages are in the library, `lib.rs`).
mod cli;

use std::process::ExitCode;
use tracer::{bench, demo, live, sweep, tui};

use clap::Parser as _;

/// Prints to stdout; a closed pipe (`| head`) is a normal end, not an error.
fn print_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// The command line, or an exit: help and version as clap prints them; a usage error as one line
/// (which option, what is wrong with its value) and exit status 2.
fn parse_command_line() -> Result<cli::Cli, ExitCode> {
    match cli::Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("error: bad command line");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("tracer: error: {first} (see tracer --help)");
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // The benchmarks' helpers run without the event loop.
    let bench = match &cli.command {
        cli::Command::BenchPipeline(args) => Some(bench::pipeline::run(args)),
        cli::Command::BenchClusterModel(args) => Some(bench::cluster_model::run(args)),
        cli::Command::BenchClusterApi(args) => Some(bench::cluster_api::run(args)),
        cli::Command::BenchMetrics(args) => Some(bench::metrics::run(args)),
        _ => None,
    };
    if let Some(result) = bench {
        return exit_code(result);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tracer: error: cannot start the event loop: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        cli::Command::Trace(args) => runtime.block_on(live::run(args)),
        cli::Command::Tui(args) => runtime.block_on(tui::live(args)),
        cli::Command::Replay(args) => runtime.block_on(tui::replay(args)),
        cli::Command::Summary(args) => tui::summary(&args).and_then(|text| print_stdout(&text)),
        cli::Command::Sweep(args) => runtime
            .block_on(sweep::run(&args))
            .and_then(|text| print_stdout(&text)),
        cli::Command::Demo(args) => runtime.block_on(demo::run(args)),
        cli::Command::BenchPipeline(_)
        | cli::Command::BenchClusterModel(_)
        | cli::Command::BenchClusterApi(_)
        | cli::Command::BenchMetrics(_) => Ok(()),
    };
    exit_code(result)
}

fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracer: error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes as anyhow's `{:#}` writes them, less each cause the text before it
/// already says (`cannot read F: {source}` whose `source` is also its cause).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read f.jsonl: {source}")]
    struct ReadError {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::other("stream did not contain valid UTF-8");
        let e = anyhow::Error::from(ReadError { source: io }).context("summary");
        assert_eq!(
            error_text(&e),
            "summary: cannot read f.jsonl: stream did not contain valid UTF-8"
        );
        let e = anyhow::anyhow!("disk full").context("writing out.jsonl");
        assert_eq!(error_text(&e), "writing out.jsonl: disk full");
    }
}
