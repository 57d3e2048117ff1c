//! Running the scenarios: natively on the host kernel, or in a qemu VM booting a Debian kernel.
use std::{
    fmt::Write as _,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{SCENARIOS, Side, debian::Kernel, initramfs, report};

/// A VM that has not powered off by then is stopped and its scenarios count as failed (the
/// newest kernel forces every other hook tier, beside other VMs).
const VM_TIMEOUT: Duration = Duration::from_mins(40);
const GUEST_INIT: &str = include_str!("guest_init.sh");
/// The shell function that lists the tiers to force after the default run.
const OTHER_TIERS: &str = include_str!("other_tiers.sh");

/// The commands that run the scenarios and print what `report` parses: the kernel release, the
/// tracer's first stats record (its `kernel` capabilities and hook tiers), each test binary's
/// output with the default tiers (`KM-TIER default`), then the same side's scenarios again with
/// each other tier the tracer said this kernel offers forced (`KM-TIER dns kprobe`, ...). A forced
/// tier the tracer cannot run fails its scenarios: nothing is skipped in silence, but a tier
/// `plan.already_run` names, which ran elsewhere in the same run.
pub(super) fn scenario_script(
    root: &Path,
    tracer: &Path,
    binaries: &[(String, PathBuf)],
    plan: Plan,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
    let _ = writeln!(s, "export TRACER_BIN='{}'", tracer.display());
    let _ = writeln!(s, "echo \"KM-KERNEL $(uname -r)\"");
    let _ = writeln!(
        s,
        "rm -f /tmp/tracer-verifier-*.log; \"$TRACER_BIN\" trace --duration 2 --stats-interval 1 --format json > /tmp/km-caps 2>&1"
    );
    let _ = writeln!(s, "sed 's/^/KM-CAPS /' /tmp/km-caps");
    // A program the kernel refused: the end of its verifier log, for whoever reads the VM's log.
    let _ = writeln!(
        s,
        "for f in /tmp/tracer-verifier-*.log; do [ -f \"$f\" ] && {{ echo \"KM-VERIFIER $f\"; tail -40 \"$f\"; }}; done"
    );
    let _ = writeln!(s, "KM_ALREADY_RUN='{}'", plan.already_run.join(" "));
    s.push_str(OTHER_TIERS);
    let _ = writeln!(s, "cd '{}'", root.join("tests").display());
    if plan.default {
        let _ = writeln!(s, "echo 'KM-TIER default'");
        run_binaries(&mut s, binaries, None, "");
    }
    for &side in plan.forced {
        let var = format!("TRACER_{}_HOOKS", side.name().to_uppercase());
        let _ = writeln!(s, "for tier in $(other_tiers {}); do", side.name());
        let _ = writeln!(s, "echo \"KM-TIER {} $tier\"", side.name());
        run_binaries(&mut s, binaries, Some(side), &format!("{var}=$tier "));
        let _ = writeln!(s, "done");
    }
    let _ = writeln!(s, "echo KM-DONE");
    s
}

/// What one boot runs: the scenarios with the default tiers, and the sides whose other tiers are
/// forced.
#[derive(Clone, Copy)]
pub struct Plan<'a> {
    pub default: bool,
    pub forced: &'static [Side],
    /// Tiers not to force, as `side:tier` (`tcp:tracepoint`): the same run tested them elsewhere.
    pub already_run: &'a [String],
}

impl<'a> Plan<'a> {
    pub const DEFAULT: Plan<'static> = Plan {
        default: true,
        forced: &[],
        already_run: &[],
    };

    /// The default tiers, then every other tier of both sides but those `already_run`.
    pub fn all(already_run: &'a [String]) -> Self {
        Plan {
            default: true,
            forced: &[Side::Tcp, Side::Dns],
            already_run,
        }
    }
}

/// The hook tiers a VM forces besides its kernel's own choice.
#[derive(Clone, Copy)]
pub enum Forcing<'a> {
    /// The kernel's own choice only.
    No,
    /// Every other tier the kernel offers, but those `already_run` (`side:tier`).
    OtherTiers { already_run: &'a [String] },
}

