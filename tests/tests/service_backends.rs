//! Which backend behind a Service swallowed the SYN: kube-proxy style DNAT in a "node" namespace with a
//! bridge and pod namespaces; the tracer names Service and backend from the node's conntrack table.
use std::{
    net::{SocketAddr, SocketAddrV4},
    time::Duration,
};

use serde_json::Value;
use tests::{
    testbed::{Listener, ReturnPathBed, ServiceBed, nft_drop_syn_to},
    tracer::Tracer,
};

const SVC_PORT: u16 = 80;
const POD_PORT: u16 = 8080;

fn tracer_for(bed: &ServiceBed, extra: &[&str]) -> Tracer {
    let mut args = vec![
        "--netns",
        bed.client.name(),
        "--conntrack-netns",
        bed.node.name(),
    ];
    args.extend_from_slice(extra);
    Tracer::start(&args)
}

/// `n` connects to the Service from the client, 10 at a time, each giving up after `timeout`.
/// Returns how many were answered.
fn connect_many(bed: &ServiceBed, n: usize, timeout: Duration) -> usize {
    let vip = SocketAddr::from(SocketAddrV4::new(bed.vip, SVC_PORT));
    let mut answered = 0;
    for batch in 0..n.div_ceil(10) {
        let handles: Vec<_> = (0..10.min(n - batch * 10))
            .map(|i| {
                bed.client.spawn_in(&format!("tc-svc-{i}"), move || {
                    std::net::TcpStream::connect_timeout(&vip, timeout).is_ok()
                })
            })
            .collect();
        for h in handles {
            if h.join().expect("client thread") {
                answered += 1;
            }
        }
    }
    answered
}

/// `n` connects to the Service from the client, one after the other, `gap` apart: an SRE retrying
/// by hand, or a client retrying. Returns how many were answered.
fn connect_one_by_one(bed: &ServiceBed, n: usize, gap: Duration) -> usize {
    (0..n)
        .map(|_| {
            let answered = connect_many(bed, 1, Duration::from_secs(2));
            std::thread::sleep(gap);
            answered
        })
        .sum()
}

/// The final `refused` records, in the order the tracer wrote them, once `n` have arrived.
fn refusals(tracer: &mut Tracer, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let refused = |t: &Tracer| -> Vec<Value> {
        finals(t)
            .into_iter()
            .filter(|r| r["verdict"] == "refused")
            .cloned()
            .collect()
    };
    while refused(tracer).len() < n && std::time::Instant::now() < deadline {
        tracer.collect_for(Duration::from_millis(300));
    }
    let found = refused(tracer);
    assert_eq!(found.len(), n, "one final record per refusal: {found:?}");
    found
}

/// The `conntrack` section of the final stats record.
fn final_conntrack_stats(tracer: Tracer) -> Value {
    let (_, seen, stderr) = tracer.stop();
    let stats = seen
        .iter()
        .rfind(|v| v["kind"] == "stats" && v["final"] == true)
        .unwrap_or_else(|| panic!("a final stats record; stderr:\n{stderr}"));
    stats["conntrack"].clone()
}

fn finals(tracer: &Tracer) -> Vec<&Value> {
    tracer
        .connect_records()
        .into_iter()
        .filter(|r| r["final"] == true)
        .collect()
}

