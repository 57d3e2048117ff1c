//! UDP DNS verdicts against a real dnsmasq in a namespace: answered queries are counted (never sent
//! one by one), a dropping server gives `unanswered`, an ICMP-rejecting one `refused`, and a real
//! nginx whose resolver socket is glued to a dead server gives `dns_stuck_socket`.
use std::{
    net::Ipv4Addr,
    process::Command,
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::{
    kernel_facts,
    testbed::{Netns, TwoHosts},
    tracer::Tracer,
};

/// The one name the test server knows, and its address.
const NAME: &str = "web.test";

/// Starts dnsmasq in `ns` answering only `web.test` with `answer`, listening on `listen` only;
/// returns once it answers.
#[expect(
    clippy::zombie_processes,
    reason = "the Netns kills and reaps what it spawned when it drops"
)]
fn dnsmasq(ns: &Netns, listen: &[Ipv4Addr], answer: Ipv4Addr) {
    let mut args = vec![
        "dnsmasq".to_string(),
        "--no-daemon".into(),
        "--conf-file=/dev/null".into(),
        "--no-resolv".into(),
        "--no-hosts".into(),
        "--bind-interfaces".into(),
        "--user=root".into(),
        "--pid-file".into(),
        format!("--address=/{NAME}/{answer}"),
    ];
    for ip in listen {
        args.push(format!("--listen-address={ip}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ns.spawn(&args);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let ok = listen.iter().all(|ip| {
            ns.exec_ok(&[
                "dig",
                &format!("@{ip}"),
                NAME,
                "A",
                "+short",
                "+tries=1",
                "+time=1",
            ])
        });
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("dnsmasq did not answer on {listen:?} within 10 s");
}

/// `dig @server web.test A` from `ns`, one try; returns its stdout.
fn dig(ns: &Netns, server: Ipv4Addr) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "dig"])
        .arg(format!("@{server}"))
        .args([NAME, "A", "+tries=1", "+time=1"])
        .output()
        .expect("run dig");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// dig's one try got no answer.
fn assert_timed_out(dig_output: &str) {
    assert!(
        dig_output.contains("timed out"),
        "the query went unanswered:\n{dig_output}"
    );
}

fn dns_records<'a>(seen: &'a [Value], verdict: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|v| v["kind"] == "dns" && v["verdict"] == verdict)
        .collect()
}

fn healthy_total(seen: &[Value], server: &str) -> u64 {
    seen.iter()
        .filter(|v| v["kind"] == "dns_healthy" && v["server"] == server)
        .map(|v| v["answered"].as_u64().expect("answered"))
        .sum()
}

#[test]
fn dns_answered_queries_are_counted_in_the_kernel_not_sent_one_by_one() {
    let bed = TwoHosts::new("dnsok");
    let answer = Ipv4Addr::new(10, 231, 77, 7);
    dnsmasq(&bed.server, &[bed.server_ip], answer);
    let mut tracer = Tracer::start(&["--netns", bed.client.name()]);
    for _ in 0..3 {
        let out = dig(&bed.client, bed.server_ip);
        assert!(out.contains(&answer.to_string()), "dig answered:\n{out}");
    }
    let server = format!("{}:53", bed.server_ip);
    tracer.expect("a dns_healthy record", Duration::from_secs(5), |v| {
        v["kind"] == "dns_healthy" && v["server"] == server.as_str()
    });
    let (_, seen, stderr) = tracer.stop();
    assert_eq!(healthy_total(&seen, &server), 3, "{seen:?}\n{stderr}");
    assert!(
        seen.iter().all(|v| v["kind"] != "dns"),
        "healthy queries are not sent one by one: {seen:?}"
    );
    let stats = seen.last().expect("final stats");
    assert_eq!(stats["kind"], "stats");
    assert!(stats["dns"]["queries"].as_u64() >= Some(3), "{stats}");
    assert!(stats["dns"]["healthy"].as_u64() >= Some(3), "{stats}");
}

