//! Bad input and hostile environments give one clear sentence and a non-zero exit, never a panic or a
//! verifier dump; the programs detach on SIGINT and SIGTERM; losses are counted and shown.
use std::{
    net::{SocketAddr, SocketAddrV4},
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::{
    kernel_facts,
    testbed::{TwoHosts, connect_from, nft_drop_syn_to},
    tracer::{Tracer, run_to_exit},
};

fn assert_clean_failure(code: Option<i32>, stderr: &str, expected: &str) {
    assert_eq!(code, Some(1), "exit code; stderr:\n{stderr}");
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in stderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "no panic:\n{stderr}");
    assert!(!stderr.contains("verifier"), "no verifier dump:\n{stderr}");
    assert!(
        stderr.lines().count() <= 3,
        "one clear sentence, not a dump:\n{stderr}"
    );
}

#[test]
fn without_capabilities_it_says_what_is_missing() {
    // Same binary, as an unprivileged user with no capabilities.
    let wrapper = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ];
    let (code, stderr) = run_to_exit(&["trace", "--duration", "1"], &[], &wrapper);
    assert_clean_failure(
        code,
        &stderr,
        "missing capabilities CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN, CAP_SYS_ADMIN",
    );
    assert!(
        stderr.contains("Run it as root"),
        "says what to do:\n{stderr}"
    );
}

#[test]
fn without_kernel_btf_it_says_so() {
    let (code, stderr) = run_to_exit(
        &["trace", "--duration", "1"],
        &[("TRACER_BTF_PATH", "/nonexistent/vmlinux")],
        &[],
    );
    assert_clean_failure(code, &stderr, "no kernel BTF at /nonexistent/vmlinux");
}

#[test]
fn a_kernel_without_one_of_the_tracepoints_is_named() {
    // The running kernel's BTF with one tracepoint's type renamed: as a kernel without it looks.
    let mut btf = std::fs::read("/sys/kernel/btf/vmlinux").expect("kernel BTF");
    let name = b"btf_trace_tcp_destroy_sock\0";
    let at = btf
        .windows(name.len())
        .position(|w| w == name)
        .expect("the tracepoint's BTF type");
    btf[at + name.len() - 2] = b'X';
    let path = std::env::temp_dir().join(format!("tracer-test-btf-{}", std::process::id()));
    std::fs::write(&path, &btf).expect("writing the BTF copy");
    let (code, stderr) = run_to_exit(
        &["trace", "--duration", "1"],
        &[("TRACER_BTF_PATH", path.to_str().expect("utf-8 path"))],
        &[],
    );
    let _ = std::fs::remove_file(&path);
    assert_clean_failure(
        code,
        &stderr,
        "this kernel has no tracepoint tcp_destroy_sock",
    );
}

#[test]
fn kernel_btf_that_does_not_parse_is_named() {
    let path = std::env::temp_dir().join(format!("tracer-test-bad-btf-{}", std::process::id()));
    std::fs::write(&path, b"this is not BTF").expect("writing the file");
    let (code, stderr) = run_to_exit(
        &["trace", "--duration", "1"],
        &[("TRACER_BTF_PATH", path.to_str().expect("utf-8 path"))],
        &[],
    );
    let _ = std::fs::remove_file(&path);
    assert_clean_failure(code, &stderr, "not BTF data");
}

#[test]
fn an_unknown_namespace_is_named() {
    let (code, stderr) = run_to_exit(&["trace", "--netns", "no-such-ns-here"], &[], &[]);
    assert_clean_failure(code, &stderr, "unknown network namespace 'no-such-ns-here'");
}

#[test]
fn a_bad_cidr_is_a_usage_error() {
    let (code, stderr) = run_to_exit(&["trace", "--dst", "10.0.0.0/33"], &[], &[]);
    assert_eq!(code, Some(2), "clap usage error: {stderr}");
    assert!(stderr.contains("prefix length 33 is too long"), "{stderr}");
}

