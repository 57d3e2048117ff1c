//! The `stuck socket` verdict: one socket whose last N queries to one server all went unanswered,
//! while other sockets' queries to the same server or Service were answered in the same window.
//! The incident this is for: a resolver (nginx's) keeps one UDP socket whose conntrack entry still
//! points at a deleted DNS pod; every lookup on it times out, other sockets work.
use std::{
    collections::{HashMap, VecDeque},
    net::SocketAddr,
};

/// Answers older than this are forgotten, and so are runs with no new loss for this long.
const HORIZON_NS: u64 = 600 * 1_000_000_000;
/// Answer batches kept per server or Service.
const MAX_BATCHES: usize = 256;

/// A query that went unanswered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub socket_cookie: u64,
    pub netns_inode: u64,
    pub pid: u32,
    pub comm: String,
    pub client: SocketAddr,
    /// Where the query went.
    pub server: SocketAddr,
    /// The Service it was meant for (the connected address), or the server.
    pub service: SocketAddr,
    pub sent_ns: u64,
}

/// A socket found stuck.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    /// The latest lost query (process, addresses).
    pub latest: Lost,
    /// When the first lost query of the run was sent.
    pub since_ns: u64,
    pub lost: u32,
    pub others_answered: u64,
}

#[derive(Debug)]
struct Run {
    latest: Lost,
    since_ns: u64,
    lost: u32,
    reported: bool,
}

#[derive(Debug)]
pub struct StuckDetector {
    threshold: u32,
    runs: HashMap<(u64, SocketAddr), Run>,
    /// Answers per server or Service address: (time, count), oldest first.
    answers: HashMap<SocketAddr, VecDeque<(u64, u64)>>,
}

impl StuckDetector {
    pub fn new(threshold: u32) -> StuckDetector {
        StuckDetector {
            threshold: threshold.max(1),
            runs: HashMap::new(),
            answers: HashMap::new(),
        }
    }

    /// `count` replies from `server` (as the sockets saw it: a Service after un-NAT) by `at_ns`.
    pub fn answered(&mut self, server: SocketAddr, at_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let batches = self.answers.entry(server).or_default();
        batches.push_back((at_ns, count));
        if batches.len() > MAX_BATCHES {
            batches.pop_front();
        }
    }

    fn answered_since(&self, addrs: [SocketAddr; 2], since_ns: u64) -> u64 {
        let mut total = 0;
        for (i, addr) in addrs.iter().enumerate() {
            if i == 1 && addrs[0] == addrs[1] {
                break;
            }
            if let Some(batches) = self.answers.get(addr) {
                total += batches
                    .iter()
                    .filter(|(at, _)| *at >= since_ns)
                    .map(|(_, n)| n)
                    .sum::<u64>();
            }
        }
        total
    }

    /// One more unanswered query. `socket_answered_ns` is the last time its socket got any reply:
    /// a reply after the run began ends the run. Returns the socket once it is found stuck (once
    /// per run).
    pub fn lost(&mut self, query: Lost, socket_answered_ns: Option<u64>) -> Option<Stuck> {
        let key = (query.socket_cookie, query.server);
        let run = self.runs.entry(key).or_insert_with(|| Run {
            latest: query.clone(),
            since_ns: query.sent_ns,
            lost: 0,
            reported: false,
        });
        if socket_answered_ns.is_some_and(|at| at > run.since_ns) {
            *run = Run {
                latest: query.clone(),
                since_ns: query.sent_ns,
                lost: 0,
                reported: false,
            };
        }
        run.lost += 1;
        run.latest = query;
        self.check_one(key)
    }

    fn check_one(&mut self, key: (u64, SocketAddr)) -> Option<Stuck> {
        let run = self.runs.get(&key)?;
        if run.reported || run.lost < self.threshold {
            return None;
        }
        let others = self.answered_since([run.latest.service, run.latest.server], run.since_ns);
        if others == 0 {
            return None;
        }
        let run = self.runs.get_mut(&key)?;
        run.reported = true;
        Some(Stuck {
            latest: run.latest.clone(),
            since_ns: run.since_ns,
            lost: run.lost,
            others_answered: others,
        })
    }

