//! Plain text that reads like `conntrack -E`, verdict first; then, when known, the names of both
//! ends, the explanation, and a cluster-state verdict:
//! ```text
//! [REFUSED rst] tcp 10.244.131.21:40522 -> 10.244.154.32:8080 syns=1 0ms pid=4242 comm=curl netns=cni-3f2a
//!               pod app/web-1 (Deployment/web) -> pod app/worker-2 (Deployment/worker, node-b, ready) of Service app/webhooks
//!               10.244.154.32:8080 answered with a RST: the host is up but nothing listens on that port.
//!               [ENDPOINT DOES NOT LISTEN] Refused by pod app/worker-2 (Deployment worker), a Ready endpoint of ...
//! ```
use std::io::{self, Write};

use super::Sink;
use crate::record::{
    ConnectRecord, DnsRecord, HealthyRecord, Record, ReplyLostRecord, StatsRecord,
};

pub struct TextSink<W: Write> {
    out: W,
}

impl<W: Write> TextSink<W> {
    pub fn new(out: W) -> TextSink<W> {
        TextSink { out }
    }
}

impl<W: Write> Sink for TextSink<W> {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        match record {
            Record::Connect(c) => self.connect(c),
            Record::Healthy(h) => self.healthy(h),
            Record::Service(s) => writeln!(
                self.out,
                "{:<20} {} (last {}s, {} of {} failing)",
                "[SERVICE]", s.summary, s.window_s, s.failing, s.total
            ),
            Record::StaleNat(n) => writeln!(
                self.out,
                "{:<20} tcp SYN_SENT src={} dst={} [UNREPLIED] src={} dst={} age>={}s\n{:<20} {}",
                "[STALE NAT]",
                n.original.src,
                n.original.dst,
                n.reply.src,
                n.reply.dst,
                n.age_s,
                "",
                n.explanation
            ),
            Record::StaleDatapath(d) => writeln!(
                self.out,
                "{:<20} {} {} {} -> {}{} {} ({})\n{:<20} {}",
                if d.gone {
                    "[STALE DATAPATH GONE]"
                } else {
                    "[STALE DATAPATH]"
                },
                d.source.name(),
                d.protocol,
                d.service,
                d.backend,
                d.service_name
                    .as_ref()
                    .map_or_else(String::new, |n| format!(" service={n}")),
                d.location,
                d.reason.text(),
                "",
                d.explanation
            ),
            Record::Dns(d) => self.dns(d),
            Record::DnsHealthy(d) => writeln!(
                self.out,
                "{:<20} dns -> {} answered={} mean={:.1}ms netns={}",
                "[DNS ANSWERED]", d.server, d.answered, d.mean_latency_ms, d.netns
            ),
            Record::DnsStuckSocket(d) => writeln!(
                self.out,
                "{:<20} dns socket {} -> {} lost={} since {} pid={} comm={} netns={}\n{:<20} {}",
                "[DNS STUCK SOCKET]",
                d.client,
                d.server,
                d.lost,
                d.since,
                d.pid,
                d.comm,
                d.netns,
                "",
                d.explanation
            ),
            Record::Stats(s) => self.stats(s),
            Record::ReplyLost(r) => self.reply_lost(r),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write> TextSink<W> {
    fn connect(&mut self, c: &ConnectRecord) -> io::Result<()> {
        let tag = c.verdict.tag();
        // The Service the app meant, then where the SYN actually went.
        let dst = match (&c.service, &c.backend) {
            (Some(service), Some(backend)) => format!("{service} backend={backend}"),
            _ => c.dst.to_string(),
        };
        writeln!(
            self.out,
            "{tag:<20} tcp {} -> {dst} syns={} {}ms pid={} comm={} netns={}",
            c.src, c.syns, c.syn_sent_ms, c.pid, c.comm, c.netns
        )?;
        if let Some(names) = c.identity.summary() {
            writeln!(self.out, "{:<20} {names}", "")?;
        }
        if c.is_final {
            writeln!(self.out, "{:<20} {}", "", c.explanation)?;
        }
        // Once per attempt while it is live (its first retransmit), and at its end.
        if let (Some(verdict), Some(why)) =
            (&c.identity.cluster_verdict, &c.identity.cluster_explanation)
            && (c.is_final || c.syns == 2)
        {
            writeln!(
                self.out,
                "{:<20} [{}] {why}",
                "",
                verdict.name().to_uppercase()
            )?;
        }
        Ok(())
    }

    fn reply_lost(&mut self, r: &ReplyLostRecord) -> io::Result<()> {
        let via = r
            .client
            .map_or_else(String::new, |c| format!(" (client {c})"));
        writeln!(
            self.out,
            "{:<20} tcp {} -> {}{via} retransmits={} unacked={}B {}ms pid={} comm={} netns={}",
            format!("[REPLY LOST {}]", r.outcome.name()),
            r.local,
            r.peer,
            r.retransmits,
            r.unacked_bytes,
            r.lost_for_ms,
            r.pid.map_or_else(|| "-".to_string(), |p| p.to_string()),
            r.comm.as_deref().unwrap_or("-"),
            r.netns
        )?;
        if let Some(names) = r.identity.summary() {
            writeln!(self.out, "{:<20} {names}", "")?;
        }
        writeln!(self.out, "{:<20} {}", "", r.explanation)
    }

    fn healthy(&mut self, h: &HealthyRecord) -> io::Result<()> {
        writeln!(
            self.out,
            "{:<20} tcp -> {} established={} mean={:.1}ms pid={} comm={} netns={}",
            "[ESTABLISHED]", h.dst, h.established, h.mean_syn_sent_ms, h.pid, h.comm, h.netns
        )?;
        match h.identity.summary() {
            Some(names) => writeln!(self.out, "{:<20} {names}", ""),
            None => Ok(()),
        }
    }

    fn dns(&mut self, d: &DnsRecord) -> io::Result<()> {
        writeln!(
            self.out,
            "{:<20} dns {} {} id={} {} -> {}{} pid={} comm={} netns={}\n{:<20} {}",
            format!("[DNS {}]", d.verdict.name().to_uppercase()),
            d.name.as_deref().unwrap_or("?"),
            d.qtype.as_deref().unwrap_or("?"),
            d.id,
            d.client,
            d.server,
            d.dialed
                .as_ref()
                .map_or_else(String::new, |s| format!(" (dialled {s})")),
            d.pid,
            d.comm,
            d.netns,
            "",
            d.explanation
        )
    }

    /// Written when something was lost, and at exit.
    fn stats(&mut self, s: &StatsRecord) -> io::Result<()> {
        let lost = s.dropped.total();
        if lost == 0 && !s.is_final {
            return Ok(());
        }
        // Refusals whose backend could not be named (destroy events not followed yet): not a loss
        // of records, said beside the drops so that it is not missed either.
        let mut unnamed = match s.conntrack.refused_before_subscription {
            0 => String::new(),
            n => format!(" refused_before_subscription={n}"),
        };
        if let Some(d) = &s.datapath {
            unnamed = format!("{unnamed} stale_datapath={}", d.stale_entries);
        }
        let causes = match s.dropped.in_words() {
            words if words.is_empty() => String::new(),
            words => format!(" ({words})"),
        };
        writeln!(
            self.out,
            "{:<20} attempts={} established_first_syn={} events={} open={} dropped={lost}{causes}{unnamed}",
            "[STATS]", s.attempts, s.established_first_syn, s.events, s.open_flows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Identity;
    use crate::verdict::ClusterVerdictKind;

    pub fn refused_by_worker() -> ConnectRecord {
        ConnectRecord {
            time: "2026-11-30T16:40:02.118Z".parse().expect("time"),
            verdict: crate::verdict::Verdict::Refused {
                by: crate::verdict::RefusedBy::Rst,
            },
            is_final: true,
            src: "10.244.131.21:40522".parse().expect("address"),
            dst: "10.244.154.32:8080".parse().expect("address"),
            dialed: None,
            service: None,
            backend: None,
            dns: false,
            syns: 1,
            syn_sent_ms: 0,
            errno: Some(crate::verdict::Errno(libc::ECONNREFUSED)),
            pid: 4242,
            tid: 4242,
            comm: "curl".into(),
            cgroup_id: 77,
            netns: "cni-3f2a".into(),
            netns_inode: 4097,
            flow: "f-1".into(),
            explanation: "10.244.154.32:8080 answered with a RST: the host is up but nothing listens on that port.".into(),
            identity: Identity {
                src_pod: Some("web-1".into()),
                src_namespace: Some("app".into()),
                src_owner: Some("Deployment/web".into()),
                dst_pod: Some("worker-2".into()),
                dst_namespace: Some("app".into()),
                dst_owner: Some("Deployment/worker".into()),
                dst_node: Some("node-b".into()),
                dst_ready: Some(true),
                dst_service: Some("app/webhooks".into()),
                dst_endpoint_of: vec!["app/webhooks".into()],
                cluster_verdict: Some(ClusterVerdictKind::EndpointDoesNotListen),
                cluster_explanation: Some("Refused by pod app/worker-2 (Deployment worker), ...".into()),
                identity_source: Some("api".into()),
                identity_age_s: Some(42),
                identity_stale: true,
                ..Identity::default()
            },
        }
    }

    #[test]
    fn names_and_the_cluster_verdict_follow_the_flow_line() {
        let mut sink = TextSink::new(Vec::new());
        sink.write(&Record::Connect(refused_by_worker()))
            .expect("write");
        let text = String::from_utf8(sink.out).expect("utf8");
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        assert_eq!(
            lines,
            [
                "[REFUSED rst]        tcp 10.244.131.21:40522 -> 10.244.154.32:8080 syns=1 0ms pid=4242 comm=curl netns=cni-3f2a",
                "pod app/web-1 (Deployment/web) -> pod app/worker-2 (Deployment/worker, node-b, ready) of Service \
                 app/webhooks [names stale: 42s old, Kubernetes API unreachable]",
                "10.244.154.32:8080 answered with a RST: the host is up but nothing listens on that port.",
                "[ENDPOINT DOES NOT LISTEN] Refused by pod app/worker-2 (Deployment worker), ...",
            ]
        );
    }

    #[test]
    fn the_final_stats_line_says_how_many_refusals_had_no_backend_named() {
        let mut stats = StatsRecord {
            is_final: true,
            ..StatsRecord::default()
        };
        let mut sink = TextSink::new(Vec::new());
        sink.write(&Record::Stats(stats.clone())).expect("write");
        stats.conntrack.refused_before_subscription = 2;
        sink.write(&Record::Stats(stats)).expect("write");
        let text = String::from_utf8(sink.out).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(!lines[0].contains("refused_before_subscription"), "{text}");
        assert!(
            lines[1].ends_with(" refused_before_subscription=2"),
            "{text}"
        );
    }

    #[test]
    fn a_stale_datapath_entry_is_one_line_and_its_sentence() {
        let line = r#"{"schema":1,"kind":"stale_datapath","time":"2026-11-30T16:40:10.000Z","service":"10.96.0.10:80","protocol":"tcp","service_name":"app/web","backend":"10.244.1.30:8080","source":"nftables","location":"endpoint-X-app/web/tcp/http__10.244.1.30/8080","reason":"its pod is gone","gone":true,"explanation":"gone."}"#;
        let record = serde_json::from_str::<crate::record::Line>(line)
            .expect("parses")
            .record;
        let mut sink = TextSink::new(Vec::new());
        sink.write(&record).expect("write");
        let text = String::from_utf8(sink.out).expect("utf8");
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        assert_eq!(
            lines,
            [
                "[STALE DATAPATH GONE] nftables tcp 10.96.0.10:80 -> 10.244.1.30:8080 service=app/web \
                 endpoint-X-app/web/tcp/http__10.244.1.30/8080 (its pod is gone)",
                "gone.",
            ]
        );
    }

    #[test]
    fn without_names_the_output_is_as_before() {
        let mut record = refused_by_worker();
        record.identity = Identity::default();
        let mut sink = TextSink::new(Vec::new());
        sink.write(&Record::Connect(record)).expect("write");
        let text = String::from_utf8(sink.out).expect("utf8");
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        assert_eq!(
            lines,
            [
                "[REFUSED rst]        tcp 10.244.131.21:40522 -> 10.244.154.32:8080 syns=1 0ms pid=4242 comm=curl netns=cni-3f2a",
                "10.244.154.32:8080 answered with a RST: the host is up but nothing listens on that port.",
            ],
            "the flow line and its sentence, no names line: {text}"
        );
    }
}
