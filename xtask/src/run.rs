//! `cargo xtask run -- ARGS`: the one command that builds and runs the tracer on a fresh machine,
//! installing what building it and running its demo need.
use std::process::Command;

use anyhow::Context as _;

use crate::{
    setup,
    shell::{cargo, run as run_cmd},
};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    setup::build_tools()?;
    // What the demo uses at run time. Not fatal: the tracer runs without it, and the demo says
    // what it skipped.
    if let Err(e) = setup::debian_packages(setup::RUN_PACKAGES) {
        eprintln!(
            "xtask: could not install {} ({e:#}); the demo will skip what needs it",
            setup::RUN_PACKAGES.join(" ")
        );
    }
    run_cmd(cargo().args(["build", "--release", "--package", "tracer"]))?;
    let root = workspace_root()?;
    let status = Command::new(root.join("target/release/tracer"))
        .args(args)
        .status()
        .context("starting target/release/tracer")?;
    std::process::exit(status.code().unwrap_or(1));
}

pub fn workspace_root() -> anyhow::Result<std::path::PathBuf> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").context("run through cargo xtask")?;
    std::path::Path::new(&manifest)
        .parent()
        .map(std::path::Path::to_path_buf)
        .context("xtask has no parent directory")
}
