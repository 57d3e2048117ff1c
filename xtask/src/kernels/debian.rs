//! Debian's kernel packages, downloaded and unpacked (never installed on the host), cached between
//! runs. The newest package of each series is resolved at run time through a private apt state
//! (one per architecture) that points at the same archive as the system's sources: the archive
//! drops old patch releases, and the system's own sources and package database stay untouched.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{
    arch::Arch,
    shell::{output, run},
};

/// A kernel series the nodes run, and the Debian suite that ships it.
pub struct Series {
    /// As users say it: `5.10`.
    pub name: &'static str,
    pub suite: &'static str,
}

/// An unpacked kernel package.
pub struct Kernel {
    /// The release as `uname -r` prints it, e.g. `6.1.0-57-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `lib/modules/RELEASE` of the package.
    pub modules: PathBuf,
    /// Why it is not the newest the archive lists, if it is not.
    pub note: Option<String>,
}

/// Where kernels, busybox and apt state are kept between runs: outside the work tree, so a fresh
/// clone on the same machine reuses them.
pub fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME").map_or_else(
        || PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into())).join(".cache"),
        PathBuf::from,
    );
    base.join("tracer-kernel-matrix")
}

/// The private apt state of `arch`'s packages.
pub fn apt_dir(arch: Arch) -> PathBuf {
    match arch {
        Arch::Amd64 => cache_dir().join("apt"),
        Arch::Arm64 => cache_dir().join(format!("apt-{}", arch.debian_name())),
    }
}

/// apt for `arch`'s packages, with its lists and archives under `apt_dir(arch)`, reading only its
/// `sources.list`, and an empty package database of its own (nothing is installed anywhere).
pub fn apt(arch: Arch, tool: &str) -> Command {
    let dir = apt_dir(arch);
    let mut cmd = Command::new(tool);
    for (key, value) in [
        ("Dir::Etc::sourcelist", dir.join("sources.list")),
        ("Dir::Etc::sourceparts", PathBuf::from("-")),
        ("Dir::State::Lists", dir.join("lists")),
        ("Dir::State::status", dir.join("status")),
        ("Dir::Cache::Archives", dir.join("archives")),
        ("Dir::Cache", dir.join("cache")),
    ] {
        cmd.arg("-o").arg(format!("{key}={}", value.display()));
    }
    cmd.args(["-o", &format!("APT::Architecture={}", arch.debian_name())])
        .args(["-o", &format!("APT::Architectures={}", arch.debian_name())])
        // apt drops privileges to _apt for downloads; a root-owned cache folder would make it warn.
        .args(["-o", "APT::Sandbox::User=root"]);
    cmd
}

/// The system's sources' URI whose path ends with `suffix` (`/debian`, `/debian-security`): the
/// Debian archives, not a third party's.
fn archive_uri(suffix: &str) -> Option<String> {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        files.extend(
            dir.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sources" || e == "list")),
        );
    }
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines() {
            let uri = line.strip_prefix("URIs:").map(str::trim).or_else(|| {
                line.strip_prefix("deb ")
                    .and_then(|l| l.split_whitespace().find(|w| w.contains("://")))
            });
            if let Some(uri) = uri
                && uri.trim_end_matches('/').ends_with(suffix)
            {
                return Some(uri.to_string());
            }
        }
    }
    None
}

/// Refreshes the private apt state of `arch` for `suites`. Returns false (and says why) if the
/// archive cannot be reached; then only cached kernels can be tested.
pub fn refresh(arch: Arch, suites: &[&str]) -> anyhow::Result<bool> {
    let dir = apt_dir(arch);
    for sub in ["lists/partial", "archives/partial", "cache"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    if !dir.join("status").exists() {
        std::fs::write(dir.join("status"), "")?;
    }
    let uri = archive_uri("/debian").context(
        "no Debian archive (a URI ending in /debian) in /etc/apt/sources.list(.d): the kernel \
         matrix downloads kernels from it",
    )?;
    // Kernel security updates (the newest patch releases) are in the security archive.
    let security = archive_uri("/debian-security");
    let mut suites = suites.to_vec();
    suites.dedup();
    let mut sources = String::new();
    for suite in suites {
        let _ = writeln!(sources, "deb {uri} {suite} main");
        if let Some(security) = &security {
            let _ = writeln!(sources, "deb {security} {suite}-security main");
        }
    }
    std::fs::write(dir.join("sources.list"), sources)?;
    // A failed fetch is only a warning to apt-get update (exit 0, old lists used): make it an error.
    let ok = apt(arch, "apt-get")
        .args(["-qq", "update", "--error-on=any"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "xtask: the Debian archive did not answer; only the {} kernels cached in {} can be tested",
            arch.debian_name(),
            cache_dir().display()
        );
    }
    Ok(ok)
}

/// The newest `linux-image-SERIES.*-ARCH-unsigned` package the archive has.
/// The `linux-image-SERIES.*-ARCH-unsigned` packages the archive lists, newest first.
fn packages_newest_first(series: &Series, arch: Arch) -> anyhow::Result<Vec<String>> {
    let pattern = format!("^linux-image-{}\\.", series.name.replace('.', "\\."));
    let list = output(apt(arch, "apt-cache").args(["search", "--names-only", &pattern]))?;
    let suffix = format!("-{}-unsigned", arch.debian_name());
    let mut packages: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.ends_with(&suffix))
        .filter(|name| !name.contains("-rt-") && !name.contains("-cloud-"))
        .map(str::to_string)
        .collect();
    packages.sort_by_key(|name| std::cmp::Reverse(version_numbers(name)));
    if packages.is_empty() {
        anyhow::bail!(
            "no linux-image-{}.*-{}-unsigned package in {}",
            series.name,
            arch.debian_name(),
            series.suite
        );
    }
    Ok(packages)
}

