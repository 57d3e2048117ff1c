//! The soak's accounting per flow: every connect the load counted as failed is matched with the
//! tracer's `connect` records of the same source port and destination around its time, and gets a
//! [`Fate`]. Totals alone cannot tell a lost record from a connect the load and the tracer judged
//! differently (the load gives up on a connect at 1 s, when its first SYN retransmit leaves: one
//! answered then is a failure for the load and `slow` for the tracer).
//!
//! The load cycles through the same source ports every turn (about 10 s apart for one
//! destination), so a record belongs to a failure when it names its port and destination and
//! falls within [`BEFORE`] and [`AFTER`] of it.
use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    net::SocketAddrV4,
    time::{Duration, SystemTime},
};

use serde_json::Value;

use crate::bench::load::{FailedConnect, Failure};

/// A record may carry a time up to this long before the load's `connect()` call (clocks read on two
/// sides: the tracer's wall time is the kernel's, converted with an offset taken at its start).
const BEFORE: Duration = Duration::from_millis(500);
/// ... and this long after the load's close (a final record's time is the kernel's close).
const AFTER: Duration = Duration::from_secs(3);

/// `tcp_info.tcpi_state` values.
const TCP_ESTABLISHED: u8 = 1;
const TCP_SYN_SENT: u8 = 2;

/// The fields of a `connect` record the matching needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRecord {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub at: SystemTime,
    pub verdict: String,
    pub is_final: bool,
    pub netns: String,
    /// The attempt's id, shared by its live updates and its end.
    pub flow: String,
    pub syns: u64,
}

impl ConnectRecord {
    /// A `connect` record of the JSON output; `None` for anything else.
    pub fn from_json(v: &Value) -> Option<ConnectRecord> {
        if v["kind"] != "connect" {
            return None;
        }
        Some(ConnectRecord {
            src: v["src"].as_str()?.parse().ok()?,
            dst: v["dst"].as_str()?.parse().ok()?,
            at: humantime::parse_rfc3339_weak(v["time"].as_str()?).ok()?,
            verdict: v["verdict"].as_str()?.to_owned(),
            is_final: v["final"].as_bool().unwrap_or(false),
            netns: v["netns"].as_str().unwrap_or_default().to_owned(),
            flow: v["flow"].as_str().unwrap_or_default().to_owned(),
            syns: v["syns"].as_u64().unwrap_or(0),
        })
    }

    fn is_answer(&self) -> bool {
        matches!(self.verdict.as_str(), "slow" | "established")
    }
}

/// SYN retransmits of ended attempts that got no live `unanswered` update: a final record's `syns`
/// beyond 1 + its live updates (one is sent per retransmit the tracer's program saw). The share of
/// `dropped.syn_retransmits_unseen` that fell on these records' flows (that counter is the whole
/// node's).
pub fn retransmits_without_live_update(records: &[ConnectRecord]) -> u64 {
    let mut live: HashMap<&str, u64> = HashMap::new();
    for r in records.iter().filter(|r| !r.is_final) {
        *live.entry(r.flow.as_str()).or_default() += 1;
    }
    records
        .iter()
        .filter(|r| r.is_final)
        .map(|r| {
            let seen = live.get(r.flow.as_str()).copied().unwrap_or(0);
            r.syns.saturating_sub(1 + seen)
        })
        .sum()
}

/// What the tracer wrote about one connect the load counted as failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// A final record with a failure verdict (`abandoned`, `timed_out`, `refused`, ...).
    Failure { verdict: String },
    /// A final record that says it was answered (`slow`): the load gave up as the answer came.
    Answered { verdict: String },
    /// Answered on the first SYN, as the load's own look at the socket says (`ESTABLISHED`, one
    /// SYN): counted in the tracer's `healthy` totals, never a record of its own, by design.
    HealthyByDesign,
    /// Only live `unanswered` records, no final one.
    LiveOnly,
    /// No record at all.
    Unreported,
    /// No connect was made (no source port could be bound): nothing for the tracer to see.
    NotSent,
}

impl Fate {
    /// Whether this is a loss: a connect that went out and whose end the tracer did not report.
    pub fn is_lost(&self) -> bool {
        matches!(self, Fate::LiveOnly | Fate::Unreported)
    }
}