    /// Runs long enough whose server or Service got answers for others only since their last
    /// loss; and forgets what is older than the horizon.
    pub fn check(&mut self, now_ns: u64) -> Vec<Stuck> {
        let horizon = now_ns.saturating_sub(HORIZON_NS);
        self.runs.retain(|_, r| r.latest.sent_ns >= horizon);
        for batches in self.answers.values_mut() {
            while batches.front().is_some_and(|(at, _)| *at < horizon) {
                batches.pop_front();
            }
        }
        self.answers.retain(|_, b| !b.is_empty());
        let keys: Vec<_> = self.runs.keys().copied().collect();
        keys.into_iter().filter_map(|k| self.check_one(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn lost(socket: u64, server: &str, sent_s: u64) -> Lost {
        Lost {
            socket_cookie: socket,
            netns_inode: 1,
            pid: 42,
            comm: "nginx".into(),
            client: "10.0.0.1:40000".parse().expect("addr"),
            server: server.parse().expect("addr"),
            service: "10.96.0.10:53".parse().expect("addr"),
            sent_ns: sent_s * S,
        }
    }

    fn service() -> SocketAddr {
        "10.96.0.10:53".parse().expect("addr")
    }

    #[test]
    fn three_lost_while_others_are_answered_is_stuck_once() {
        let mut d = StuckDetector::new(3);
        d.answered(service(), 9 * S, 5);
        assert_eq!(d.lost(lost(1, "10.0.0.9:53", 10), None), None);
        assert_eq!(d.lost(lost(1, "10.0.0.9:53", 11), None), None);
        d.answered(service(), 11 * S, 2);
        let stuck = d.lost(lost(1, "10.0.0.9:53", 12), None).expect("stuck");
        assert_eq!(stuck.lost, 3);
        assert_eq!(stuck.since_ns, 10 * S);
        assert_eq!(
            stuck.others_answered, 2,
            "answers before the run do not count"
        );
        assert_eq!(stuck.latest.comm, "nginx");
        assert_eq!(
            d.lost(lost(1, "10.0.0.9:53", 13), None),
            None,
            "once per run"
        );
        assert!(d.check(14 * S).is_empty());
    }

    #[test]
    fn nobody_answered_means_a_dead_service_not_a_stuck_socket() {
        let mut d = StuckDetector::new(3);
        for t in 10..20 {
            assert_eq!(d.lost(lost(1, "10.0.0.9:53", t), None), None);
        }
        // Others get answers later: the run is reported by the periodic check.
        d.answered(service(), 21 * S, 1);
        let stuck = d.check(21 * S);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].lost, 10);
    }

    #[test]
    fn a_reply_on_the_socket_ends_the_run() {
        let mut d = StuckDetector::new(3);
        d.answered(service(), 10 * S, 5);
        d.lost(lost(1, "10.0.0.9:53", 10), None);
        d.lost(lost(1, "10.0.0.9:53", 11), None);
        // The socket got an answer at 11.5 s: its next loss starts a new run.
        assert_eq!(
            d.lost(lost(1, "10.0.0.9:53", 12), Some(11 * S + S / 2)),
            None
        );
        assert_eq!(
            d.lost(lost(1, "10.0.0.9:53", 13), Some(11 * S + S / 2)),
            None
        );
        d.answered(service(), 13 * S, 1);
        let stuck = d
            .lost(lost(1, "10.0.0.9:53", 14), Some(11 * S + S / 2))
            .expect("stuck after 3 more");
        assert_eq!(stuck.since_ns, 12 * S);
    }

    #[test]
    fn sockets_and_servers_are_counted_apart() {
        let mut d = StuckDetector::new(2);
        d.answered(service(), 0, 1);
        assert_eq!(d.lost(lost(1, "10.0.0.9:53", 10), None), None);
        assert_eq!(d.lost(lost(2, "10.0.0.9:53", 10), None), None);
        assert_eq!(d.lost(lost(1, "10.0.0.8:53", 10), None), None);
        d.answered(service(), 10 * S, 1);
        assert!(d.lost(lost(2, "10.0.0.9:53", 11), None).is_some());
    }

    #[test]
    fn old_runs_and_answers_are_forgotten() {
        let mut d = StuckDetector::new(3);
        d.answered(service(), 0, 1);
        d.lost(lost(1, "10.0.0.9:53", 1), None);
        assert!(d.check(HORIZON_NS + 2 * S).is_empty());
        assert!(d.runs.is_empty() && d.answers.is_empty());
    }
}