/// How many older packages of a series are tried when the newest cannot be downloaded.
const OLDER_TRIED: usize = 6;

/// The numbers in a package name, in order: `6.1.0-57` sorts below `6.1.0-58`, `6.12.115` below
/// `6.12.117`.
fn version_numbers(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The newest `arch` kernel of `series`: downloaded and unpacked unless it is in the cache
/// already. The archive's index can list a package its pool no longer serves (bullseye-security's
/// arm64 kernels answer 404 here): then the newest older one that downloads, and the kernel's
/// `note` names the ones that did not. When the archive is unreachable (`online` false), the
/// newest cached one, if any.
pub fn kernel(series: &Series, arch: Arch, online: bool) -> anyhow::Result<Kernel> {
    let root = cache_dir().join("kernels");
    std::fs::create_dir_all(&root)?;
    let mut not_served = Vec::new();
    let unpacked = if online {
        let mut found = None;
        for package in packages_newest_first(series, arch)?
            .into_iter()
            .take(OLDER_TRIED + 1)
        {
            let dir = root.join(&package);
            if dir.join("boot").is_dir() {
                found = Some(dir);
                break;
            }
            match download_and_unpack(arch, &package, &dir) {
                Ok(()) => {
                    found = Some(dir);
                    break;
                }
                Err(why) => not_served.push(format!("{package} ({why:#})")),
            }
        }
        found.with_context(|| {
            format!(
                "none of the newest {} kernels downloads: {}",
                series.name,
                not_served.join("; ")
            )
        })?
    } else {
        std::fs::read_dir(&root)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with(&format!("linux-image-{}.", series.name))
                        && n.ends_with(&format!("-{}-unsigned", arch.debian_name()))
                }) && p.join("boot").is_dir()
            })
            .max_by_key(|p| version_numbers(&p.to_string_lossy()))
            .with_context(|| {
                format!(
                    "the Debian archive is unreachable and no {} {} kernel is cached in {}",
                    arch.debian_name(),
                    series.name,
                    root.display()
                )
            })?
    };
    let release = std::fs::read_dir(unpacked.join("lib/modules"))?
        .flatten()
        .next()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .with_context(|| format!("{}: no lib/modules", unpacked.display()))?;
    let note = (!not_served.is_empty()).then(|| {
        format!(
            "the archive lists newer {} kernels it did not serve: {}",
            series.name,
            not_served.join("; ")
        )
    });
    Ok(Kernel {
        note,
        vmlinuz: unpacked.join(format!("boot/vmlinuz-{release}")),
        modules: unpacked.join("lib/modules").join(&release),
        release,
    })
}

fn download_and_unpack(arch: Arch, package: &str, dir: &Path) -> anyhow::Result<()> {
    eprintln!("xtask: downloading {package}");
    let debs = cache_dir().join("debs");
    std::fs::create_dir_all(&debs)?;
    let status = apt(arch, "apt-get")
        .args(["-qq", "download", package])
        .current_dir(&debs)
        .status()
        .context("starting apt-get")?;
    if !status.success() {
        anyhow::bail!("apt-get download failed: {status}");
    }
    let deb = std::fs::read_dir(&debs)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{package}_")))
        })
        .with_context(|| format!("apt-get download {package} left no .deb"))?;
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&partial))?;
    std::fs::rename(&partial, dir)?;
    std::fs::remove_file(&deb)?;
    Ok(())
}