/// One failure and its fate, with the records found for it.
#[derive(Debug, Clone)]
pub struct Matched {
    pub failure: FailedConnect,
    pub fate: Fate,
    pub records: Vec<ConnectRecord>,
}

/// The failures of one load (one destination or several) matched with the records.
#[derive(Debug, Default)]
pub struct Accounting {
    pub matched: Vec<Matched>,
    /// Final failure records for these destinations and source address that match no failure the
    /// load counted (it saw them answered, or cut them at the end of a turn).
    pub unclaimed_failure_records: Vec<ConnectRecord>,
}

/// Matches `failures` of connects from `client` (to any of `dsts`) with `records`.
pub fn account(
    failures: &[FailedConnect],
    client: std::net::Ipv4Addr,
    dsts: &dyn Fn(SocketAddrV4) -> bool,
    records: &[ConnectRecord],
) -> Accounting {
    let mut by_port: HashMap<u16, Vec<usize>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if *r.src.ip() == client && dsts(r.dst) {
            by_port.entry(r.src.port()).or_default().push(i);
        }
    }
    let mut claimed = vec![false; records.len()];
    let mut matched = Vec::with_capacity(failures.len());
    for f in failures {
        let Some(port) = f.port else {
            matched.push(Matched {
                failure: *f,
                fate: Fate::NotSent,
                records: Vec::new(),
            });
            continue;
        };
        let (from, to) = (
            f.started.checked_sub(BEFORE).unwrap_or(f.started),
            f.ended + AFTER,
        );
        let mine: Vec<usize> = by_port
            .get(&port)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| !claimed[i] && records[i].at >= from && records[i].at <= to)
            .collect();
        for &i in &mine {
            claimed[i] = true;
        }
        let records: Vec<ConnectRecord> = mine.iter().map(|&i| records[i].clone()).collect();
        let fate = fate_of(f, &records);
        matched.push(Matched {
            failure: *f,
            fate,
            records,
        });
    }
    let unclaimed_failure_records = by_port
        .values()
        .flatten()
        .filter(|&&i| !claimed[i] && records[i].is_final && !records[i].is_answer())
        .map(|&i| records[i].clone())
        .collect();
    Accounting {
        matched,
        unclaimed_failure_records,
    }
}

fn fate_of(failure: &FailedConnect, records: &[ConnectRecord]) -> Fate {
    if let Some(end) = records.iter().find(|r| r.is_final) {
        let verdict = end.verdict.clone();
        return if end.is_answer() {
            Fate::Answered { verdict }
        } else {
            Fate::Failure { verdict }
        };
    }
    if !records.is_empty() {
        return Fate::LiveOnly;
    }
    match failure.how {
        Failure::TimedOut {
            tcp_state: TCP_ESTABLISHED,
            syns: 1,
        } => Fate::HealthyByDesign,
        _ => Fate::Unreported,
    }
}

impl Accounting {
    /// Failures whose connect went out and whose end the tracer did not report.
    pub fn lost(&self) -> u64 {
        self.matched.iter().filter(|m| m.fate.is_lost()).count() as u64
    }

    /// Failures with a final failure record.
    pub fn reported(&self) -> u64 {
        self.count(|f| matches!(f, Fate::Failure { .. }))
    }

    fn count(&self, which: impl Fn(&Fate) -> bool) -> u64 {
        self.matched.iter().filter(|m| which(&m.fate)).count() as u64
    }