#[test]
fn verdicts_name_the_dropping_backend_and_shares_are_near_half() {
    let bed = ServiceBed::new("svc", 2);
    let live = SocketAddrV4::new(bed.backend_ips[0], POD_PORT);
    let dead = SocketAddrV4::new(bed.backend_ips[1], POD_PORT);
    let _listener = Listener::start(&bed.backends[0], live);
    bed.backends[1].nft(&nft_drop_syn_to(POD_PORT));
    bed.service(SVC_PORT, &[(*live.ip(), POD_PORT), (*dead.ip(), POD_PORT)]);
    let mut tracer = tracer_for(&bed, &[]);
    let vip = format!("{}:{SVC_PORT}", bed.vip);

    let total = 40;
    let answered = connect_many(&bed, total, Duration::from_millis(1500));
    let failed = total - answered;
    assert!(
        (8..=32).contains(&answered),
        "random DNAT over two backends: {answered} of {total} answered"
    );

    // Every black-holed connect is reported once, naming the Service and the dead backend.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while finals(&tracer).len() < failed && std::time::Instant::now() < deadline {
        tracer.collect_for(Duration::from_millis(300));
    }
    let ended = finals(&tracer);
    assert_eq!(
        ended.len(),
        failed,
        "one final record per failed connect: {ended:?}"
    );
    for r in &ended {
        assert_eq!(r["verdict"], "abandoned", "{r}");
        assert_eq!(r["service"], vip.as_str(), "{r}");
        assert_eq!(
            r["backend"],
            dead.to_string(),
            "the dropping backend is named: {r}"
        );
        assert_eq!(
            r["dst"],
            vip.as_str(),
            "the socket only knows the Service: {r}"
        );
        assert!(
            r["explanation"]
                .as_str()
                .expect("text")
                .contains(&format!("backend {dead}")),
            "{r}"
        );
    }
    let live_updates: Vec<_> = tracer
        .connect_records()
        .into_iter()
        .filter(|r| r["final"] == false)
        .collect();
    assert!(!live_updates.is_empty(), "unanswered reported live");
    assert!(
        live_updates
            .iter()
            .all(|r| r["backend"] == dead.to_string()),
        "{live_updates:?}"
    );

    // The per-Service view: the dead backend's failures and the live one's answers, side by side.
    let svc = tracer.expect(
        "service record with every connect",
        Duration::from_secs(6),
        |v| {
            v["kind"] == "service"
                && v["service"] == vip.as_str()
                && v["total"].as_u64() == Some(total as u64)
        },
    );
    assert_eq!(svc["failing"], failed, "{svc}");
    let backends = svc["backends"].as_array().expect("backends");
    assert_eq!(
        backends[0]["backend"],
        dead.to_string(),
        "worst first: {svc}"
    );
    assert_eq!(backends[0]["verdicts"]["abandoned"], failed, "{svc}");
    assert_eq!(backends[1]["backend"], live.to_string(), "{svc}");
    assert_eq!(backends[1]["verdicts"]["established"], answered, "{svc}");
    let summary = svc["summary"].as_str().expect("summary");
    assert!(
        summary.starts_with(&format!("{vip} -> {dead} abandoned {failed} of {total}, {live} established {answered} of {total}")),
        "{summary}"
    );
}

/// Under `--conntrack-destroy-events auto` (the default) destroy events are followed only once a
/// refused connect found no conntrack entry: the first refusal has no backend, the ones after it
/// name the backend that does not listen, and the unnamed one is counted, not lost silently.
#[test]
fn a_backend_that_does_not_listen_is_named_in_the_refusal() {
    let bed = ServiceBed::new("deaf", 1);
    let deaf = SocketAddrV4::new(bed.backend_ips[0], POD_PORT);
    bed.service(SVC_PORT, &[(*deaf.ip(), POD_PORT)]);
    let mut tracer = tracer_for(&bed, &[]);
    let tries = 5;
    assert_eq!(
        connect_one_by_one(&bed, tries, Duration::from_millis(300)),
        0
    );
    let refused = refusals(&mut tracer, tries);
    let vip = format!("{}:{SVC_PORT}", bed.vip);
    for r in &refused {
        assert_eq!(r["cause"], "rst", "{r}");
    }
    assert!(
        refused[0].get("backend").is_none(),
        "auto: the first refusal comes before destroy events are followed: {}",
        refused[0]
    );
    let named: Vec<&Value> = refused[1..]
        .iter()
        .filter(|r| r["backend"] == deaf.to_string())
        .collect();
    assert!(
        !named.is_empty(),
        "a later refusal names the backend: {refused:?}"
    );
    for r in &named {
        assert_eq!(r["service"], vip.as_str(), "{r}");
    }
    let unnamed = refused
        .iter()
        .filter(|r| r.get("backend").is_none())
        .count();
    let stderr = tracer.stderr();
    assert!(
        stderr.contains("following conntrack destroy events"),
        "stderr says when auto starts following: {stderr}"
    );
    let conntrack = final_conntrack_stats(tracer);
    assert_eq!(conntrack["destroy_events"], "auto", "{conntrack}");
    assert_eq!(conntrack["destroy_events_subscribed"], true, "{conntrack}");
    assert_eq!(
        conntrack["refused_before_subscription"], unnamed,
        "every refusal without its backend is counted: {conntrack}"
    );
}