/// Runs each binary's scenarios (of `side`, or all), with `env` before the command.
fn run_binaries(s: &mut String, binaries: &[(String, PathBuf)], side: Option<Side>, env: &str) {
    for (name, exe) in binaries {
        let tests: Vec<&str> = SCENARIOS
            .iter()
            .filter(|sc| sc.binary == name && (side.is_none() || sc.side == side))
            .map(|sc| sc.test)
            .collect();
        if tests.is_empty() {
            continue;
        }
        let _ = writeln!(s, "echo 'KM-RUN {name}'");
        let _ = writeln!(
            s,
            "{env}'{}' --test-threads=1 --color never --exact {} 2>&1",
            exe.display(),
            tests.join(" ")
        );
        let _ = writeln!(s, "echo \"KM-EXIT {name} $?\"");
    }
}

pub fn run_on_host(
    root: &Path,
    tracer: &Path,
    binaries: &[(String, PathBuf)],
    work: &Path,
) -> anyhow::Result<report::Outcome> {
    let log = work.join("host.log");
    let status = Command::new("sh")
        .arg("-c")
        .arg(scenario_script(root, tracer, binaries, Plan::DEFAULT))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(Stdio::inherit())
        .status()
        .context("running the scenarios on the host")?;
    let text = std::fs::read_to_string(&log)?;
    let mut outcome = report::parse(&text, log);
    if !status.success() {
        outcome.note = Some(format!("scenario script exited {status}"));
    }
    Ok(outcome)
}

/// Stage 2 of the guest: mounts a node has, then `body`, then power off. The root is the host's
/// under a writable overlay, so nothing is mounted over a folder that may hold the work tree (a CI
/// clone under /tmp); `/run` starts empty, as on a booted node.
pub(super) fn stage2(body: &str) -> String {
    let mounts = "\
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount --make-rshared /
ip link set lo up
hostname kernel-matrix
";
    format!("#!/bin/sh\n{mounts}{body}\nsync\n/.km/busybox poweroff -f\n")
}

/// qemu's acceleration: KVM where the host's `/dev/kvm` runs stock kernels (Intel or AMD
/// virtualisation), else TCG (a paravirtual `/dev/kvm` such as `kvm_pvm` hangs them).
fn accel_args() -> Vec<&'static str> {
    let real_kvm = Path::new("/dev/kvm").exists()
        && (Path::new("/sys/module/kvm_intel").exists()
            || Path::new("/sys/module/kvm_amd").exists());
    if real_kvm {
        vec!["-accel", "kvm", "-cpu", "host"]
    } else {
        vec!["-accel", "tcg,thread=multi", "-cpu", "max"]
    }
}

/// The scenarios in an x86-64 VM booting `kernel`. Forcing other tiers, two VMs side by side:
/// the default tiers then the TCP side's others in one, the DNS side's others in the second (the
/// scenarios mostly wait, so the two share the CPUs well); their consoles are read as one.
pub fn run_in_vm(
    kernel: &Kernel,
    root: &Path,
    tracer: &Path,
    binaries: &[(String, PathBuf)],
    work: &Path,
    forcing: Forcing,
) -> anyhow::Result<report::Outcome> {
    let log = work.join(format!("{}.log", kernel.release));
    let Forcing::OtherTiers { already_run } = forcing else {
        let body = scenario_script(root, tracer, binaries, Plan::DEFAULT);
        return Ok(boot_x86(kernel, &body, work, &log, VM_TIMEOUT)?.outcome(kernel, log));
    };
    let first = Plan {
        default: true,
        forced: &[Side::Tcp],
        already_run,
    };
    let second = Plan {
        default: false,
        forced: &[Side::Dns],
        already_run,
    };
    let second_log = work.join(format!("{}-dns-tiers.log", kernel.release));
    let (a, b) = std::thread::scope(|scope| {
        let b = scope.spawn(|| {
            let body = scenario_script(root, tracer, binaries, second);
            boot_x86(kernel, &body, work, &second_log, VM_TIMEOUT)
        });
        let body = scenario_script(root, tracer, binaries, first);
        let a = boot_x86(kernel, &body, work, &log, VM_TIMEOUT);
        (a, b.join())
    });
    let (mut a, b) = (
        a?,
        b.map_err(|_| anyhow::anyhow!("the second VM's thread panicked"))??,
    );
    let both_done = a.text.contains("KM-DONE") && b.text.contains("KM-DONE");
    a.text.push_str(&b.text);
    a.timed_out = a.timed_out.or(b.timed_out);
    let mut outcome = a.outcome(kernel, log);
    if !both_done {
        outcome.finished = false;
        outcome.note.get_or_insert_with(|| {
            format!(
                "a VM's scenarios did not run to their end (see {})",
                second_log.display()
            )
        });
    }
    Ok(outcome)
}