#[test]
fn with_no_dns_the_per_packet_hooks_are_not_attached() {
    let bed = TwoHosts::new("nodns");
    let answer = Ipv4Addr::new(10, 231, 77, 7);
    dnsmasq(&bed.server, &[bed.server_ip], answer);
    let tracer = Tracer::start(&["--netns", bed.client.name(), "--no-dns"]);
    for _ in 0..3 {
        let out = dig(&bed.client, bed.server_ip);
        assert!(out.contains(&answer.to_string()), "dig answered:\n{out}");
    }
    let (_, seen, stderr) = tracer.stop();
    assert!(
        seen.iter()
            .all(|v| !v["kind"].as_str().unwrap_or("").starts_with("dns")),
        "no DNS records: {seen:?}"
    );
    let stats = seen.last().expect("final stats");
    assert_eq!(stats["kind"], "stats");
    assert_eq!(
        stats["dns"]["queries"], 0,
        "no query seen: {stats}\n{stderr}"
    );
}

#[test]
fn dns_server_that_drops_queries_gives_unanswered_with_name_and_type() {
    let bed = TwoHosts::new("dnsdrop");
    dnsmasq(&bed.server, &[bed.server_ip], Ipv4Addr::new(10, 231, 77, 7));
    bed.server.nft(
        "table inet tb_dnsdrop {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 53 drop
  }
}
",
    );
    let mut tracer = Tracer::start(&["--netns", bed.client.name(), "--dns-timeout", "1.5"]);
    assert_timed_out(&dig(&bed.client, bed.server_ip));
    let server = format!("{}:53", bed.server_ip);
    let record = tracer.expect("an unanswered dns record", Duration::from_secs(6), |v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered"
    });
    assert_eq!(record["name"], NAME, "{record}");
    assert_eq!(record["qtype"], "A", "{record}");
    assert_eq!(record["server"], server.as_str(), "{record}");
    // dig sends from a worker thread: the comm is that thread's (`isc-net-0000`).
    let comm = record["comm"].as_str().expect("comm");
    assert!(comm == "dig" || comm.starts_with("isc-"), "{record}");
    assert!(record["pid"].as_u64() > Some(0), "{record}");
    assert!(record["waited_ms"].as_u64() >= Some(1500), "{record}");
    assert!(record["socket_cookie"].as_u64() > Some(0), "{record}");
    let (_, seen, _) = tracer.stop();
    assert!(dns_records(&seen, "refused").is_empty(), "{seen:?}");
}

#[test]
fn dns_server_that_rejects_with_icmp_gives_refused() {
    let bed = TwoHosts::new("dnsrej");
    dnsmasq(&bed.server, &[bed.server_ip], Ipv4Addr::new(10, 231, 77, 7));
    bed.server.nft(
        "table inet tb_dnsreject {
  chain input {
    type filter hook input priority 0; policy accept;
    meta nfproto ipv4 udp dport 53 reject with icmp type port-unreachable
  }
}
",
    );
    // Without the error-report tracepoint (5.10) the tracer cannot tell the ICMP error from
    // silence: it says so (`dns_refused` degraded) and the query is reported unanswered.
    let full = kernel_facts::has_tracepoint("inet_sk_error_report");
    let (verdict, not) = if full {
        ("refused", "unanswered")
    } else {
        ("unanswered", "refused")
    };
    let mut tracer = Tracer::start(&["--netns", bed.client.name()]);
    let out = dig(&bed.client, bed.server_ip);
    let record = tracer.expect(verdict, Duration::from_secs(10), |v| {
        v["kind"] == "dns" && v["verdict"] == verdict
    });
    assert_eq!(record["name"], NAME, "{record} (dig said:\n{out})");
    assert_eq!(record["qtype"], "A", "{record}");
    assert_eq!(
        record["server"],
        format!("{}:53", bed.server_ip).as_str(),
        "{record}"
    );
    let (_, seen, _) = tracer.stop();
    assert!(dns_records(&seen, not).is_empty(), "{seen:?}");
    let stats = seen
        .iter()
        .rev()
        .find(|v| v["kind"] == "stats")
        .expect("final stats");
    let state = &stats["kernel"]["capabilities"]["dns_refused"]["state"];
    assert_eq!(*state, if full { "full" } else { "degraded" }, "{stats}");
}

