//! The VM's initramfs: static busybox, the stage-1 `/init`, the stage-2 script, and the kernel
//! modules the tests need, in the order their dependencies require. Debian's image packages ship
//! no `modules.dep` (and the host has no depmod), so dependencies come from each module's
//! `.modinfo` `depends=` line.
use std::{
    collections::{HashMap, HashSet},
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::debian::Kernel;

/// Modules the guest loads, with their dependencies: the virtio and 9p stack that shares the host's
/// root, overlayfs, and what the test beds use (veth, bridge with `br_netfilter`, nftables with NAT,
/// reject and conntrack, ctnetlink for the tracer's Service naming). A module missing from the
/// package is built in.
const MODULES: &[&str] = &[
    // libcrc32c only soft-depends on it: load it first.
    "crc32c_generic",
    "virtio_pci",
    "9pnet_virtio",
    "9p",
    "overlay",
    "veth",
    "dummy",
    "bridge",
    "br_netfilter",
    "nf_tables",
    "nft_chain_nat",
    "nft_nat",
    "nft_ct",
    "nft_reject_inet",
    "nft_reject_ipv4",
    "nft_reject_ipv6",
    "nft_numgen",
    "nft_limit",
    "nft_log",
    "nft_masq",
    "nf_conntrack_netlink",
];

/// Writes `out` (an uncompressed newc cpio, which every kernel takes as an initramfs), with
/// `busybox` (a static one of the kernel's architecture) as its shell and tools.
pub fn build(
    kernel: &Kernel,
    busybox: &Path,
    init: &str,
    stage2: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let staging = out.with_extension("d");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("bin"))?;
    std::fs::create_dir_all(staging.join("modules"))?;
    std::fs::copy(busybox, staging.join("bin/busybox")).with_context(|| {
        format!(
            "copying {} (Debian package busybox-static)",
            busybox.display()
        )
    })?;
    write_executable(&staging.join("init"), init)?;
    write_executable(&staging.join("stage2.sh"), stage2)?;

    let order = module_order(&kernel.modules)?;
    let mut names = Vec::new();
    for (name, path) in &order {
        std::fs::write(
            staging.join(format!("modules/{name}.ko")),
            module_bytes(path)?,
        )?;
        names.push(name.as_str());
    }
    std::fs::write(staging.join("modules/order"), names.join("\n") + "\n")?;

    let mut files = Vec::new();
    list_files(&staging, &staging, &mut files)?;
    // The host's busybox packs it: the guest's may be of another architecture.
    let mut cpio = Command::new(BUSYBOX)
        .args(["cpio", "-o", "-H", "newc", "-R", "0:0"])
        .current_dir(&staging)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(out)?)
        .stderr(Stdio::null())
        .spawn()
        .context("starting busybox cpio")?;
    cpio.stdin
        .take()
        .context("cpio stdin")?
        .write_all((files.join("\n") + "\n").as_bytes())?;
    if !cpio.wait()?.success() {
        bail!("busybox cpio failed building {}", out.display());
    }
    std::fs::remove_dir_all(&staging)?;
    Ok(())
}

/// The host's static busybox (Debian package busybox-static): the initramfs's shell and tools, and
/// the guest's `poweroff`, for VMs of the host's architecture.
pub const BUSYBOX: &str = "/bin/busybox";

fn write_executable(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        out.push(format!("./{}", path.strip_prefix(root)?.to_string_lossy()));
        if entry.file_type()?.is_dir() {
            list_files(root, &path, out)?;
        }
    }
    Ok(())
}

/// `MODULES` and their dependencies, dependencies first: (name, file).
fn module_order(modules_dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut files = HashMap::new();
    index_modules(&modules_dir.join("kernel"), &mut files)?;
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for name in MODULES {
        add_with_dependencies(name, &files, &mut seen, &mut order)?;
    }
    Ok(order)
}

fn index_modules(dir: &Path, files: &mut HashMap<String, PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            index_modules(&path, files)?;
            continue;
        }
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        if let Some((name, _)) = file.split_once(".ko") {
            files.insert(name.replace('-', "_"), path.clone());
        }
    }
    Ok(())
}

fn add_with_dependencies(
    name: &str,
    files: &HashMap<String, PathBuf>,
    seen: &mut HashSet<String>,
    order: &mut Vec<(String, PathBuf)>,
) -> anyhow::Result<()> {
    let name = name.replace('-', "_");
    if !seen.insert(name.clone()) {
        return Ok(());
    }
    let Some(path) = files.get(&name) else {
        return Ok(()); // built into this kernel
    };
    let bytes = module_bytes(path)?;
    for dependency in depends(&bytes) {
        add_with_dependencies(&dependency, files, seen, order)?;
    }
    order.push((name, path.clone()));
    Ok(())
}

/// The module's `depends=a,b` from its `.modinfo` strings.
fn depends(module: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(start) = module.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let rest = &module[start + KEY.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
}

/// A module file, decompressed (6.12 ships `.ko.xz`).
fn module_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        "xz"
    } else if name.ends_with(".zst") {
        "zstd"
    } else {
        return std::fs::read(path).with_context(|| format!("reading {name}"));
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| format!("starting {tool}"))?;
    if !out.status.success() {
        bail!("{tool} -dc {name} failed");
    }
    Ok(out.stdout)
}
