//! Map a cgroup path to the Kubernetes container that owns it.
//!
//! The flow tracer sees a socket event with a PID (and, on cgroup v2, a cgroup
//! id). To say *who* made the connection it needs the container id and pod
//! UID, and the only kernel-side fact that carries them is the cgroup path that
//! kubelet and the container runtime created. This module turns such a path
//! (one line of `/proc/PID/cgroup`, the whole file, or a path resolved from a
//! cgroup v2 id) into a [`ContainerRef`], without touching the filesystem.
//!
//! Layouts covered (all produced by real kubelet / runtime configurations):
//!
//! * systemd cgroup driver:
//!   `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`
//!   (also `crio-<id>.scope`, `docker-<id>.scope`; Guaranteed pods sit directly
//!   under `kubepods.slice` as `kubepods-pod<uid>.slice`);
//! * cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>` (`crio-<id>` for
//!   CRI-O), `/kubepods/pod<uid>/<id>` for Guaranteed;
//! * containerd's "systemd path with colons" form, seen when the path is
//!   reported relative to the runtime's own unit:
//!   `/system.slice/containerd.service/kubepods-burstable-pod<uid>.slice:cri-containerd:<id>`;
//! * nested prefixes from kind / k3d / k3s-in-docker nodes, e.g.
//!   `/docker/<node-id>/kubelet.slice/kubelet-kubepods.slice/...` or
//!   `/docker/<node-id>/kubepods/besteffort/pod<uid>/<id>`;
//! * cgroup v1 lines (`12:memory:/kubepods/...`, `1:name=systemd:/...`) and the
//!   v2 line (`0::/...`).
//!
//! Plain host processes (`/user.slice/...`, `/system.slice/nginx.service`)
//! yield `None`. A bare Docker container outside Kubernetes
//! (`/docker/<id>`, `/system.slice/docker-<id>.scope`) yields a
//! [`ContainerRef`] with no pod UID.

use std::fmt;

/// Container runtime, as far as it can be told from the cgroup path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// `cri-containerd-<id>.scope` or `...:cri-containerd:<id>`.
    Containerd,
    /// `crio-<id>.scope` or `crio-<id>` (cgroupfs driver).
    CriO,
    /// `docker-<id>.scope` or `/docker/<id>`.
    Docker,
    /// A bare 64-hex segment (cgroupfs driver with containerd or dockershim):
    /// the path does not say which runtime made it.
    Unknown,
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Docker => "docker",
            Runtime::Unknown => "unknown",
        })
    }
}

/// Kubernetes QoS class, from the `kubepods` sub-hierarchy the pod sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Qos {
    /// Pod cgroup directly under `kubepods` / `kubepods.slice`.
    Guaranteed,
    /// Under `burstable` / `kubepods-burstable.slice`.
    Burstable,
    /// Under `besteffort` / `kubepods-besteffort.slice`.
    BestEffort,
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Qos::Guaranteed => "Guaranteed",
            Qos::Burstable => "Burstable",
            Qos::BestEffort => "BestEffort",
        })
    }
}

/// The container (and pod, when the path is under `kubepods`) a cgroup
/// belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContainerRef {
    /// Runtime inferred from the segment naming.
    pub runtime: Runtime,
    /// 64 lowercase hex characters.
    pub container_id: String,
    /// Pod UID in its API form: dashed UUID (`1b2c3d4e-5f60-...`), or the
    /// 32-hex config hash that kubelet uses as the UID of static pods.
    pub pod_uid: Option<String>,
    /// QoS class; `None` when the path has no pod segment.
    pub qos: Option<Qos>,
}

/// Parse one cgroup path, e.g.
/// `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope`.
///
/// A `/proc/PID/cgroup` line (`hierarchy:controllers:path`) is also accepted;
/// the prefix is stripped. Returns `None` if no container id is found.
#[expect(
    clippy::single_match_else,
    reason = "two layouts side by side: with a pod segment, without"
)]
pub fn parse_cgroup_path(path: &str) -> Option<ContainerRef> {
    let path = strip_proc_prefix(path.trim());
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();

    // Locate the pod segment (the last one, in case of nested kubelets).
    let mut pod: Option<(usize, PodSeg)> = None;
    for (i, seg) in segments.iter().enumerate() {
        if let Some(p) = parse_pod_segment(seg) {
            pod = Some((i, p));
        }
    }

    match pod {
        Some((i, p)) => {
            // Colon layout: the container id lives in the pod segment itself.
            if let Some((runtime, id)) = p.colon_container {
                return Some(ContainerRef {
                    runtime,
                    container_id: id,
                    pod_uid: Some(p.uid),
                    qos: Some(p.qos.unwrap_or_else(|| qos_from_ancestors(&segments[..i]))),
                });
            }
            // Otherwise the first container-looking segment below the pod is
            // the pod's container; anything deeper (docker-in-docker, systemd
            // inside the container) belongs to it.
            let (runtime, id) = segments[i + 1..]
                .iter()
                .find_map(|s| parse_container_segment(s))?;
            Some(ContainerRef {
                runtime,
                container_id: id,
                pod_uid: Some(p.uid),
                qos: Some(p.qos.unwrap_or_else(|| qos_from_ancestors(&segments[..i]))),
            })
        }
        None => {
            // No pod: a plain container (docker run, kind node, ...). The
            // innermost container segment is the most specific answer.
            let (i, (mut runtime, id)) = segments
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, s)| parse_container_segment(s).map(|c| (i, c)))?;
            // `/docker/<id>`: Docker's cgroupfs layout for `docker run`.
            if runtime == Runtime::Unknown && i > 0 && segments[i - 1] == "docker" {
                runtime = Runtime::Docker;
            }
            Some(ContainerRef {
                runtime,
                container_id: id,
                pod_uid: None,
                qos: None,
            })
        }
    }
}

