//! The stale datapath audit end to end (incident 000): a "node" namespace holding kube-proxy's real
//! rules (iptables through the nf_tables backend, or kube-proxy's nftables table) for Service
//! app/web with a live and a dead backend, a kubectl-format snapshot whose EndpointSlice lists only
//! the live one, and the real tracer reading that namespace (`--conntrack-netns`). It must name the
//! dead backend's entry and where it lives, not the live one; see the entry go when the rules
//! change; and agree with the black-holed connects real traffic through the stale DNAT gives.
use std::{
    net::{Ipv4Addr, SocketAddr, SocketAddrV4},
    path::PathBuf,
    time::Duration,
};

use serde_json::{Value, json};
use tests::{
    testbed::{Listener, ServiceBed, nft_drop_syn_to},
    tracer::Tracer,
};

const SVC_PORT: u16 = 80;
const POD_PORT: u16 = 8080;
const LIVE_POD: &str = "web-7f9c-live1";

struct Bed {
    bed: ServiceBed,
    live: SocketAddrV4,
    dead: SocketAddrV4,
    vip: SocketAddr,
    _listener: Listener,
    snapshot: PathBuf,
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.snapshot);
    }
}

/// Backend 0 listens (pod web-...-live1, listed by the EndpointSlice); backend 1 drops SYNs and is
/// no pod at all (its pod was deleted, the slice no longer lists it).
fn bed(prefix: &str) -> Bed {
    let bed = ServiceBed::new(prefix, 2);
    let live = SocketAddrV4::new(bed.backend_ips[0], POD_PORT);
    let dead = SocketAddrV4::new(bed.backend_ips[1], POD_PORT);
    let listener = Listener::start(&bed.backends[0], live);
    bed.backends[1].nft(&nft_drop_syn_to(POD_PORT));
    let vip = SocketAddr::from(SocketAddrV4::new(bed.vip, SVC_PORT));
    let snapshot = std::env::temp_dir().join(format!(
        "tracer-stale-datapath-{}-{}.json",
        std::process::id(),
        bed.node.name()
    ));
    std::fs::write(&snapshot, cluster(&bed, *live.ip()).to_string()).expect("write the snapshot");
    Bed {
        bed,
        live,
        dead,
        vip,
        _listener: listener,
        snapshot,
    }
}

fn cluster(bed: &ServiceBed, live_ip: Ipv4Addr) -> Value {
    let pod = |name: &str, ip: Ipv4Addr| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
               "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "app:1"}]},
               "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    json!({"apiVersion": "v1", "kind": "List", "items": [
        pod(LIVE_POD, live_ip),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "app"},
         "spec": {"type": "ClusterIP", "clusterIP": bed.vip.to_string(), "selector": {"app": "web"},
                  "ports": [{"name": "http", "port": SVC_PORT, "targetPort": POD_PORT, "protocol": "TCP"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "web-x7k2p", "namespace": "app", "labels": {"kubernetes.io/service-name": "web"}},
         "ports": [{"name": "http", "port": POD_PORT, "protocol": "TCP"}],
         "endpoints": [{"addresses": [live_ip.to_string()], "conditions": {"ready": true},
                        "targetRef": {"kind": "Pod", "namespace": "app", "name": LIVE_POD}}]}
    ]})
}

const SEP_LIVE: &str = "KUBE-SEP-TBLIVE0000000000";
const SEP_DEAD: &str = "KUBE-SEP-TBDEAD0000000000";

/// kube-proxy's iptables rules for app/web:http as `iptables-save` shows them (kube-proxy 1.29+):
/// with the dead backend's SEP chain first, at probability 0.5, when `with_dead`.
fn iptables_rules(b: &Bed, with_dead: bool) -> String {
    let (vip, live, dead) = (b.bed.vip, b.live, b.dead);
    let svc = "KUBE-SVC-TBWEB00000000000";
    let sep = |chain: &str, to: SocketAddrV4| {
        format!(
            "-A {chain} -s {ip}/32 -m comment --comment \"app/web:http\" -j KUBE-MARK-MASQ\n\
             -A {chain} -p tcp -m comment --comment \"app/web:http\" -m tcp -j DNAT --to-destination {to}\n",
            ip = to.ip()
        )
    };
    let mut rules = format!(
        "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:{svc} - [0:0]\n\
         :{SEP_LIVE} - [0:0]\n{dead_chain}\
         -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
         -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n\
         -A KUBE-SERVICES -d {vip}/32 -p tcp -m comment --comment \"app/web:http cluster IP\" -m tcp --dport {SVC_PORT} -j {svc}\n",
        dead_chain = if with_dead {
            format!(":{SEP_DEAD} - [0:0]\n")
        } else {
            String::new()
        }
    );
    if with_dead {
        rules += &format!(
            "-A {svc} -m comment --comment \"app/web:http -> {dead}\" -m statistic --mode random --probability 0.5000000000 -j {SEP_DEAD}\n"
        );
        rules += &sep(SEP_DEAD, dead);
    }
    rules += &format!("-A {svc} -m comment --comment \"app/web:http -> {live}\" -j {SEP_LIVE}\n");
    rules += &sep(SEP_LIVE, live);
    rules + "COMMIT\n"
}

