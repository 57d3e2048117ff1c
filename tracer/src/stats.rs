//! The `stats` record: totals since the start and every loss by cause, from the kernel's counters
//! and the userspace stages'.
use tracer_common::counter;

use crate::{
    cilium::CiliumMaps,
    clock::Timestamp,
    kernel::KernelSide,
    kernel::capabilities::DIALLED_BEFORE_SOCKET_LB,
    record::{ConntrackStats, DnsStats, Dropped, SocketLbStats, StatsRecord},
    stages::Stages,
};

/// `with_kernel`: carry the kernel's release and capabilities (the first and the final record).
pub fn record(
    kernel: &KernelSide,
    stages: &Stages,
    node: Option<String>,
    with_kernel: bool,
    is_final: bool,
) -> StatsRecord {
    let c = kernel.counters.read();
    let destroyed = &stages.enricher.destroyed;
    StatsRecord {
        time: Timestamp(std::time::SystemTime::now()),
        attempts: c.get(counter::ATTEMPTS_STARTED),
        established_first_syn: c.get(counter::ESTABLISHED_FIRST_SYN),
        answered_seen_late: c.get(counter::ANSWERED_SEEN_LATE),
        events: stages.events,
        open_flows: stages.flows.open_count() as u64,
        dropped: Dropped {
            ring_buffer_full: c.get(counter::RINGBUF_FULL),
            attempts_map_full: c.get(counter::ATTEMPTS_MAP_FULL),
            healthy_map_full: c.get(counter::HEALTHY_MAP_FULL),
            decode_errors: stages.decode_errors,
            expired_flows: stages.flows.expired,
            conntrack_events_lost: destroyed.lost(),
            dns_pending_full: c.get(counter::DNS_PENDING_FULL),
            dns_ring_buffer_full: c.get(counter::DNS_RINGBUF_FULL),
            dns_healthy_map_full: c.get(counter::DNS_HEALTHY_MAP_FULL),
            skipped_program_runs: kernel.skipped.read(),
            end_unseen: c.get(counter::END_UNSEEN),
            dns_unreadable: c.get(counter::DNS_UNREADABLE),
            dns_mmsg_beyond: c.get(counter::DNS_MMSG_BEYOND),
            syn_retransmits_unseen: c.get(counter::SYN_RETRANSMITS_UNSEEN),
        },
        dns: DnsStats {
            queries: c.get(counter::DNS_QUERIES),
            healthy: c.get(counter::DNS_HEALTHY_REPLIES),
            ..stages.dns.stats.clone()
        },
        conntrack: ConntrackStats {
            destroy_events: destroyed.mode().name().into(),
            destroy_events_subscribed: destroyed.is_open(),
            refused_before_subscription: destroyed.refused_before_subscription,
        },
        datapath: stages.datapath.stats(),
        socket_lb: stages
            .enricher
            .cilium
            .as_ref()
            .map(|cilium| socket_lb(kernel, cilium)),
        identity: stages.enricher.identities.stats(stages.held.len() as u64),
        kernel: with_kernel.then(|| kernel.capabilities.info()),
        node,
        is_final,
    }
}

/// Which way a socket-level load-balanced connect gets its Service named on this node.
fn socket_lb(kernel: &KernelSide, cilium: &CiliumMaps) -> SocketLbStats {
    let path = if kernel.capabilities.is_full(DIALLED_BEFORE_SOCKET_LB) {
        "preorder_hook"
    } else if cilium.can_name() {
        "cilium_maps"
    } else {
        "none"
    };
    SocketLbStats {
        path: path.into(),
        cilium: cilium.stats(),
    }
}
