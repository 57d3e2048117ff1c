//! `cargo xtask test`: every test. Unit tests first (no root needed), then the integration tests in
//! `tests/`, which load the real programs as root and make real connections in network namespaces
//! they create, with the static binaries and the multi-architecture image `dist` and `image` build,
//! then the kernel matrix (the same scenarios on Debian's 5.10, 6.1 and 6.12 amd64 kernels in VMs,
//! and on the newest arm64 one, emulated). Integration tests run one at a time, each in its own
//! process with a time limit (`integration.rs`): each attaches to the same root cgroup and
//! tracepoints, and timing assertions (SYN retransmits 1 s apart) want a quiet machine.
//!
//! The arm64 side needs nothing the host's side builds, so it runs beside it from the start, at
//! the lowest CPU priority and in its own build directory (cargo locks one per build): its binary
//! builds in the CPU the host's builds leave idle. The VMs run beside the host's integration
//! tests, which mostly wait (for SYN retransmits, DNS timeouts, a tracer to start), also at the
//! lowest priority: the arm64 one once the host's builds are done (a VM starved by a build would
//! miss its scenarios' timings), the amd64 ones once the arm64 binary is built too (the arm64 VM,
//! the longest, goes first).
//! Each phase's time is printed (`[time]`), so a CI log shows where a cold run's time goes.
use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::mpsc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

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

pub fn all(filter: Option<&str>, time_limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let result = all_phases(filter, time_limit);
    eprintln!(
        "xtask: [time] cargo xtask test {} in {:.0} s",
        if result.is_ok() { "passed" } else { "failed" },
        started.elapsed().as_secs_f64()
    );
    result
}

fn all_phases(filter: Option<&str>, time_limit: Duration) -> anyhow::Result<()> {
    phase("set-up", setup::all)?;
    let with_matrix = filter.is_none();
    let (send_arm64_binary, arm64_binary) = mpsc::channel::<PathBuf>();
    let (arm64_built, wait_for_arm64_build) = mpsc::channel::<()>();
    let (host_builds_done, wait_for_host_builds) = mpsc::channel::<()>();
    let arm64 = in_background(move || {
        arm64_side(
            with_matrix,
            &send_arm64_binary,
            arm64_built,
            &wait_for_host_builds,
        )
    });

    if with_matrix {
        // --include-ignored: a test marked #[ignore] runs anyway; nothing is skipped in silence.
        phase("unit tests", || {
            run(cargo().args([
                "test",
                "--workspace",
                "--exclude",
                "tests",
                "--exclude",
                "tracer-ebpf",
                "--",
                "--include-ignored",
            ]))
        })?;
    }
    // The files users download, tested as they are: the static binaries, and the image around them.
    let tracer = phase("the x86_64 binary", || {
        dist::build(Arch::host().musl_target())
    })?;
    let (image_tests, host_tests): (Vec<_>, Vec<_>) =
        phase("building the integration tests", || {
            integration::build(filter)
        })?
        .into_iter()
        .partition(|t| t.binary == IMAGE_TESTS);
    let amd64 = if with_matrix {
        let host_tiers = host_tiers(&tracer)?;
        let tracer = tracer.clone();
        Some(in_background(move || {
            let vms = phase("(beside) the amd64 kernels' tests and kernels", || {
                kernels::prepare(
                    amd64_targets()?,
                    &[(Arch::host(), tracer)],
                    kernels::TierScope::Newest,
                    host_tiers,
                )
            })?;
            // The arm64 binary first: its VM, the longest, waits for it. Err: it failed, and
            // main says so; these VMs run all the same.
            let _ = wait_for_arm64_build.recv();
            phase("(beside) the amd64 kernels", || vms.run())
        }))
    } else {
        None
    };
    let _ = host_builds_done.send(());

    let root = workspace_root()?;
    phase("integration tests on this host", || {
        integration::run(&root, &host_tests, time_limit, &[("TRACER_BIN", &tracer)])
    })?;
    let received = phase("waiting for the arm64 binary", || {
        Ok(arm64_binary.recv().ok())
    })?;
    let Some(tracer_arm64) = received else {
        // It ended without one: its error says why.
        let why = joined(arm64)
            .err()
            .unwrap_or_else(|| anyhow::anyhow!("the arm64 build ended without a binary"));
        return Err(why.context("building the arm64 binary"));
    };
    let tracers = [(Arch::host(), tracer), (Arch::Arm64, tracer_arm64)];
    let image = phase("the image", || image::build(&tracers))?;
    phase("the image's tests", || {
        integration::run(
            &root,
            &image_tests,
            time_limit,
            &[
                ("TRACER_BIN", &tracers[0].1),
                ("TRACER_BIN_ARM64", &tracers[1].1),
                ("TRACER_IMAGE", &image),
            ],
        )
    })?;
    let Some(amd64) = amd64 else {
        return joined(arm64).map(drop);
    };
    let amd64 = phase("waiting for the amd64 kernels", || joined(amd64))?;
    let arm64 = phase("waiting for the arm64 kernel", || joined(arm64))?
        .context("the arm64 kernel was not run")?;
    amd64.and(arm64).report()
}