#[test]
fn with_destroy_events_always_the_first_refusal_names_the_backend() {
    let bed = ServiceBed::new("deafa", 1);
    let deaf = SocketAddrV4::new(bed.backend_ips[0], POD_PORT);
    bed.service(SVC_PORT, &[(*deaf.ip(), POD_PORT)]);
    let mut tracer = tracer_for(&bed, &["--conntrack-destroy-events", "always"]);
    assert_eq!(connect_many(&bed, 1, Duration::from_secs(2)), 0);
    let r = &refusals(&mut tracer, 1)[0];
    assert_eq!(r["cause"], "rst", "{r}");
    assert_eq!(r["service"], format!("{}:{SVC_PORT}", bed.vip), "{r}");
    assert_eq!(r["backend"], deaf.to_string(), "{r}");
    let conntrack = final_conntrack_stats(tracer);
    assert_eq!(conntrack["destroy_events"], "always", "{conntrack}");
    assert_eq!(conntrack["destroy_events_subscribed"], true, "{conntrack}");
    assert_eq!(conntrack["refused_before_subscription"], 0, "{conntrack}");
}

#[test]
fn with_destroy_events_never_refusals_have_no_backend_and_are_counted() {
    let bed = ServiceBed::new("deafn", 1);
    let deaf = SocketAddrV4::new(bed.backend_ips[0], POD_PORT);
    bed.service(SVC_PORT, &[(*deaf.ip(), POD_PORT)]);
    let mut tracer = tracer_for(&bed, &["--conntrack-destroy-events", "never"]);
    let tries = 3;
    assert_eq!(
        connect_one_by_one(&bed, tries, Duration::from_millis(300)),
        0
    );
    for r in refusals(&mut tracer, tries) {
        assert!(r.get("backend").is_none(), "never subscribed: {r}");
    }
    let conntrack = final_conntrack_stats(tracer);
    assert_eq!(conntrack["destroy_events"], "never", "{conntrack}");
    assert_eq!(conntrack["destroy_events_subscribed"], false, "{conntrack}");
    assert_eq!(
        conntrack["refused_before_subscription"], tries,
        "{conntrack}"
    );
}

#[test]
fn a_service_without_endpoints_is_refused_by_icmp_with_no_backend() {
    let bed = ServiceBed::new("noep", 0);
    bed.service(SVC_PORT, &[]);
    let mut tracer = tracer_for(&bed, &[]);
    assert_eq!(connect_many(&bed, 1, Duration::from_secs(2)), 0);
    let r = tracer.expect("refused", Duration::from_secs(5), |v| {
        v["kind"] == "connect" && v["verdict"] == "refused"
    });
    assert_eq!(r["cause"], "icmp", "REJECT, no RST: {r}");
    assert_eq!(r["dst"], format!("{}:{SVC_PORT}", bed.vip), "{r}");
    assert!(
        r.get("backend").is_none(),
        "no endpoint, so no backend: {r}"
    );
}

#[test]
fn nat_entries_without_a_reply_are_listed_with_their_tuples() {
    let bed = ServiceBed::new("stale", 1);
    let dead = SocketAddrV4::new(bed.backend_ips[0], POD_PORT);
    bed.backends[0].nft(&nft_drop_syn_to(POD_PORT));
    bed.service(SVC_PORT, &[(*dead.ip(), POD_PORT)]);
    let mut tracer = tracer_for(&bed, &["--stale-after", "1"]);
    assert_eq!(connect_many(&bed, 1, Duration::from_secs(4)), 0);
    let r = tracer.expect("stale NAT entry", Duration::from_secs(5), |v| {
        v["kind"] == "stale_nat"
    });
    assert_eq!(
        r["original"]["src"]
            .as_str()
            .map(|s| s.starts_with(&format!("{}:", bed.client_ip))),
        Some(true),
        "{r}"
    );
    assert_eq!(
        r["original"]["dst"],
        format!("{}:{SVC_PORT}", bed.vip),
        "{r}"
    );
    assert_eq!(r["reply"]["src"], dead.to_string(), "{r}");
    assert_eq!(r["backend"], dead.to_string(), "{r}");
    assert_eq!(r["state"], "SYN_SENT", "{r}");
    assert!(r["age_s"].as_u64() >= Some(1), "{r}");
}