/// Ids of the BPF programs a process holds, from its fd table.
fn prog_ids_of(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .expect("fdinfo")
        .flatten()
    {
        let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
        if let Some(id) = info.lines().find_map(|l| l.strip_prefix("prog_id:")) {
            ids.push(id.trim().parse().expect("prog id"));
        }
    }
    // Program fds and link fds both name the program.
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// True while the kernel still has a BPF program with this id.
fn prog_exists(id: u32) -> bool {
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    let mut attr = [0u32; 32];
    attr[0] = id;
    // SAFETY: bpf(2) with a zeroed attr of sufficient size; only reads `attr`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_GET_FD_BY_ID,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd >= 0 {
        // SAFETY: closing the fd we just got.
        unsafe { libc::close(fd as libc::c_int) };
        return true;
    }
    false
}

fn programs_detach_on(signal: libc::c_int) {
    let tracer = Tracer::start(&[]);
    let ids = prog_ids_of(tracer.pid());
    // 8 TCP programs (2 connect hooks, 6 on tracepoints) and the 2 DNS `cgroup_skb` programs.
    assert_eq!(ids.len(), 10, "all programs loaded: {ids:?}");
    assert!(ids.iter().all(|&id| prog_exists(id)));
    let (ok, records, stderr) = tracer.stop_with(signal);
    assert!(ok, "clean exit on signal {signal}: {stderr}");
    assert!(stderr.contains("programs detached"), "{stderr}");
    let last = records.last().expect("a final record");
    assert_eq!(
        (last["kind"].as_str(), last["final"].as_bool()),
        (Some("stats"), Some(true)),
        "{last}"
    );
    // The kernel frees a program soon after its last reference goes: asked until then.
    let deadline = Instant::now() + Duration::from_secs(5);
    let left = loop {
        let left: Vec<u32> = ids.iter().copied().filter(|&id| prog_exists(id)).collect();
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        left.is_empty(),
        "programs still loaded 5 s after exit: {left:?}"
    );
}

#[test]
fn programs_detach_on_sigterm() {
    programs_detach_on(libc::SIGTERM);
}

#[test]
fn programs_detach_on_ctrl_c() {
    programs_detach_on(libc::SIGINT);
}

/// Five black-holed connects at once from `bed`'s client.
fn five_black_holed_connects(bed: &TwoHosts) {
    let clients: Vec<_> = (0..5)
        .map(|i| {
            let dst = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 9000));
            bed.client.spawn_in(&format!("tc-full-{i}"), move || {
                std::net::TcpStream::connect_timeout(&dst, Duration::from_millis(1500)).map(drop)
            })
        })
        .collect();
    for c in clients {
        assert!(c.join().expect("client").is_err(), "dropped SYNs time out");
    }
}

#[test]
fn attempts_beyond_the_kernel_table_are_counted_as_dropped() {
    let bed = TwoHosts::new("full");
    bed.server.nft(&nft_drop_syn_to(9000));
    let mut tracer = Tracer::start(&["--netns", bed.client.name(), "--max-attempts", "2"]);
    // Two fit in the table, three do not.
    five_black_holed_connects(&bed);
    let stats = tracer.expect("stats with the drops", Duration::from_secs(5), |v| {
        v["kind"] == "stats" && v["dropped"]["attempts_map_full"].as_u64() >= Some(3)
    });
    assert_eq!(stats["dropped"]["attempts_map_full"], 3, "{stats}");
    let (_, records, stderr) = tracer.stop();
    assert!(
        stderr.contains("events dropped so far: attempts map full "),
        "drops are said on stderr too, in words (issue 27: not a Debug struct):\n{stderr}"
    );
    let followed = records
        .iter()
        .filter(|v| v["kind"] == "connect" && v["final"] == true)
        .count();
    assert_eq!(followed, 2, "the two attempts that fit are still reported");
}