/// Parse the whole text of `/proc/PID/cgroup` (cgroup v1 with one line per
/// hierarchy, v2 with a single `0::/...` line, or hybrid).
///
/// Every line is tried; the first result that names a pod wins, otherwise the
/// first container found. Returns `None` for host processes.
pub fn parse_proc_cgroup(contents: &str) -> Option<ContainerRef> {
    let mut fallback = None;
    for line in contents.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(r) = parse_cgroup_path(line) {
            if r.pod_uid.is_some() {
                return Some(r);
            }
            if fallback.is_none() {
                fallback = Some(r);
            }
        }
    }
    fallback
}

/// Strip `hierarchy-id:controllers:` from a `/proc/PID/cgroup` line. Only the
/// first two colons are separators: the path itself may contain colons.
fn strip_proc_prefix(line: &str) -> &str {
    if line.starts_with('/') {
        return line;
    }
    let mut parts = line.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(id), Some(_controllers), Some(path))
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) =>
        {
            path
        }
        _ => line,
    }
}

/// What a pod-level segment tells us.
struct PodSeg {
    uid: String,
    /// QoS named in the segment itself (`kubepods-burstable-pod...`).
    qos: Option<Qos>,
    /// Container from the containerd colon form `...slice:cri-containerd:<id>`.
    colon_container: Option<(Runtime, String)>,
}

/// Recognise `pod<uid>` (cgroupfs) and `[prefix-]kubepods[-qos]-pod<uid>.slice`
/// (systemd), optionally followed by `:<runtime>:<id>`.
fn parse_pod_segment(seg: &str) -> Option<PodSeg> {
    let (slice, colon_container) = match seg.split_once(':') {
        Some((slice, rest)) => {
            let (prefix, id) = rest.split_once(':')?;
            let runtime = match prefix {
                "cri-containerd" => Runtime::Containerd,
                "crio" => Runtime::CriO,
                "docker" => Runtime::Docker,
                _ => return None,
            };
            if !is_container_id(id) {
                return None;
            }
            (slice, Some((runtime, id.to_owned())))
        }
        None => (seg, None),
    };

    if let Some(name) = slice.strip_suffix(".slice") {
        // systemd: e.g. "kubepods-burstable-pod<uid>" or
        // "kubelet-kubepods-pod<uid>" (kind). Units use '-' as the hierarchy
        // separator, so the UID's dashes were escaped to '_'.
        let (head, raw_uid) = name.rsplit_once("-pod")?;
        if !head.split('-').any(|w| w == "kubepods") {
            return None;
        }
        let uid = normalize_uid(raw_uid)?;
        let qos = if head.ends_with("-burstable") {
            Some(Qos::Burstable)
        } else if head.ends_with("-besteffort") {
            Some(Qos::BestEffort)
        } else {
            Some(Qos::Guaranteed)
        };
        return Some(PodSeg {
            uid,
            qos,
            colon_container,
        });
    }

    if colon_container.is_some() {
        return None;
    }
    let uid = normalize_uid(slice.strip_prefix("pod")?)?;
    Some(PodSeg {
        uid,
        qos: None,
        colon_container: None,
    })
}

/// For the cgroupfs layout: the QoS is the parent directory of the pod.
fn qos_from_ancestors(ancestors: &[&str]) -> Qos {
    match ancestors.last().copied() {
        Some("burstable") => Qos::Burstable,
        Some("besteffort") => Qos::BestEffort,
        _ => Qos::Guaranteed,
    }
}