#[test]
fn socket_level_load_balancing_keeps_the_dialled_service_and_names_the_backend() {
    let bed = tests::testbed::TwoHosts::new("slb");
    let backend = SocketAddrV4::new(bed.server_ip, POD_PORT);
    // A Service address the client has no route to: only the rewrite makes the connect go anywhere.
    let vip = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 96, 200, 10), SVC_PORT);
    let lb = tests::socket_lb::SocketLb::new("tracer-test-slb", vip, backend);
    let mut tracer = Tracer::start(&["--netns", bed.client.name()]);
    // The client: a process in the load-balanced cgroup, inside the client namespace.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {procs} && exec ip netns exec {ns} timeout 3 bash -c 'exec 3<>/dev/tcp/{ip}/{port}'",
            procs = lb.procs_file().display(),
            ns = bed.client.name(),
            ip = vip.ip(),
            port = vip.port()
        ))
        .status()
        .expect("run the client");
    assert!(!status.success(), "nothing listens on the backend: refused");
    let r = tracer.expect("refused", Duration::from_secs(5), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(
        r["verdict"], "refused",
        "the rewrite worked, the backend refused: {r}"
    );
    assert_eq!(
        r["dst"],
        backend.to_string(),
        "the socket knows the backend: {r}"
    );
    assert_eq!(
        r["dialed"],
        vip.to_string(),
        "the app dialled the Service: {r}"
    );
    assert_eq!(r["service"], vip.to_string(), "{r}");
    assert_eq!(r["backend"], backend.to_string(), "{r}");
    assert_eq!(r["comm"], "bash", "{r}");
    // The socket named the backend: no conntrack lookup, so under the default `auto` this refusal
    // neither needs destroy events nor opens them.
    let conntrack = final_conntrack_stats(tracer);
    assert_eq!(conntrack["destroy_events"], "auto", "{conntrack}");
    assert_eq!(conntrack["destroy_events_subscribed"], false, "{conntrack}");
    assert_eq!(conntrack["refused_before_subscription"], 0, "{conntrack}");
    drop(lb);
}

/// Cilium's socket LB on a kernel without `BPF_F_PREORDER` (emulated with `--no-preorder`): the
/// rewrite happens before the tracer's hook, which sees only the backend; the Service is named from
/// Cilium's reverse socket NAT map, filled by the test's rewriter as Cilium's program fills it.
#[test]
fn cilium_socket_lb_before_the_hook_names_the_service_from_its_maps() {
    let bed = tests::testbed::TwoHosts::new("cslb");
    let backend = SocketAddrV4::new(bed.server_ip, POD_PORT);
    let vip = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 96, 200, 11), SVC_PORT);
    let lb = tests::cilium_lb::CiliumLb::new("tracer-test-cslb", vip, backend);
    let mut tracer = lb.start_tracer(bed.client.name(), &[]);
    // Cilium deletes a socket's entry when the socket is released, which for a connect refused at
    // its first SYN is at once. The client connects without blocking and reads SO_ERROR, as most
    // do (curl, Go, nginx): a blocking connect() that fails disconnects the socket, which zeroes
    // its port, and Cilium's delete misses then.
    let url = format!("http://{vip}/");
    let status = lb.run_released(
        &tracer,
        bed.client.name(),
        &["curl", "-s", "--noproxy", "*", "--max-time", "3", &url],
    );
    assert!(!status.success(), "nothing listens on the backend: refused");
    let r = tracer.expect("refused", Duration::from_secs(5), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(r["verdict"], "refused", "{r}");
    assert_eq!(
        r["dst"],
        backend.to_string(),
        "the socket knows the backend: {r}"
    );
    assert_eq!(
        r["service"],
        vip.to_string(),
        "named from Cilium's maps: {r}"
    );
    assert_eq!(r["backend"], backend.to_string(), "{r}");
    assert_eq!(r["dialed"], vip.to_string(), "what the app dialled: {r}");
    let (_, seen, stderr) = tracer.stop();
    let stats = seen
        .iter()
        .rfind(|v| v["kind"] == "stats" && v["final"] == true)
        .unwrap_or_else(|| panic!("a final stats record; stderr:\n{stderr}"));
    let socket_lb = &stats["socket_lb"];
    assert_eq!(socket_lb["path"], "cilium_maps", "{stats}");
    assert_eq!(socket_lb["cilium"]["present"], true, "{stats}");
    assert_eq!(socket_lb["cilium"]["named"], 1, "{stats}");
    assert_eq!(
        socket_lb["cilium"]["backend_gone"], 0,
        "the backend is the Service's: {stats}"
    );
    assert_eq!(
        stats["kernel"]["capabilities"]["dialled_before_socket_lb"]["state"], "degraded",
        "{stats}"
    );
    drop(lb);
}

