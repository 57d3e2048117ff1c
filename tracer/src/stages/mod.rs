//! The userspace stages of the pipeline (2 to 5; 1 is `kernel/`, 6 `sink/`), and the path of one
//! record through them, shared by live tracing (`live.rs`) and the throughput benchmark
//! (`bench/pipeline.rs`), so the benchmark measures the live code:
//!
//! 2. `decode/`: ring-buffer bytes -> one typed event (`KernelEvent`).
//! 3. `flows.rs` (TCP connects) or `dns/` (UDP DNS): events -> flows and findings, each with its
//!    verdict; a server's lost replies need no state here.
//! 4. `filter.rs`: the destination filters, before anything is named.
//! 5. `enrich/`: names, wall time, Service and backend -> the record; a record waiting for a pod
//!    lookup waits in `held.rs`. `route_check.rs` asks the kernel's routes what a hook could not
//!    see (the errno of a connect that sent no SYN, a query's source address);
//!    `service_view.rs` keeps each Service's verdicts over a window.
//!
//! Then the record goes to a `Sink`. What the kernel counts rather than sends (healthy connects
//! and DNS replies) and what conntrack dumps find take the same filter, enrich and sink.
pub mod decode;
pub mod dns;
pub mod enrich;
pub mod filter;
pub mod flows;
pub mod held;
pub mod route_check;
pub mod service_view;

use std::{io, time::Instant};

use tracer_common::{HealthyKey, HealthyStats, ReplyLoss};

use self::{
    decode::{KernelEvent, Query, ReplyLost, TcpEvent, decode},
    dns::{DnsTracker, Expired, Finding, HealthyTotals},
    enrich::Enricher,
    filter::DestinationFilter,
    flows::FlowTable,
    held::{HeldRecords, Pending},
    route_check::RouteCheck,
    service_view::ServiceView,
};
use crate::{
    clock::{KernelClock, Timestamp},
    conntrack::{dumper::Answered, netlink::Conntrack, subscription::DestroySubscription},
    datapath::{Snapshot, audit::Audit, backends::RuleBackends},
    identity::Identities,
    netns::NetnsNames,
    record::{Record, StaleNatRecord},
    sink::Sink,
};

/// What the stages are built from: the options of `trace` and `tui`, and what was opened for them.
pub struct StageOptions {
    pub clock: KernelClock,
    pub identities: Identities,
    /// The node's conntrack table, for Service backends; `None` when it cannot be read.
    pub conntrack: Option<Conntrack>,
    pub destroyed: DestroySubscription,
    pub filter: DestinationFilter,
    pub service_window: std::time::Duration,
    pub dns_timeout: std::time::Duration,
    pub dns_stuck_after: u32,
}

pub struct Stages {
    pub flows: FlowTable,
    pub enricher: Enricher,
    pub filter: DestinationFilter,
    pub services: ServiceView,
    pub dns: DnsTracker,
    /// The errno of connects that failed before any SYN left.
    pub route_check: RouteCheck,
    /// The node's Service rules judged against the EndpointSlices.
    pub datapath: Audit,
    /// Records waiting for a pod lookup.
    pub held: HeldRecords,
    /// Records received from the kernel.
    pub events: u64,
    pub decode_errors: u64,
}

impl Stages {
    pub fn new(options: StageOptions) -> Stages {
        Stages {
            flows: FlowTable::default(),
            enricher: Enricher {
                clock: options.clock,
                netns: NetnsNames::new(),
                identities: options.identities,
                conntrack: options.conntrack,
                destroyed: options.destroyed,
                reply_owners: hashbrown::HashMap::new(),
                cilium: None,
                rule_backends: RuleBackends::default(),
            },
            filter: options.filter,
            services: ServiceView::new(options.service_window),
            dns: DnsTracker::new(options.dns_timeout, options.dns_stuck_after),
            route_check: RouteCheck::default(),
            datapath: Audit::default(),
            held: HeldRecords::default(),
            events: 0,
            decode_errors: 0,
        }
    }

    /// Forgets open attempts whose end never came (counted in `dropped.expired_flows`), and the
    /// owners of sockets whose end never came.
    pub fn expire(&mut self, now_ns: u64) {
        self.flows.expire(now_ns);
        self.enricher.expire(now_ns);
    }

