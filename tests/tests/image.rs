//! The OCI image `cargo xtask image` builds (`TRACER_IMAGE`), checked offline: one image index with
//! an amd64 and an arm64 image, each a valid layout with the entrypoint the DaemonSet and `kubectl
//! debug` rely on and the binary inside byte-identical to the static binary of its architecture
//! that the other tests and the kernel matrix run (`TRACER_BIN`, `TRACER_BIN_ARM64`). Then the
//! host's binary,
//! unpacked from the image's rootfs, runs the way the DaemonSet in `deploy/` runs it: its arguments,
//! its capabilities and no others, the host's network and PID namespaces, the node's cgroup v2 root,
//! `/sys` and `/run/netns` visible. (No container can be started on this machine: crun refuses its
//! hybrid cgroup layout.)
use std::{
    net::{SocketAddr, SocketAddrV4},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;
use tests::{
    testbed::{TwoHosts, connect_from, nft_drop_syn_to},
    tracer::{records_of_run, tracer_bin},
};

fn image_archive() -> PathBuf {
    PathBuf::from(
        std::env::var("TRACER_IMAGE")
            .expect("TRACER_IMAGE is not set: run the integration tests with `cargo xtask test`"),
    )
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The static binary of each architecture the image is for, by OCI architecture name.
fn binary_of(arch: &str) -> PathBuf {
    let var = match arch {
        "amd64" => "TRACER_BIN",
        "arm64" => "TRACER_BIN_ARM64",
        other => panic!("the image is for no architecture {other}"),
    };
    PathBuf::from(std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the integration tests with `cargo xtask test`")
    }))
}

/// The host's OCI architecture name.
fn host_arch() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    }
}

/// One architecture's image unpacked by umoci (which checks the layout, manifest and layer digests
/// as it goes).
struct Unpacked {
    dir: PathBuf,
}

impl Unpacked {
    fn new() -> Unpacked {
        Unpacked::of(host_arch())
    }

