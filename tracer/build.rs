//! Builds the kernel programs (`tracer-ebpf`) for the BPF target with the pinned nightly and
//! bpf-linker, and leaves the object in `OUT_DIR` for `include_bytes_aligned!`.
//! `cargo xtask setup` installs that toolchain; `AYA_BUILD_SKIP=1` skips this step (clippy on hosts
//! without the toolchain).

/// Keep in sync with `xtask/src/setup.rs`: bpf-linker links against this nightly's LLVM.
const EBPF_TOOLCHAIN: &str = "nightly-2026-05-20";

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let ebpf_dir = format!("{manifest_dir}/../tracer-ebpf");
    println!("cargo:rerun-if-changed={manifest_dir}/../tracer-common/src");
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "tracer-ebpf",
            root_dir: &ebpf_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(EBPF_TOOLCHAIN),
    )
}
