//! A socket whose replies were lost (`tracer-ebpf/src/replies.rs`) -> its record: wall time, the
//! namespace's name, the process holding the socket, the client as this node's conntrack knows it,
//! the pod and Service at the local address, the node the replies went to, and the sentence.
use std::{path::Path, time::Duration};

use super::Enricher;
use crate::{
    conntrack::netlink::Direction,
    identity::{node_address, socket_owner},
    record::ReplyLostRecord,
    stages::decode::ReplyLost,
    verdict::ReplyOutcome,
};

impl Enricher {
    pub fn reply_lost_record(&mut self, l: &ReplyLost) -> ReplyLostRecord {
        let (local, peer, is_final, handshake) = (l.local, l.peer, l.is_final, l.handshake);
        let outcome = match (is_final, handshake) {
            (false, _) => ReplyOutcome::Unacknowledged,
            (true, true) => ReplyOutcome::NoFinalAck,
            (true, false) => ReplyOutcome::of_end(l.unacked, l.error),
        };
        // The server's socket is the reply direction of the connection the node translated.
        let entry = self.conntrack.as_mut().and_then(|c| {
            c.get_by_reply(Direction {
                src: local,
                dst: peer,
            })
            .ok()
            .flatten()
        });
        let client = entry
            .as_ref()
            .map(|e| e.original.src)
            .filter(|client| *client != peer);
        let client_dialed = client.and(entry.as_ref().map(|e| e.original.dst));
        // The owner found at the live report is kept for the end (by then the socket is being
        // freed and no process holds it); /proc is walked only when none is known.
        let key = (l.sock, l.first_ns);
        let known = if is_final {
            self.reply_owners.remove(&key).map(|(owner, _)| owner)
        } else {
            None
        };
        let owner = known.or_else(|| socket_owner::owner_of(l.socket_inode, Path::new("/proc")));
        if let (Some(owner), false) = (&owner, is_final) {
            self.reply_owners.insert(key, (owner.clone(), l.at_ns));
        }
        let ends = self
            .identities
            .cluster_view()
            .map(|v| node_address::reply_ends(&v.state, local, peer))
            .unwrap_or_default();
        let lost_for = Duration::from_nanos(l.at_ns.saturating_sub(l.first_ns));
        ReplyLostRecord {
            time: self.time_of(l.at_ns),
            outcome,
            is_final,
            handshake,
            local,
            peer,
            client,
            client_dialed,
            peer_node: ends.peer_node,
            local_service: ends.local_service,
            retransmits: l.retransmits,
            unacked_bytes: l.unacked,
            lost_for_ms: lost_for.as_millis() as u64,
            pid: owner.as_ref().map(|(pid, _)| *pid),
            comm: owner.map(|(_, comm)| comm),
            netns: self.netns.name(l.netns_inode),
            netns_inode: l.netns_inode,
            flow: format!("{:x}-{:x}", l.sock, l.first_ns),
            explanation: outcome.explain(
                local,
                peer,
                handshake,
                l.retransmits,
                l.unacked,
                lost_for,
                client,
            ),
            identity: self.identities.server_end(local, peer),
        }
    }
}
