//! `cargo xtask clippy`: host crates with the stable toolchain, the eBPF crate for its BPF target with
//! the pinned nightly (it cannot build for the host).
use std::process::Command;

use crate::{
    setup::{self, EBPF_NIGHTLY},
    shell::{cargo, run},
};

pub fn all() -> anyhow::Result<()> {
    setup::build_tools()?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--exclude",
        "tracer-ebpf",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(Command::new("rustup")
        .args([
            "run",
            EBPF_NIGHTLY,
            "cargo",
            "clippy",
            "--package",
            "tracer-ebpf",
        ])
        .args([
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--release",
            "--",
            "-D",
            "warnings",
        ]))
}
