//! The records the tracer reports: one type per JSON-lines record kind (see docs/schema.md for the
//! schema as a user reads it). Text mode, the JSON sink and `replay` all use these types.
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

mod identity;

pub use self::identity::Identity;
pub use crate::clock::Timestamp;
use crate::verdict::{ClusterVerdictKind, DnsVerdict, Errno, ReplyOutcome, Verdict, VerdictKind};

/// Version of the JSON-lines schema; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    Connect(ConnectRecord),
    Healthy(HealthyRecord),
    Service(ServiceRecord),
    StaleNat(StaleNatRecord),
    StaleDatapath(StaleDatapathRecord),
    Stats(StatsRecord),
    Dns(DnsRecord),
    DnsHealthy(DnsHealthyRecord),
    DnsStuckSocket(DnsStuckSocketRecord),
    ReplyLost(ReplyLostRecord),
}

/// One line of output: the schema version, then the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub schema: u32,
    #[serde(flatten)]
    pub record: Record,
}

/// A connect attempt that needs attention: live (`final: false`, verdict `unanswered`) or ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectRecord {
    pub time: Timestamp,
    /// `verdict` and `cause`.
    #[serde(flatten)]
    pub verdict: Verdict,
    #[serde(rename = "final")]
    pub is_final: bool,
    /// `ip:port`; the port is 0 if the kernel had not assigned it yet.
    pub src: SocketAddr,
    /// Destination as the socket knows it (the backend when a socket-level load balancer rewrote it).
    pub dst: SocketAddr,
    /// What the application passed to `connect()`, only when it differs from `dst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialed: Option<SocketAddr>,
    /// The Service address the application meant, when load balancing was seen: the dialled address
    /// (socket-level LB) or the socket's destination that conntrack DNAT'd (kube-proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<SocketAddr>,
    /// The backend the connect was actually sent to, when `service` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<SocketAddr>,
    /// SYNs sent: 1 + retransmits.
    pub syns: u16,
    /// Time in `SYN_SENT` so far (live) or in all (final).
    pub syn_sent_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<Errno>,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    pub netns: String,
    /// The namespace's nsfs inode number (`ls -l /proc/PID/ns/net`). Recordings made before it
    /// replaced the netns cookie call it `netns_cookie`.
    #[serde(alias = "netns_cookie")]
    pub netns_inode: u64,
    /// Stable id of the attempt, shared by its live updates and its final record.
    pub flow: String,
    pub explanation: String,
    /// Pod, Service and node names, the cluster-state verdict (all optional; see `record/identity.rs`).
    #[serde(flatten)]
    pub identity: Identity,
    /// A TCP connect to port 53: DNS over TCP.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dns: bool,
}

/// Connects from one process to one destination answered on their first SYN, since the previous
/// such record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthyRecord {
    pub time: Timestamp,
    /// Always `established`.
    pub verdict: VerdictKind,
    pub dst: SocketAddr,
    pub pid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    pub netns: String,
    /// The namespace's nsfs inode number (`ls -l /proc/PID/ns/net`). Recordings made before it
    /// replaced the netns cookie call it `netns_cookie`.
    #[serde(alias = "netns_cookie")]
    pub netns_inode: u64,
    pub established: u64,
    pub mean_syn_sent_ms: f64,
    /// Pod, Service and node names (all optional; see `record/identity.rs`).
    #[serde(flatten)]
    pub identity: Identity,
}

/// Per Service, per backend: the verdicts of the connects of the last `window_s` seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    pub time: Timestamp,
    pub service: SocketAddr,
    pub window_s: u64,
    /// Worst first.
    pub backends: Vec<BackendShare>,
    pub total: u64,
    pub failing: u64,
    pub failing_share: f64,
    /// The line that ends the incident: `10.96.0.10:80 -> 10.244.1.30:8080 unanswered 48 of 100, ...`.
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendShare {
    pub backend: SocketAddr,
    /// Count per verdict (`established`, `abandoned`, `refused`, ...).
    pub verdicts: std::collections::BTreeMap<VerdictKind, u64>,
    pub total: u64,
    pub failing: u64,
}

/// A conntrack entry still in `SYN_SENT` with no reply (`[UNREPLIED]`) after the threshold: what
/// `conntrack -E` shows raw, reported once per entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaleNatRecord {
    pub time: Timestamp,
    pub original: Tuple,
    pub reply: Tuple,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<SocketAddr>,
    pub state: String,
    /// At least this old: first seen by the tracer this long ago.
    pub age_s: u64,
    pub explanation: String,
}