#[test]
fn cilium_socket_lb_names_an_ipv6_service_from_its_maps() {
    let bed = tests::testbed::TwoHosts::new("cslb6");
    let (_, server6) = bed.add_ipv6();
    let backend = std::net::SocketAddrV6::new(server6, POD_PORT, 0, 0);
    let vip_ip = std::net::Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 0x11);
    let vip = std::net::SocketAddrV6::new(vip_ip, SVC_PORT, 0, 0);
    let lb = tests::cilium_lb::CiliumLb::new("tracer-test-cslb6", vip, backend);
    let mut tracer = lb.start_tracer(bed.client.name(), &[]);
    let url = format!("http://{vip}/");
    let status = lb.run_released(
        &tracer,
        bed.client.name(),
        &[
            "curl",
            "-s",
            "-g",
            "--noproxy",
            "*",
            "--max-time",
            "3",
            &url,
        ],
    );
    assert!(!status.success(), "nothing listens on the backend: refused");
    let r = tracer.expect("refused", Duration::from_secs(5), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(r["verdict"], "refused", "{r}");
    assert_eq!(r["dst"], backend.to_string(), "{r}");
    assert_eq!(
        r["service"],
        vip.to_string(),
        "named from Cilium's maps: {r}"
    );
    assert_eq!(r["dialed"], vip.to_string(), "{r}");
    let (_, seen, stderr) = tracer.stop();
    let stats = seen
        .iter()
        .rfind(|v| v["kind"] == "stats" && v["final"] == true)
        .unwrap_or_else(|| panic!("a final stats record; stderr:\n{stderr}"));
    let cilium = &stats["socket_lb"]["cilium"];
    assert_eq!(stats["socket_lb"]["path"], "cilium_maps", "{stats}");
    assert_eq!(cilium["maps"][0], "cilium_lb6_reverse_sk", "{stats}");
    assert_eq!(cilium["named"], 1, "{stats}");
    assert_eq!(
        cilium["backend_gone"], 0,
        "the backend is the Service's: {stats}"
    );
    drop(lb);
}