    fn of(arch: &str) -> Unpacked {
        let dir = std::env::temp_dir().join(format!("tb-image-{arch}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("work dir");
        let layout = dir.join("oci");
        run(Command::new("skopeo").args([
            "--override-arch",
            arch,
            "--override-os",
            "linux",
            "copy",
            "--quiet",
            &format!("oci-archive:{}", image_archive().display()),
            &format!("oci:{}:tracer", layout.display()),
        ]));
        run(Command::new("umoci")
            .args(["unpack", "--image", &format!("{}:tracer", layout.display())])
            .arg(dir.join("bundle")));
        Unpacked { dir }
    }

    fn rootfs(&self) -> PathBuf {
        self.dir.join("bundle/rootfs")
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The DaemonSet's container, from `deploy/daemonset.yaml`.
fn daemonset_container() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/daemonset.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/daemonset.yaml");
    let ds: Value = serde_yaml_ng::from_str(&text).expect("daemonset.yaml is YAML");
    ds["spec"]["template"]["spec"]["containers"][0].clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn the_image_is_one_index_of_an_amd64_and_an_arm64_image() {
    let index: Value = serde_json::from_str(&run(Command::new("skopeo").args([
        "inspect",
        "--raw",
        &format!("oci-archive:{}", image_archive().display()),
    ])))
    .expect("image index JSON");
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{index}"
    );
    let mut platforms: Vec<String> = index["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .map(|m| {
            assert_eq!(
                m["mediaType"], "application/vnd.oci.image.manifest.v1+json",
                "{m}"
            );
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or("?"),
                m["platform"]["architecture"].as_str().unwrap_or("?")
            )
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{index}");
}

#[test]
fn each_platforms_image_has_the_entrypoint_the_deployments_use_and_its_dist_binary() {
    // The DaemonSet gives arguments only: the image's entrypoint runs them.
    let container = daemonset_container();
    assert!(container.get("command").is_none(), "{container}");
    assert_eq!(strings(&container["args"])[0], "trace", "{container}");
    for arch in ["amd64", "arm64"] {
        let config: Value = serde_json::from_str(&run(Command::new("skopeo").args([
            "--override-arch",
            arch,
            "--override-os",
            "linux",
            "inspect",
            "--config",
            &format!("oci-archive:{}", image_archive().display()),
        ])))
        .expect("image config JSON");
        assert_eq!(config["os"], "linux", "{config}");
        assert_eq!(config["architecture"], arch, "{config}");
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/usr/local/bin/tracer"]),
            "{arch}: {config}"
        );
        assert_eq!(
            config["config"]["Cmd"],
            serde_json::json!(["trace"]),
            "{arch}: {config}"
        );
        let env = strings(&config["config"]["Env"]);
        assert!(
            env.iter()
                .any(|e| e.starts_with("PATH=") && e.contains("/usr/local/bin")),
            "{arch}: `kubectl debug ... -- tracer tui` finds the binary by name: {env:?}"
        );

        let unpacked = Unpacked::of(arch);
        let inside = std::fs::read(unpacked.rootfs().join("usr/local/bin/tracer")).expect("binary");
        let dist = binary_of(arch);
        let tested = std::fs::read(&dist).expect("the dist binary");
        assert!(
            inside == tested,
            "{arch}: the binary in the image is {} byte for byte, the static binary the tests \
             and the kernel matrix run",
            dist.display()
        );
        let files: Vec<_> = walk(&unpacked.rootfs());
        assert_eq!(
            files,
            vec!["tmp".to_string(), "usr/local/bin/tracer".to_string()],
            "{arch}: FROM scratch: the binary and /tmp, nothing else"
        );
    }
}

fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .expect("read dir")
            .flatten()
            .collect();
        entries.sort_by_key(std::fs::DirEntry::path);
        if entries.is_empty() && dir != root {
            out.push(
                dir.strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string(),
            );
        }
        for e in entries {
            if e.file_type().expect("file type").is_dir() {
                stack.push(e.path());
            } else {
                out.push(
                    e.path()
                        .strip_prefix(root)
                        .expect("under root")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    out.sort();
    out
}

/// `--bounding-set` for setpriv: exactly `caps` (DaemonSet names, `NET_ADMIN`). Root's capabilities
/// after exec are its bounding set.
fn setpriv_caps(caps: &[String]) -> String {
    let list: Vec<String> = caps
        .iter()
        .map(|c| format!("+{}", c.to_lowercase()))
        .collect();
    format!("-all,{}", list.join(","))
}

/// The node's cgroup v2 root here (hybrid: `/sys/fs/cgroup/unified`).
fn host_cgroup2_root() -> String {
    std::fs::read_to_string("/proc/mounts")
        .expect("/proc/mounts")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| f[1].to_string())
        })
        .min_by_key(String::len)
        .expect("a cgroup2 mount")
}

#[test]
fn the_unpacked_binary_runs_as_the_daemonset_runs_it_and_names_refused_and_abandoned() {
    let container = daemonset_container();
    let caps = strings(&container["securityContext"]["capabilities"]["add"]);
    let args: Vec<String> = strings(&container["args"])
        .into_iter()
        // No API server here: the rest of the arguments as the manifest has them.
        .filter(|a| a != "--in-cluster")
        // The metrics endpoint as the manifest asks for it, on a loopback port the kernel picks
        // rather than a fixed port on every address of this machine.
        .map(|a| {
            if a.starts_with("--metrics=") {
                "--metrics=127.0.0.1:0".to_string()
            } else {
                a
            }
        })
        .collect();
    assert!(
        args.contains(&"--cgroup-root=/host/sys/fs/cgroup".to_string()),
        "{args:?}"
    );
    let unpacked = Unpacked::new();
    let rootfs = unpacked.rootfs();
    let bed = TwoHosts::new("image");
    bed.server.nft(&nft_drop_syn_to(81));

    // A container's view: the image's files; /proc of the host PID namespace; the host's /sys
    // (BTF); the node's cgroup v2 root at /host/sys/fs/cgroup; /run/netns. Entering the rootfs
    // needs CAP_SYS_CHROOT, which the runtime has and the tracer then keeps here: the one
    // capability beyond the manifest's.
    let mounts = format!(
        "set -e; R='{r}'; mkdir -p $R/proc $R/sys $R/run/netns $R/host/sys/fs/cgroup; \
         mount -t proc proc $R/proc; mount --rbind /sys $R/sys; \
         mount --rbind /run/netns $R/run/netns; mount --bind '{cg}' $R/host/sys/fs/cgroup; \
         exec setpriv --bounding-set={bound} chroot $R /usr/local/bin/tracer {args} --netns {ns} --duration 7",
        r = rootfs.display(),
        cg = host_cgroup2_root(),
        bound = setpriv_caps(&[caps.clone(), vec!["SYS_CHROOT".into()]].concat()),
        args = args.join(" "),
        ns = bed.client.name(),
    );
    let child = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &mounts])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    std::thread::sleep(Duration::from_secs(3));
    let refused = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 9));
    let black_hole = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 81));
    let err = connect_from(&bed.client, "tc-img-rst", refused, Duration::from_secs(2))
        .expect_err("nothing listens");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    connect_from(
        &bed.client,
        "tc-img-gone",
        black_hole,
        Duration::from_millis(1500),
    )
    .expect_err("the SYN is dropped");
    let out = child.wait_with_output().expect("tracer output");
    // JSON lines, as the DaemonSet's --format=json.
    let (records, stderr) = records_of_run(&out);
    let verdict_of = |comm: &str| {
        records
            .iter()
            .find(|v| v["kind"] == "connect" && v["comm"] == comm && v["final"] == true)
            .map(|v| v["verdict"].clone())
    };
    assert_eq!(
        verdict_of("tc-img-rst"),
        Some("refused".into()),
        "{records:?}\n{stderr}"
    );
    assert_eq!(
        verdict_of("tc-img-gone"),
        Some("abandoned".into()),
        "{records:?}\n{stderr}"
    );
    let last = records
        .iter()
        .rev()
        .find(|v| v["kind"] == "stats")
        .expect("final stats");
    assert_eq!(
        last["kernel"]["capabilities"]["cgroup_v2"]["state"], "full",
        "the node's root through --cgroup-root: {last}"
    );
}

#[test]
fn without_any_one_of_the_core_capabilities_it_stops_with_a_sentence_naming_it() {
    let caps = strings(&daemonset_container()["securityContext"]["capabilities"]["add"]);
    for core in ["BPF", "PERFMON", "NET_ADMIN", "SYS_ADMIN"] {
        assert!(
            caps.iter().any(|c| c == core),
            "{core} is in the DaemonSet: {caps:?}"
        );
        let fewer: Vec<String> = caps.iter().filter(|c| *c != core).cloned().collect();
        let set = setpriv_caps(&fewer);
        let out = Command::new("setpriv")
            .arg(format!("--bounding-set={set}"))
            .arg(tracer_bin())
            .args(["trace", "--duration", "1"])
            .output()
            .expect("setpriv");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "without {core}: {stderr}");
        assert!(
            stderr.contains(&format!("CAP_{core}")),
            "without {core}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