/// Writes an nginx config whose resolver is `resolver` and whose only location proxies to
/// `web.test:8080` through a variable, so every request after `valid=1s` resolves again.
fn nginx_conf(dir: &std::path::Path, resolver: Ipv4Addr, port: u16) -> std::path::PathBuf {
    let d = dir.display();
    let conf = format!(
        "worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  resolver {resolver} valid=1s ipv6=off;
  resolver_timeout 2s;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      set $backend_host {NAME};
      proxy_pass http://$backend_host:8080;
      proxy_connect_timeout 1s;
    }}
  }}
}}
"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).expect("write nginx.conf");
    path
}

/// One HTTP request to nginx from inside `ns`; returns the status code curl printed.
fn curl(ns: &Netns, port: u16) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "curl", "-s", "-m", "4", "-o"])
        .args(["/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Points the client's DNS "Service" address at `backend` (kube-proxy style DNAT in `OUTPUT`).
fn dns_service(ns: &Netns, vip: Ipv4Addr, backend: Ipv4Addr) {
    ns.nft(&format!(
        "table ip tb_dnssvc {{
  chain out {{
    type nat hook output priority -100; policy accept;
  }}
}}
flush chain ip tb_dnssvc out
add rule ip tb_dnssvc out ip daddr {vip} udp dport 53 dnat to {backend}
"
    ));
}