#[test]
fn a_service_backend_nobody_has_is_unreachable_and_named() {
    let bed = ServiceBed::new("unrb", 0);
    // The datapath still DNATs to an address on a routed link where nothing answers neighbour
    // discovery: the node answers the client with ICMP host-unreachable, and its conntrack entry
    // holds the DNAT.
    let (gone, _link) = bed.gone_host("unrbg");
    bed.service(SVC_PORT, &[(gone, POD_PORT)]);
    let mut tracer = tracer_for(&bed, &[]);
    assert_eq!(connect_many(&bed, 1, Duration::from_secs(10)), 0);
    let r = tracer.expect("unreachable", Duration::from_secs(8), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(r["verdict"], "unreachable", "{r}");
    assert_eq!(r["service"], format!("{}:{SVC_PORT}", bed.vip), "{r}");
    assert_eq!(r["backend"], format!("{gone}:{POD_PORT}"), "{r}");
}

#[test]
fn a_host_network_connect_to_a_backend_nobody_has_is_unreachable_and_named() {
    // A process on the node itself (hostNetwork): kube-proxy DNATs its connects in OUTPUT, to an
    // address on the bridge that no pod has any more; the neighbour lookup fails.
    let bed = ServiceBed::new("unrh", 0);
    let gone = std::net::Ipv4Addr::new(10, 231, bed.vip.octets()[2], 99);
    let vip = bed.vip;
    bed.node.nft(&format!(
        "table ip svc_out {{\n  chain output {{\n    type nat hook output priority -100;\n    \
         ip daddr {vip} tcp dport {SVC_PORT} dnat to {gone}:{POD_PORT}\n  }}\n}}\n"
    ));
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.node.name(),
        "--conntrack-netns",
        bed.node.name(),
    ]);
    let dst = SocketAddr::from(SocketAddrV4::new(vip, SVC_PORT));
    let connect = bed.node.spawn_in("tc-hostnet", move || {
        std::net::TcpStream::connect_timeout(&dst, Duration::from_secs(10))
            .map(|_| ())
            .map_err(|e| e.raw_os_error())
    });
    assert_eq!(
        connect.join().expect("client thread"),
        Err(Some(libc::EHOSTUNREACH))
    );
    let r = tracer.expect("unreachable", Duration::from_secs(8), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(r["verdict"], "unreachable", "{r}");
    assert_eq!(r["service"], format!("{vip}:{SVC_PORT}"), "{r}");
    assert_eq!(r["backend"], format!("{gone}:{POD_PORT}"), "{r}");
}

#[test]
fn a_syn_ack_dropped_after_the_nodes_conntrack_is_no_answered_connect() {
    // Regression (#28): the ingress node's conntrack saw the pod's SYN-ACK before the node dropped
    // it, and the `service` record counted the abandoned connect's backend `established`.
    let bed = ReturnPathBed::new("sva");
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--conntrack-netns",
        bed.ingress.name(),
    ]);
    let addr = SocketAddr::V4(bed.pod_addr);
    let _listener = bed
        .pod
        .run_in("sva-bind", move || std::net::TcpListener::bind(addr))
        .expect("the server listens");
    bed.cut_return_path_after_conntrack();
    let dst = SocketAddr::V4(bed.node_port);
    let answered = bed.client.run_in("sva-client", move || {
        std::net::TcpStream::connect_timeout(&dst, Duration::from_millis(2500)).is_ok()
    });
    assert!(!answered, "the client never gets the SYN-ACK");
    let end = tracer.expect("the connect's end", Duration::from_secs(5), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(end["verdict"], "abandoned", "{end}");
    assert_eq!(end["backend"], bed.pod_addr.to_string(), "{end}");
    // Service records come every stats interval (1 s); a few cover the dumps after the SYN-ACK.
    tracer.collect_for(Duration::from_secs(4));
    let services: Vec<&Value> = tracer
        .seen
        .iter()
        .filter(|v| v["kind"] == "service" && v["service"] == bed.node_port.to_string())
        .collect();
    assert!(!services.is_empty(), "the Service view names the NodePort");
    for s in &services {
        for b in s["backends"].as_array().expect("backends") {
            assert!(
                b["verdicts"].get("established").is_none(),
                "the abandoned connect was counted answered: {s}"
            );
        }
    }
    let last = services.last().expect("a service record");
    assert_eq!(last["total"], 1, "one connect, abandoned: {last}");
    assert_eq!(last["failing"], 1, "{last}");
}