/// Boots `kernel` in an x86-64 VM with the host's root shared read-only, runs the shell script
/// `body` in it once a node's mounts are up, and returns its console (also in `log`) when the VM
/// has powered off, or is stopped after `timeout`.
pub fn boot_x86(
    kernel: &Kernel,
    body: &str,
    work: &Path,
    log: &Path,
    timeout: Duration,
) -> anyhow::Result<Booted> {
    // Named after the log: two VMs of one kernel may boot at once.
    let stem = log.file_stem().map(|s| s.to_string_lossy().into_owned());
    let initrd = work.join(format!("initramfs-{}.cpio", stem.unwrap_or_default()));
    initramfs::build(
        kernel,
        Path::new(initramfs::BUSYBOX),
        GUEST_INIT,
        &stage2(body),
        &initrd,
    )?;
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(accel_args())
        .args(["-m", "2048", "-smp", "2"])
        .args(["-append", "console=ttyS0 panic=-1 quiet"])
        // The host's root, read-only; the guest writes to a tmpfs overlay. No network device: the
        // guest's test traffic has nowhere to go but its own namespaces.
        .args([
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        ]);
    boot(
        qemu,
        "qemu-system-x86_64 (Debian package qemu-system-x86)",
        &kernel.vmlinuz,
        &initrd,
        log,
        timeout,
    )
}

/// What a VM wrote on its console, and whether it was stopped for taking too long.
pub struct Booted {
    pub text: String,
    pub timed_out: Option<Duration>,
}

impl Booted {
    /// The scenarios' outcome, read from the console.
    pub(super) fn outcome(self, kernel: &Kernel, log: PathBuf) -> report::Outcome {
        let mut outcome = report::parse(&self.text, log);
        if outcome.release.is_empty() {
            outcome.release.clone_from(&kernel.release);
        }
        if let Some(timeout) = self.timed_out {
            outcome.finished = false;
            outcome.note = Some(format!(
                "the VM did not power off within {} s",
                timeout.as_secs()
            ));
        }
        outcome
    }
}

/// Boots `vmlinuz` with `initrd` in `qemu` (its machine, memory and shares already given), waits
/// for it to power off (or stops it after `timeout`), and reads its serial console (kept in `log`).
pub(super) fn boot(
    mut qemu: Command,
    what: &str,
    vmlinuz: &Path,
    initrd: &Path,
    log: &Path,
    timeout: Duration,
) -> anyhow::Result<Booted> {
    qemu.args(["-nographic", "-no-reboot", "-nodefaults"])
        .args(["-serial", "stdio", "-monitor", "none"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(log)?)
        .stderr(Stdio::inherit());
    // SAFETY: prctl only, between fork and exec. The thread that starts qemu waits for it below,
    // so qemu is killed exactly when `cargo xtask` ends first (a failure elsewhere, Ctrl-C).
    unsafe {
        qemu.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut qemu = qemu.spawn().with_context(|| format!("starting {what}"))?;
    let deadline = Instant::now() + timeout;
    let mut timed_out = None;
    while qemu.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = qemu.kill();
            let _ = qemu.wait();
            timed_out = Some(timeout);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = std::fs::remove_file(initrd);
    let text = String::from_utf8_lossy(&std::fs::read(log)?).replace('\r', "");
    Ok(Booted { text, timed_out })
}
