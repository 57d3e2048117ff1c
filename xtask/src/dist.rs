//! `cargo xtask dist`: the file users copy onto a node. A statically linked `tracer` (musl, the eBPF
//! object embedded), checked to need no shared library, at `target/dist/tracer-VERSION-ARCH`. The
//! integration tests and the kernel matrix run this very file.
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::{
    run::workspace_root,
    setup,
    shell::{cargo, run},
};

/// `x86_64` today; `aarch64-unknown-linux-musl` builds the same way (its `musl-gcc` from a cross
/// toolchain).
pub const DEFAULT_TARGET: &str = "x86_64-unknown-linux-musl";

#[derive(clap::Args)]
pub struct DistArgs {
    /// Rust target triple of the binary.
    #[arg(long, default_value = DEFAULT_TARGET)]
    pub target: String,
}

/// Builds the static binary and returns its path.
pub fn build(target: &str) -> anyhow::Result<PathBuf> {
    setup::musl_target(target)?;
    setup::debian_packages(&["musl-tools", "binutils"])?;
    // ring (rustls) compiles C: with musl's wrapper, against musl's headers.
    let cc_var = format!("CC_{}", target.replace('-', "_"));
    run(cargo().env(&cc_var, "musl-gcc").args([
        "build",
        "--release",
        "--package",
        "tracer",
        "--target",
        target,
    ]))?;
    let root = workspace_root()?;
    let built = root.join("target").join(target).join("release/tracer");
    check_static(&built)?;
    let version = env!("CARGO_PKG_VERSION");
    let arch = target.split('-').next().unwrap_or(target);
    let dist = root.join("target/dist");
    std::fs::create_dir_all(&dist)?;
    let out = dist.join(format!("tracer-{version}-{arch}"));
    std::fs::copy(&built, &out).with_context(|| format!("copying {}", built.display()))?;
    // Symbols only: the embedded eBPF object keeps its BTF (it is data in the binary, not a symbol).
    run(std::process::Command::new("strip").arg(&out))?;
    let size = std::fs::metadata(&out)?.len();
    eprintln!("xtask: {} ({}, static)", out.display(), mib(size));
    Ok(out)
}

pub fn run_dist(args: &DistArgs) -> anyhow::Result<()> {
    setup::build_tools()?;
    let out = build(&args.target)?;
    println!("{}", out.display());
    Ok(())
}

/// `14.4 MiB`.
pub fn mib(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    format!("{}.{} MiB", bytes / MIB, bytes % MIB * 10 / MIB)
}

/// How an ELF executable is linked.
#[derive(Debug, PartialEq, Eq)]
enum Linking {
    Static,
    /// It needs a program interpreter or a shared library: which.
    Dynamic(&'static str),
}

/// Fails unless `path` is an ELF executable that asks for no program interpreter and no shared
/// library: one file that runs on any node.
pub fn check_static(path: &Path) -> anyhow::Result<()> {
    let elf = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match linking(&elf) {
        Some(Linking::Static) => Ok(()),
        Some(Linking::Dynamic(why)) => bail!("{} is not static: {why}", path.display()),
        None => bail!("{} is not a 64-bit little-endian ELF file", path.display()),
    }
}

/// How `elf` is linked; `None` if it is not a 64-bit little-endian ELF file.
fn linking(elf: &[u8]) -> Option<Linking> {
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    const DT_NEEDED: u64 = 1;
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        let header = phoff + i * phentsize;
        match u32_at(header)? {
            PT_INTERP => return Some(Linking::Dynamic("it names a program interpreter")),
            PT_DYNAMIC => {
                // A static PIE has a dynamic section for its own relocations, but no DT_NEEDED.
                let offset = usize::try_from(u64_at(header + 0x08)?).ok()?;
                let size = usize::try_from(u64_at(header + 0x20)?).ok()?;
                for entry in (offset..offset + size).step_by(16) {
                    if u64_at(entry)? == DT_NEEDED {
                        return Some(Linking::Dynamic("it needs a shared library (DT_NEEDED)"));
                    }
                }
            }
            _ => {}
        }
    }
    Some(Linking::Static)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_glibc_test_runner_itself_is_not_static() {
        let me = std::env::current_exe().expect("current exe");
        let elf = std::fs::read(me).expect("read self");
        assert!(matches!(linking(&elf), Some(Linking::Dynamic(_))));
    }

    #[test]
    fn a_file_that_is_not_elf_is_said_so() {
        assert_eq!(linking(b"#!/bin/sh\n"), None);
        assert_eq!(linking(b"\x7fELF\x02\x01"), None);
    }
}