/// kube-proxy's iptables rules (as `iptables-save` shows them) for Service app/web:http at `vip`
/// with the one endpoint `to`.
fn kube_proxy_one_endpoint(vip: SocketAddr, to: SocketAddrV4) -> String {
    let (svc, sep) = ("KUBE-SVC-TBGONE0000000000", "KUBE-SEP-TBGONE0000000000");
    format!(
        "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n\
         :{svc} - [0:0]\n:{sep} - [0:0]\n\
         -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
         -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n\
         -A KUBE-SERVICES -d {ip}/32 -p tcp -m comment --comment \"app/web:http cluster IP\" -m tcp --dport {port} -j {svc}\n\
         -A {svc} -m comment --comment \"app/web:http -> {to}\" -j {sep}\n\
         -A {sep} -s {to_ip}/32 -m comment --comment \"app/web:http\" -j KUBE-MARK-MASQ\n\
         -A {sep} -p tcp -m comment --comment \"app/web:http\" -m tcp -j DNAT --to-destination {to}\n\
         COMMIT\n",
        ip = vip.ip(),
        port = vip.port(),
        to_ip = to.ip(),
    )
}

/// Service app/web whose EndpointSlice still lists `gone` for pod web-gone, which no longer exists.
fn only_endpoint_gone(vip: SocketAddr, gone: SocketAddrV4) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "app"},
         "spec": {"type": "ClusterIP", "clusterIP": vip.ip().to_string(), "selector": {"app": "web"},
                  "ports": [{"name": "http", "port": vip.port(), "targetPort": gone.port(), "protocol": "TCP"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "web-x7k2p", "namespace": "app", "labels": {"kubernetes.io/service-name": "web"}},
         "ports": [{"name": "http", "port": gone.port(), "protocol": "TCP"}],
         "endpoints": [{"addresses": [gone.ip().to_string()], "conditions": {"ready": true},
                        "targetRef": {"kind": "Pod", "namespace": "app", "name": "web-gone"}}]}
    ]})
}

#[test]
fn a_service_whose_only_endpoint_is_gone_from_the_bridge_names_it_from_the_rules() {
    // Regression (#28): the SYNs wait for ARP on the node's bridge and the node's conntrack holds
    // no entry for them, so the `unanswered` and `unreachable` records had neither `service` nor
    // `backend`. The node's Service rules allow one backend only: that one is named.
    let bed = ServiceBed::new("gonb", 0);
    let gone = SocketAddrV4::new(
        std::net::Ipv4Addr::new(10, 231, bed.vip.octets()[2], 99),
        POD_PORT,
    );
    let vip = SocketAddr::from(SocketAddrV4::new(bed.vip, SVC_PORT));
    bed.node
        .iptables_restore(&kube_proxy_one_endpoint(vip, gone));
    let state =
        tests::temp_file::temp_file("state.json", only_endpoint_gone(vip, gone).to_string());
    let mut tracer = tracer_for(&bed, &["--cluster-state", &state]);
    // The audit has read the rules once it reports the entry stale (its pod is gone).
    tracer.expect("the rules read", Duration::from_secs(10), |v| {
        v["kind"] == "stale_datapath"
    });
    let connect = bed.client.spawn_in("tc-gone", move || {
        std::net::TcpStream::connect_timeout(&vip, Duration::from_secs(10))
            .map(|_| ())
            .map_err(|e| e.raw_os_error())
    });
    std::thread::sleep(Duration::from_millis(1500));
    let entries = bed
        .node
        .exec(&["conntrack", "-L", "-d", &bed.vip.to_string()]);
    assert!(
        String::from_utf8_lossy(&entries.stdout).trim().is_empty(),
        "the bed's premise: no conntrack entry while the SYNs wait for ARP: {}",
        String::from_utf8_lossy(&entries.stdout)
    );
    assert_eq!(
        connect.join().expect("client thread"),
        Err(Some(libc::EHOSTUNREACH))
    );
    let end = tracer.expect("unreachable", Duration::from_secs(8), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(end["verdict"], "unreachable", "{end}");
    let records = tracer.connect_records();
    assert!(
        records.len() >= 2,
        "live unanswered, then the end: {records:?}"
    );
    for r in records {
        assert_eq!(r["service"], vip.to_string(), "{r}");
        assert_eq!(r["backend"], gone.to_string(), "{r}");
    }
    assert_eq!(end["cluster_verdict"], "backend is no live pod", "{end}");
}