/// The arm64 binary (sent as soon as it is built; `built` is dropped then, which tells the amd64
/// VMs), then the newest arm64 kernel's scenarios, once the host's builds are done; `None` without
/// the matrix, or when the host's side failed first.
fn arm64_side(
    with_matrix: bool,
    send_binary: &mpsc::Sender<PathBuf>,
    built: mpsc::Sender<()>,
    wait_for_host_builds: &mpsc::Receiver<()>,
) -> anyhow::Result<Option<kernels::Ran>> {
    let tracer = phase("(beside) the arm64 binary", || {
        dist::build(Arch::Arm64.musl_target())
    })?;
    let _ = send_binary.send(tracer.clone());
    drop(built);
    if !with_matrix {
        return Ok(None);
    }
    let vm = phase(
        "(beside) the arm64 kernel's tests, kernel and userland",
        || {
            kernels::prepare(
                vec![kernels::newest(Arch::Arm64)],
                &[(Arch::Arm64, tracer)],
                kernels::TierScope::Newest,
                Vec::new(),
            )
        },
    )?;
    if wait_for_host_builds.recv().is_err() {
        // The host's side failed before its tests: nothing will read this VM's result.
        return Ok(None);
    }
    phase("(beside) the arm64 kernel", || vm.run()).map(Some)
}

/// Runs one phase of the test run and says how long it took, so a CI log shows where a cold
/// run's time goes.
fn phase<T>(name: &str, work: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let started = Instant::now();
    let result = work();
    eprintln!(
        "xtask: [time] {name}: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    result
}

/// Every amd64 VM kernel (the host's ran every scenario just now, as the integration tests). The
/// other hook tiers are forced on the newest, which offers them all, but those the host chose
/// (`host_tiers`), which its integration tests ran (`cargo xtask kernels` forces every tier on
/// every kernel). Of the emulated arm64 kernels only the newest runs, beside (`cargo xtask kernels
/// --arch arm64` runs them all).
fn amd64_targets() -> anyhow::Result<Vec<kernels::Target>> {
    let mut targets = kernels::chosen_targets(&kernels::KernelsArgs::default())?;
    targets.retain(|t| !matches!(t, kernels::Target::Host));
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

/// Runs `work` on a thread at the lowest CPU priority (nice 19), which every process and thread
/// it starts inherits: on Linux the nice value belongs to the thread, and a child takes its parent
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
                "xtask: the background work runs at normal priority: {}",
                std::io::Error::last_os_error()
            );
        }
        work()
    })
}

/// The result of a background thread.
fn joined<T>(thread: JoinHandle<anyhow::Result<T>>) -> anyhow::Result<T> {
    thread
        .join()
        .map_err(|_| anyhow::anyhow!("a background thread panicked"))?
}

/// `cargo xtask kernels`: the matrix alone.
pub fn kernels(args: &kernels::KernelsArgs) -> anyhow::Result<()> {
    setup::all()?;
    let targets = kernels::chosen_targets(args)?;
    let tracers = vec![(args.arch, dist::build(args.arch.musl_target())?)];
    kernels::run(targets, &tracers, args.forced_tiers)
}