fn endpoint_chain(to: SocketAddrV4) -> String {
    format!(
        "endpoint-TB{:06X}-app/web/tcp/http__{}/{}",
        u32::from(*to.ip()) & 0xff_ffff,
        to.ip(),
        to.port()
    )
}

/// kube-proxy's nftables table for app/web:http (kube-proxy 1.31+ `nftables` mode, the parts the
/// datapath needs): `service-ips` -> `service-*` -> one `endpoint-*` chain per backend.
fn nft_table(b: &Bed, with_dead: bool) -> String {
    let svc = "service-TBWEB000-app/web/tcp/http";
    let mut backends = vec![b.live];
    if with_dead {
        backends.insert(0, b.dead);
    }
    let vmap: Vec<String> = backends
        .iter()
        .enumerate()
        .map(|(i, to)| format!("{i} : goto {}", endpoint_chain(*to)))
        .collect();
    let mut script = format!(
        "add table ip kube-proxy\n\
         delete table ip kube-proxy\n\
         add table ip kube-proxy {{ comment \"rules for kube-proxy\" ; }}\n\
         {chains}\
         add map ip kube-proxy service-ips {{ type ipv4_addr . inet_proto . inet_service : verdict ; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\" ; }}\n\
         add chain ip kube-proxy mark-for-masquerade\n\
         add chain ip kube-proxy nat-prerouting {{ type nat hook prerouting priority -100 ; }}\n\
         add chain ip kube-proxy services\n\
         add chain ip kube-proxy {svc}\n\
         add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000\n\
         add rule ip kube-proxy nat-prerouting jump services\n\
         add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips\n\
         add rule ip kube-proxy {svc} ip daddr {vip} tcp dport {SVC_PORT} ip saddr != 10.231.0.0/16 jump mark-for-masquerade\n\
         add rule ip kube-proxy {svc} numgen random mod {n} vmap {{ {vmap} }}\n\
         add element ip kube-proxy service-ips {{ {vip} . tcp . {SVC_PORT} : goto {svc} }}\n",
        vip = b.bed.vip,
        chains = backends
            .iter()
            .map(|to| format!("add chain ip kube-proxy {}\n", endpoint_chain(*to)))
            .collect::<String>(),
        n = backends.len(),
        vmap = vmap.join(" , ")
    );
    for to in backends {
        let chain = endpoint_chain(to);
        script += &format!(
            "add rule ip kube-proxy {chain} ip saddr {ip} jump mark-for-masquerade\n\
             add rule ip kube-proxy {chain} meta l4proto tcp dnat to {to}\n",
            ip = to.ip()
        );
    }
    script
}

fn tracer_for(b: &Bed) -> Tracer {
    Tracer::start(&[
        "--netns",
        b.bed.client.name(),
        "--conntrack-netns",
        b.bed.node.name(),
        "--cluster-state",
        b.snapshot.to_str().expect("utf-8 path"),
    ])
}

fn is_stale(v: &Value, backend: SocketAddrV4, gone: bool) -> bool {
    v["kind"] == "stale_datapath"
        && v["backend"] == backend.to_string()
        && (v["gone"] == true) == gone
}

/// The stale entry for the dead backend: named with its Service, source, chain and reason; and no
/// stale entry for the live backend.
fn expect_dead_entry_only(tracer: &mut Tracer, b: &Bed, source: &str, location: &str) -> Value {
    let stale = tracer.expect(
        "a stale_datapath record for the dead backend",
        Duration::from_secs(10),
        |v| is_stale(v, b.dead, false),
    );
    assert_eq!(stale["service"], b.vip.to_string(), "{stale}");
    assert_eq!(stale["service_name"], "app/web", "{stale}");
    assert_eq!(stale["source"], source, "{stale}");
    assert_eq!(stale["location"], location, "{stale}");
    assert_eq!(stale["protocol"], "tcp", "{stale}");
    assert_eq!(
        stale["reason"], "no EndpointSlice lists it and its pod is gone",
        "{stale}"
    );
    let explanation = stale["explanation"].as_str().expect("an explanation");
    assert!(
        explanation.contains(&b.dead.to_string()) && explanation.contains(location),
        "{explanation}"
    );
    // A few more reads: the live backend is never reported, the dead one only once.
    tracer.collect_for(Duration::from_secs(3));
    let records: Vec<&Value> = tracer
        .seen
        .iter()
        .filter(|v| v["kind"] == "stale_datapath")
        .collect();
    assert_eq!(
        records.len(),
        1,
        "one record, at start, none for the live backend: {records:?}"
    );
    stale
}

