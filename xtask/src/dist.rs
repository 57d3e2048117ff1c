//! `cargo xtask dist`: the file users copy onto a node. A statically linked `tracer` (musl, the eBPF
//! object embedded), checked to need no shared library and to be built for its architecture, at
//! `target/dist/tracer-VERSION-ARCH`. The integration tests and the kernel matrix run this very
//! file. `--target aarch64-unknown-linux-musl` cross-builds the arm64 one on an x86-64 machine
//! with Debian's cross compiler (for ring's C and as the linker; the C library is Rust's own musl).
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::{
    arch::Arch,
    run::workspace_root,
    setup,
    shell::{cargo, run},
    static_pie,
};

/// The host's musl target: the binary the integration tests run.
pub const DEFAULT_TARGET: &str = "x86_64-unknown-linux-musl";

#[derive(clap::Args)]
pub struct DistArgs {
    /// Rust target triple of the binary: `x86_64-unknown-linux-musl` or `aarch64-unknown-linux-musl`.
    #[arg(long, default_value = DEFAULT_TARGET)]
    pub target: String,
}

/// The C compiler (ring's C and assembly), linker and strip for one target.
struct Toolchain {
    cc: &'static str,
    /// `None`: rustc's default (`cc`), which links a native musl binary.
    linker: Option<&'static str>,
    /// rustc links this target's static executables at a fixed address: link through
    /// `static_pie`'s wrapper.
    needs_static_pie_wrapper: bool,
    strip: &'static str,
    /// Flags for the C compiler.
    cflags: &'static str,
    /// The Debian packages that bring them.
    packages: &'static [&'static str],
}

fn toolchain(arch: Arch) -> anyhow::Result<Toolchain> {
    if arch == Arch::host() {
        // musl's wrapper compiles against musl's headers.
        return Ok(Toolchain {
            cc: "musl-gcc",
            linker: None,
            needs_static_pie_wrapper: arch == Arch::Arm64,
            strip: "strip",
            cflags: "",
            packages: &["musl-tools", "binutils"],
        });
    }
    match arch {
        // Debian has no musl cross compiler, and its glibc headers do not belong in a musl binary:
        // ring's C is built freestanding (its own `RING_CORE_NOSTDLIBINC` mode, which includes no C
        // library header), and gcc links Rust's self-contained musl (crt objects, libc.a).
        Arch::Arm64 => Ok(Toolchain {
            cc: "aarch64-linux-gnu-gcc",
            linker: Some("aarch64-linux-gnu-gcc"),
            needs_static_pie_wrapper: true,
            strip: "aarch64-linux-gnu-strip",
            cflags: "-ffreestanding -DRING_CORE_NOSTDLIBINC=1",
            packages: &["gcc-aarch64-linux-gnu", "binutils-aarch64-linux-gnu"],
        }),
        Arch::Amd64 => bail!(
            "building the x86_64 binary on an {:?} machine is not set up",
            Arch::host()
        ),
    }
}

/// `cargo` set up to build for `target` (a musl target): the Rust target and the C compiler and
/// linker installed, their environment variables set.
pub fn cargo_for(target: &str) -> anyhow::Result<(Command, Arch)> {
    let arch = Arch::of_target(target).with_context(|| {
        format!(
            "unsupported target {target}: choose one of {}",
            Arch::ALL.map(Arch::musl_target).join(", ")
        )
    })?;
    if !target.ends_with("-linux-musl") {
        bail!("{target} is not a musl target: the binary users copy must be static");
    }
    setup::musl_target(target)?;
    let tools = toolchain(arch)?;
    setup::debian_packages(tools.packages)?;
    let env_target = target.replace('-', "_");
    let mut cmd = cargo();
    if arch != Arch::host() {
        cmd.env("CARGO_TARGET_DIR", build_dir(arch)?);
    }
    cmd.env(format!("CC_{env_target}"), tools.cc);
    if !tools.cflags.is_empty() {
        // Only when needed: cc-rs tracks the variable, and setting it rebuilds ring and its users.
        cmd.env(format!("CFLAGS_{env_target}"), tools.cflags);
    }
    let linker = match (tools.linker, tools.needs_static_pie_wrapper) {
        (linker, true) => Some(static_pie::wrapper(linker.unwrap_or("cc"))?),
        (Some(linker), false) => Some(PathBuf::from(linker)),
        (None, false) => None,
    };
    if let Some(linker) = linker {
        cmd.env(
            format!("CARGO_TARGET_{}_LINKER", env_target.to_uppercase()),
            linker,
        );
    }
    Ok((cmd, arch))
}

