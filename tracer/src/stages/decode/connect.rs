//! TCP connect attempts as the kernel writes them (`ConnectEvent`, `HealthyKey`/`HealthyStats`)
//! -> typed.
use std::net::SocketAddr;

use tracer_common::{
    ConnectEvent, EVENT_SYN_RETRANSMIT, FLAG_ANSWERED, FLAG_DIALED_BY_SOCKET_LB, FLAG_DIALED_KNOWN,
    FLAG_NO_SYN, FLAG_RST_RECEIVED, HealthyKey, HealthyStats,
};

use super::{DecodeError, comm_to_string, socket_addr};

/// A TCP connect attempt as of one kernel event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpEvent {
    /// An open attempt sent another SYN: it is unanswered so far.
    SynRetransmit { at_ns: u64, attempt: Attempt },
    /// An attempt that needs attention ended; `error` is the errno reported on the socket (0 if none).
    ConnectEnd {
        at_ns: u64,
        error: i32,
        attempt: Attempt,
    },
}

/// One connect attempt, with its addresses and process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Kernel address of the `struct sock`; with `start_ns` the attempt's key (the kernel reuses
    /// socket addresses).
    pub sock: u64,
    /// Kernel time the socket entered `SYN_SENT`.
    pub start_ns: u64,
    /// Kernel time the socket left `SYN_SENT` for `CLOSE`, 0 while still open.
    pub closed_ns: u64,
    pub netns_inode: u64,
    pub cgroup_id: u64,
    /// The socket cookie, 0 if nobody had asked for it (Cilium's socket LB asks).
    pub cookie: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The port is 0 until the kernel assigns it after `SYN_SENT`.
    pub src: SocketAddr,
    /// Destination as the socket knows it (the backend when a socket-level load balancer
    /// rewrote it).
    pub dst: SocketAddr,
    /// What the application passed to `connect()`, when known and different from `dst`.
    pub dialed: Option<SocketAddr>,
    /// SYNs sent so far: 1 + SYN retransmits.
    pub syn_count: u16,
    /// errno of an ICMP error queued on the socket while in `SYN_SENT`, 0 if none.
    pub soft_error: i32,
    pub flags: AttemptFlags,
}

/// What the kernel side saw of an attempt (`FLAG_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptFlags(u16);

impl AttemptFlags {
    pub const fn new(bits: u16) -> AttemptFlags {
        AttemptFlags(bits)
    }

    /// A SYN-ACK came back.
    pub fn answered(self) -> bool {
        self.0 & FLAG_ANSWERED != 0
    }

    /// The peer answered the SYN with a RST.
    pub fn rst_received(self) -> bool {
        self.0 & FLAG_RST_RECEIVED != 0
    }

    /// `connect()` failed before any SYN left.
    pub fn no_syn(self) -> bool {
        self.0 & FLAG_NO_SYN != 0
    }

    /// Cilium's socket LB rewrote the destination before our `connect()` hook ran.
    pub fn dialed_by_socket_lb(self) -> bool {
        self.0 & FLAG_DIALED_BY_SOCKET_LB != 0
    }
}

pub(super) fn tcp_event(kind: u32, ev: &ConnectEvent) -> Result<TcpEvent, DecodeError> {
    let attempt = attempt(&ev.attempt)?;
    Ok(if kind == EVENT_SYN_RETRANSMIT {
        TcpEvent::SynRetransmit {
            at_ns: ev.event_ns,
            attempt,
        }
    } else {
        TcpEvent::ConnectEnd {
            at_ns: ev.event_ns,
            error: ev.error,
            attempt,
        }
    })
}

fn attempt(a: &tracer_common::Attempt) -> Result<Attempt, DecodeError> {
    let dst = socket_addr(a.family, a.daddr, a.dport)?;
    let dialed = if a.flags & FLAG_DIALED_KNOWN == 0 {
        None
    } else {
        Some(socket_addr(a.family, a.dialed_addr, a.dialed_port)?).filter(|d| *d != dst)
    };
    Ok(Attempt {
        sock: a.sock,
        start_ns: a.start_ns,
        closed_ns: a.closed_ns,
        netns_inode: a.netns_inode,
        cgroup_id: a.cgroup_id,
        cookie: a.cookie,
        pid: a.pid,
        tid: a.tid,
        comm: comm_to_string(&a.comm),
        src: socket_addr(a.family, a.saddr, a.sport)?,
        dst,
        dialed,
        syn_count: a.syn_count,
        soft_error: a.soft_error,
        flags: AttemptFlags(a.flags),
    })
}

