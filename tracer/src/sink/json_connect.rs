//! The `connect` JSON line written by hand: nearly every line of a busy node is one, and building
//! it through serde (a map, because of `flatten`, with every key escaped and every address and
//! time through `fmt`) cost twice the rest of the pipeline. The schema stays the one of
//! `record/`: the record is destructured field by field (a new field does not compile until it
//! is written here), the identity fields are serde's own, and the tests below compare this writer
//! with serde's serialization of the same record over generated records.
use std::io;

use super::json_values::{TimeText, boolean, key, number, socket_addr, string};
use crate::record::{ConnectRecord, SCHEMA_VERSION};

/// One `connect` line, without its newline, appended to `out`: the fields in the order serde
/// writes `Line { schema, record: Record::Connect(..) }`.
pub fn write(out: &mut Vec<u8>, times: &mut TimeText, record: &ConnectRecord) -> io::Result<()> {
    let ConnectRecord {
        time,
        verdict,
        is_final,
        src,
        dst,
        dialed,
        service,
        backend,
        syns,
        syn_sent_ms,
        errno,
        pid,
        tid,
        comm,
        cgroup_id,
        netns,
        netns_inode,
        flow,
        explanation,
        identity,
        dns,
    } = record;
    out.extend_from_slice(b"{\"schema\":");
    number(out, SCHEMA_VERSION.into());
    out.extend_from_slice(b",\"kind\":\"connect\"");
    key!(out, "time");
    times.write(out, *time)?;
    // `verdict` and `cause` (rare, short, and serde's own text).
    key!(out, "verdict");
    serde_json::to_writer(&mut *out, &verdict.kind())?;
    if let Some(cause) = verdict.cause() {
        key!(out, "cause");
        serde_json::to_writer(&mut *out, &cause)?;
    }
    key!(out, "final");
    boolean(out, *is_final);
    key!(out, "src");
    socket_addr(out, *src);
    key!(out, "dst");
    socket_addr(out, *dst);
    if let Some(addr) = dialed {
        key!(out, "dialed");
        socket_addr(out, *addr);
    }
    if let Some(addr) = service {
        key!(out, "service");
        socket_addr(out, *addr);
    }
    if let Some(addr) = backend {
        key!(out, "backend");
        socket_addr(out, *addr);
    }
    key!(out, "syns");
    number(out, (*syns).into());
    key!(out, "syn_sent_ms");
    number(out, *syn_sent_ms);
    if let Some(errno) = errno {
        key!(out, "errno");
        serde_json::to_writer(&mut *out, errno)?;
    }
    key!(out, "pid");
    number(out, (*pid).into());
    key!(out, "tid");
    number(out, (*tid).into());
    key!(out, "comm");
    string(out, comm)?;
    key!(out, "cgroup_id");
    number(out, *cgroup_id);
    key!(out, "netns");
    string(out, netns)?;
    key!(out, "netns_inode");
    number(out, *netns_inode);
    key!(out, "flow");
    string(out, flow)?;
    key!(out, "explanation");
    string(out, explanation)?;
    // Flattened as serde does it: its object, `{}` or `{"src_pod":..,..}`, without the braces.
    let start = out.len();
    serde_json::to_writer(&mut *out, identity)?;
    if out.len() == start + 2 {
        out.truncate(start);
    } else {
        out[start] = b',';
        out.pop();
    }
    if *dns {
        key!(out, "dns");
        boolean(out, true);
    }
    out.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::{
        net::{IpAddr, SocketAddr},
        time::{Duration, UNIX_EPOCH},
    };

    use proptest::prelude::*;

    use super::*;
    use crate::verdict::ClusterVerdictKind;
    use crate::{
        clock::Timestamp,
        identity::Identity,
        record::{Line, Record},
        verdict::{Errno, RefusedBy, Unreachable, Verdict},
    };

    /// What serde writes for the record: the schema's reference.
    fn serde_line(record: &ConnectRecord) -> String {
        serde_json::to_string(&Line {
            schema: SCHEMA_VERSION,
            record: Record::Connect(record.clone()),
        })
        .expect("serialize")
    }

    fn hand_line(record: &ConnectRecord) -> String {
        let mut out = Vec::new();
        write(&mut out, &mut TimeText::default(), record).expect("write");
        String::from_utf8(out).expect("utf8")
    }

    fn verdict() -> impl Strategy<Value = Verdict> {
        prop_oneof![
            Just(Verdict::Established),
            Just(Verdict::Slow),
            Just(Verdict::Unanswered),
            Just(Verdict::Refused { by: RefusedBy::Rst }),
            Just(Verdict::Refused {
                by: RefusedBy::Icmp
            }),
            Just(Verdict::Unreachable {
                kind: Unreachable::Host
            }),
            Just(Verdict::Unreachable {
                kind: Unreachable::Network
            }),
            Just(Verdict::TimedOut),
            Just(Verdict::Abandoned),
            any::<i32>().prop_map(|errno| Verdict::Failed { errno }),
        ]
    }

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
            (any::<[u8; 16]>(), any::<u16>(), any::<u32>()).prop_map(|(ip, port, scope)| {
                SocketAddr::V6(std::net::SocketAddrV6::new(ip.into(), port, 0, scope))
            }),
        ]
    }

    /// Any text: plain names, and strings with quotes, backslashes and control characters.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9./:-]{0,24}",
            any::<String>(),
            "[\"\\\\\u{0}-\u{1f}\u{7f}a é🦀]{0,12}",
        ]
    }

    fn identity() -> impl Strategy<Value = Identity> {
        (
            prop::collection::vec(prop::option::of(text()), 17),
            prop::collection::vec(text(), 0..3),
            [any::<Option<bool>>(), any::<Option<bool>>()],
            any::<Option<u64>>(),
            any::<bool>(),
        )
            .prop_map(
                |(mut names, endpoint_of, [dst_ready, backend_ready], age, stale)| {
                    let mut next = || names.remove(0);
                    Identity {
                        src_pod: next(),
                        src_namespace: next(),
                        src_owner: next(),
                        src_container: next(),
                        src_cgroup: next(),
                        dst_pod: next(),
                        dst_namespace: next(),
                        dst_owner: next(),
                        dst_node: next(),
                        dst_ready,
                        dst_service: next(),
                        dst_port_name: next(),
                        dst_endpoint_of: endpoint_of,
                        backend_pod: next(),
                        backend_namespace: next(),
                        backend_node: next(),
                        backend_ready,
                        cluster_verdict: next().map(|t| {
                            ClusterVerdictKind::ALL[t.len() % ClusterVerdictKind::ALL.len()]
                        }),
                        cluster_explanation: next(),
                        identity_source: next(),
                        identity_age_s: age,
                        identity_stale: stale,
                    }
                },
            )
    }

    /// Times from the epoch to the last millisecond of year 9999.
    fn time() -> impl Strategy<Value = Timestamp> {
        (0..253_402_300_800u64, 0..1_000_000_000u32)
            .prop_map(|(s, ns)| Timestamp(UNIX_EPOCH + Duration::new(s, ns)))
    }

    fn record() -> impl Strategy<Value = ConnectRecord> {
        (
            (time(), verdict(), any::<bool>(), addr(), addr()),
            [
                prop::option::of(addr()),
                prop::option::of(addr()),
                prop::option::of(addr()),
            ],
            (
                any::<u16>(),
                any::<u64>(),
                prop::option::of(any::<i32>()),
                any::<u32>(),
                any::<u32>(),
            ),
            (text(), any::<u64>(), text(), any::<u64>(), text(), text()),
            (identity(), any::<bool>()),
        )
            .prop_map(
                |(
                    (time, verdict, is_final, src, dst),
                    [dialed, service, backend],
                    (syns, syn_sent_ms, errno, pid, tid),
                    (comm, cgroup_id, netns, netns_inode, flow, explanation),
                    (identity, dns),
                )| ConnectRecord {
                    time,
                    verdict,
                    is_final,
                    src,
                    dst,
                    dialed,
                    service,
                    backend,
                    syns,
                    syn_sent_ms,
                    errno: errno.map(Errno),
                    pid,
                    tid,
                    comm,
                    cgroup_id,
                    netns,
                    netns_inode,
                    flow,
                    explanation,
                    identity,
                    dns,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2048,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn the_hand_written_line_is_serdes_line(record in record()) {
            prop_assert_eq!(hand_line(&record), serde_line(&record));
        }
    }

    /// Each optional field alone, and all at once: every key in the right place.
    #[test]
    fn each_optional_field_sits_where_serde_puts_it() {
        let a = |s: &str| s.parse::<SocketAddr>().expect("address");
        let base = ConnectRecord {
            time: Timestamp(UNIX_EPOCH + Duration::from_millis(1_795_000_000_118)),
            verdict: Verdict::Abandoned,
            is_final: true,
            src: a("10.0.0.1:40000"),
            dst: a("10.0.0.2:80"),
            dialed: None,
            service: None,
            backend: None,
            syns: 3,
            syn_sent_ms: 3002,
            errno: None,
            pid: 1,
            tid: 2,
            comm: "curl".into(),
            cgroup_id: 7,
            netns: "host".into(),
            netns_inode: 4_026_531_840,
            flow: "ffff-1".into(),
            explanation: "e".into(),
            identity: Identity::default(),
            dns: false,
        };
        let full_identity = Identity {
            src_pod: Some("web-1".into()),
            dst_ready: Some(false),
            dst_endpoint_of: vec!["app/webhooks".into(), "app/other".into()],
            identity_age_s: Some(42),
            identity_stale: true,
            ..Identity::default()
        };
        let variants: Vec<ConnectRecord> = vec![
            base.clone(),
            ConnectRecord {
                verdict: Verdict::Refused { by: RefusedBy::Rst },
                ..base.clone()
            },
            ConnectRecord {
                verdict: Verdict::Failed {
                    errno: libc::EACCES,
                },
                errno: Some(Errno(libc::EACCES)),
                ..base.clone()
            },
            ConnectRecord {
                dialed: Some(a("10.96.0.10:80")),
                ..base.clone()
            },
            ConnectRecord {
                service: Some(a("10.96.0.10:80")),
                backend: Some(a("[fd00::9]:8080")),
                ..base.clone()
            },
            ConnectRecord {
                identity: Identity {
                    src_cgroup: Some("/".into()),
                    ..Identity::default()
                },
                ..base.clone()
            },
            ConnectRecord {
                identity: full_identity.clone(),
                ..base.clone()
            },
            ConnectRecord {
                dns: true,
                ..base.clone()
            },
            ConnectRecord {
                dns: true,
                identity: full_identity,
                errno: Some(Errno(999)),
                dialed: Some(a("1.1.1.1:53")),
                ..base.clone()
            },
        ];
        for record in &variants {
            assert_eq!(hand_line(record), serde_line(record));
        }
    }
}
