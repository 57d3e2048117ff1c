//! `cargo xtask image`: an OCI image of the static tracer, built offline (no registry is reachable,
//! so no base image: FROM scratch, the one file and a `/tmp`), with Debian's umoci, saved as an OCI
//! archive with skopeo. `podman load`, `docker load` and `ctr import` take the archive.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{dist, run::workspace_root, setup, shell::run};

/// Where the binary lives in the image; `PATH` includes its folder, so `kubectl debug ... -- tracer
/// tui` finds it by name.
pub const BINARY_IN_IMAGE: &str = "usr/local/bin/tracer";
/// The image's name in the archive.
pub const NAME: &str = "localhost/tracer";

pub fn run_image() -> anyhow::Result<()> {
    setup::all()?;
    let binary = dist::build(dist::DEFAULT_TARGET)?;
    let archive = build(&binary)?;
    println!("{}", archive.display());
    Ok(())
}

/// Builds the image around `binary`; returns the OCI archive's path.
pub fn build(binary: &Path) -> anyhow::Result<PathBuf> {
    let root = workspace_root()?;
    let work = root.join("target/image");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let layout = work.join("oci");
    let image = format!("{}:tracer", layout.display());
    let bundle = work.join("bundle");
    run(Command::new("umoci")
        .arg("init")
        .arg("--layout")
        .arg(&layout))?;
    run(Command::new("umoci").args(["new", "--image", &image]))?;
    run(Command::new("umoci")
        .args(["unpack", "--image", &image])
        .arg(&bundle))?;

    let rootfs = bundle.join("rootfs");
    let target = rootfs.join(BINARY_IN_IMAGE);
    std::fs::create_dir_all(target.parent().context("binary path has a folder")?)?;
    std::fs::copy(binary, &target).with_context(|| format!("copying {}", binary.display()))?;
    // Where a refused program's verifier log goes; a read-only root leaves it unwritten, harmlessly.
    let tmp = rootfs.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))?;
    }
    run(Command::new("umoci")
        .args(["repack", "--image", &image])
        .arg(&bundle))?;

    let version = env!("CARGO_PKG_VERSION");
    let commit = git_commit(&root);
    run(Command::new("umoci").args([
        "config",
        "--image",
        &image,
        &format!("--config.entrypoint=/{BINARY_IN_IMAGE}"),
        "--config.cmd=trace",
        "--config.env=PATH=/usr/local/bin:/usr/bin:/bin",
        "--config.workingdir=/",
        "--config.label=org.opencontainers.image.title=tracer",
        &format!("--config.label=org.opencontainers.image.version={version}"),
        &format!("--config.label=org.opencontainers.image.revision={commit}"),
    ]))?;
    run(Command::new("umoci").arg("gc").arg("--layout").arg(&layout))?;

    let archive = root
        .join("target/dist")
        .join(format!("tracer-image-{version}.oci.tar"));
    let _ = std::fs::remove_file(&archive);
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci:{image}"),
        &format!("oci-archive:{}:{NAME}:{version}", archive.display()),
    ]))?;
    let _ = std::fs::remove_dir_all(&work);
    let size = std::fs::metadata(&archive)?.len();
    eprintln!("xtask: {} ({})", archive.display(), dist::mib(size));
    Ok(archive)
}

fn git_commit(root: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        )
}