/// Recognise a container-level segment and return runtime and id.
fn parse_container_segment(seg: &str) -> Option<(Runtime, String)> {
    let (runtime, id) = if let Some(rest) = seg.strip_prefix("cri-containerd-") {
        (
            Runtime::Containerd,
            rest.strip_suffix(".scope").unwrap_or(rest),
        )
    } else if let Some(rest) = seg.strip_prefix("crio-") {
        // "crio-conmon-<id>.scope" is the monitor process, not the container:
        // it fails the hex check below.
        (Runtime::CriO, rest.strip_suffix(".scope").unwrap_or(rest))
    } else if let Some(rest) = seg.strip_prefix("docker-") {
        (Runtime::Docker, rest.strip_suffix(".scope")?)
    } else {
        (Runtime::Unknown, seg)
    };
    is_container_id(id).then(|| (runtime, id.to_owned()))
}

/// A container id: exactly 64 lowercase hex characters.
fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Turn a UID as found in a cgroup name into its API form. Accepts a UUID with
/// `_` or `-` separators, or a 32-hex static-pod hash.
fn normalize_uid(raw: &str) -> Option<String> {
    let uid: String = raw
        .chars()
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    let b = uid.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    let is_uuid = b.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && hex(0..8)
        && hex(9..13)
        && hex(14..18)
        && hex(19..23)
        && hex(24..36);
    let is_hash = b.len() == 32 && hex(0..32);
    (is_uuid || is_hash).then_some(uid)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "test assertions")]
mod tests {
    use super::*;

    const ID: &str = "4f9d1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7";
    const ID2: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const UID: &str = "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901";
    const UID_US: &str = "1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901";

    fn expect(path: &str, runtime: Runtime, uid: Option<&str>, qos: Option<Qos>) {
        let r = parse_cgroup_path(path).unwrap_or_else(|| panic!("no match for {path}"));
        assert_eq!(r.runtime, runtime, "{path}");
        assert_eq!(r.container_id, ID, "{path}");
        assert_eq!(r.pod_uid.as_deref(), uid, "{path}");
        assert_eq!(r.qos, qos, "{path}");
    }

    #[test]
    fn systemd_containerd_burstable() {
        expect(
            &format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice/cri-containerd-{ID}.scope"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Burstable),
        );
    }

    #[test]
    fn systemd_crio_besteffort() {
        expect(
            &format!(
                "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_US}.slice/crio-{ID}.scope"
            ),
            Runtime::CriO,
            Some(UID),
            Some(Qos::BestEffort),
        );
    }

