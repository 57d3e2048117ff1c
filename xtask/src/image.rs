//! `cargo xtask image`: one OCI image of the static tracer for amd64 and arm64 nodes, built offline
//! (no registry is reachable, so no base image: FROM scratch, the one file and a `/tmp`). Debian's
//! umoci builds one image per architecture in one layout; an image index names the two by
//! platform, and skopeo saves the index with both as an OCI archive. `podman load`, `docker load`
//! and `ctr import` take the archive; a runtime pulls the image of its node's architecture.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use crate::{
    arch::Arch,
    dist,
    run::workspace_root,
    setup,
    shell::{output, run},
};

/// Where the binary lives in the image; `PATH` includes its folder, so `kubectl debug ... -- tracer
/// tui` finds it by name.
pub const BINARY_IN_IMAGE: &str = "usr/local/bin/tracer";
/// The image's name in the archive.
pub const NAME: &str = "localhost/tracer";

pub fn run_image() -> anyhow::Result<()> {
    setup::all()?;
    let binaries = Arch::ALL
        .into_iter()
        .map(|arch| Ok((arch, dist::build(arch.musl_target())?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let archive = build(&binaries)?;
    println!("{}", archive.display());
    Ok(())
}

/// Builds the image around each architecture's static binary; returns the OCI archive's path.
pub fn build(binaries: &[(Arch, PathBuf)]) -> anyhow::Result<PathBuf> {
    let root = workspace_root()?;
    let work = root.join("target/image");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let layout = work.join("oci");
    run(Command::new("umoci")
        .arg("init")
        .arg("--layout")
        .arg(&layout))?;
    let version = env!("CARGO_PKG_VERSION");
    let commit = git_commit(&root);
    for (arch, binary) in binaries {
        one_architecture(&layout, &work, *arch, binary, version, &commit)?;
    }
    run(Command::new("umoci").arg("gc").arg("--layout").arg(&layout))?;
    index_of_platforms(&layout, binaries)?;

    let archive = root
        .join("target/dist")
        .join(format!("tracer-image-{version}.oci.tar"));
    let _ = std::fs::remove_file(&archive);
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--all",
        &format!("oci:{}:tracer", layout.display()),
        &format!("oci-archive:{}:{NAME}:{version}", archive.display()),
    ]))?;
    let _ = std::fs::remove_dir_all(&work);
    let size = std::fs::metadata(&archive)?.len();
    eprintln!("xtask: {} ({})", archive.display(), dist::mib(size));
    Ok(archive)
}

/// The image of one architecture, tagged `tracer-ARCH` in `layout`.
fn one_architecture(
    layout: &Path,
    work: &Path,
    arch: Arch,
    binary: &Path,
    version: &str,
    commit: &str,
) -> anyhow::Result<()> {
    let image = format!("{}:tracer-{}", layout.display(), arch.debian_name());
    let bundle = work.join(format!("bundle-{}", arch.debian_name()));
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
    run(Command::new("umoci").args([
        "config",
        "--image",
        &image,
        "--os=linux",
        &format!("--architecture={}", arch.debian_name()),
        &format!("--config.entrypoint=/{BINARY_IN_IMAGE}"),
        "--config.cmd=trace",
        "--config.env=PATH=/usr/local/bin:/usr/bin:/bin",
        "--config.workingdir=/",
        "--config.label=org.opencontainers.image.title=tracer",
        &format!("--config.label=org.opencontainers.image.version={version}"),
        &format!("--config.label=org.opencontainers.image.revision={commit}"),
    ]))?;
    Ok(())
}

/// Replaces the layout's per-architecture tags with one `tracer` tag: an image index that lists
/// each architecture's manifest with its platform.
fn index_of_platforms(layout: &Path, binaries: &[(Arch, PathBuf)]) -> anyhow::Result<()> {
    const REF_NAME: &str = "org.opencontainers.image.ref.name";
    let index_path = layout.join("index.json");
    let index: Value = serde_json::from_slice(&std::fs::read(&index_path)?)
        .with_context(|| format!("reading {}", index_path.display()))?;
    let tagged = index["manifests"]
        .as_array()
        .context("index.json has no manifests")?;
    let mut manifests = Vec::new();
    for (arch, _) in binaries {
        let tag = format!("tracer-{}", arch.debian_name());
        let Some(manifest) = tagged
            .iter()
            .find(|m| m["annotations"][REF_NAME] == tag.as_str())
        else {
            bail!("umoci left no manifest tagged {tag}");
        };
        let mut platform = json!({"architecture": arch.debian_name(), "os": "linux"});
        if *arch == Arch::Arm64 {
            platform["variant"] = "v8".into();
        }
        manifests.push(json!({
            "mediaType": manifest["mediaType"],
            "digest": manifest["digest"],
            "size": manifest["size"],
            "platform": platform,
        }));
    }
    let platforms = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": manifests,
    }))?;
    let blobs = layout.join("blobs/sha256");
    let staged = blobs.join("index.partial");
    std::fs::write(&staged, &platforms)?;
    let digest = output(Command::new("sha256sum").arg(&staged))?
        .split_whitespace()
        .next()
        .context("sha256sum printed no digest")?
        .to_string();
    std::fs::rename(&staged, blobs.join(&digest))?;
    let top = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": format!("sha256:{digest}"),
            "size": platforms.len(),
            "annotations": {REF_NAME: "tracer"},
        }],
    });
    std::fs::write(&index_path, serde_json::to_vec(&top)?)?;
    Ok(())
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