/// One direction of a conntrack entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuple {
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// An entry of the node's Service datapath (kube-proxy's iptables or nftables rules, IPVS) that the
/// cluster's EndpointSlices do not back: reported when the audit first finds it, and once more with
/// `gone: true` when it is no longer stale (removed from the datapath, or backed again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaleDatapathRecord {
    pub time: Timestamp,
    /// The Service address the entry translates.
    pub service: SocketAddr,
    /// `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// `namespace/name`: from the cluster state, else from the datapath's own names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Where the entry sends connects.
    pub backend: SocketAddr,
    pub source: Source,
    /// The chain, map or virtual server that holds it (`KUBE-SEP-...`, `endpoint-...`).
    pub location: String,
    pub reason: StaleReason,
    /// This entry is no longer stale: the datapath dropped it, or the cluster backs it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
    pub explanation: String,
}

/// Where a datapath entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// kube-proxy `--proxy-mode=iptables`: DNAT rules in the `nat` table.
    Iptables,
    /// kube-proxy `--proxy-mode=nftables`: `table ip kube-proxy`.
    Nftables,
    /// kube-proxy `--proxy-mode=ipvs`: IPVS virtual and real servers.
    Ipvs,
    /// Cilium's kube-proxy replacement: its pinned services and backends maps.
    Cilium,
}

impl Source {
    pub const ALL: [Source; 4] = [
        Source::Iptables,
        Source::Nftables,
        Source::Ipvs,
        Source::Cilium,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Source::Iptables => "iptables",
            Source::Nftables => "nftables",
            Source::Ipvs => "ipvs",
            Source::Cilium => "cilium",
        }
    }

    /// How a sentence names it: "kube-proxy's iptables".
    pub fn described(self) -> &'static str {
        match self {
            Source::Iptables => "kube-proxy's iptables rules",
            Source::Nftables => "kube-proxy's nftables table",
            Source::Ipvs => "the IPVS table",
            Source::Cilium => "Cilium's service maps",
        }
    }
}

/// Why a datapath entry is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StaleReason {
    /// No EndpointSlice of the Service lists the backend (a pod still has the address).
    #[serde(rename = "no EndpointSlice lists it")]
    Unlisted,
    /// An EndpointSlice still lists the backend for a pod, but no current pod has the address.
    #[serde(rename = "its pod is gone")]
    PodGone,
    /// Neither: no EndpointSlice lists it and no current pod has the address.
    #[serde(rename = "no EndpointSlice lists it and its pod is gone")]
    UnlistedPodGone,
}

impl StaleReason {
    pub fn text(self) -> &'static str {
        match self {
            StaleReason::Unlisted => "no EndpointSlice lists it",
            StaleReason::PodGone => "its pod is gone",
            StaleReason::UnlistedPodGone => "no EndpointSlice lists it and its pod is gone",
        }
    }
}

/// One UDP DNS query that needs attention: `slow` or `error` (answered), `unanswered`, `refused`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DnsRecord {
    pub time: Timestamp,
    pub verdict: DnsVerdict,
    /// Question name, `None` when the question did not parse.
    pub name: Option<String>,
    /// Question type (`A`, `AAAA`, ...).
    pub qtype: Option<String>,
    pub id: u16,
    /// `ip:port` the query was sent to (after DNAT in the sender's own namespace).
    pub server: SocketAddr,
    /// What a connected socket was connected to (a Service address), when it differs from `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialed: Option<SocketAddr>,
    /// The Service address the query was meant for, when load balancing was seen: `dialed` (DNAT in
    /// the sender's namespace), or `server` when conntrack DNAT'd it (kube-proxy on the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<SocketAddr>,
    /// The DNS server the query was actually sent to, when `service` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<SocketAddr>,
    pub client: SocketAddr,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    pub netns: String,
    /// The namespace's nsfs inode number (`ls -l /proc/PID/ns/net`). Recordings made before it
    /// replaced the netns cookie call it `netns_cookie`.
    #[serde(alias = "netns_cookie")]
    pub netns_inode: u64,
    pub socket_cookie: u64,
    /// RCODE name of the reply (`NOERROR`, `NXDOMAIN`, `SERVFAIL`, ...), answered queries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcode: Option<String>,
    /// Query to reply, answered queries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// How long the query waited before it was reported, `unanswered` and `refused` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    pub explanation: String,
    /// `DNS server is no live pod` for an unanswered or refused query, when cluster state says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<ClusterVerdictKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_explanation: Option<String>,
}

