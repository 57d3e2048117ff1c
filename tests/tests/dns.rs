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
    testbed::{Netns, TwoHosts},
    tracer::Tracer,
};

/// The one name the test server knows, and its address.
const NAME: &str = "web.test";

/// Starts dnsmasq in `ns` answering only `web.test` with `answer`, listening on `listen` only;
/// returns once it answers.
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
    let _ = dig(&bed.client, bed.server_ip);
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
    let mut tracer = Tracer::start(&["--netns", bed.client.name()]);
    let out = dig(&bed.client, bed.server_ip);
    let record = tracer.expect("a refused dns record", Duration::from_secs(5), |v| {
        v["kind"] == "dns" && v["verdict"] == "refused"
    });
    assert_eq!(record["name"], NAME, "{record} (dig said:\n{out})");
    assert_eq!(record["qtype"], "A", "{record}");
    assert_eq!(
        record["server"],
        format!("{}:53", bed.server_ip).as_str(),
        "{record}"
    );
    let (_, seen, _) = tracer.stop();
    assert!(dns_records(&seen, "unanswered").is_empty(), "{seen:?}");
}
