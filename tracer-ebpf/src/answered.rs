//! A connect that was answered (its socket took in a SYN-ACK and is `ESTABLISHED`): reached from
//! `SYN_SENT -> ESTABLISHED` (`inet_sock_set_state.rs`), from `tcp_init_transfer()` on the client
//! side (`tcp_init_transfer.rs`), or when the socket ends if that run was skipped
//! (`tcp_destroy_sock.rs`). Answered on the first SYN, it is only counted per destination and
//! process (`HEALTHY`); after retransmits it is a record (`slow`).
use tracer_common::{
    Attempt, EVENT_CONNECT_END, Endpoint, FLAG_ANSWERED, HealthyKey, HealthyStats, counter,
};

use crate::{
    attempts::{self, Sock},
    maps::{HEALTHY, count, emit, now_ns},
    syn_count,
};

/// When the answer was seen: as the socket left `SYN_SENT`, or only when it was destroyed (that
/// run was skipped, see the module comment).
#[derive(PartialEq, Eq)]
pub enum Seen {
    OnTime,
    AtDestroy,
}

/// Ends `attempt` of `sk` as answered: a record if it took retransmits, else a healthy count.
pub fn answered(sk: Sock, attempt: &mut Attempt, seen: Seen) {
    attempt.flags |= FLAG_ANSWERED;
    if seen == Seen::AtDestroy {
        count(counter::ANSWERED_SEEN_LATE);
    } else {
        // Only SYNs were retransmitted yet (at destroy, data may have been too).
        syn_count::catch_up(sk, attempt);
    }
    if attempt.syn_count > 1 {
        emit(EVENT_CONNECT_END, 0, attempt);
    } else if seen == Seen::OnTime {
        // Healthy: answered on the first SYN. Count it per destination, send nothing.
        count_healthy(attempt);
    } else {
        // Answered on the first SYN, but when is unknown: counted, kept out of the mean wait.
        count(counter::ESTABLISHED_FIRST_SYN);
    }
    attempts::end(sk);
}

fn count_healthy(attempt: &Attempt) {
    count(counter::ESTABLISHED_FIRST_SYN);
    let key = HealthyKey {
        dst: Endpoint {
            netns_inode: attempt.netns_inode,
            addr: attempt.daddr,
            port: attempt.dport,
            family: attempt.family,
            _pad: [0; 4],
        },
        pid: attempt.pid,
        _pad: 0,
    };
    let waited = now_ns().saturating_sub(attempt.start_ns);
    if let Some(stats) = HEALTHY.get_ptr_mut(&key) {
        // SAFETY: valid per-CPU map value pointer: no other writer while this program runs here.
        unsafe {
            (*stats).established += 1;
            (*stats).syn_sent_ns_total += waited;
            (*stats).cgroup_id = attempt.cgroup_id;
            (*stats).comm = attempt.comm;
        }
    } else if HEALTHY
        .insert(
            &key,
            &HealthyStats {
                established: 1,
                syn_sent_ns_total: waited,
                cgroup_id: attempt.cgroup_id,
                comm: attempt.comm,
            },
            0,
        )
        .is_err()
    {
        count(counter::HEALTHY_MAP_FULL);
    }
}
