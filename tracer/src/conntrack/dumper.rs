//! A background thread that dumps the conntrack table every interval, so a large table never stalls
//! the ring-buffer consumer. From each dump it derives the answered connects per Service backend (new
//! `[ASSURED]`, DNAT'd entries) and the stale `[UNREPLIED]` entries.
use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel},
    time::{Duration, Instant, SystemTime},
};

use hashbrown::{HashMap, HashSet};

use super::{
    netlink::{Conntrack, Entry},
    stale::StaleNat,
};
use crate::{clock::Timestamp, record::StaleNatRecord};

/// (Service, backend, connects answered since the previous dump).
pub type Answered = Vec<(SocketAddr, SocketAddr, u64)>;

/// What one dump says.
pub enum DumpResult {
    Summary {
        at: Instant,
        /// (Service, backend) -> connects answered since the previous dump.
        answered: Answered,
        stale: Vec<StaleNatRecord>,
    },
    Failed(String),
}

pub struct Dumper {
    pub results: Receiver<DumpResult>,
    /// Dropping it stops the thread at its next wake-up.
    _stop: Sender<()>,
}

impl Dumper {
    pub fn start(netns: Option<PathBuf>, interval: Duration, stale_after: Duration) -> Dumper {
        let (tx, results) = channel();
        let (stop, stopped) = channel::<()>();
        std::thread::Builder::new()
            .name("conntrack-dump".into())
            .spawn(move || run(netns.as_deref(), interval, stale_after, &tx, &stopped))
            .map_or_else(
                |e| eprintln!("tracer: warning: cannot start the conntrack thread: {e}"),
                drop,
            );
        Dumper {
            results,
            _stop: stop,
        }
    }
}

fn run(
    netns: Option<&std::path::Path>,
    interval: Duration,
    stale_after: Duration,
    tx: &Sender<DumpResult>,
    stopped: &Receiver<()>,
) {
    let mut conntrack = match Conntrack::open(netns) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(DumpResult::Failed(e.to_string()));
            return;
        }
    };
    let mut stale = StaleNat::new(stale_after);
    let mut answered = AnsweredCount::default();
    loop {
        let now = Instant::now();
        let result = match conntrack.dump() {
            Ok(entries) => DumpResult::Summary {
                at: now,
                answered: answered.since_last(&entries),
                stale: stale.update(now, &entries, Timestamp(SystemTime::now())),
            },
            Err(e) => DumpResult::Failed(e.to_string()),
        };
        if tx.send(result).is_err() {
            return;
        }
        match stopped.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// Connects answered per (Service, backend), counted once per conntrack entry. An entry counts when
/// it is `[ASSURED]`: the client acknowledged the backend's SYN-ACK, so its socket was answered. A
/// reply alone (`SEEN_REPLY`) is not enough: a SYN-ACK dropped after this node's conntrack saw it
/// (the return path cut on the node) never reached the client, whose connect is abandoned.
#[derive(Debug, Default)]
pub struct AnsweredCount {
    /// Entries already counted; the first dump only sets the baseline.
    counted: Option<HashSet<u32>>,
}

impl AnsweredCount {
    pub fn since_last(&mut self, entries: &[Entry]) -> Answered {
        let answered_entry = |e: &&Entry| e.assured && e.backend().is_some();
        let mut answered: HashMap<(SocketAddr, SocketAddr), u64> = HashMap::new();
        if let Some(before) = &self.counted {
            for e in entries
                .iter()
                .filter(answered_entry)
                .filter(|e| !before.contains(&e.id))
            {
                if let Some(backend) = e.backend() {
                    *answered.entry((e.original.dst, backend)).or_default() += 1;
                }
            }
        }
        self.counted = Some(
            entries
                .iter()
                .filter(answered_entry)
                .map(|e| e.id)
                .collect(),
        );
        answered.into_iter().map(|((s, b), n)| (s, b, n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conntrack::netlink::{Direction, TcpState};

    fn entry(id: u32, replied: bool, assured: bool) -> Entry {
        let a = |s: &str| s.parse().expect("addr");
        Entry {
            id,
            original: Direction {
                src: a("10.233.1.2:40000"),
                dst: a("10.233.1.1:30080"),
            },
            reply: Direction {
                src: a("10.234.1.2:8080"),
                dst: a("10.234.1.1:40000"),
            },
            replied,
            assured,
            dst_nat: true,
            tcp_state: Some(if assured {
                TcpState::Established
            } else {
                TcpState::SynRecv
            }),
            timeout_s: 60,
        }
    }

    #[test]
    fn a_syn_ack_the_client_never_acknowledged_is_no_answered_connect() {
        let mut count = AnsweredCount::default();
        assert!(count.since_last(&[]).is_empty(), "the baseline");
        // The backend's SYN-ACK passed this node's conntrack and was dropped after it.
        assert!(count.since_last(&[entry(7, true, false)]).is_empty());
        // The client acknowledged it: one answered connect, counted once.
        let answered = count.since_last(&[entry(7, true, true)]);
        assert_eq!(
            answered,
            [(
                "10.233.1.1:30080".parse().expect("addr"),
                "10.234.1.2:8080".parse().expect("addr"),
                1
            )]
        );
        assert!(count.since_last(&[entry(7, true, true)]).is_empty());
    }
}
