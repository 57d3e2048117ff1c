//! `cargo xtask test`: every test. Unit tests first (no root needed), then the integration tests in
//! `tests/`, which load the real programs as root and make real connections in network namespaces
//! they create, with the static binaries and the multi-architecture image `dist` and `image` build,
//! then the kernel matrix (the same scenarios on Debian's 5.10, 6.1 and 6.12 amd64 kernels in VMs,
//! and on the newest arm64 one, emulated). Integration tests run one at a time, each in its own
//! process with a time limit (`integration.rs`): each attaches to the same root cgroup and
//! tracepoints, and timing assertions (SYN retransmits 1 s apart) want a quiet machine.
//!
//! The host's integration tests mostly wait (for SYN retransmits, DNS timeouts, a tracer to start),
//! so what only the image test and the matrix need (the arm64 binaries, the image, the kernels)
//! is built beside them at the lowest CPU priority: it takes the CPU they leave idle.
use std::{path::Path, process::Command, thread::JoinHandle};

use anyhow::Context as _;

use crate::{
    arch::Arch,
    dist, image, integration, kernels,
    run::workspace_root,
    setup,
    shell::{cargo, output, run},
};

/// The test binary that checks the image (it needs every architecture's binary).
const IMAGE_TESTS: &str = "image";

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
    // The files users download, tested as they are: the static binaries, and the image around them.
    let tracer = dist::build(Arch::host().musl_target())?;
    // Built now: the background work below also runs cargo, which locks the build directory.
    let (image_tests, host_tests): (Vec<_>, Vec<_>) = integration::build(filter)?
        .into_iter()
        .partition(|t| t.binary == IMAGE_TESTS);
    let with_matrix = filter.is_none();
    let host_tiers = if with_matrix {
        host_tiers(&tracer)?
    } else {
        Vec::new()
    };
    let background = {
        let tracer = tracer.clone();
        in_background(move || {
            let tracer_arm64 = dist::build(Arch::Arm64.musl_target())?;
            let tracers = vec![(Arch::host(), tracer), (Arch::Arm64, tracer_arm64.clone())];
            let image = image::build(&tracers)?;
            let matrix = if with_matrix {
                Some(kernels::prepare(
                    matrix_targets()?,
                    &tracers,
                    kernels::TierScope::Newest,
                    host_tiers,
                )?)
            } else {
                None
            };
            Ok((tracer_arm64, image, matrix))
        })
    };
    let root = workspace_root()?;
    integration::run(&root, &host_tests, time_limit, &[("TRACER_BIN", &tracer)])?;
    let (tracer_arm64, image, matrix) = background
        .join()
        .map_err(|_| anyhow::anyhow!("the background build panicked"))?
        .context("building the arm64 binary, the image and the kernel matrix")?;
    integration::run(
        &root,
        &image_tests,
        time_limit,
        &[
            ("TRACER_BIN", &tracer),
            ("TRACER_BIN_ARM64", &tracer_arm64),
            ("TRACER_IMAGE", &image),
        ],
    )?;
    match matrix {
        Some(matrix) => matrix.run(),
        None => Ok(()),
    }
}

/// Every amd64 VM kernel (the host's ran every scenario just now, as the integration tests); of
/// the emulated arm64 kernels, the newest (`cargo xtask kernels --arch arm64` runs them all). The
/// other hook tiers are forced on the newest amd64 kernel, which offers them all, but those the
/// host chose (`host_tiers`), which its integration tests ran (`cargo xtask kernels` forces every
/// tier on every kernel).
fn matrix_targets() -> anyhow::Result<Vec<kernels::Target>> {
    let mut targets = kernels::chosen_targets(&kernels::KernelsArgs::default())?;
    targets.retain(|t| !matches!(t, kernels::Target::Host));
    targets.push(kernels::newest(Arch::Arm64));
    Ok(targets)
}

/// The hook tiers the host's kernel chooses, as `side:tier` (`tcp:tracepoint`): every
/// integration test runs with them. Read from the tracer's first stats record.
fn host_tiers(tracer: &Path) -> anyhow::Result<Vec<String>> {
    let out = output(Command::new(tracer).args([
        "trace",
        "--duration",
        "2",
        "--stats-interval",
        "1",
        "--format",
        "json",
    ]))?;
    let stats = out
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|record| record["kind"] == "stats")
        .context("the tracer printed no stats record")?;
    let tiers: Vec<String> = ["tcp", "dns"]
        .into_iter()
        .filter_map(|side| {
            let tier = stats["kernel"]["hooks"][side]["tier"].as_str()?;
            Some(format!("{side}:{tier}"))
        })
        .collect();
    eprintln!(
        "xtask: the host's hook tiers are {}; the newest VM kernel forces the others",
        tiers.join(" ")
    );
    Ok(tiers)
}

/// Runs `work` on a thread at the lowest CPU priority (nice 19), which every process it starts
/// inherits: on Linux the nice value belongs to the thread, and a child takes its parent
/// thread's.
fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> JoinHandle<anyhow::Result<T>> {
    std::thread::spawn(move || {
        // SAFETY: gettid and setpriority on the calling thread; no memory is involved.
        let lowered = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid.cast_unsigned(), 19)
        };
        if lowered != 0 {
            eprintln!(
                "xtask: the background build runs at normal priority: {}",
                std::io::Error::last_os_error()
            );
        }
        work()
    })
}

/// `cargo xtask kernels`: the matrix alone.
pub fn kernels(args: &kernels::KernelsArgs) -> anyhow::Result<()> {
    setup::all()?;
    let targets = kernels::chosen_targets(args)?;
    let tracers = vec![(args.arch, dist::build(args.arch.musl_target())?)];
    kernels::run(targets, &tracers, args.forced_tiers)
}