/// Fast NOERROR replies from one server in one namespace since the previous such record: counted
/// in the kernel, never sent one by one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DnsHealthyRecord {
    pub time: Timestamp,
    /// The replies' source as the sockets saw it (a Service address after un-NAT).
    pub server: SocketAddr,
    pub netns: String,
    /// The namespace's nsfs inode number (`ls -l /proc/PID/ns/net`). Recordings made before it
    /// replaced the netns cookie call it `netns_cookie`.
    #[serde(alias = "netns_cookie")]
    pub netns_inode: u64,
    pub answered: u64,
    pub mean_latency_ms: f64,
}

/// One socket whose last queries to one server all went unanswered while other sockets' queries to
/// the same server or Service were answered: the socket is glued to a dead server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DnsStuckSocketRecord {
    pub time: Timestamp,
    pub pid: u32,
    pub comm: String,
    pub netns: String,
    /// The namespace's nsfs inode number (`ls -l /proc/PID/ns/net`). Recordings made before it
    /// replaced the netns cookie call it `netns_cookie`.
    #[serde(alias = "netns_cookie")]
    pub netns_inode: u64,
    pub socket_cookie: u64,
    pub client: SocketAddr,
    /// The server the socket's queries went to, which does not answer.
    pub server: SocketAddr,
    /// The Service (connected address) other sockets reach, when it differs from `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<SocketAddr>,
    /// Time the first lost query of the run was sent.
    pub since: Timestamp,
    /// Queries lost in a row.
    pub lost: u32,
    /// Replies other sockets got from the server or Service since then.
    pub others_answered: u64,
    pub explanation: String,
}

/// A server socket whose replies were not acknowledged: retransmitted data the peer never took in
/// (the server answered, the client never got it). Live (`final: false`, outcome `unacknowledged`)
/// from the third retransmit, then once at the socket's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyLostRecord {
    pub time: Timestamp,
    pub outcome: ReplyOutcome,
    #[serde(rename = "final")]
    pub is_final: bool,
    /// The replies were SYN-ACKs: the handshake never got its final ACK.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handshake: bool,
    /// The socket's own end (the server).
    pub local: SocketAddr,
    /// Where its replies went.
    pub peer: SocketAddr,
    /// The client as this node's conntrack knows it, when the node translated it (SNAT): `peer` is
    /// then the translating address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<SocketAddr>,
    /// The address the client connected to (a `NodePort`, a Service), from the same entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_dialed: Option<SocketAddr>,
    /// With cluster state: the node whose address `peer` is (the node that SNAT'd the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_node: Option<String>,
    /// With cluster state: the Service (`namespace/name`) whose EndpointSlices list `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_service: Option<String>,
    pub retransmits: u32,
    pub unacked_bytes: u32,
    /// From the first retransmit to this record.
    pub lost_for_ms: u64,
    /// The process holding the socket (absent once it had closed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    pub netns: String,
    pub netns_inode: u64,
    pub flow: String,
    pub explanation: String,
    /// The pod at `local`, what `peer` is (all optional; see `record/identity.rs`).
    #[serde(flatten)]
    pub identity: Identity,
}

/// DNS totals since start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsStats {
    /// UDP queries seen leaving sockets.
    pub queries: u64,
    /// Of those, answered fast with NOERROR (counted, not sent one by one).
    pub healthy: u64,
    pub slow_or_error: u64,
    pub unanswered: u64,
    pub refused: u64,
    pub stuck_sockets: u64,
    /// Queries whose question did not parse (reported without a name).
    pub malformed: u64,
}

/// Where pod and Service names come from and how fresh they are, in every `stats` record: a
/// consumer sees that names are stale even while no record needs one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityStats {
    /// `file` (`--cluster-state`) or `api` (`--kubeconfig`, `--in-cluster`).
    pub source: String,
    /// Seconds since the file was written, or since the API was last known in sync (0 in sync).
    pub age_s: u64,
    /// The API is unreachable, not listed yet, or its watches are failing.
    pub stale: bool,
    /// What this tracer asked of the API server since the start (`api` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<ApiStats>,
}

/// Requests to the API server since the start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiStats {
    /// By kind (`pods`, `services`, `endpointslices`, `nodes`): the list+watch requests.
    pub requests: std::collections::BTreeMap<String, KindRequests>,
    /// Pods looked up on demand for failing records.
    pub lookups: LookupStats,
    /// Records waiting for a lookup right now.
    pub held_records: u64,
}