/// Connects from one process to one destination answered on the first SYN, as the kernel counted
/// them (`HEALTHY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthyConnects {
    pub dst: SocketAddr,
    pub netns_inode: u64,
    pub pid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    pub established: u64,
    pub syn_sent_ns_total: u64,
}

pub fn healthy_connects(
    key: &HealthyKey,
    stats: &HealthyStats,
) -> Result<HealthyConnects, DecodeError> {
    Ok(HealthyConnects {
        dst: socket_addr(key.dst.family, key.dst.addr, key.dst.port)?,
        netns_inode: key.dst.netns_inode,
        pid: key.pid,
        comm: comm_to_string(&stats.comm),
        cgroup_id: stats.cgroup_id,
        established: stats.established,
        syn_sent_ns_total: stats.syn_sent_ns_total,
    })
}

#[cfg(test)]
mod tests {
    use tracer_common::{AF_INET, EVENT_CONNECT_END};

    use super::{super::*, *};

    #[test]
    fn decodes_a_connect_end_record() {
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"curl");
        let mut daddr = [0u8; 16];
        daddr[..4].copy_from_slice(&[10, 0, 0, 7]);
        let ev = ConnectEvent {
            kind: EVENT_CONNECT_END,
            error: 111,
            event_ns: 42,
            attempt: tracer_common::Attempt {
                syn_count: 3,
                daddr,
                dport: 8080,
                family: AF_INET,
                comm,
                flags: FLAG_RST_RECEIVED,
                ..tracer_common::Attempt::default()
            },
        };
        let Ok(KernelEvent::Tcp(TcpEvent::ConnectEnd {
            at_ns: 42,
            error: 111,
            attempt,
        })) = decode(&bytes_of(&ev))
        else {
            panic!("not a connect end: {:?}", decode(&bytes_of(&ev)));
        };
        assert_eq!(attempt.dst, "10.0.0.7:8080".parse().expect("addr"));
        assert_eq!(attempt.src, "0.0.0.0:0".parse().expect("addr"));
        assert_eq!((attempt.comm.as_str(), attempt.syn_count), ("curl", 3));
        assert!(attempt.flags.rst_received() && !attempt.flags.answered());
    }

    #[test]
    fn the_dialled_address_is_kept_only_when_known_and_different() {
        let mut a = tracer_common::Attempt {
            family: AF_INET,
            dport: 80,
            dialed_port: 80,
            ..tracer_common::Attempt::default()
        };
        a.daddr[..4].copy_from_slice(&[10, 244, 1, 30]);
        a.dialed_addr[..4].copy_from_slice(&[10, 96, 0, 10]);
        assert_eq!(attempt(&a).map(|a| a.dialed), Ok(None), "not known");
        a.flags = FLAG_DIALED_KNOWN;
        assert_eq!(
            attempt(&a).map(|a| a.dialed),
            Ok(Some("10.96.0.10:80".parse().expect("addr")))
        );
        a.dialed_addr = a.daddr;
        assert_eq!(attempt(&a).map(|a| a.dialed), Ok(None), "the same");
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let ev = ConnectEvent {
            kind: EVENT_SYN_RETRANSMIT,
            ..ConnectEvent::default()
        };
        let bytes = bytes_of(&ev);
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes must not decode"
            );
        }
    }

    #[test]
    fn an_attempt_of_an_unknown_family_is_an_error() {
        let ev = ConnectEvent {
            kind: EVENT_SYN_RETRANSMIT,
            ..ConnectEvent::default()
        };
        assert_eq!(
            decode(&bytes_of(&ev)),
            Err(DecodeError::UnknownFamily { family: 0 })
        );
    }
}
