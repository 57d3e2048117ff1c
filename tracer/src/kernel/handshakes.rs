//! Handshakes whose SYN-ACKs never got their final ACK (`HANDSHAKES`, filled by
//! `tracer-ebpf/src/replies.rs`): the kernel side removes one when the final ACK comes; one that
//! stops being retransmitted without that has been given up by the server's kernel, and userspace
//! takes it out here.
use aya::maps::{HashMap, MapData};
use tracer_common::{HandshakeKey, ReplyLoss};

/// Time after a handshake's last SYN-ACK retransmit, on top of the time its retransmits took so
/// far, after which no further retransmit is coming: the kernel doubles the interval each time.
const QUIET_AFTER_NS: u64 = 3_000_000_000;

pub struct Handshakes {
    map: HashMap<MapData, HandshakeKey, ReplyLoss>,
}

impl Handshakes {
    pub fn new(map: HashMap<MapData, HandshakeKey, ReplyLoss>) -> Handshakes {
        Handshakes { map }
    }

    /// Takes out the handshakes the server's kernel has given up on by `now_ns`.
    pub fn take_given_up(&mut self, now_ns: u64) -> Vec<ReplyLoss> {
        let given_up: Vec<(HandshakeKey, ReplyLoss)> = self
            .map
            .iter()
            .flatten()
            .filter(|(_, loss)| is_given_up(loss, now_ns))
            .collect();
        for (key, _) in &given_up {
            let _ = self.map.remove(key);
        }
        given_up.into_iter().map(|(_, loss)| loss).collect()
    }
}

fn is_given_up(loss: &ReplyLoss, now_ns: u64) -> bool {
    let took = loss.last_ns.saturating_sub(loss.first_ns);
    now_ns.saturating_sub(loss.last_ns) > took.saturating_add(QUIET_AFTER_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_is_given_up_once_its_next_retransmit_is_overdue() {
        let s = 1_000_000_000;
        let loss = ReplyLoss {
            first_ns: 10 * s,
            last_ns: 13 * s,
            ..ReplyLoss::default()
        };
        assert!(
            !is_given_up(&loss, 18 * s),
            "the next one may come at 13+6 s"
        );
        assert!(is_given_up(&loss, 20 * s));
    }
}