/// Counts since the start, in the `stats` record (`cluster_api.lookups`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupStats {
    /// Requests made to the API server.
    pub requests: u64,
    /// Of those, answered.
    pub answered: u64,
    /// Of those, failed or given up.
    pub failed: u64,
    /// Lookups a record needed that the cache answered.
    pub cache_hits: u64,
    /// Lookups not made because of the rate limit.
    pub rate_limited: u64,
    /// Records that went out before their lookup was answered (after waiting their bound).
    pub late: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRequests {
    /// List requests, one per page.
    pub lists: u64,
    pub watches: u64,
    /// Requests that failed and watch streams that broke.
    pub failures: u64,
}

/// Tracer health: totals since start, and everything that was lost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsRecord {
    pub time: Timestamp,
    /// Connect attempts the kernel side followed.
    pub attempts: u64,
    /// Of those, answered on the first SYN (counted, not sent one by one).
    pub established_first_syn: u64,
    /// Attempts whose answer the kernel skipped (a program run nested in itself) and that were
    /// found answered when their socket was destroyed: recovered, not lost.
    #[serde(default)]
    pub answered_seen_late: u64,
    /// Records received from the kernel.
    pub events: u64,
    /// Attempts open right now (unanswered, no end yet).
    pub open_flows: u64,
    pub dropped: Dropped,
    #[serde(default)]
    pub dns: DnsStats,
    #[serde(default)]
    pub conntrack: ConntrackStats,
    /// The datapath audit: stale entries the node's Service rules hold now, and each source read;
    /// absent from trackers that did not run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datapath: Option<DatapathStats>,
    /// How a Service is named when a socket-level load balancer rewrote the connect; absent from
    /// trackers before it was said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_lb: Option<SocketLbStats>,
    /// With cluster state: where names come from, how fresh they are, what the API was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityStats>,
    /// `--node-name` (a `DaemonSet`'s downward API), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The running kernel and what the tracer can do on it: on the first and the final record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelInfo>,
    /// True on the last record, written at exit.
    #[serde(rename = "final")]
    pub is_final: bool,
}

/// The running kernel: its release, and each capability of the tracer on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub release: String,
    pub capabilities: std::collections::BTreeMap<String, Capability>,
    /// Which hooks each side runs on (absent in recordings of tracers before hook tiers).
    #[serde(default, skip_serializing_if = "HookTiers::is_unknown")]
    pub hooks: HookTiers,
}

/// Where the kernel programs hook in, each side on the best tier the kernel allows: fentry (a
/// trampoline on the kernel function), a tracepoint, a kprobe, or (DNS only) packets at the
/// cgroup root. A cheaper tier runs fewer programs per connect and per packet; each sees the same
/// connects and queries (a difference is a capability, `degraded` with its reason).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookTiers {
    pub dns: SideTier,
    pub tcp: SideTier,
}

impl HookTiers {
    /// Nothing known: a recording of a tracer before hook tiers.
    pub fn is_unknown(&self) -> bool {
        *self == HookTiers::default()
    }
}

/// One side's tier.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideTier {
    /// The tier in use; absent when the side is off (`--no-dns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<HookTier>,
    /// Every tier of this side the kernel allows, best first (what `--dns-hooks` and
    /// `--tcp-hooks` may force).
    #[serde(default)]
    pub available: Vec<HookTier>,
    /// Tiers better than the one in use, each with why it is not used.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_used: std::collections::BTreeMap<HookTier, String>,
}

/// A way for the kernel programs to hook in (`--dns-hooks`, `--tcp-hooks`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum HookTier {
    /// fentry on kernel functions: `udp_send_skb`, `__udp_enqueue_schedule_skb` (DNS);
    /// `tcp_connect`, `tcp_init_transfer` (TCP).
    Fentry,
    /// Tracepoints: `sock_send_length`/`sock_recv_length` with the caller's buffers (DNS, Linux
    /// 6.3+); `inet_sock_set_state` (TCP).
    Tracepoint,
    /// kprobes on the fentry tier's functions.
    Kprobe,
    /// `cgroup_skb` on the cgroup root: every packet of every socket (DNS only).
    CgroupSkb,
}