/// Without a namespace filter the state-change program also follows sockets the `connect()` hook did
/// not see (kernel sockets); an attempt the hook could not store must not be counted a second time
/// there.
#[test]
fn an_attempt_the_full_table_missed_is_counted_once_without_a_namespace_filter() {
    let bed = TwoHosts::new("full1");
    bed.server.nft(&nft_drop_syn_to(9000));
    let mut tracer = Tracer::start(&["--max-attempts", "2"]);
    five_black_holed_connects(&bed);
    let stats = tracer.expect("stats with the drops", Duration::from_secs(5), |v| {
        v["kind"] == "stats" && v["dropped"]["attempts_map_full"].as_u64() >= Some(3)
    });
    tracer.stop();
    // At least the three of ours that did not fit; more only if other connects on the machine took
    // table slots meanwhile (each of those is one more, never two).
    let full = stats["dropped"]["attempts_map_full"].as_u64().unwrap_or(0);
    assert!((3..=5).contains(&full), "counted once each: {stats}");
}

/// The benchmark's "its hooks, empty" peer (`--hooks-only`) must be what it says: every program
/// attached, none doing any work. A refused connect, which a normal run reports, leaves no trace.
#[test]
fn hooks_only_attaches_every_program_and_does_nothing() {
    let bed = TwoHosts::new("hooks");
    let mut tracer = Tracer::start(&["--netns", bed.client.name(), "--hooks-only"]);
    assert_eq!(prog_ids_of(tracer.pid()).len(), 10, "all programs attached");
    let nobody = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 9001));
    let refused = connect_from(&bed.client, "tc-hooks", nobody, Duration::from_secs(2));
    assert_eq!(
        refused.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused),
        "nothing listens on the server's port 9001"
    );
    tracer.collect_for(Duration::from_millis(300));
    let (ok, records, stderr) = tracer.stop();
    assert!(ok, "{stderr}");
    let last = records.last().expect("a final stats record");
    assert_eq!(last["kind"], "stats", "{last}");
    assert_eq!(last["attempts"], 0, "no attempt opened: {last}");
    assert!(
        records.iter().all(|v| v["kind"] != "connect"),
        "no connect record: {records:?}"
    );
}

/// Which state each capability must be in on this kernel, from facts read without the tracer.
fn expected_capabilities() -> Vec<(&'static str, &'static str)> {
    let version = kernel_facts::version();
    let error_report = kernel_facts::has_tracepoint("inet_sk_error_report");
    let full_if = |yes: bool| if yes { "full" } else { "degraded" };
    let cgroup2 = std::fs::read_to_string("/proc/mounts")
        .expect("/proc/mounts")
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("cgroup2"));
    vec![
        ("cgroup_v2", full_if(cgroup2)),
        ("connect_errors", full_if(error_report)),
        (
            "dialled_before_socket_lb",
            full_if(kernel_facts::has_preorder()),
        ),
        ("dns", "full"),
        ("dns_refused", full_if(error_report)),
        // Only the syscall tracepoints see a reply no later than the application reads it.
        (
            "dns_unread_replies",
            full_if(expected_tiers().0 != "tracepoint"),
        ),
        ("skipped_runs_counted", full_if(version >= (5, 12))),
    ]
}

/// The hook tier the tracer must pick on this kernel, (DNS, TCP), from what the kernel allows as
/// read here: the cheapest first, or the one the environment forces.
fn expected_tiers() -> (String, String) {
    let fentry = kernel_facts::loads_fentry();
    let kprobes = kernel_facts::has_kprobes();
    let error_report = kernel_facts::has_tracepoint("inet_sk_error_report");
    let dns = if fentry {
        "fentry"
    } else if kernel_facts::has_tracepoint("sock_send_length") {
        "tracepoint"
    } else if kprobes {
        "kprobe"
    } else {
        "cgroup-skb"
    };
    let tcp = if fentry && error_report {
        "fentry"
    } else if kprobes && error_report {
        "kprobe"
    } else {
        "tracepoint"
    };
    let forced = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|t| t != "auto")
            .unwrap_or_else(|| default.to_string())
    };
    (
        forced("TRACER_DNS_HOOKS", dns),
        forced("TRACER_TCP_HOOKS", tcp),
    )
}

