//! The reply that never arrived (incident 002): a client reaches a pod through an ingress node that
//! DNATs and SNATs its connection (externalTrafficPolicy: Cluster); the ingress node's return path
//! is cut after the request. The server answered; the tracer on the server's side reports the
//! replies lost and names the address they went to (the ingress node's SNAT address) and, from
//! that node's conntrack, the real client. A healthy exchange on the same path reports nothing.
use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    time::Duration,
};

use serde_json::Value;
use tests::{testbed::ReturnPathBed, tracer::Tracer};

const ANSWER_BYTES: usize = 32 * 1024;

/// Serves `n` connections in the pod: reads a request, answers `ANSWER_BYTES`, then waits for the
/// client to close; returns how each connection ended (`Ok` when the client closed).
fn server(bed: &ReturnPathBed, n: usize) -> std::thread::JoinHandle<Vec<std::io::Result<()>>> {
    let addr = SocketAddr::V4(bed.pod_addr);
    let listener = bed
        .pod
        .run_in("rpl-bind", move || TcpListener::bind(addr))
        .expect("the server listens");
    bed.pod.spawn_in("rpl-server", move || {
        (0..n)
            .map(|_| {
                let (mut conn, _) = listener.accept()?;
                let mut request = [0u8; 64];
                let _ = conn.read(&mut request)?;
                conn.write_all(&[b'x'; ANSWER_BYTES])?;
                let mut rest = [0u8; 1];
                conn.read(&mut rest).map(|_| ())
            })
            .collect()
    })
}

fn client_connect(bed: &ReturnPathBed) -> TcpStream {
    let dst = SocketAddr::V4(bed.node_port);
    bed.client
        .run_in("rpl-client", move || {
            TcpStream::connect_timeout(&dst, Duration::from_secs(5))
        })
        .expect("the client connects through the ingress node")
}

/// The record names the server, the ingress node's SNAT address its replies went to, and the real
/// client from that node's conntrack.
fn assert_ends_named(end: &Value, bed: &ReturnPathBed) {
    let ip_of = |field: &str| {
        end[field]
            .as_str()
            .and_then(|a| a.parse::<SocketAddr>().ok())
            .map(|a| a.ip().to_string())
    };
    assert_eq!(end["local"], bed.pod_addr.to_string(), "{end}");
    assert_eq!(
        ip_of("peer"),
        Some(bed.snat_ip.to_string()),
        "the replies went to the ingress node's SNAT address: {end}"
    );
    assert_eq!(
        ip_of("client"),
        Some(bed.client_ip.to_string()),
        "the ingress node's conntrack names the real client: {end}"
    );
}

fn replies_lost(tracer: &Tracer) -> Vec<&Value> {
    tracer
        .seen
        .iter()
        .filter(|r| r["kind"] == "reply_lost")
        .collect()
}

/// Cluster state in which the ingress node (the SNAT address) is a node that is not Ready.
fn ingress_node_not_ready(bed: &ReturnPathBed) -> tests::temp_file::TempFile {
    let snapshot = serde_json::json!({
        "apiVersion": "v1", "kind": "List",
        "items": [{
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-ingress"},
            "status": {"addresses": [{"type": "InternalIP", "address": bed.snat_ip.to_string()}],
                       "conditions": [{"type": "Ready", "status": "Unknown"}]}
        }]
    });
    tests::temp_file::temp_file("nodes.json", snapshot.to_string())
}