impl HookTier {
    pub fn name(self) -> &'static str {
        match self {
            HookTier::Fentry => "fentry",
            HookTier::Tracepoint => "tracepoint",
            HookTier::Kprobe => "kprobe",
            HookTier::CgroupSkb => "cgroup-skb",
        }
    }
}

impl std::fmt::Display for HookTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl KernelInfo {
    /// Names of the capabilities not at `full`, for a one-line header.
    pub fn degraded(&self) -> Vec<&str> {
        self.capabilities
            .iter()
            .filter(|(_, c)| !matches!(c, Capability::Full))
            .map(|(name, _)| name.as_str())
            .collect()
    }
}

/// What one capability is on this kernel; `reason` says what is missing and what it costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Capability {
    Full,
    Degraded { reason: String },
    Off { reason: String },
}

/// The datapath audit as of its latest read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatapathStats {
    /// What the entries were judged against: `file`, `api`, or `none` (no cluster state: nothing is
    /// judged and `stale_entries` is 0).
    pub cluster_state: String,
    /// Entries stale right now, over every source: the number the sweep and the metrics read.
    pub stale_entries: u64,
    /// By source (`iptables`, `nftables`, `ipvs`): read, absent from this node, or failed.
    pub sources: std::collections::BTreeMap<String, SourceState>,
}

/// One datapath source on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum SourceState {
    Read {
        entries: u64,
        stale: u64,
    },
    /// Not on this node (a tool, a table or a kernel module missing): a fact, not a failure.
    Absent {
        reason: String,
    },
    Failed {
        reason: String,
    },
}

/// The conntrack destroy-event subscription (`--conntrack-destroy-events`), where refused Service
/// connects find their backend once conntrack has deleted the entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConntrackStats {
    /// The mode: `auto`, `always` or `never`.
    pub destroy_events: String,
    /// Subscribed right now.
    pub destroy_events_subscribed: bool,
    /// Refused connects (RST) with no conntrack entry left that ended while destroy events were not
    /// followed (in `auto`, the first refusal of a burst): reported, but if a Service's DNAT chose
    /// their backend, it is not named. Not a loss of records, so not in `dropped`.
    pub refused_before_subscription: u64,
}

/// Where the Service of a socket-level load-balanced connect comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketLbStats {
    /// `preorder_hook`: the tracer's `connect()` hook runs before any socket LB and sees the
    /// dialled address; `cilium_maps`: it runs after (no `BPF_F_PREORDER`), and Cilium's reverse
    /// socket NAT map names the Service; `none`: neither, a socket LB's connects name only the
    /// backend.
    pub path: String,
    pub cilium: CiliumStats,
}

/// Cilium's pinned load-balancing maps, as found in `--cilium-bpffs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiliumStats {
    /// The directory looked in.
    pub bpffs: String,
    /// Whether any of Cilium's load-balancing maps is pinned there.
    pub present: bool,
    /// The maps read.
    pub maps: Vec<String>,
    /// Maps pinned there but not read, each with why (a layout of another Cilium version).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
    /// Sockets whose Service Cilium's reverse socket NAT map named.
    pub named: u64,
    /// Of those, sockets connected to a backend that Cilium's services map no longer lists for
    /// that Service: glued to a removed backend.
    pub backend_gone: u64,
}

/// Everything lost, by cause. Any non-zero value means some flows were not reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Kernel records lost because the ring buffer was full.
    pub ring_buffer_full: u64,
    /// Attempts not followed because the kernel's attempt table was full.
    pub attempts_map_full: u64,
    /// Destinations whose healthy count could not be kept.
    pub healthy_map_full: u64,
    /// Kernel records that did not decode.
    pub decode_errors: u64,
    /// Open attempts whose end never arrived (forgotten after 5 minutes).
    pub expired_flows: u64,
    /// Conntrack destroy events lost (receive buffer full): some refused connects lack a backend.
    #[serde(default)]
    pub conntrack_events_lost: u64,
    /// DNS queries not followed because the kernel's pending-query table was full.
    #[serde(default)]
    pub dns_pending_full: u64,
    /// DNS reply records lost because the ring buffer was full.
    #[serde(default)]
    pub dns_ring_buffer_full: u64,
    /// DNS servers whose healthy count could not be kept.
    #[serde(default)]
    pub dns_healthy_map_full: u64,
    /// Runs of the kernel programs the kernel skipped because they would have nested inside the
    /// same program on that CPU: each is a retransmit, reset, error or socket end not seen. (The
    /// state-change program's skips are accounted exactly instead: `end_unseen`.)
    #[serde(default)]
    pub skipped_program_runs: u64,
    /// Attempts whose answer and the close after it were both skipped: destroyed with no end seen,
    /// outcome unknown, not reported.
    #[serde(default)]
    pub end_unseen: u64,
    /// DNS datagrams whose header a hook could not read (user memory not paged in, a header
    /// outside an skb's linear data): queries not followed, replies not paired.
    #[serde(default)]
    pub dns_unreadable: u64,
    /// Messages of one `sendmmsg`/`recvmmsg` call past the first four, which the syscall
    /// tracepoint tier does not read.
    #[serde(default)]
    pub dns_mmsg_beyond: u64,
    /// SYN retransmits the kernel made without running the retransmit program (no skipped run
    /// counted either): their live `unanswered` update was not sent. The attempt's final `syns`
    /// is taken from the socket's own count.
    #[serde(default)]
    pub syn_retransmits_unseen: u64,
}

