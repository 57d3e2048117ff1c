//! The scenarios on Debian's arm64 kernels, in `qemu-system-aarch64` (TCG on an x86-64 machine).
//! The host's root cannot serve an arm64 guest, so the guest's root is the arm64 userland
//! (`userland.rs`) with the static aarch64 tracer and the aarch64 test binaries added, shared
//! read-only over 9p under the same tmpfs overlay and the same stage-1 `/init` as on x86-64.
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::Context as _;

use super::{debian::Kernel, initramfs, report, userland::Userland, vm};
use crate::shell::run;

/// Where the tracer and the test binaries are in the guest.
const IN_GUEST: &str = "/opt/kernel-matrix";
/// Emulated, an arm64 guest runs the scenarios several times slower than an x86-64 one.
const VM_TIMEOUT: Duration = Duration::from_mins(45);
const GUEST_INIT: &str = include_str!("guest_init.sh");

pub fn run_in_vm(
    kernel: &Kernel,
    userland: &Userland,
    tracer: &Path,
    binaries: &[(String, PathBuf)],
    work: &Path,
    forcing: vm::Forcing,
) -> anyhow::Result<report::Outcome> {
    let guest = work.join(format!("root-{}", kernel.release));
    guest_root(userland, tracer, binaries, &guest)?;
    let in_guest = Path::new(IN_GUEST);
    let guest_binaries: Vec<(String, PathBuf)> = binaries
        .iter()
        .map(|(name, _)| (name.clone(), in_guest.join(name)))
        .collect();
    let initrd = work.join(format!("initramfs-{}.cpio", kernel.release));
    initramfs::build(
        kernel,
        &userland.busybox(),
        GUEST_INIT,
        &vm::stage2(&vm::scenario_script(
            in_guest,
            &in_guest.join("tracer"),
            &guest_binaries,
            match forcing {
                vm::Forcing::OtherTiers { already_run } => vm::Plan::all(already_run),
                vm::Forcing::No => vm::Plan::DEFAULT,
            },
        )),
        &initrd,
    )?;
    let mut qemu = Command::new("qemu-system-aarch64");
    // Neoverse N1: the cores of Graviton2 and Ampere Altra nodes (and no pointer authentication,
    // which TCG emulates slowly).
    qemu.args(["-machine", "virt", "-cpu", "neoverse-n1"])
        .args(["-accel", "tcg,thread=multi", "-m", "2048", "-smp", "2"])
        .args(["-append", "console=ttyAMA0 panic=-1 quiet"])
        // The assembled root, read-only; no network device, as on x86-64.
        .arg("-virtfs")
        .arg(format!(
            "local,path={},mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            guest.display()
        ));
    let log = work.join(format!("{}.log", kernel.release));
    let booted = vm::boot(
        qemu,
        "qemu-system-aarch64 (Debian package qemu-system-arm)",
        &kernel.vmlinuz,
        &initrd,
        &log,
        VM_TIMEOUT,
    );
    let _ = std::fs::remove_dir_all(&guest);
    Ok(booted?.outcome(kernel, log))
}

/// The userland (hard links: the guest only reads it) plus the tracer and the test binaries under
/// `IN_GUEST`, and the folder the scenarios start in.
fn guest_root(
    userland: &Userland,
    tracer: &Path,
    binaries: &[(String, PathBuf)],
    guest: &Path,
) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(guest);
    let linked = Command::new("cp")
        .arg("-al")
        .arg(&userland.root)
        .arg(guest)
        .status()
        .is_ok_and(|s| s.success());
    if !linked {
        let _ = std::fs::remove_dir_all(guest);
        run(Command::new("cp").arg("-a").arg(&userland.root).arg(guest))?;
    }
    let dir = guest.join(IN_GUEST.trim_start_matches('/'));
    std::fs::create_dir_all(dir.join("tests"))?;
    std::fs::copy(tracer, dir.join("tracer"))
        .with_context(|| format!("copying {}", tracer.display()))?;
    for (name, exe) in binaries {
        std::fs::copy(exe, dir.join(name)).with_context(|| format!("copying {}", exe.display()))?;
    }
    Ok(())
}