#[test]
fn replies_cut_on_the_ingress_node_are_lost_and_name_the_snat_address_and_the_client() {
    let bed = ReturnPathBed::new("rpl");
    // The server's kernel gives up after a few retransmits (seconds, not the default 15 minutes).
    bed.pod
        .exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_retries2=3"]);
    let cluster_state = ingress_node_not_ready(&bed);
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.pod.name(),
        "--conntrack-netns",
        bed.ingress.name(),
        "--cluster-state",
        &cluster_state,
    ]);
    let served = server(&bed, 2);

    // A healthy exchange first: the whole answer arrives.
    let mut healthy = client_connect(&bed);
    healthy.write_all(b"GET /").expect("request");
    let mut answer = Vec::new();
    healthy
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    while answer.len() < ANSWER_BYTES {
        let mut buf = [0u8; 8192];
        let n = healthy.read(&mut buf).expect("the answer arrives");
        assert!(n > 0, "the server closed early");
        answer.extend_from_slice(&buf[..n]);
    }
    drop(healthy);

    // Then one whose replies the ingress node drops.
    let mut cut = client_connect(&bed);
    bed.cut_return_path();
    cut.write_all(b"GET /").expect("request");
    let outcomes = served.join().expect("the server thread");
    assert!(outcomes[0].is_ok(), "healthy: {:?}", outcomes[0]);
    assert_eq!(
        outcomes[1].as_ref().map_err(std::io::Error::raw_os_error),
        Err(Some(libc::ETIMEDOUT)),
        "the server's kernel gave up on its replies"
    );

    let end = tracer.expect("the replies lost", Duration::from_secs(5), |v| {
        v["kind"] == "reply_lost" && v["final"] == true
    });
    assert_eq!(end["outcome"], "timed_out", "{end}");
    assert_ends_named(&end, &bed);
    assert_eq!(end["client_dialed"], bed.node_port.to_string(), "{end}");
    assert!(
        end["retransmits"].as_u64().expect("retransmits") >= 3,
        "{end}"
    );
    assert!(end["unacked_bytes"].as_u64().expect("unacked") > 0, "{end}");
    assert_eq!(
        end["pid"],
        std::process::id(),
        "the test's server holds the socket: {end}"
    );
    assert_eq!(end["cluster_verdict"], "peer node is NotReady", "{end}");
    assert!(
        end["cluster_explanation"]
            .as_str()
            .is_some_and(|e| e.contains("node-ingress")),
        "{end}"
    );
    assert_eq!(end["dst_node"], "node-ingress", "{end}");
    let explanation = end["explanation"].as_str().expect("explanation");
    assert!(
        explanation.contains("never acknowledged")
            && explanation.contains(&bed.snat_ip.to_string()),
        "{explanation}"
    );
    let live: Vec<_> = replies_lost(&tracer)
        .into_iter()
        .filter(|r| r["final"] == false)
        .collect();
    assert!(
        live.iter()
            .any(|r| r["outcome"] == "unacknowledged" && r["flow"] == end["flow"]),
        "reported live before its end: {live:?}"
    );
    let flows: std::collections::BTreeSet<_> = replies_lost(&tracer)
        .iter()
        .map(|r| r["flow"].to_string())
        .collect();
    assert_eq!(
        flows.len(),
        1,
        "the healthy exchange reported nothing: {flows:?}"
    );
    drop(cut);
}

#[test]
fn syn_acks_cut_on_the_ingress_node_are_a_handshake_that_never_completed() {
    let bed = ReturnPathBed::new("rph");
    // The server's kernel gives up on a handshake after 2 SYN-ACK retransmits (about 7 s).
    bed.pod
        .exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_synack_retries=2"]);
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.pod.name(),
        "--conntrack-netns",
        bed.ingress.name(),
    ]);
    let addr = SocketAddr::V4(bed.pod_addr);
    let _listener = bed
        .pod
        .run_in("rph-bind", move || TcpListener::bind(addr))
        .expect("the server listens");
    // The return path is cut before the handshake: the SYN arrives, no SYN-ACK gets back.
    bed.cut_return_path();
    let dst = SocketAddr::V4(bed.node_port);
    let refused = bed.client.run_in("rph-client", move || {
        TcpStream::connect_timeout(&dst, Duration::from_secs(3))
    });
    assert!(refused.is_err(), "the client never gets an answer");

    let live = tracer.expect("SYN-ACKs retransmitted", Duration::from_secs(8), |v| {
        v["kind"] == "reply_lost" && v["final"] == false
    });
    assert_eq!(live["handshake"], true, "{live}");
    assert_eq!(live["outcome"], "unacknowledged", "{live}");
    let end = tracer.expect("the handshake given up", Duration::from_secs(20), |v| {
        v["kind"] == "reply_lost" && v["final"] == true
    });
    assert_eq!(end["handshake"], true, "{end}");
    assert_eq!(end["outcome"], "no_final_ack", "{end}");
    assert_eq!(end["flow"], live["flow"], "{end}");
    assert_ends_named(&end, &bed);
    assert_eq!(
        end["pid"],
        std::process::id(),
        "the listener's process: {end}"
    );
    assert!(
        end["explanation"]
            .as_str()
            .is_some_and(|e| e.contains("the final ACK never came")),
        "{end}"
    );
}

#[test]
fn a_clients_own_unacknowledged_request_is_not_a_servers_lost_reply() {
    // Regression (#28): the client's socket, whose request and close the cut return path leaves
    // unacknowledged, was reported as replies lost, with its ephemeral port as `local`.
    let bed = ReturnPathBed::new("rpk");
    bed.pod
        .exec(&["sysctl", "-q", "-w", "net.ipv4.tcp_retries2=3"]);
    let mut client_side = Tracer::start(&["--netns", bed.client.name()]);
    let mut server_side = Tracer::start(&[
        "--netns",
        bed.pod.name(),
        "--conntrack-netns",
        bed.ingress.name(),
    ]);
    let served = server(&bed, 1);
    let mut cut = client_connect(&bed);
    bed.cut_return_path();
    cut.write_all(b"GET /").expect("request");
    // The same cut leaves both ends retransmitting: the server its answer, the client its request.
    let live = server_side.expect("the server's replies lost", Duration::from_secs(8), |v| {
        v["kind"] == "reply_lost"
    });
    assert_eq!(live["local"], bed.pod_addr.to_string(), "{live}");
    drop(cut);
    client_side.collect_for(Duration::from_secs(4));
    let client_reports = replies_lost(&client_side);
    assert!(
        client_reports.is_empty(),
        "the client's socket is no server: {client_reports:?}"
    );
    let _ = served.join();
}