/// One cause of loss as it is shown: `name` in `tracer summary`, `short` in the TUI's one-line
/// header.
pub struct DropCause {
    pub name: &'static str,
    pub short: &'static str,
    pub count: u64,
}

impl Dropped {
    /// Every cause, in the order shown: one list for every breakdown, so each adds up to `total`.
    pub fn by_cause(&self) -> [DropCause; 14] {
        let cause = |name, short, count| DropCause { name, short, count };
        [
            cause("ring buffer full", "ring", self.ring_buffer_full),
            cause("attempts map full", "attempts map", self.attempts_map_full),
            cause("healthy map full", "healthy map", self.healthy_map_full),
            cause("decode errors", "decode", self.decode_errors),
            cause("expired flows", "expired", self.expired_flows),
            cause(
                "conntrack events lost",
                "conntrack events",
                self.conntrack_events_lost,
            ),
            cause("dns pending full", "dns pending", self.dns_pending_full),
            cause(
                "dns ring buffer full",
                "dns ring",
                self.dns_ring_buffer_full,
            ),
            cause(
                "dns healthy map full",
                "dns healthy map",
                self.dns_healthy_map_full,
            ),
            cause(
                "skipped program runs",
                "skipped runs",
                self.skipped_program_runs,
            ),
            cause("ends unseen", "ends unseen", self.end_unseen),
            cause("dns unreadable", "dns unreadable", self.dns_unreadable),
            cause("dns mmsg beyond", "dns mmsg beyond", self.dns_mmsg_beyond),
            cause(
                "syn retransmits unseen",
                "retransmits unseen",
                self.syn_retransmits_unseen,
            ),
        ]
    }

    pub fn total(&self) -> u64 {
        self.by_cause().iter().map(|c| c.count).sum()
    }

    /// `ring buffer full 1200, expired flows 2`: the causes that lost anything, in words; empty
    /// when nothing was lost.
    pub fn in_words(&self) -> String {
        let parts: Vec<String> = self
            .by_cause()
            .into_iter()
            .filter(|c| c.count > 0)
            .map(|c| format!("{} {}", c.name, c.count))
            .collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dropped_field_is_a_cause_shown_in_the_breakdowns() {
        // Each field a different power of two, set through its JSON name: a field missing from
        // `by_cause` (or listed twice) changes the sum.
        let mut fields = serde_json::to_value(Dropped::default()).expect("json");
        let map = fields.as_object_mut().expect("an object");
        for (i, value) in map.values_mut().enumerate() {
            *value = (1u64 << i).into();
        }
        let all: u64 = (0..map.len()).map(|i| 1u64 << i).sum();
        let dropped: Dropped = serde_json::from_value(fields).expect("back");
        assert_eq!(dropped.total(), all);
    }

    #[test]
    fn drops_are_said_in_words() {
        let dropped = Dropped {
            ring_buffer_full: 611_991,
            end_unseen: 2,
            ..Dropped::default()
        };
        assert_eq!(dropped.in_words(), "ring buffer full 611991, ends unseen 2");
        assert_eq!(Dropped::default().in_words(), "");
    }

    #[test]
    fn lines_round_trip_through_json() {
        let line = Line {
            schema: SCHEMA_VERSION,
            record: Record::Stats(StatsRecord {
                attempts: 3,
                ..StatsRecord::default()
            }),
        };
        let text = serde_json::to_string(&line).expect("serialize");
        assert!(text.starts_with(r#"{"schema":1,"kind":"stats","#), "{text}");
        let back: Line = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, line);
    }
}