    /// The load's failures by fate, as rows of the soak's summary (figure, value).
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let answered: Vec<&Matched> = self
            .matched
            .iter()
            .filter(|m| matches!(m.fate, Fate::Answered { .. }))
            .collect();
        // The load's own last look at the socket (`TCP_INFO`, just before its close): the answer
        // had come already (unread), or the SYN had been retransmitted, or neither (both came
        // between that look and the close).
        let look = |answered_yet: bool, retransmitted: bool| {
            answered
                .iter()
                .filter(|m| match m.failure.how {
                    Failure::TimedOut { tcp_state, syns } if tcp_state != 0 => {
                        (tcp_state != TCP_SYN_SENT) == answered_yet
                            && (answered_yet || (syns > 1) == retransmitted)
                    }
                    _ => false,
                })
                .count()
        };
        let (answered_already, after_retransmit, one_syn) =
            (look(true, false), look(false, true), look(false, false));
        let mut verdicts: BTreeMap<&str, u64> = BTreeMap::new();
        for m in &self.matched {
            if let Fate::Failure { verdict } = &m.fate {
                *verdicts.entry(verdict.as_str()).or_default() += 1;
            }
        }
        let verdicts: Vec<String> = verdicts.iter().map(|(v, n)| format!("{v} {n}")).collect();
        vec![
            (
                "final failure records, by verdict",
                if verdicts.is_empty() {
                    "0".to_owned()
                } else {
                    verdicts.join(", ")
                },
            ),
            (
                "answered (`slow`) as the load gave up; its last look before closing saw: \
                 answered already (unread), the SYN retransmitted, one SYN",
                format!(
                    "{}; {answered_already}, {after_retransmit}, {one_syn}",
                    answered.len()
                ),
            ),
            (
                "answered on the first SYN (`healthy`, no record by design), live records only, \
                 no record, never sent",
                format!(
                    "{}, {}, {}, {}",
                    self.count(|f| *f == Fate::HealthyByDesign),
                    self.count(|f| *f == Fate::LiveOnly),
                    self.count(|f| *f == Fate::Unreported),
                    self.count(|f| *f == Fate::NotSent),
                ),
            ),
            (
                "final failure records no failure of the load claims",
                self.unclaimed_failure_records.len().to_string(),
            ),
        ]
    }

    /// Every failure that is not a plain final failure record, one line each, for the work
    /// directory: what the load saw and what the tracer wrote.
    pub fn details(&self) -> String {
        let mut out = String::new();
        for m in self
            .matched
            .iter()
            .filter(|m| !matches!(m.fate, Fate::Failure { .. }))
        {
            let f = &m.failure;
            let _ = write!(
                out,
                "{:?} port {:?} started {} ended {} ({} ms) load {:?}:",
                m.fate,
                f.port,
                humantime::format_rfc3339_millis(f.started),
                humantime::format_rfc3339_millis(f.ended),
                f.ended
                    .duration_since(f.started)
                    .unwrap_or_default()
                    .as_millis(),
                f.how
            );
            for r in &m.records {
                let _ = write!(
                    out,
                    " [{} {} final={}]",
                    humantime::format_rfc3339_millis(r.at),
                    r.verdict,
                    r.is_final
                );
            }
            out.push('\n');
        }
        for r in &self.unclaimed_failure_records {
            let _ = writeln!(
                out,
                "unclaimed record {} -> {} at {} {} (netns {})",
                r.src,
                r.dst,
                humantime::format_rfc3339_millis(r.at),
                r.verdict,
                r.netns
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 232, 0, 1);
    const VIP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 232, 100, 1), 80);

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_hours(500_000) + Duration::from_millis(ms)
    }

    fn failure(port: u16, started_ms: u64, how: Failure) -> FailedConnect {
        FailedConnect {
            port: Some(port),
            started: at(started_ms),
            ended: at(started_ms + 1_001),
            how,
        }
    }

    fn record(port: u16, ms: u64, verdict: &str, is_final: bool) -> ConnectRecord {
        ConnectRecord {
            src: SocketAddrV4::new(CLIENT, port),
            dst: VIP,
            at: at(ms),
            verdict: verdict.to_owned(),
            is_final,
            netns: "bhb-c-1".to_owned(),
            flow: format!("f{port}"),
            syns: 1,
        }
    }

    const SYN_SENT: Failure = Failure::TimedOut {
        tcp_state: 2,
        syns: 1,
    };

    fn fates(failures: &[FailedConnect], records: &[ConnectRecord]) -> Vec<Fate> {
        account(failures, CLIENT, &|d| d == VIP, records)
            .matched
            .into_iter()
            .map(|m| m.fate)
            .collect()
    }

    #[test]
    fn each_failure_gets_the_records_of_its_own_port_and_turn() {
        // Port 1024 is used again 10 s later: its second failure has no record of its own.
        let failures = [
            failure(1024, 0, SYN_SENT),
            failure(1025, 10, SYN_SENT),
            failure(1024, 10_000, SYN_SENT),
        ];
        let records = [
            record(1024, 1_001, "abandoned", true),
            record(1025, 1_011, "slow", true),
            record(1026, 1_011, "abandoned", true),
        ];
        assert_eq!(
            fates(&failures, &records),
            [
                Fate::Failure {
                    verdict: "abandoned".into()
                },
                Fate::Answered {
                    verdict: "slow".into()
                },
                Fate::Unreported,
            ]
        );
    }

    #[test]
    fn live_updates_without_an_end_are_a_loss() {
        let failures = [failure(2000, 0, SYN_SENT)];
        let records = [record(2000, 1_000, "unanswered", false)];
        let acc = account(&failures, CLIENT, &|d| d == VIP, &records);
        assert_eq!(acc.matched[0].fate, Fate::LiveOnly);
        assert_eq!(acc.lost(), 1);
    }

    #[test]
    fn an_answer_on_the_first_syn_as_the_load_gave_up_is_healthy_not_lost() {
        let failures = [
            failure(
                3000,
                0,
                Failure::TimedOut {
                    tcp_state: TCP_ESTABLISHED,
                    syns: 1,
                },
            ),
            failure(
                3001,
                0,
                Failure::TimedOut {
                    tcp_state: TCP_ESTABLISHED,
                    syns: 2,
                },
            ),
        ];
        assert_eq!(
            fates(&failures, &[]),
            [Fate::HealthyByDesign, Fate::Unreported]
        );
    }

    #[test]
    fn failure_records_no_load_failure_claims_are_listed() {
        let failures = [failure(1024, 0, SYN_SENT)];
        let records = [
            record(1024, 1_001, "abandoned", true),
            record(1030, 5_000, "abandoned", true),
            record(1031, 5_000, "slow", true),
        ];
        let acc = account(&failures, CLIENT, &|d| d == VIP, &records);
        assert_eq!(acc.unclaimed_failure_records, [records[1].clone()]);
        assert_eq!((acc.reported(), acc.lost()), (1, 0));
    }

    #[test]
    fn a_connect_never_sent_is_not_a_loss() {
        let mut f = failure(1, 0, Failure::NotStarted(libc::EADDRINUSE));
        f.port = None;
        let acc = account(&[f], CLIENT, &|d| d == VIP, &[]);
        assert_eq!(
            (acc.matched[0].fate.clone(), acc.lost()),
            (Fate::NotSent, 0)
        );
    }

    #[test]
    fn the_rows_say_what_the_load_saw_of_the_answered_ones() {
        let timed_out = |tcp_state, syns| Failure::TimedOut { tcp_state, syns };
        let failures = [
            failure(1024, 0, SYN_SENT),
            failure(1025, 0, timed_out(2, 2)),
            failure(1026, 0, timed_out(8, 2)),
            failure(1027, 0, timed_out(2, 1)),
        ];
        let records = [
            record(1024, 1_001, "abandoned", true),
            record(1025, 1_001, "slow", true),
            record(1026, 990, "slow", true),
            record(1027, 1_001, "slow", true),
        ];
        let rows = account(&failures, CLIENT, &|d| d == VIP, &records).rows();
        let values: Vec<&str> = rows.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["abandoned 1", "3; 1, 1, 1", "0, 0, 0, 0", "0"]);
    }

    #[test]
    fn retransmits_are_unseen_where_a_final_record_counts_more_syns_than_live_updates() {
        let mut records = vec![
            record(1024, 1_000, "unanswered", false),
            record(1024, 2_000, "unanswered", false),
            record(1024, 2_500, "abandoned", true),
            record(1025, 1_001, "slow", true),
            record(1026, 1_001, "abandoned", true),
        ];
        records[2].syns = 3;
        records[3].syns = 2;
        assert_eq!(retransmits_without_live_update(&records), 1);
    }

    #[test]
    fn a_record_line_parses() {
        let v: Value = serde_json::from_str(
            r#"{"schema":1,"kind":"connect","time":"2027-01-15T08:00:01.001Z","verdict":"abandoned","final":true,"src":"10.232.0.1:1024","dst":"10.232.100.1:80","netns":"bhb-c-1"}"#,
        )
        .expect("json");
        let r = ConnectRecord::from_json(&v).expect("a connect record");
        assert_eq!(
            (r.src.port(), r.dst, r.is_final, r.verdict.as_str()),
            (1024, VIP, true, "abandoned")
        );
    }
}