    /// One ring-buffer record: at most one record written to `sink`.
    pub fn process(&mut self, bytes: &[u8], sink: &mut dyn Sink) -> io::Result<()> {
        self.events += 1;
        let Ok(event) = decode(bytes) else {
            self.decode_errors += 1;
            return Ok(());
        };
        match event {
            KernelEvent::Tcp(event) => self.connect(event, sink),
            KernelEvent::DnsReply(mut reply) => {
                fill_client_address(&mut self.route_check, &mut reply.query);
                let via = self.enricher.dns_service_server(&reply.query);
                let finding = self.dns.reply(reply, via);
                self.write_dns(finding, sink)
            }
            KernelEvent::ReplyLost(lost) => self.reply(&lost, sink),
        }
    }

    /// A TCP connect attempt: its flow, filtered on its destinations, named.
    fn connect(&mut self, mut event: TcpEvent, sink: &mut dyn Sink) -> io::Result<()> {
        if let TcpEvent::ConnectEnd { error, attempt, .. } = &mut event
            && *error == 0
            && attempt.flags.no_syn()
        {
            *error =
                self.route_check
                    .errno(attempt.netns_inode, attempt.pid, attempt.tid, attempt.dst);
        }
        let flow = self.flows.apply(event);
        let dst = flow.attempt.dst;
        if !self
            .filter
            .matches(&[dst, flow.attempt.dialed.unwrap_or(dst)])
        {
            return Ok(());
        }
        let via = self.enricher.service_backend(&flow);
        if let (Some(v), true) = (via, flow.is_final) {
            self.services
                .record(Instant::now(), v.service, v.backend, flow.verdict.kind());
        }
        let record = self.enricher.connect_record(&flow, via);
        let waits_for = self.enricher.identities.take_waiting();
        if waits_for.is_empty() {
            return sink.write(&Record::Connect(record));
        }
        let pending = Pending::Connect {
            flow: Box::new(flow),
            via,
        };
        self.held.hold(pending, waits_for, Instant::now());
        Ok(())
    }

