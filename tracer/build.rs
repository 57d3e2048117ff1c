//! Builds the kernel programs (`tracer-ebpf`) for the BPF target with the pinned nightly and
//! bpf-linker, and leaves the object in `OUT_DIR` for `include_bytes_aligned!`.
//! `cargo xtask setup` installs that toolchain; `AYA_BUILD_SKIP=1` skips this step (clippy on hosts
//! without the toolchain).

/// Keep in sync with `xtask/src/setup.rs`: bpf-linker links against this nightly's LLVM.
const EBPF_TOOLCHAIN: &str = "nightly-2026-05-20";

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    git_commit(&manifest_dir);
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

/// `TRACER_GIT_COMMIT` for `tracer --version`: the commit built, `-dirty` with uncommitted changes,
/// `unknown` outside a git checkout (a source tarball).
fn git_commit(manifest_dir: &str) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-C", manifest_dir])
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).map_or_else(
        || "unknown".to_string(),
        |commit| {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        },
    );
    println!("cargo:rustc-env=TRACER_GIT_COMMIT={commit}");
    // `--git-path` is relative to the directory in a plain clone, absolute in a worktree; a path
    // that does not exist would make cargo rebuild the crate every time.
    for file in ["HEAD", "index"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            let path = std::path::Path::new(manifest_dir).join(path);
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