    #[test]
    fn systemd_crio_conmon_is_not_the_container() {
        let p = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_US}.slice/crio-conmon-{ID}.scope"
        );
        assert_eq!(parse_cgroup_path(&p), None);
    }

    #[test]
    fn systemd_docker_burstable() {
        expect(
            &format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice/docker-{ID}.scope"
            ),
            Runtime::Docker,
            Some(UID),
            Some(Qos::Burstable),
        );
    }

    #[test]
    fn systemd_guaranteed() {
        expect(
            &format!("/kubepods.slice/kubepods-pod{UID_US}.slice/cri-containerd-{ID}.scope"),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Guaranteed),
        );
    }

    #[test]
    fn cgroupfs_burstable_besteffort_guaranteed() {
        expect(
            &format!("/kubepods/burstable/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::Burstable),
        );
        expect(
            &format!("/kubepods/besteffort/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::BestEffort),
        );
        expect(
            &format!("/kubepods/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::Guaranteed),
        );
    }

    #[test]
    fn cgroupfs_crio() {
        expect(
            &format!("/kubepods/besteffort/pod{UID}/crio-{ID}"),
            Runtime::CriO,
            Some(UID),
            Some(Qos::BestEffort),
        );
    }

    #[test]
    fn static_pod_hash_uid() {
        let hash = "6b0e3b5d4a1c2f9e8d7c6b5a49382716";
        let r = parse_cgroup_path(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{hash}.slice/cri-containerd-{ID}.scope"
        ))
        .unwrap();
        assert_eq!(r.pod_uid.as_deref(), Some(hash));
    }

    #[test]
    fn v1_line_prefixes() {
        expect(
            &format!("12:memory:/kubepods/burstable/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::Burstable),
        );
        expect(
            &format!(
                "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_US}.slice/docker-{ID}.scope"
            ),
            Runtime::Docker,
            Some(UID),
            Some(Qos::BestEffort),
        );
        expect(
            &format!("4:cpu,cpuacct:/kubepods/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::Guaranteed),
        );
    }

    #[test]
    fn v2_line_prefix() {
        expect(
            &format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice/cri-containerd-{ID}.scope"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Burstable),
        );
    }

    #[test]
    fn containerd_colon_layout() {
        expect(
            &format!(
                "/system.slice/containerd.service/kubepods-burstable-pod{UID_US}.slice:cri-containerd:{ID}"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Burstable),
        );
        expect(
            &format!(
                "0::/system.slice/containerd.service/kubepods-pod{UID_US}.slice:cri-containerd:{ID}"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Guaranteed),
        );
        expect(
            &format!(
                "1:name=systemd:/system.slice/containerd.service/kubepods-besteffort-pod{UID_US}.slice:cri-containerd:{ID}"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::BestEffort),
        );
    }

    #[test]
    fn kind_node_prefix() {
        // kind: kubelet runs with --cgroup-root=/kubelet, node is a docker container.
        expect(
            &format!(
                "/docker/{ID2}/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UID_US}.slice/cri-containerd-{ID}.scope"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::BestEffort),
        );
        // Same, viewed from inside the node's cgroup namespace (v2).
        expect(
            &format!(
                "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod{UID_US}.slice/cri-containerd-{ID}.scope"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Guaranteed),
        );
    }

    #[test]
    fn k3s_in_docker_prefix() {
        expect(
            &format!("/docker/{ID2}/kubepods/besteffort/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::BestEffort),
        );
        // k3s on a systemd host, cgroupfs-style path under its own unit.
        expect(
            &format!("0::/k3s/kubepods/burstable/pod{UID}/{ID}"),
            Runtime::Unknown,
            Some(UID),
            Some(Qos::Burstable),
        );
    }

    #[test]
    fn sub_cgroup_inside_container() {
        // A process in a nested cgroup under the container (e.g. systemd or
        // docker-in-docker in the pod) still maps to the pod's container.
        expect(
            &format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice/cri-containerd-{ID}.scope/docker/{ID2}"
            ),
            Runtime::Containerd,
            Some(UID),
            Some(Qos::Burstable),
        );
    }

    #[test]
    fn plain_docker_container_has_no_pod() {
        for p in [
            format!("/docker/{ID}"),
            format!("0::/system.slice/docker-{ID}.scope"),
        ] {
            let r = parse_cgroup_path(&p).unwrap();
            assert_eq!(r.runtime, Runtime::Docker);
            assert_eq!(r.container_id, ID);
            assert_eq!(r.pod_uid, None);
            assert_eq!(r.qos, None);
        }
    }

    #[test]
    fn host_processes_are_none() {
        for p in [
            "/user.slice/user-0.slice/session-1.scope",
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/foo.scope",
            "/system.slice/nginx.service",
            "/system.slice/containerd.service",
            "/system.slice/kubelet.service",
            "/kubepods.slice",
            "/kubepods.slice/kubepods-burstable.slice",
            &format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice"
            ),
            "0::/",
            "/",
            "",
            "garbage",
            "/kubepods/burstable/podnot-a-uid/abc",
        ] {
            assert_eq!(parse_cgroup_path(p), None, "{p}");
        }
    }

    #[test]
    fn proc_cgroup_v1_file() {
        let text = format!(
            "12:hugetlb:/kubepods/burstable/pod{UID}/{ID}\n\
             11:memory:/kubepods/burstable/pod{UID}/{ID}\n\
             10:cpu,cpuacct:/kubepods/burstable/pod{UID}/{ID}\n\
             2:pids:/kubepods/burstable/pod{UID}/{ID}\n\
             1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n\
             0::/\n"
        );
        let r = parse_proc_cgroup(&text).unwrap();
        assert_eq!(r.container_id, ID);
        assert_eq!(r.pod_uid.as_deref(), Some(UID));
        assert_eq!(r.qos, Some(Qos::Burstable));
    }

    #[test]
    fn proc_cgroup_v2_file() {
        let text = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_US}.slice/crio-{ID}.scope\n"
        );
        let r = parse_proc_cgroup(&text).unwrap();
        assert_eq!(r.runtime, Runtime::CriO);
        assert_eq!(r.pod_uid.as_deref(), Some(UID));
    }

    #[test]
    fn proc_cgroup_prefers_pod_line() {
        // Hybrid/odd v1 where one hierarchy shows only a docker parent.
        let text = format!(
            "3:cpuset:/docker/{ID2}\n1:name=systemd:/docker/{ID2}/kubepods/pod{UID}/{ID}\n"
        );
        let r = parse_proc_cgroup(&text).unwrap();
        assert_eq!(r.container_id, ID);
        assert_eq!(r.pod_uid.as_deref(), Some(UID));
    }

    #[test]
    fn proc_cgroup_host() {
        let v1 = "12:memory:/user.slice/user-0.slice/session-1.scope\n1:name=systemd:/user.slice/user-0.slice/session-1.scope\n0::/user.slice/user-0.slice/session-1.scope\n";
        assert_eq!(parse_proc_cgroup(v1), None);
        assert_eq!(parse_proc_cgroup("0::/system.slice/nginx.service\n"), None);
        assert_eq!(parse_proc_cgroup(""), None);
    }
}