    /// The held records whose lookups were answered or whose wait is over (every one with
    /// `all`, at exit).
    pub fn release_held(&mut self, sink: &mut dyn Sink, all: bool) -> io::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        for record in self.held.release(&mut self.enricher, Instant::now(), all) {
            sink.write(&record)?;
        }
        Ok(())
    }

    /// A socket (or handshake) whose replies are not acknowledged: live, or its end.
    fn reply(&mut self, lost: &ReplyLost, sink: &mut dyn Sink) -> io::Result<()> {
        if !self.filter.matches(&[lost.peer, lost.local]) {
            return Ok(());
        }
        let record = self.enricher.reply_lost_record(lost);
        sink.write(&Record::ReplyLost(record))
    }

    /// Handshakes the server's kernel gave up on, taken out of the kernel's table: their end.
    pub fn handshakes_given_up(
        &mut self,
        given_up: Vec<ReplyLoss>,
        now_ns: u64,
        sink: &mut dyn Sink,
    ) -> io::Result<()> {
        for loss in given_up {
            let Ok(lost) = decode::reply_lost(&loss, now_ns, true) else {
                self.decode_errors += 1;
                continue;
            };
            self.reply(&lost, sink)?;
        }
        Ok(())
    }

    /// A DNS tick: the queries the kernel side took out as expired, with the servers' healthy
    /// totals; what needs a record is written.
    pub fn dns_tick(
        &mut self,
        healthy: &HealthyTotals,
        expired: Vec<Expired>,
        now_ns: u64,
        sink: &mut dyn Sink,
    ) -> io::Result<()> {
        let mut expired = expired;
        for e in &mut expired {
            fill_client_address(&mut self.route_check, &mut e.query);
        }
        let enricher = &mut self.enricher;
        let findings = self
            .dns
            .tick(healthy, expired, now_ns, |q| enricher.dns_service_server(q));
        for finding in findings {
            self.write_dns(finding, sink)?;
        }
        Ok(())
    }

    fn write_dns(&mut self, finding: Finding, sink: &mut dyn Sink) -> io::Result<()> {
        match finding {
            Finding::Query {
                query,
                outcome,
                at_ns,
                via,
            } => {
                let mut dests = vec![query.server];
                dests.extend(query.dialed);
                dests.extend(via.map(|(_, backend)| backend));
                if !self.filter.matches(&dests) {
                    return Ok(());
                }
                if query.question().is_err() {
                    self.dns.stats.malformed += 1;
                }
                let record = self.enricher.dns_record(&query, outcome, at_ns, via);
                let waits_for = self.enricher.identities.take_waiting();
                if waits_for.is_empty() {
                    return sink.write(&Record::Dns(record));
                }
                let pending = Pending::Dns {
                    query: Box::new(query),
                    outcome,
                    at_ns,
                    via,
                };
                self.held.hold(pending, waits_for, Instant::now());
                Ok(())
            }
            Finding::StuckSocket(stuck) => {
                let q = &stuck.latest;
                if !self.filter.matches(&[q.server, q.service]) {
                    return Ok(());
                }
                self.dns.stats.stuck_sockets += 1;
                let record = self.enricher.dns_stuck_record(&stuck);
                sink.write(&Record::DnsStuckSocket(record))
            }
        }
    }

    /// What the kernel counted rather than sent, since the last call: healthy connects (from the
    /// kernel's per-destination counts) and DNS replies, then the Services view with the answered
    /// connects and stale NAT entries conntrack's dump found.
    pub fn write_counts(
        &mut self,
        healthy: Vec<(HealthyKey, HealthyStats)>,
        conntrack: ConntrackDump,
        sink: &mut dyn Sink,
    ) -> io::Result<()> {
        let time = Timestamp(std::time::SystemTime::now());
        for h in self.dns.take_healthy() {
            if self.filter.matches(&[h.server.addr]) {
                let record = self.enricher.dns_healthy_record(&h, time);
                sink.write(&Record::DnsHealthy(record))?;
            }
        }
        // A destination of an address family we do not know cannot be named: left out.
        for h in healthy
            .into_iter()
            .filter_map(|(key, stats)| decode::healthy_connects(&key, &stats).ok())
        {
            if self.filter.matches(&[h.dst]) {
                let record = self.enricher.healthy_record(&h, time);
                sink.write(&Record::Healthy(record))?;
            }
        }
        for (at, answered) in conntrack.answered {
            for (service, backend, n) in answered {
                if self.filter.matches(&[service]) {
                    self.services.established(at, service, backend, n);
                }
            }
        }
        for record in conntrack.stale {
            sink.write(&Record::StaleNat(record))?;
        }
        for record in self.services.records(Instant::now(), time) {
            sink.write(&Record::Service(record))?;
        }
        Ok(())
    }
}

impl Stages {
    /// One read of the node's datapath: the `stale_datapath` records of what changed, judged
    /// against the cluster state as of now.
    pub fn write_datapath(&mut self, snapshot: Snapshot, sink: &mut dyn Sink) -> io::Result<()> {
        self.enricher.rule_backends.update(&snapshot);
        let time = Timestamp(std::time::SystemTime::now());
        let audit = &mut self.datapath;
        let records = if self.enricher.identities.has_cluster() {
            self.enricher
                .identities
                .with_known(|view, known| audit.judge(snapshot, Some((view, known)), time))
                .unwrap_or_default()
        } else {
            audit.judge(snapshot, None, time)
        };
        for record in records {
            sink.write(&Record::StaleDatapath(record))?;
        }
        Ok(())
    }
}

/// What conntrack's dumps found since the last report: answered connects per Service and backend
/// (with the time of their dump), and entries stuck unreplied.
#[derive(Debug, Default)]
pub struct ConntrackDump {
    pub answered: Vec<(Instant, Answered)>,
    pub stale: Vec<StaleNatRecord>,
}

/// A query from an unbound, unconnected socket seen by a hook that knows only the socket (the
/// `sock_send_length` tracepoint) has no client address: the one the kernel's route lookup picks
/// for the server in the sender's namespace is what it left from.
fn fill_client_address(route_check: &mut RouteCheck, query: &mut Query) {
    if !query.client.ip().is_unspecified() {
        return;
    }
    if let Some(source) =
        route_check.source(query.key.netns_inode, query.pid, query.tid, query.server)
    {
        query.client.set_ip(source);
    }
}