fn assert_kernel_object(stats: &Value, expected: &[(&str, &str)], stderr: &str) {
    let kernel = &stats["kernel"];
    assert_eq!(
        kernel["release"],
        kernel_facts::release().as_str(),
        "{stats}"
    );
    let capabilities = kernel["capabilities"].as_object().expect("capabilities");
    assert_eq!(capabilities.len(), expected.len(), "{stats}");
    for (name, state) in expected {
        let c = &capabilities[*name];
        let got = c["state"].as_str().expect("a state");
        assert_eq!(got, *state, "{name}: {stats}");
        if got == "full" {
            assert!(c.get("reason").is_none(), "{name}: {stats}");
        } else {
            let reason = c["reason"].as_str().expect("a reason");
            assert!(
                reason.len() > 20,
                "{name}: a reason that says something: {stats}"
            );
            if !reason.starts_with("--no-dns") && !reason.starts_with("DNS is off") {
                assert!(
                    stderr.contains(&format!("{name}: {reason}")),
                    "said once on stderr: {name}\n{stderr}"
                );
            }
        }
    }
}

#[test]
fn the_kernel_object_lists_every_capability_in_the_first_and_final_stats() {
    let expected = expected_capabilities();
    let mut tracer = Tracer::start(&[]);
    let first = tracer.expect("the first stats record", Duration::from_secs(5), |v| {
        v["kind"] == "stats"
    });
    tracer.expect("a second stats record", Duration::from_secs(5), |v| {
        v["kind"] == "stats" && v["final"] == false && v["kernel"].is_null()
    });
    let (_, seen, stderr) = tracer.stop();
    assert_kernel_object(&first, &expected, &stderr);
    let (dns, tcp) = expected_tiers();
    let hooks = &first["kernel"]["hooks"];
    assert_eq!(hooks["dns"]["tier"], dns.as_str(), "{first}");
    assert_eq!(hooks["tcp"]["tier"], tcp.as_str(), "{first}");
    assert!(
        stderr.contains(&format!("tracer: hooks: tcp={tcp} dns={dns}")),
        "said once on stderr:\n{stderr}"
    );
    let last = seen
        .iter()
        .rev()
        .find(|v| v["kind"] == "stats")
        .expect("final stats");
    assert_eq!(last["final"], true, "{last}");
    assert_kernel_object(last, &expected, &stderr);
    let degraded = first["kernel"]["capabilities"]
        .as_object()
        .expect("capabilities")
        .values()
        .filter(|c| c["state"] == "degraded")
        .count();
    assert_eq!(
        stderr.matches("tracer: degraded on kernel").count(),
        degraded,
        "each degradation said once:\n{stderr}"
    );

    // --no-dns is the user's choice: DNS off with that reason, nothing said as a degradation.
    let tracer = Tracer::start(&["--no-dns"]);
    let (_, seen, _) = tracer.stop();
    let last = seen
        .iter()
        .rev()
        .find(|v| v["kind"] == "stats")
        .expect("final stats");
    let capabilities = &last["kernel"]["capabilities"];
    assert_eq!(capabilities["dns"]["state"], "off", "{last}");
    assert_eq!(capabilities["dns"]["reason"], "--no-dns", "{last}");
    assert_eq!(capabilities["dns_refused"]["state"], "off", "{last}");
}

