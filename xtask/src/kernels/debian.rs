//! Debian's kernel packages, downloaded and unpacked (never installed on the host), cached between
//! runs. The newest package of each series is resolved at run time through a private apt state that
//! points at the same archive as the system's sources: the archive drops old patch releases, and
//! the system's own sources stay untouched.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::shell::{output, run};

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

/// apt with its lists and archives under `dir`, reading only `dir/sources.list`.
fn apt(dir: &Path, tool: &str) -> Command {
    let mut cmd = Command::new(tool);
    for (key, value) in [
        ("Dir::Etc::sourcelist", dir.join("sources.list")),
        ("Dir::Etc::sourceparts", PathBuf::from("-")),
        ("Dir::State::Lists", dir.join("lists")),
        ("Dir::Cache::Archives", dir.join("archives")),
        ("Dir::Cache", dir.join("cache")),
    ] {
        cmd.arg("-o").arg(format!("{key}={}", value.display()));
    }
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

/// Refreshes the private apt state for `suites`. Returns false (and says why) if the archive cannot
/// be reached; then cached kernels are used.
pub fn refresh(suites: &[&str]) -> anyhow::Result<bool> {
    let dir = cache_dir().join("apt");
    for sub in ["lists/partial", "archives/partial", "cache"] {
        std::fs::create_dir_all(dir.join(sub))?;
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
    let ok = apt(&dir, "apt-get")
        .args(["-qq", "-o", "APT::Sandbox::User=root", "update"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "xtask: the Debian archive did not answer; using the kernels cached in {}",
            cache_dir().display()
        );
    }
    Ok(ok)
}

/// The newest `linux-image-SERIES.*-amd64-unsigned` package the archive has.
fn newest_package(series: &Series) -> anyhow::Result<String> {
    let dir = cache_dir().join("apt");
    let pattern = format!("^linux-image-{}\\.", series.name.replace('.', "\\."));
    let list = output(apt(&dir, "apt-cache").args(["search", "--names-only", &pattern]))?;
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.ends_with("-amd64-unsigned"))
        .filter(|name| !name.contains("-rt-") && !name.contains("-cloud-"))
        .max_by_key(|name| version_numbers(name))
        .map(str::to_string)
        .with_context(|| {
            format!(
                "no linux-image-{}.* package in {}",
                series.name, series.suite
            )
        })
}

/// The numbers in a package name, in order: `6.1.0-57` sorts below `6.1.0-58`, `6.12.115` below
/// `6.12.117`.
fn version_numbers(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The newest kernel of `series`: downloaded and unpacked unless it is in the cache already. When
/// the archive is unreachable (`online` false), the newest cached one.
pub fn kernel(series: &Series, online: bool) -> anyhow::Result<Kernel> {
    let root = cache_dir().join("kernels");
    std::fs::create_dir_all(&root)?;
    let package = if online {
        Some(newest_package(series)?)
    } else {
        None
    };
    let unpacked = match &package {
        Some(package) => {
            let dir = root.join(package);
            if !dir.join("boot").is_dir() {
                download_and_unpack(package, &dir)?;
            }
            dir
        }
        None => std::fs::read_dir(&root)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                // The VMs are x86-64: a cached arm64 kernel of the series is not one to boot.
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.starts_with(&format!("linux-image-{}.", series.name))
                        && n.ends_with("-amd64-unsigned")
                }) && p.join("boot").is_dir()
            })
            .max_by_key(|p| version_numbers(&p.to_string_lossy()))
            .with_context(|| {
                format!(
                    "no cached kernel {} and the archive is unreachable",
                    series.name
                )
            })?,
    };
    let release = std::fs::read_dir(unpacked.join("lib/modules"))?
        .flatten()
        .next()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .with_context(|| format!("{}: no lib/modules", unpacked.display()))?;
    Ok(Kernel {
        vmlinuz: unpacked.join(format!("boot/vmlinuz-{release}")),
        modules: unpacked.join("lib/modules").join(&release),
        release,
    })
}

fn download_and_unpack(package: &str, dir: &Path) -> anyhow::Result<()> {
    eprintln!("xtask: downloading {package}");
    let apt_dir = cache_dir().join("apt");
    let debs = cache_dir().join("debs");
    std::fs::create_dir_all(&debs)?;
    // apt drops privileges to _apt for downloads; a root-owned cache folder would make it warn.
    run(apt(&apt_dir, "apt-get")
        .args(["-qq", "-o", "APT::Sandbox::User=root", "download", package])
        .current_dir(&debs))?;
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