/// The incident: nginx's resolver socket keeps its conntrack entry to a DNS pod that died, while
/// new sockets to the same Service address reach the live pod.
#[test]
#[expect(
    clippy::zombie_processes,
    reason = "the Netns kills and reaps what it spawned when it drops"
)]
fn dns_nginx_resolver_socket_glued_to_a_dead_server_is_a_stuck_socket() {
    let bed = TwoHosts::new("dnsngx");
    let dead = bed.server_ip;
    let live = Ipv4Addr::new(
        bed.server_ip.octets()[0],
        bed.server_ip.octets()[1],
        bed.server_ip.octets()[2],
        3,
    );
    bed.server
        .exec(&["ip", "addr", "add", &format!("{live}/24"), "dev", "eth0"]);
    dnsmasq(&bed.server, &[dead, live], Ipv4Addr::LOCALHOST);
    let vip = Ipv4Addr::new(10, 96, 0, 10);
    bed.client
        .exec(&["ip", "route", "add", "10.96.0.0/16", "dev", "eth0"]);
    dns_service(&bed.client, vip, dead);

    let dir = std::env::temp_dir().join(format!("tb-nginx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("nginx dir");
    let port = 8088;
    let conf = nginx_conf(&dir, vip, port);
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--dns-timeout",
        "1.5",
        // The client's namespace holds the Service's DNAT (a host-network client on a kube-proxy
        // node): its conntrack names the backend, whichever side of the DNAT the hooks see.
        "--conntrack-netns",
        bed.client.name(),
    ]);
    let conf_arg = conf.display().to_string();
    let master = bed.client.spawn(&[
        "nginx",
        "-e",
        &format!("{}/error.log", dir.display()),
        "-c",
        &conf_arg,
        "-g",
        "daemon off;",
    ]);
    // Up, and resolved once through the (still live) first server: its socket is connected and
    // its conntrack entry points there.
    let deadline = Instant::now() + Duration::from_secs(10);
    while curl(&bed.client, port) != "502" {
        assert!(Instant::now() < deadline, "nginx did not start or resolve");
        std::thread::sleep(Duration::from_millis(200));
    }
    let workers = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", master.id()))
        .expect("nginx children");
    let worker: u64 = workers
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("an nginx worker");

    // The DNS pod dies; the Service now points at the live one.
    dns_service(&bed.client, vip, live);
    bed.server.nft(&format!(
        "table inet tb_dnsdead {{
  chain input {{
    type filter hook input priority 0; policy accept;
    ip daddr {dead} udp dport 53 drop
  }}
}}
"
    ));
    let mut found = None;
    for _ in 0..10 {
        // nginx answers (502: nothing behind the name, or no answer for it) after asking its
        // resolver socket.
        assert_eq!(curl(&bed.client, port), "502", "nginx answered");
        let out = dig(&bed.client, vip);
        assert!(
            out.contains("127.0.0.1"),
            "a new socket reaches the live server:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(1100));
        tracer.collect_for(Duration::from_millis(10));
        found = tracer
            .seen
            .iter()
            .find(|v| v["kind"] == "dns_stuck_socket")
            .cloned();
        if found.is_some() {
            break;
        }
    }
    let stuck = found.unwrap_or_else(|| {
        tracer.expect("a dns_stuck_socket record", Duration::from_secs(5), |v| {
            v["kind"] == "dns_stuck_socket"
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(stuck["comm"], "nginx", "{stuck}");
    assert_eq!(stuck["pid"].as_u64(), Some(worker), "the worker: {stuck}");
    assert_eq!(stuck["server"], format!("{dead}:53").as_str(), "{stuck}");
    assert_eq!(stuck["service"], format!("{vip}:53").as_str(), "{stuck}");
    assert!(stuck["lost"].as_u64() >= Some(3), "{stuck}");
    assert!(stuck["others_answered"].as_u64() >= Some(1), "{stuck}");

    let (_, seen, stderr) = tracer.stop();
    // The second client's queries (dig, new sockets) stay answered: counted, never unanswered.
    assert!(
        healthy_total(&seen, &format!("{vip}:53")) >= 3,
        "{seen:?}\n{stderr}"
    );
    let unanswered = dns_records(&seen, "unanswered");
    assert!(
        !unanswered.is_empty(),
        "nginx's lost queries are reported: {seen:?}"
    );
    assert!(
        unanswered.iter().all(|v| v["comm"] == "nginx"),
        "only nginx's queries are lost: {unanswered:?}"
    );
    assert!(
        unanswered
            .iter()
            .all(|v| v["server"] == format!("{dead}:53").as_str()
                && v["dialed"] == format!("{vip}:53").as_str()),
        "lost queries name the dead server and the Service: {unanswered:?}"
    );
}

/// A DNS query for `web.test` of type `qtype` with id `id`, as a stub resolver sends it.
fn query_bytes(id: u16, qtype: u16) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; one question
    for label in NAME.split('.') {
        q.push(u8::try_from(label.len()).expect("short label"));
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes()); // IN
    q
}

/// glibc's resolver sends the A and AAAA queries of one lookup together, in one `sendmmsg` on a
/// connected socket: each hook tier must see both messages of the call.
#[test]
fn dns_a_and_aaaa_sent_together_by_sendmmsg_are_both_followed() {
    let bed = TwoHosts::new("dnsmmsg");
    dnsmasq(&bed.server, &[bed.server_ip], Ipv4Addr::new(10, 231, 77, 7));
    bed.server.nft(
        "table inet tb_dnsmmsg {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 53 drop
  }
}
",
    );
    let mut tracer = Tracer::start(&["--netns", bed.client.name(), "--dns-timeout", "1.5"]);
    let server = std::net::SocketAddrV4::new(bed.server_ip, 53);
    let sent = bed.client.run_in("resolver", move || {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind");
        socket.connect(server).expect("connect");
        let mut queries = [query_bytes(0x4a41, 1), query_bytes(0x4a42, 28)];
        let mut iovs: Vec<libc::iovec> = queries
            .iter_mut()
            .map(|q| libc::iovec {
                iov_base: q.as_mut_ptr().cast(),
                iov_len: q.len(),
            })
            .collect();
        // SAFETY: zeroed mmsghdrs are valid; each points at one iovec alive for the call.
        let mut messages: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = std::ptr::from_mut(iov);
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        // SAFETY: the socket is open; `messages` holds 2 valid headers.
        unsafe {
            libc::sendmmsg(
                std::os::fd::AsRawFd::as_raw_fd(&socket),
                messages.as_mut_ptr(),
                2,
                0,
            )
        }
    });
    assert_eq!(sent, 2, "sendmmsg sent both queries");
    let a = tracer.expect("the A query unanswered", Duration::from_secs(6), |v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered" && v["qtype"] == "A"
    });
    let aaaa = tracer.expect("the AAAA query unanswered", Duration::from_secs(6), |v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered" && v["qtype"] == "AAAA"
    });
    for record in [&a, &aaaa] {
        assert_eq!(record["name"], NAME, "{record}");
        assert_eq!(record["server"], server.to_string().as_str(), "{record}");
        assert_eq!(record["comm"], "resolver", "{record}");
    }
    assert_eq!(
        a["socket_cookie"], aaaa["socket_cookie"],
        "one socket: {a}\n{aaaa}"
    );
    let _ = tracer.stop();
}