/// Connects through the Service until one is black-holed (the random DNAT chose the dead backend);
/// its final record, which names that backend.
fn black_holed_connect(tracer: &mut Tracer, b: &Bed) -> Value {
    let vip = b.vip;
    for _ in 0..20 {
        let answered = b.bed.client.run_in("tc-stale", move || {
            std::net::TcpStream::connect_timeout(&vip, Duration::from_millis(1500)).is_ok()
        });
        if !answered {
            return tracer.expect(
                "the final record of the black-holed connect",
                Duration::from_secs(5),
                |v| v["kind"] == "connect" && v["final"] == true && v["service"] == vip.to_string(),
            );
        }
    }
    panic!("20 connects through a 50% stale DNAT were all answered");
}

/// `ipvs` as the final stats record states it: read when the `ip_vs` module is loaded here, else
/// absent with the reason (said on stderr too), never silently skipped.
fn check_ipvs_statement(stats: &Value, stderr: &str) {
    let ipvs = &stats["datapath"]["sources"]["ipvs"];
    if std::path::Path::new("/proc/net/ip_vs").exists() {
        assert_eq!(ipvs["state"], "read", "{stats}");
    } else {
        assert_eq!(ipvs["state"], "absent", "{stats}");
        assert_eq!(
            ipvs["reason"], "no /proc/net/ip_vs: the ip_vs module is not loaded",
            "{stats}"
        );
        assert!(
            stderr.contains(
                "datapath audit: ipvs not present: no /proc/net/ip_vs: the ip_vs module is not loaded"
            ),
            "{stderr}"
        );
    }
}

fn final_stats(seen: &[Value], stderr: &str) -> Value {
    seen.iter()
        .rfind(|v| v["kind"] == "stats" && v["final"] == true)
        .unwrap_or_else(|| panic!("a final stats record; stderr:\n{stderr}"))
        .clone()
}

#[test]
fn stale_datapath_iptables_names_the_dead_sep_agrees_with_traffic_and_sees_it_removed() {
    let b = bed("sdi");
    b.bed.node.iptables_restore(&iptables_rules(&b, true));
    let mut tracer = tracer_for(&b);
    let stale = expect_dead_entry_only(&mut tracer, &b, "iptables", SEP_DEAD);

    // Real traffic through the stale DNAT: the connect it black-holes names the same backend.
    let connect = black_holed_connect(&mut tracer, &b);
    assert_eq!(connect["verdict"], "abandoned", "{connect}");
    assert_eq!(connect["backend"], stale["backend"], "{connect}\n{stale}");
    assert_eq!(connect["service"], stale["service"], "{connect}\n{stale}");

    // kube-proxy catches up: the dead SEP chain goes, and so does the entry.
    b.bed.node.iptables_restore(&iptables_rules(&b, false));
    let gone = tracer.expect(
        "the stale entry reported gone",
        Duration::from_secs(10),
        |v| is_stale(v, b.dead, true),
    );
    assert_eq!(gone["location"], SEP_DEAD, "{gone}");
    assert!(
        gone["explanation"]
            .as_str()
            .is_some_and(|e| e.ends_with("the stale entry was removed.")),
        "{gone}"
    );

    let (ok, seen, stderr) = tracer.stop();
    assert!(ok, "{stderr}");
    let stats = final_stats(&seen, &stderr);
    let datapath = &stats["datapath"];
    assert_eq!(datapath["cluster_state"], "file", "{stats}");
    assert_eq!(datapath["stale_entries"], 0, "{stats}");
    assert_eq!(
        datapath["sources"]["iptables"],
        json!({"state": "read", "entries": 1, "stale": 0}),
        "{stats}"
    );
    assert_eq!(
        datapath["sources"]["nftables"]["state"], "absent",
        "{stats}"
    );
    check_ipvs_statement(&stats, &stderr);
}

