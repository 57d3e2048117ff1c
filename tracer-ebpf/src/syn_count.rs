//! An attempt's SYN count: one for the first SYN, one per retransmit the retransmit program saw
//! (`tcp_retransmit_skb.rs`), caught up from the socket's own count where the kernel made a
//! retransmit without running that program. The kernel does not always run a program where its
//! tracepoint fires, and does not always count it as a skipped run: on this project's development
//! VM a retransmit timer that fires while one particular task is current runs no BPF program
//! at all, with `recursion_misses` left at 0. The socket counts every retransmit it makes
//! (`tcp_sock.total_retrans`, SYNs only while it is in `SYN_SENT`), so the count is settled from
//! it, and the retransmits no program saw are counted (`SYN_RETRANSMITS_UNSEEN`): their live
//! `unanswered` update is lost.
use tracer_common::{Attempt, counter};

use crate::{
    attempts::Sock,
    maps::{count_by, sock_offsets},
    sock_fields,
};

/// Raises `attempt.syn_count` to what the socket says it sent, counting the difference as unseen.
/// Only while the socket has sent nothing but SYNs (in `SYN_SENT`, or as it leaves it); an attempt
/// with no SYN (failed before one left) keeps 0.
pub fn catch_up(sk: Sock, attempt: &mut Attempt) {
    if attempt.syn_count == 0 {
        return;
    }
    let retransmits: u32 = sock_fields::read(sk.0 + u64::from(sock_offsets().tcp_total_retrans));
    let sent = u16::try_from(retransmits.saturating_add(1)).unwrap_or(u16::MAX);
    if sent > attempt.syn_count {
        count_by(
            counter::SYN_RETRANSMITS_UNSEEN,
            u64::from(sent - attempt.syn_count),
        );
        attempt.syn_count = sent;
    }
}
