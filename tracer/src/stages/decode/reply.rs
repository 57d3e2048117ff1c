//! Server sockets whose replies were lost, as the kernel writes them (`ReplyEvent` in the ring
//! buffer, `ReplyLoss` in the map of half-open handshakes) -> typed.
use std::net::SocketAddr;

use tracer_common::{ReplyLoss, STATE_SYN_RECV};

use super::{DecodeError, socket_addr};

/// A socket (or handshake) whose replies are not acknowledged: live, or its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyLost {
    /// Kernel time of this report.
    pub at_ns: u64,
    /// The socket's end (or the handshake given up), not a live report.
    pub is_final: bool,
    /// The replies were SYN-ACKs: the handshake never got its final ACK.
    pub handshake: bool,
    /// The socket's own end (the server).
    pub local: SocketAddr,
    /// Where its replies went.
    pub peer: SocketAddr,
    /// Kernel address of the `struct sock`; with `first_ns` the loss's key.
    pub sock: u64,
    /// Kernel time of the first retransmit.
    pub first_ns: u64,
    pub socket_inode: u64,
    pub netns_inode: u64,
    pub retransmits: u32,
    /// Bytes sent and not acknowledged.
    pub unacked: u32,
    /// errno on the socket at its end, 0 if none.
    pub error: i32,
}

/// One loss, as reported at `at_ns`; `is_final` at the socket's end.
pub fn reply_lost(l: &ReplyLoss, at_ns: u64, is_final: bool) -> Result<ReplyLost, DecodeError> {
    Ok(ReplyLost {
        at_ns,
        is_final,
        handshake: l.state == STATE_SYN_RECV,
        local: socket_addr(l.family, l.saddr, l.sport)?,
        peer: socket_addr(l.family, l.daddr, l.dport)?,
        sock: l.sock,
        first_ns: l.first_ns,
        socket_inode: l.socket_inode,
        netns_inode: l.netns_inode,
        retransmits: l.retransmits,
        unacked: l.unacked,
        error: l.error,
    })
}