#[test]
fn dns_over_tcp_goes_through_the_tcp_verdicts_labelled_dns() {
    let bed = TwoHosts::new("dnstcp");
    bed.server
        .nft(&tests::testbed::nft_reject_icmp_port_unreachable(53));
    let mut tracer = Tracer::start(&["--netns", bed.client.name()]);
    let to = std::net::SocketAddr::from((bed.server_ip, 53));
    let result = tests::testbed::connect_from(&bed.client, "tcpdns", to, Duration::from_secs(3));
    assert!(result.is_err(), "the connect is refused");
    let record = tracer.expect("a connect record to port 53", Duration::from_secs(5), |v| {
        v["kind"] == "connect" && v["final"] == true
    });
    assert_eq!(record["dns"], true, "{record}");
    assert_eq!(record["verdict"], "refused", "{record}");
}

#[test]
fn dns_slow_and_error_replies_are_sent_one_by_one_with_rcode_and_latency() {
    let bed = TwoHosts::new("dnsrc");
    dnsmasq(&bed.server, &[bed.server_ip], Ipv4Addr::new(10, 231, 77, 7));
    // Every reply is "slow" past 1 µs: the known name comes back NOERROR but is sent.
    let mut tracer = Tracer::start(&["--netns", bed.client.name(), "--dns-slow", "0.000001"]);
    let answer = dig(&bed.client, bed.server_ip);
    assert!(
        answer.contains("10.231.77.7"),
        "dnsmasq answered:\n{answer}"
    );
    let slow = tracer.expect("a slow dns record", Duration::from_secs(5), |v| {
        v["kind"] == "dns" && v["verdict"] == "slow"
    });
    assert_eq!(slow["name"], NAME, "{slow}");
    assert_eq!(slow["rcode"], "NOERROR", "{slow}");
    assert!(slow["latency_ms"].is_u64(), "{slow}");
    // dnsmasq has no upstream: another name gets an error rcode.
    let out = Command::new("ip")
        .args(["netns", "exec", bed.client.name(), "dig"])
        .arg(format!("@{}", bed.server_ip))
        .args(["other.test", "AAAA", "+tries=1", "+time=1"])
        .output()
        .expect("run dig");
    let error = tracer.expect("an error dns record", Duration::from_secs(5), |v| {
        v["kind"] == "dns" && v["verdict"] == "error"
    });
    assert_eq!(error["name"], "other.test", "{error}");
    assert_eq!(error["qtype"], "AAAA", "{error}");
    let rcode = error["rcode"].as_str().expect("rcode");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("status: {rcode}")),
        "the rcode dig saw ({rcode}): {error}"
    );
}