/// Where `arch`'s binaries build: the host's in `target/`, another architecture's in
/// `target/cross-ARCH/`. Cargo locks a build directory for a whole build; with one each, the arm64
/// binary builds while the host's tests build and run (`cargo xtask test`).
pub fn build_dir(arch: Arch) -> anyhow::Result<PathBuf> {
    let target = workspace_root()?.join("target");
    Ok(if arch == Arch::host() {
        target
    } else {
        target.join(format!("cross-{}", arch.debian_name()))
    })
}

/// Builds the static binary for `target` and returns its path.
pub fn build(target: &str) -> anyhow::Result<PathBuf> {
    let (mut cmd, arch) = cargo_for(target)?;
    run(cmd.args([
        "build",
        "--release",
        "--package",
        "tracer",
        "--target",
        target,
    ]))?;
    let root = workspace_root()?;
    let built = build_dir(arch)?.join(target).join("release/tracer");
    check_static(&built, arch)?;
    let version = env!("CARGO_PKG_VERSION");
    let dist = root.join("target/dist");
    std::fs::create_dir_all(&dist)?;
    let out = dist.join(format!("tracer-{version}-{}", arch.rust_name()));
    std::fs::copy(&built, &out).with_context(|| format!("copying {}", built.display()))?;
    // Symbols only: the embedded eBPF object keeps its BTF (it is data in the binary, not a symbol).
    run(Command::new(toolchain(arch)?.strip).arg(&out))?;
    check_static(&out, arch)?;
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

/// Fails unless `path` is an ELF executable for `arch` that asks for no program interpreter and no
/// shared library: one file that runs on any node of that architecture.
pub fn check_static(path: &Path, arch: Arch) -> anyhow::Result<()> {
    let elf = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let machine = elf_machine(&elf);
    if machine.is_some() && machine != Some(arch.elf_machine()) {
        bail!(
            "{} is not an {} executable (ELF machine {})",
            path.display(),
            arch.rust_name(),
            machine.unwrap_or_default()
        );
    }
    if elf_type(&elf).is_some_and(|t| t != ET_DYN) {
        bail!(
            "{} is linked at a fixed address: not a static-pie (the kernel cannot randomise it)",
            path.display()
        );
    }
    match linking(&elf) {
        Some(Linking::Static) => Ok(()),
        Some(Linking::Dynamic(why)) => bail!("{} is not static: {why}", path.display()),
        None => bail!("{} is not a 64-bit little-endian ELF file", path.display()),
    }
}

/// `e_type` of a position-independent executable (or a shared object).
const ET_DYN: u16 = 3;

/// `e_type` of a 64-bit little-endian ELF file.
fn elf_type(elf: &[u8]) -> Option<u16> {
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    elf.get(0x10..0x12)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
}

/// `e_machine` of a 64-bit little-endian ELF file.
fn elf_machine(elf: &[u8]) -> Option<u16> {
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    elf.get(0x12..0x14)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
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
    fn an_executable_of_another_architecture_is_refused() {
        let me = std::env::current_exe().expect("current exe");
        let other = if Arch::host() == Arch::Amd64 {
            Arch::Arm64
        } else {
            Arch::Amd64
        };
        let err = check_static(&me, other).expect_err("not built for the other architecture");
        assert!(err.to_string().contains("ELF machine"), "{err}");
    }

    #[test]
    fn a_static_executable_at_a_fixed_address_is_refused() {
        const ET_EXEC: u16 = 2;
        let mut elf = vec![0_u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x10..0x12].copy_from_slice(&ET_EXEC.to_le_bytes());
        elf[0x12..0x14].copy_from_slice(&Arch::host().elf_machine().to_le_bytes());
        let path = std::env::temp_dir().join(format!("xtask-fixed-{}", std::process::id()));
        std::fs::write(&path, &elf).expect("write");
        let err = check_static(&path, Arch::host()).expect_err("not a static-pie");
        let _ = std::fs::remove_file(&path);
        assert!(err.to_string().contains("fixed address"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_elf_is_said_so() {
        assert_eq!(linking(b"#!/bin/sh\n"), None);
        assert_eq!(linking(b"\x7fELF\x02\x01"), None);
    }
}