#[test]
fn stale_datapath_cilium_maps_name_the_dead_backend_agree_with_traffic_and_see_it_removed() {
    let b = bed("sdc");
    let SocketAddr::V4(vip) = b.vip else {
        unreachable!("an IPv4 bed")
    };
    // Cilium's service maps still send the Service to the dead backend, as on 3 of 10 nodes in
    // incident 000; its socket LB rewrites connects from the client's cgroup.
    let lb = tests::cilium_lb::CiliumLb::new("tracer-test-sdc", vip, b.dead);
    let mut tracer = lb.start_tracer(
        b.bed.client.name(),
        &[
            "--conntrack-netns",
            b.bed.node.name(),
            "--cluster-state",
            b.snapshot.to_str().expect("utf-8 path"),
        ],
    );
    let location = "cilium_lb4_services_v2 slot 1, cilium_lb4_backends_v3 id 1";
    let stale = expect_dead_entry_only(&mut tracer, &b, "cilium", location);

    // Real traffic through Cilium's socket LB: the connect it black-holes names the same backend.
    let url = format!("http://{vip}/");
    let status = lb.run_released(
        &tracer,
        b.bed.client.name(),
        &["curl", "-s", "--noproxy", "*", "--max-time", "2", &url],
    );
    assert!(!status.success(), "the dead backend drops the SYNs");
    let connect = tracer.expect(
        "the final record of the black-holed connect",
        Duration::from_secs(5),
        |v| v["kind"] == "connect" && v["final"] == true,
    );
    assert_eq!(connect["verdict"], "abandoned", "{connect}");
    assert_eq!(connect["backend"], stale["backend"], "{connect}\n{stale}");
    assert_eq!(connect["service"], stale["service"], "{connect}\n{stale}");

    // Cilium's agent catches up: the backend's slot goes, and so does the entry.
    lb.remove_backend();
    let gone = tracer.expect(
        "the stale entry reported gone",
        Duration::from_secs(10),
        |v| is_stale(v, b.dead, true),
    );
    assert_eq!(gone["location"], location, "{gone}");

    let (ok, seen, stderr) = tracer.stop();
    assert!(ok, "{stderr}");
    let stats = final_stats(&seen, &stderr);
    let datapath = &stats["datapath"];
    assert_eq!(datapath["stale_entries"], 0, "{stats}");
    assert_eq!(
        datapath["sources"]["cilium"],
        json!({"state": "read", "entries": 0, "stale": 0}),
        "{stats}"
    );
    drop(lb);
}

#[test]
fn stale_datapath_nftables_names_the_dead_endpoint_chain_and_sees_it_removed() {
    let b = bed("sdn");
    b.bed.node.nft(&nft_table(&b, true));
    let mut tracer = tracer_for(&b);
    let dead_chain = endpoint_chain(b.dead);
    let stale = expect_dead_entry_only(&mut tracer, &b, "nftables", &dead_chain);

    let connect = black_holed_connect(&mut tracer, &b);
    assert_eq!(connect["backend"], stale["backend"], "{connect}\n{stale}");

    // While stale, the stats count it: what the sweep and the metrics read.
    let counted = tracer.expect(
        "a stats record counting the stale entry",
        Duration::from_secs(5),
        |v| v["kind"] == "stats" && v["datapath"]["stale_entries"] == 1,
    );
    assert_eq!(
        counted["datapath"]["sources"]["nftables"],
        json!({"state": "read", "entries": 2, "stale": 1}),
        "{counted}"
    );

    b.bed.node.nft(&nft_table(&b, false));
    tracer.expect(
        "the stale entry reported gone",
        Duration::from_secs(10),
        |v| is_stale(v, b.dead, true) && v["location"] == dead_chain.as_str(),
    );
    let (ok, seen, stderr) = tracer.stop();
    assert!(ok, "{stderr}");
    let stats = final_stats(&seen, &stderr);
    assert_eq!(stats["datapath"]["stale_entries"], 0, "{stats}");
    assert_eq!(
        stats["datapath"]["sources"]["iptables"]["state"], "absent",
        "{stats}"
    );
    check_ipvs_statement(&stats, &stderr);
}

#[test]
fn stale_datapath_without_cluster_state_is_not_judged_and_says_so() {
    let b = bed("sdx");
    b.bed.node.iptables_restore(&iptables_rules(&b, true));
    let mut tracer = Tracer::start(&[
        "--netns",
        b.bed.client.name(),
        "--conntrack-netns",
        b.bed.node.name(),
    ]);
    // The audit has had its turn once a stats record carries its state.
    tracer.expect(
        "a stats record with the datapath audit's state",
        Duration::from_secs(5),
        |v| v["kind"] == "stats" && v["datapath"].is_object(),
    );
    let (ok, seen, stderr) = tracer.stop();
    assert!(ok, "{stderr}");
    assert!(
        !seen.iter().any(|v| v["kind"] == "stale_datapath"),
        "nothing judged, nothing reported: {seen:?}"
    );
    let stats = final_stats(&seen, &stderr);
    assert_eq!(stats["datapath"]["cluster_state"], "none", "{stats}");
    assert!(
        stderr.contains("datapath audit off: no cluster state"),
        "{stderr}"
    );
}
