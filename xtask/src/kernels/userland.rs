//! A guest root of another architecture, assembled from Debian's packages of that architecture:
//! apt resolves the tools the scenarios run (and their libraries) against an empty package
//! database, downloads them through the private apt state, and each is unpacked into a folder.
//! Nothing is installed on the host, and no maintainer script runs: what those would have made (a
//! `/bin/sh`, the users) is written here. The root is cached by the exact package versions.
use std::{fmt::Write as _, path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use super::debian::{self, cache_dir};
use crate::{
    arch::Arch,
    shell::{output, run},
};

/// What the scenarios run in the guest, besides the tracer and the test binaries: the test beds'
/// ip, nft, sysctl, conntrack, dnsmasq, nginx, curl, dig, bpftool, unshare, nsenter, setpriv,
/// timeout, sed (the scenario script reads the tracer's capabilities through it) and a shell;
/// busybox for the initramfs and `poweroff`. `usr-is-merged` stands in for
/// `usrmerge` (which would bring perl).
const PACKAGES: &[&str] = &[
    "usr-is-merged",
    "bash",
    "coreutils",
    "sed",
    "grep",
    "busybox-static",
    "util-linux",
    "mount",
    "procps",
    "kmod",
    "iproute2",
    "nftables",
    "conntrack",
    "dnsmasq-base",
    "nginx-light",
    "curl",
    "dnsutils",
    "bpftool",
];

/// The suite the userland comes from: the host's, Debian 12 (with its security updates; the
/// older suites in the same apt state have lower versions).
pub const SUITE: &str = "bookworm";

/// An assembled root.
pub struct Userland {
    pub root: PathBuf,
}

impl Userland {
    /// Its static busybox, for the initramfs.
    pub fn busybox(&self) -> PathBuf {
        self.root.join("bin/busybox")
    }
}

/// The `arch` userland for the package versions the archive has now (or, with `online` false, the
/// newest one cached).
pub fn assemble(arch: Arch, online: bool) -> anyhow::Result<Userland> {
    let base = cache_dir().join(format!("userland-{}", arch.debian_name()));
    std::fs::create_dir_all(&base)?;
    if !online {
        return newest_cached(&base).map(|root| Userland { root });
    }
    let packages = resolve(arch)?;
    let root = base.join(format!("{:016x}", fingerprint(&packages)));
    if root.join(".complete").exists() {
        return Ok(Userland { root });
    }
    eprintln!(
        "xtask: assembling the {} userland from {} Debian packages",
        arch.debian_name(),
        packages.len()
    );
    let debs = base.join("debs");
    let _ = std::fs::remove_dir_all(&debs);
    std::fs::create_dir_all(&debs)?;
    run(debian::apt(arch, "apt-get")
        .args(["-qq", "download"])
        .args(&packages)
        .current_dir(&debs))?;
    let partial = root.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)?;
    for deb in std::fs::read_dir(&debs)?.flatten().map(|e| e.path()) {
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&partial))?;
    }
    what_maintainer_scripts_would_make(&partial)?;
    std::fs::write(partial.join(".complete"), packages.join("\n") + "\n")?;
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&partial, &root)?;
    std::fs::remove_dir_all(&debs)?;
    Ok(Userland { root })
}

/// `PACKAGES` and everything they depend on, as `name=version`, from apt's own resolver run
/// against the private state's empty package database.
fn resolve(arch: Arch) -> anyhow::Result<Vec<String>> {
    let plan = output(
        debian::apt(arch, "apt-get")
            .args([
                "-o",
                "Debug::NoLocking=1",
                "--simulate",
                "--no-install-recommends",
                "install",
            ])
            .args(PACKAGES),
    )?;
    // `Inst bash (5.2.15-2+b7 Debian:12.12/stable [arm64])`
    let packages: Vec<String> = plan
        .lines()
        .filter_map(|l| l.strip_prefix("Inst "))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            let version = words.next()?.strip_prefix('(')?;
            Some(format!("{name}={version}"))
        })
        .collect();
    if packages.len() < PACKAGES.len() {
        bail!(
            "apt resolved only {} packages for the {} userland:\n{plan}",
            packages.len(),
            arch.debian_name()
        );
    }
    Ok(packages)
}

/// FNV-1a of the sorted package list: the cache key of a root.
fn fingerprint(packages: &[String]) -> u64 {
    let mut sorted = packages.to_vec();
    sorted.sort();
    sorted
        .join("\n")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

fn newest_cached(base: &std::path::Path) -> anyhow::Result<PathBuf> {
    std::fs::read_dir(base)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(".complete").exists())
        .max_by_key(|p| {
            std::fs::metadata(p.join(".complete"))
                .and_then(|m| m.modified())
                .ok()
        })
        .with_context(|| {
            format!(
                "the Debian archive is unreachable and no userland is cached in {}",
                base.display()
            )
        })
}

/// The files that packages' maintainer scripts and `base-passwd` would have made: `/bin/sh`, the
/// users the daemons look up, name resolution for localhost.
fn what_maintainer_scripts_would_make(root: &std::path::Path) -> anyhow::Result<()> {
    let sh = root.join("bin/sh");
    if !sh.exists() {
        std::os::unix::fs::symlink("bash", &sh).context("linking /bin/sh")?;
    }
    let etc = root.join("etc");
    std::fs::create_dir_all(&etc)?;
    let mut passwd = String::new();
    let mut group = String::new();
    for (name, id) in [("root", 0), ("www-data", 33), ("nobody", 65534)] {
        let _ = writeln!(passwd, "{name}:x:{id}:{id}:{name}:/nonexistent:/bin/sh");
        let _ = writeln!(group, "{name}:x:{id}:");
    }
    group.push_str("nogroup:x:65534:\n");
    std::fs::write(etc.join("passwd"), passwd)?;
    std::fs::write(etc.join("group"), group)?;
    std::fs::write(etc.join("hosts"), "127.0.0.1 localhost\n::1 localhost\n")?;
    Ok(())
}