/// kube-proxy style: the pod queries the DNS Service address, the node DNATs it to a DNS pod that
/// drops queries. The record names the Service and, from the node's conntrack, the dead pod.
#[test]
fn dns_unanswered_query_to_a_service_names_the_backend_from_conntrack() {
    let bed = tests::testbed::ServiceBed::new("dnssvc", 1);
    let backend = bed.backend_ips[0];
    dnsmasq(&bed.backends[0], &[backend], Ipv4Addr::new(10, 231, 77, 7));
    let vip = bed.vip;
    bed.node.nft(&format!(
        "table ip tb_dnsnat {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {vip} udp dport 53 dnat to {backend}:53
  }}
}}
"
    ));
    // Answered through the Service first: the path works.
    assert!(
        dig(&bed.client, vip).contains("10.231.77.7"),
        "dig through the Service"
    );
    bed.backends[0].nft(
        "table inet tb_dnsdrop {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 53 drop
  }
}
",
    );
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--conntrack-netns",
        bed.node.name(),
        "--dns-timeout",
        "1.5",
    ]);
    assert_timed_out(&dig(&bed.client, vip));
    let record = tracer.expect("an unanswered dns record", Duration::from_secs(6), |v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered"
    });
    // Where the query went, whichever side of the node's DNAT the hooks saw it on.
    assert_eq!(
        record["server"],
        format!("{backend}:53").as_str(),
        "{record}"
    );
    assert_eq!(record["dialed"], format!("{vip}:53").as_str(), "{record}");
    assert_eq!(record["service"], format!("{vip}:53").as_str(), "{record}");
    assert_eq!(
        record["backend"],
        format!("{backend}:53").as_str(),
        "{record}"
    );
    assert_eq!(record["name"], NAME, "{record}");
    let explanation = record["explanation"].as_str().expect("explanation");
    assert!(
        explanation.contains(&format!("{backend}:53 (Service {vip}:53)")),
        "{record}"
    );
}

/// kubectl-format cluster state where `dead` is still listed by kube-dns's EndpointSlice for a CoreDNS
/// pod that no longer exists, while `live` is a current CoreDNS pod.
fn kube_dns_snapshot(dead: Ipv4Addr, live: Ipv4Addr, tag: &str) -> std::path::PathBuf {
    let coredns = |name: &str, ip: Ipv4Addr| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "kube-system", "uid": format!("uid-{name}"),
                         "labels": {"k8s-app": "kube-dns"}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "coredns", "image": "coredns:1",
                     "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                       "conditions": [{"type": "Ready", "status": "True"}]}
        })
    };
    let endpoint = |ip: Ipv4Addr, pod: &str| {
        serde_json::json!({"addresses": [ip.to_string()], "conditions": {"ready": true},
            "targetRef": {"kind": "Pod", "namespace": "kube-system", "name": pod, "uid": format!("uid-{pod}")}})
    };
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        coredns("coredns-7db6d8ff4d-live1", live),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system"},
         "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                  "ports": [{"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "kube-dns-x2k9p", "namespace": "kube-system",
                      "labels": {"kubernetes.io/service-name": "kube-dns"}},
         "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
         "endpoints": [endpoint(live, "coredns-7db6d8ff4d-live1"), endpoint(dead, "coredns-7db6d8ff4d-gone2")]}
    ]});
    let path =
        std::env::temp_dir().join(format!("tracer-kube-dns-{}-{tag}.json", std::process::id()));
    std::fs::write(&path, list.to_string()).expect("write the snapshot");
    path
}