/// A node with cgroup v1 only: no cgroup v2 mounted. The tracer mounts one for its hooks, says so,
/// still follows connects, and removes its mount at exit.
#[test]
fn without_a_cgroup2_mount_it_mounts_its_own_and_still_traces() {
    let bed = TwoHosts::new("nocg2");
    let dst = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 9));
    // A private mount namespace without any cgroup2 mount, where the tracer runs.
    let script = format!(
        "grep ' cgroup2 ' /proc/self/mounts | cut -d' ' -f2 | xargs -r -n1 umount -l && \
         exec '{}' trace --format json --netns {}",
        tests::tracer::tracer_bin(),
        bed.client.name()
    );
    let mut unshare = std::process::Command::new("unshare");
    unshare.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
    let mut tracer = Tracer::spawn(unshare);
    let err = connect_from(&bed.client, "tc-nocg2", dst, Duration::from_secs(2))
        .expect_err("nothing listens");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    tracer.expect("the refused connect", Duration::from_secs(5), |v| {
        v["kind"] == "connect"
            && v["verdict"] == "refused"
            && v["dst"] == dst.to_string().as_str()
            && v["comm"] == "tc-nocg2"
    });
    let (ok, records, stderr) = tracer.stop();
    assert!(ok, "a clean exit on SIGTERM: {stderr}");
    let last = records
        .iter()
        .rev()
        .find(|v| v["kind"] == "stats")
        .expect("final stats");
    let cgroup = &last["kernel"]["capabilities"]["cgroup_v2"];
    assert_eq!(cgroup["state"], "degraded", "{last}");
    let reason = cgroup["reason"].as_str().expect("reason");
    assert!(
        reason.contains("mounted one at /run/tracer-cgroup2-"),
        "{reason}"
    );
    assert!(
        stderr.contains("cgroup_v2: no cgroup v2 mounted"),
        "{stderr}"
    );
    // Its own folder, named in the reason: another tracer on the machine may have one of its own.
    let folder = reason
        .split_whitespace()
        .find(|word| word.starts_with("/run/tracer-cgroup2-"))
        .map(|word| word.trim_end_matches([',', ':', ';', ')']))
        .expect("the reason names the folder");
    assert!(
        folder["/run/tracer-cgroup2-".len()..]
            .parse::<u32>()
            .is_ok(),
        "the folder is named after the tracer's pid: {folder}"
    );
    assert!(
        !std::path::Path::new(folder).exists(),
        "the tracer's cgroup2 folder {folder} is removed at exit"
    );
}

#[test]
fn a_cgroup_root_that_is_not_cgroup2_is_one_sentence() {
    let (code, stderr) = run_to_exit(
        &["trace", "--duration", "1", "--cgroup-root", "/proc"],
        &[],
        &[],
    );
    assert_clean_failure(
        code,
        &stderr,
        "--cgroup-root /proc: not a cgroup v2 filesystem (mount -t cgroup2)",
    );
}

/// A typo in another option, or a missing privilege, must not wipe yesterday's recording.
#[test]
fn an_older_recording_survives_a_start_that_fails() {
    let dir = std::env::temp_dir().join(format!("tb-output-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let recording = dir.join("yesterday.jsonl");
    std::fs::write(&recording, "{\"a\":1}\n").expect("write");
    let path = recording.to_str().expect("utf-8");
    let (code, stderr) = run_to_exit(
        &[
            "trace",
            "--output",
            path,
            "--cluster-state",
            "/nonexistent/snapshot.json",
        ],
        &[],
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let (code, stderr) = run_to_exit(
        &["trace", "--output", path, "--duration", "1"],
        &[],
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--bounding-set=-all",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&recording).expect("read"),
        "{\"a\":1}\n",
        "untouched"
    );
    let (code, stderr) = run_to_exit(&["trace", "--output", "/", "--duration", "1"], &[], &[]);
    assert_clean_failure(code, &stderr, "output file / is a directory");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn a_namespace_that_is_not_one_or_not_readable_is_said_so() {
    let (code, stderr) = run_to_exit(
        &["trace", "--duration", "1", "--netns", "/proc/self/status"],
        &[],
        &[],
    );
    assert_clean_failure(
        code,
        &stderr,
        "/proc/self/status is not a network namespace",
    );
}
