//! Static-pie links where rustc only links static executables at a fixed address. rustc's
//! `aarch64-unknown-linux-musl` target (unlike `x86_64-unknown-linux-musl`) does not declare
//! static-pie support, so it links a static executable with musl's `crt1.o`, at a fixed address.
//! The code is position-independent already; this linker wrapper swaps in musl's self-relocating
//! start files (`rcrt1.o`, `crtbeginS.o`, `crtendS.o`, which Rust ships beside the others) and asks
//! for `-static-pie`, so the node's kernel can load the binary at a random address, as the x86-64
//! one is.
use std::{ffi::OsString, path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

/// A script that runs `xtask link-static-pie LINKER ARGS...`: cargo's linker setting takes one path.
pub fn wrapper(linker: &str) -> anyhow::Result<PathBuf> {
    let xtask = std::env::current_exe().context("the xtask executable")?;
    let dir = crate::run::workspace_root()?.join("target/xtask-linker");
    std::fs::create_dir_all(&dir)?;
    let script = dir.join(format!("{linker}-static-pie"));
    let text = format!(
        "#!/bin/sh\nexec '{}' link-static-pie {linker} \"$@\"\n",
        xtask.display()
    );
    if std::fs::read_to_string(&script).ok().as_deref() != Some(text.as_str()) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(&script, text)?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(script)
}

/// Runs `linker` with rustc's arguments for a static executable turned into a static-pie's.
pub fn link(linker: &str, args: &[OsString]) -> anyhow::Result<()> {
    let mut rewritten = Vec::new();
    for arg in args {
        // rustc passes the arguments in a file when the command line is too long.
        if let Some(file) = arg.to_str().and_then(|a| a.strip_prefix('@')) {
            let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
            rewritten.extend(text.lines().filter_map(|l| rewrite(l.into())));
        } else {
            rewritten.extend(rewrite(arg.clone()));
        }
    }
    if !rewritten.iter().any(|a| a == "-static-pie") {
        bail!("rustc did not ask for a static executable: {args:?}");
    }
    let status = Command::new(linker)
        .args(&rewritten)
        .status()
        .with_context(|| format!("starting {linker}"))?;
    if !status.success() {
        bail!("{linker} failed: {status}");
    }
    Ok(())
}

/// One argument of a static link, as a static-pie link has it (`None`: dropped).
fn rewrite(arg: OsString) -> Option<OsString> {
    let Some(text) = arg.to_str() else {
        return Some(arg);
    };
    match text {
        "-static" => return Some("-static-pie".into()),
        "-no-pie" => return None,
        _ => {}
    }
    for (fixed, relocating) in [
        ("crt1.o", "rcrt1.o"),
        ("crtbegin.o", "crtbeginS.o"),
        ("crtend.o", "crtendS.o"),
    ] {
        if let Some(dir) = text.strip_suffix(&format!("/self-contained/{fixed}")) {
            return Some(format!("{dir}/self-contained/{relocating}").into());
        }
    }
    Some(arg)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn the_start_files_and_the_static_flag_become_the_static_pie_ones() {
        let dir = "/r/lib/rustlib/aarch64-unknown-linux-musl/lib/self-contained";
        for (before, after) in [
            (format!("{dir}/crt1.o"), format!("{dir}/rcrt1.o")),
            (format!("{dir}/crtbegin.o"), format!("{dir}/crtbeginS.o")),
            (format!("{dir}/crtend.o"), format!("{dir}/crtendS.o")),
            (format!("{dir}/crti.o"), format!("{dir}/crti.o")),
            ("-static".into(), "-static-pie".into()),
            ("-lc".into(), "-lc".into()),
        ] {
            assert_eq!(rewrite(before.into()), Some(after.into()));
        }
        assert_eq!(rewrite("-no-pie".into()), None);
    }
}
