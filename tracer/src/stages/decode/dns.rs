//! UDP DNS as the kernel writes it (`DnsEvent` in the ring buffer, `PendingDns` in the map of
//! pending queries, `Endpoint` keys of the healthy counts) -> typed. The kernel side takes the
//! family from the IP header's version, so it is IPv4 or IPv6; an address of another family
//! reads as `0.0.0.0`, as it always did, so the query is still reported.
use std::net::{IpAddr, SocketAddr};

use tracer_common::{DnsEvent, DnsKey, Endpoint, PendingDns};

use super::{DecodeError, comm_to_string, socket_addr};

/// One query the kernel saw leave a socket. Its question is parsed by `dns/question.rs` (the bytes
/// come from packets anyone can send).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The kernel's key of the pending query: namespace, socket, DNS id.
    pub key: DnsKey,
    pub sent_ns: u64,
    pub cgroup_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Where the query left from; `0.0.0.0` when the hook knew only the socket, until the route
    /// is asked (`stages/mod.rs`).
    pub client: SocketAddr,
    /// Where the packet went (after DNAT in the sender's own namespace).
    pub server: SocketAddr,
    /// What a connected socket was connected to, when it differs from `server` (a Service address
    /// DNAT'd in the sender's namespace).
    pub dialed: Option<SocketAddr>,
    /// `dialed` was read from a socket load balancer's reverse socket NAT map (Cilium).
    pub dialed_by_socket_lb: bool,
    /// The socket cookie, 0 if the hook did not know it.
    pub cookie: u64,
    /// The bytes after the DNS header the kernel copied (at most `DNS_QUESTION_BYTES`).
    pub question: Vec<u8>,
}

/// A slow or error reply to a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsReply {
    pub query: Query,
    pub rcode: u8,
    pub reply_ns: u64,
    /// The reply's source.
    pub from: SocketAddr,
}

/// A DNS server as one namespace's sockets see it (the key of the kernel's healthy counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DnsServer {
    pub netns_inode: u64,
    pub addr: SocketAddr,
}

/// A query out of the kernel's ring buffer or its map of pending queries.
pub fn query(key: DnsKey, p: &PendingDns) -> Query {
    let server = addr(p.family, p.server_addr, p.server_port);
    let dialed = addr(p.family, p.dialed_addr, p.server_port);
    let len = usize::from(p.question_len).min(p.question.len());
    Query {
        key,
        sent_ns: p.sent_ns,
        cgroup_id: p.cgroup_id,
        pid: p.pid,
        tid: p.tid,
        comm: comm_to_string(&p.comm),
        client: addr(p.family, p.client_addr, p.client_port),
        server,
        dialed: (!dialed.ip().is_unspecified() && dialed != server).then_some(dialed),
        dialed_by_socket_lb: p.dialed_by_socket_lb != 0,
        cookie: p.cookie,
        question: p.question[..len].to_vec(),
    }
}

pub(super) fn reply(ev: &DnsEvent) -> DnsReply {
    DnsReply {
        query: query(ev.key, &ev.query),
        rcode: ev.rcode,
        reply_ns: ev.reply_ns,
        from: addr(ev.query.family, ev.reply_addr, ev.reply_port),
    }
}

/// A key of the kernel's healthy counts.
pub fn dns_server(e: &Endpoint) -> Result<DnsServer, DecodeError> {
    Ok(DnsServer {
        netns_inode: e.netns_inode,
        addr: socket_addr(e.family, e.addr, e.port)?,
    })
}

fn addr(family: u16, bytes: [u8; 16], port: u16) -> SocketAddr {
    socket_addr(family, bytes, port)
        .unwrap_or_else(|_| SocketAddr::new(IpAddr::from([0u8; 4]), port))
}

#[cfg(test)]
mod tests {
    use tracer_common::AF_INET;

    use super::*;

    fn pending() -> PendingDns {
        let mut p = PendingDns {
            family: AF_INET,
            server_port: 53,
            ..PendingDns::default()
        };
        p.server_addr[..4].copy_from_slice(&[10, 0, 0, 53]);
        p
    }

    #[test]
    fn a_connected_service_address_is_kept_when_dnat_changed_the_server() {
        let mut p = pending();
        assert_eq!(query(DnsKey::default(), &p).dialed, None);
        p.dialed_addr[..4].copy_from_slice(&[10, 0, 0, 53]);
        assert_eq!(
            query(DnsKey::default(), &p).dialed,
            None,
            "connected straight to the server"
        );
        p.dialed_addr[..4].copy_from_slice(&[10, 96, 0, 10]);
        assert_eq!(
            query(DnsKey::default(), &p).dialed,
            Some("10.96.0.10:53".parse().expect("addr"))
        );
    }

    #[test]
    fn the_question_is_cut_to_the_bytes_the_kernel_copied() {
        let mut p = pending();
        p.question_len = 5;
        assert_eq!(query(DnsKey::default(), &p).question.len(), 5);
        p.question_len = 200; // more than the array: clamped
        assert_eq!(
            query(DnsKey::default(), &p).question.len(),
            tracer_common::DNS_QUESTION_BYTES
        );
    }
}
