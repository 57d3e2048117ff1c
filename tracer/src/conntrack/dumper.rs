//! A background thread that dumps the conntrack table every interval, so a large table never stalls
//! the ring-buffer consumer. From each dump it derives the answered connects per Service backend (new
//! replied, DNAT'd entries) and the stale `[UNREPLIED]` entries.
use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel},
    time::{Duration, Instant, SystemTime},
};

use hashbrown::{HashMap, HashSet};

use super::{netlink::Conntrack, stale::StaleNat};
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
    // Replied entries already counted; the first dump only sets the baseline.
    let mut counted: Option<HashSet<u32>> = None;
    loop {
        let now = Instant::now();
        let result = match conntrack.dump() {
            Ok(entries) => {
                let time = Timestamp(SystemTime::now());
                let mut answered: HashMap<(SocketAddr, SocketAddr), u64> = HashMap::new();
                let replied: HashSet<u32> = entries
                    .iter()
                    .filter(|e| e.replied && e.backend().is_some())
                    .map(|e| e.id)
                    .collect();
                if let Some(before) = &counted {
                    for e in entries
                        .iter()
                        .filter(|e| e.replied && !before.contains(&e.id))
                    {
                        if let Some(backend) = e.backend() {
                            *answered.entry((e.original.dst, backend)).or_default() += 1;
                        }
                    }
                }
                counted = Some(replied);
                DumpResult::Summary {
                    at: now,
                    answered: answered.into_iter().map(|((s, b), n)| (s, b, n)).collect(),
                    stale: stale.update(now, &entries, time),
                }
            }
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
