//! Installs what the build and the tests need, each step only when it is missing.
use std::{path::PathBuf, process::Command};

use anyhow::Context as _;

use crate::shell::{output, run, succeeds};

/// The nightly that builds the eBPF crate. bpf-linker links against its libLLVM, so both are pinned
/// together (keep in sync with `tracer/build.rs`). Never `rustup update` it: that deletes the LLVM
/// bpf-linker was built against.
pub const EBPF_NIGHTLY: &str = "nightly-2026-05-20";
/// LLVM major version of that nightly: the bpf-linker feature to build with.
const LLVM_FEATURE: &str = "llvm-22";
const BPF_LINKER_VERSION: &str = "0.13.0";

/// Debian packages the tracer and its demo use at run time: nft loads the demo's Services (without
/// it the demo skips them and says so; the rest it builds through netlink).
pub const RUN_PACKAGES: &[&str] = &["nftables"];

/// Debian packages the integration tests and benchmarks drive: tmux for the TUI's terminal tests;
/// the DNS tests run dnsmasq, dig and nginx;
/// `cargo xtask bench` compares against `conntrack -E` and bpftrace, and names programs with bpftool;
/// the kernel matrix boots kernels in qemu with a busybox initramfs (and unpacks `.ko.xz` modules);
/// the cluster-wide test scrapes ten tracers with a real Prometheus (its own, in a namespace: the
/// package's service is not started where there is no init to start it).
const TEST_PACKAGES: &[&str] = &[
    "iproute2",
    "nftables",
    // kube-proxy's iptables rules for the stale datapath tests (the nf_tables backend).
    "iptables",
    "tmux",
    "conntrack",
    "bpftrace",
    "bpftool",
    "dnsmasq-base",
    "dnsutils",
    "nginx-light",
    // A client that connects without blocking and reads SO_ERROR (the Cilium socket LB test).
    "curl",
    "qemu-system-x86",
    // The arm64 kernels of the matrix, emulated.
    "qemu-system-arm",
    "busybox-static",
    "xz-utils",
    // `cargo xtask dist` (musl-gcc for ring's C) and `cargo xtask image` (an OCI image, offline).
    "musl-tools",
    "umoci",
    "skopeo",
    "prometheus",
    // GNU time: the peak RSS of `tracer summary` in `cargo xtask bench`.
    "time",
];

pub fn all() -> anyhow::Result<()> {
    build_tools()?;
    debian_packages(RUN_PACKAGES)?;
    debian_packages(TEST_PACKAGES)
}

/// What `cargo build` of the tracer needs: the pinned nightly with rust-src, and bpf-linker.
pub fn build_tools() -> anyhow::Result<()> {
    nightly()?;
    bpf_linker()
}

fn nightly() -> anyhow::Result<()> {
    let has_rust_src =
        succeeds(Command::new("rustup").args(["run", EBPF_NIGHTLY, "rustc", "--version"]))
            && output(Command::new("rustup").args([
                "component",
                "list",
                "--installed",
                "--toolchain",
                EBPF_NIGHTLY,
            ]))
            .is_ok_and(|list| list.lines().any(|l| l.starts_with("rust-src")));
    if has_rust_src {
        return Ok(());
    }
    eprintln!("xtask: installing {EBPF_NIGHTLY} with rust-src (for the eBPF crate)");
    run(Command::new("rustup").args([
        "toolchain",
        "install",
        EBPF_NIGHTLY,
        "--profile",
        "minimal",
        "--component",
        "rust-src",
    ]))
}

fn bpf_linker() -> anyhow::Result<()> {
    let installed = output(Command::new("bpf-linker").arg("--version"))
        .is_ok_and(|v| v.contains(BPF_LINKER_VERSION));
    if installed {
        return Ok(());
    }
    eprintln!(
        "xtask: building bpf-linker {BPF_LINKER_VERSION} against {EBPF_NIGHTLY}'s LLVM (about 2 minutes)"
    );
    // Debian's LLVM is too old; the nightly ships a libLLVM.so of the right major version. bpf-linker's
    // build looks for LLVM under LLVM_PREFIX/lib, so give it a folder of symlinks to that library.
    let sysroot =
        output(Command::new("rustup").args(["run", EBPF_NIGHTLY, "rustc", "--print", "sysroot"]))?;
    let lib_dir = PathBuf::from(sysroot).join("lib");
    let lib = std::fs::read_dir(&lib_dir)
        .with_context(|| format!("listing {}", lib_dir.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libLLVM.so"))
        })
        .with_context(|| format!("no libLLVM.so in {}", lib_dir.display()))?;
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let prefix = PathBuf::from(home).join(format!(".local/llvm-rust-{EBPF_NIGHTLY}"));
    let prefix_lib = prefix.join("lib");
    std::fs::create_dir_all(&prefix_lib)?;
    for name in [
        "libLLVM.so".to_string(),
        lib.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    ] {
        let link = prefix_lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link)
            .with_context(|| format!("linking {}", link.display()))?;
    }
    run(Command::new("cargo")
        .env("LLVM_PREFIX", &prefix)
        .args([
            "install",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
            "--locked",
        ])
        .args(["--no-default-features", "--features", LLVM_FEATURE]))
}

/// The Rust standard library for `target` (a musl target for the static binary).
pub fn musl_target(target: &str) -> anyhow::Result<()> {
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if installed.lines().any(|l| l.trim() == target) {
        return Ok(());
    }
    eprintln!("xtask: adding the Rust target {target}");
    run(Command::new("rustup").args(["target", "add", target]))
}

/// `apt-get install` of the packages not yet installed.
pub fn debian_packages(packages: &[&str]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            !output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_ok_and(|s| s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: installing Debian packages {}", missing.join(" "));
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing))
}