#[test]
fn dns_unanswered_by_a_server_no_pod_has_is_dns_server_is_no_live_pod() {
    let bed = TwoHosts::new("dnsgone");
    bed.server.nft(
        "table inet tb_dnsgone {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 53 drop
  }
}
",
    );
    let live = Ipv4Addr::from(u32::from(bed.server_ip) + 20);
    let state = kube_dns_snapshot(bed.server_ip, live, bed.client.name());
    let state_arg = state.display().to_string();
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--dns-timeout",
        "1.5",
        "--cluster-state",
        &state_arg,
    ]);
    assert_timed_out(&dig(&bed.client, bed.server_ip));
    let record = tracer.expect("an unanswered dns record", Duration::from_secs(6), |v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered"
    });
    assert_eq!(
        record["cluster_verdict"], "DNS server is no live pod",
        "{record}"
    );
    let why = record["cluster_explanation"].as_str().expect("explanation");
    assert!(
        why.contains(&format!("No live pod has DNS server {}:53", bed.server_ip)),
        "{why}"
    );
    assert!(
        why.contains("kube-dns-x2k9p") && why.contains("coredns-7db6d8ff4d-gone2"),
        "{why}"
    );
    let _ = std::fs::remove_file(state);
}

/// The nginx resolver case under Cilium's socket LB on a kernel without `BPF_F_PREORDER` (emulated
/// with `--no-preorder`): a connected UDP socket to the DNS Service, rewritten to a server that is
/// gone, before the tracer's hook ran. Cilium's reverse socket NAT map (filled by the test's
/// rewriter as Cilium's program fills it) names the Service.
#[test]
fn dns_to_a_service_rewritten_by_cilium_socket_lb_names_the_service_from_its_maps() {
    let bed = TwoHosts::new("dnscil");
    let vip = std::net::SocketAddrV4::new(Ipv4Addr::new(10, 96, 200, 53), 53);
    // Nothing listens on the server: its ICMP port-unreachable refuses the query.
    let backend = std::net::SocketAddrV4::new(bed.server_ip, 53);
    let lb = tests::cilium_lb::CiliumLb::new("tracer-test-dnscil", vip, backend);
    let mut tracer = lb.start_tracer(bed.client.name(), &["--dns-timeout", "1"]);
    // bash's /dev/udp is a connected UDP socket, like nginx's resolver's: one A query for NAME.
    let query =
        r"\x42\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03web\x04test\x00\x00\x01\x00\x01";
    // The client sends, reads until the refusal reaches its socket (or 2 s), and exits: Cilium
    // deletes the socket's entry at its release, before the query is reported. With the
    // tracer's userspace held until then, the Service can only have been read by its kernel hook
    // as the query left.
    let script = format!(
        "exec 3<>/dev/udp/{ip}/{port}; printf '{query}' >&3; read -r -t 2 _ <&3 2>/dev/null; true",
        ip = vip.ip(),
        port = vip.port()
    );
    // Without the error-report tracepoint (5.10) the refusal looks like silence.
    let verdict = if kernel_facts::has_tracepoint("inet_sk_error_report") {
        "refused"
    } else {
        "unanswered"
    };
    let status = lb.run_released(&tracer, bed.client.name(), &["bash", "-c", &script]);
    assert!(status.success(), "the client ran: {status}");
    let r = tracer.expect("a dns record", Duration::from_secs(10), |v| {
        v["kind"] == "dns" && v["name"] == NAME
    });
    assert_eq!(r["verdict"], verdict, "{r}");
    assert_eq!(
        r["server"],
        backend.to_string(),
        "the socket knows the server: {r}"
    );
    assert_eq!(
        r["service"],
        vip.to_string(),
        "named from Cilium's maps: {r}"
    );
    assert_eq!(r["backend"], backend.to_string(), "{r}");
    assert_eq!(
        r["dialed"],
        vip.to_string(),
        "what the resolver dialled: {r}"
    );
    let (_, seen, _) = tracer.stop();
    let stats = seen
        .iter()
        .rfind(|v| v["kind"] == "stats" && v["final"] == true)
        .expect("final stats");
    assert_eq!(stats["socket_lb"]["path"], "cilium_maps", "{stats}");
    assert_eq!(stats["socket_lb"]["cilium"]["named"], 1, "{stats}");
    drop(lb);
}
