//! The path of one kernel record through the userspace stages, shared by live tracing (`live.rs`)
//! and the throughput benchmark (`bench_pipeline.rs`), so the benchmark measures the live code:
//! bytes -> `decode` -> `flows` -> destination `filter` -> Service/backend (`enrich`, `conntrack`)
//! -> record -> `sink`.
use std::{io, time::Instant};

use tracer_common::FLAG_NO_SYN;

use crate::{
    conntrack::services::ServiceView,
    decode::{KernelEvent, decode, ip_from_kernel},
    dns::{DnsTracker, is_dns_record},
    enrich::{Enricher, destinations},
    filter::DestinationFilter,
    flows::FlowTable,
    record::Record,
    route_check::RouteCheck,
    sink::Sink,
};

pub struct Stages {
    pub flows: FlowTable,
    pub enricher: Enricher,
    pub filter: DestinationFilter,
    pub services: ServiceView,
    pub dns: DnsTracker,
    /// The errno of connects that failed before any SYN left.
    pub route_check: RouteCheck,
    /// Records received from the kernel.
    pub events: u64,
    pub decode_errors: u64,
}

impl Stages {
    /// One ring-buffer record: at most one connect record written to `sink`.
    pub fn process(&mut self, bytes: &[u8], sink: &mut dyn Sink) -> io::Result<()> {
        self.events += 1;
        if is_dns_record(bytes) {
            return match self.dns.reply(bytes, &mut self.enricher, &self.filter) {
                Ok(Some(record)) => sink.write(&record),
                Ok(None) => Ok(()),
                Err(_) => {
                    self.decode_errors += 1;
                    Ok(())
                }
            };
        }
        let Ok(mut event) = decode(bytes) else {
            self.decode_errors += 1;
            return Ok(());
        };
        if let KernelEvent::ConnectEnd { error, attempt, .. } = &mut event
            && *error == 0
            && attempt.flags & FLAG_NO_SYN != 0
            && let Some(ip) = ip_from_kernel(attempt.family, attempt.daddr)
        {
            let dst = std::net::SocketAddr::new(ip, attempt.dport);
            *error = self
                .route_check
                .errno(attempt.netns_inode, attempt.pid, attempt.tid, dst);
        }
        let flow = self.flows.apply(event);
        let (dst, dialed) = destinations(&flow);
        let dialed = dialed.unwrap_or(dst);
        if !self
            .filter
            .matches(&[(dst.ip(), dst.port()), (dialed.ip(), dialed.port())])
        {
            return Ok(());
        }
        let via = self.enricher.service_backend(&flow);
        if let (Some(v), true) = (via, flow.is_final) {
            self.services
                .record(Instant::now(), v.service, v.backend, flow.verdict.name());
        }
        let record = self.enricher.connect_record(&flow, via);
        sink.write(&Record::Connect(record))
    }
}
