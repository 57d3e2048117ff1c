//! `cargo xtask test`: every test. Unit tests first (no root needed), then the integration tests in
//! `tests/`, which load the real programs as root and make real connections in network namespaces
//! they create, with the static binaries and the multi-architecture image `dist` and `image` build,
//! then the kernel matrix (the same scenarios on Debian's 5.10, 6.1 and 6.12 amd64 kernels in VMs,
//! and on the newest arm64 one, emulated). Integration tests run one at a time: each attaches to
//! the same root cgroup and tracepoints, and timing assertions (SYN retransmits 1 s apart) want a
//! quiet machine.
use std::path::PathBuf;

use crate::{
    arch::Arch,
    dist, image, kernels, setup,
    shell::{cargo, run},
};

pub fn all(filter: Option<&str>) -> anyhow::Result<()> {
    setup::all()?;
    if filter.is_none() {
        // --include-ignored: a test marked #[ignore] runs anyway; nothing is skipped in silence.
        run(cargo().args([
            "test",
            "--workspace",
            "--exclude",
            "tests",
            "--exclude",
            "tracer-ebpf",
            "--",
            "--include-ignored",
        ]))?;
    }
    // The files users download, tested as they are: the static binaries, and the image around them.
    let tracers = Arch::ALL
        .into_iter()
        .map(|arch| Ok((arch, dist::build(arch.musl_target())?)))
        .collect::<anyhow::Result<Vec<(Arch, PathBuf)>>>()?;
    let tracer = tracer_of(&tracers, Arch::host());
    let image = image::build(&tracers)?;
    let mut cmd = cargo();
    cmd.env("TRACER_BIN", &tracer)
        .env("TRACER_BIN_ARM64", tracer_of(&tracers, Arch::Arm64))
        .env("TRACER_IMAGE", &image)
        .args([
            "test",
            "--package",
            "tests",
            "--",
            "--test-threads=1",
            "--include-ignored",
        ]);
    if let Some(filter) = filter {
        cmd.arg(filter);
    }
    run(&mut cmd)?;
    if filter.is_none() {
        // Every amd64 kernel, the host's included, so the tables have a column for each; of the
        // emulated arm64 kernels, the newest (`cargo xtask kernels --arch arm64` runs them all).
        // The other hook tiers are forced on the newest amd64 kernel, which offers them all
        // (`cargo xtask kernels` forces them on every kernel).
        let mut targets = kernels::chosen_targets(&kernels::KernelsArgs::default())?;
        targets.push(kernels::newest(Arch::Arm64));
        kernels::run(&targets, &tracers, kernels::TierScope::Newest)?;
    }
    Ok(())
}

fn tracer_of(tracers: &[(Arch, PathBuf)], arch: Arch) -> PathBuf {
    tracers
        .iter()
        .find(|(a, _)| *a == arch)
        .map(|(_, t)| t.clone())
        .unwrap_or_default()
}

/// `cargo xtask kernels`: the matrix alone.
pub fn kernels(args: &kernels::KernelsArgs) -> anyhow::Result<()> {
    setup::all()?;
    let targets = kernels::chosen_targets(args)?;
    let tracers = vec![(args.arch, dist::build(args.arch.musl_target())?)];
    kernels::run(&targets, &tracers, args.forced_tiers)
}
