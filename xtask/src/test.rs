//! `cargo xtask test`: every test. Unit tests first (no root needed), then the integration tests in
//! `tests/`, which load the real programs as root and make real connections in network namespaces
//! they create, with the static binary and the image `dist` and `image` build, then the kernel
//! matrix (the same scenarios on Debian's 5.10, 6.1 and 6.12 kernels in VMs). Integration tests run
//! one at a time, each in its own process with a time limit (`integration.rs`): each attaches to the
//! same root cgroup and tracepoints, and timing assertions (SYN retransmits 1 s apart) want a quiet
//! machine.
use crate::{
    dist, image, integration, kernels,
    run::workspace_root,
    setup,
    shell::{cargo, run},
};

pub fn all(filter: Option<&str>, time_limit: std::time::Duration) -> anyhow::Result<()> {
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
    // The file users download, tested as it is: the static binary, and the image around it.
    let tracer = dist::build(dist::DEFAULT_TARGET)?;
    let image = image::build(&tracer)?;
    integration::run(
        &workspace_root()?,
        filter,
        time_limit,
        &[("TRACER_BIN", &tracer), ("TRACER_IMAGE", &image)],
    )?;
    if filter.is_none() {
        // Every kernel, the host's included, so the tables have a column for each.
        kernels::run(&kernels::KernelsArgs::default(), &tracer)?;
    }
    Ok(())
}

/// `cargo xtask kernels`: the matrix alone.
pub fn kernels(args: &kernels::KernelsArgs) -> anyhow::Result<()> {
    setup::all()?;
    kernels::run(args, &dist::build(dist::DEFAULT_TARGET)?)
}
