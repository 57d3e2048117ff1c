//! Types that cross the kernel/userspace boundary, shared by `tracer-ebpf` (writer) and `tracer` (reader).
//!
//! Every type is `#[repr(C)]`, has no implicit padding (explicit `_pad` fields, size asserted below each
//! type) and is `Copy`. Enumerations cross as `u32` and are turned back into Rust enums by `TryFrom` in
//! userspace: never transmute kernel bytes into an enum.
//!
//! Every ring-buffer record starts with a `u32` kind (one of the `EVENT_*` constants) so the reader can
//! dispatch before it knows the record's type.
#![no_std]

pub mod cilium;

/// Length of a task's `comm`, as in the kernel's `TASK_COMM_LEN`.
pub const TASK_COMM_LEN: usize = 16;

/// Ring-buffer record kind: a connect attempt sent another SYN (`ConnectEvent`).
pub const EVENT_SYN_RETRANSMIT: u32 = 1;
/// Ring-buffer record kind: a connect attempt that needs attention ended (`ConnectEvent`).
pub const EVENT_CONNECT_END: u32 = 2;

/// Ring-buffer record kind: a DNS reply that needs attention: an error rcode, or slower than the
/// threshold (`DnsEvent`). Healthy replies are only counted (`DNS_HEALTHY`).
pub const EVENT_DNS_REPLY: u32 = 3;

/// Ring-buffer record kind: an established socket retransmitted its data `REPLY_LIVE_AT` times with
/// no acknowledgement yet: its replies may not be reaching the peer (`ReplyEvent`, live).
pub const EVENT_REPLY_RETRANSMIT: u32 = 4;
/// Ring-buffer record kind: a socket that had retransmitted data ended (`ReplyEvent`): with data
/// still unacknowledged (the replies were lost), or after live reports (it recovered).
pub const EVENT_REPLY_END: u32 = 5;
/// Data retransmits of one socket, unacknowledged, at which it is reported live.
pub const REPLY_LIVE_AT: u32 = 3;
/// SYN-ACK retransmits of one handshake, with no final ACK, at which it is reported live.
pub const HANDSHAKE_LIVE_AT: u32 = 2;
/// `ReplyLoss::state` of a handshake whose SYN-ACKs got no final ACK (`TCP_SYN_RECV`).
pub const STATE_SYN_RECV: u8 = 3;

/// `Attempt::flags`: a RST arrived while the socket was in `SYN_SENT`.
pub const FLAG_RST_RECEIVED: u16 = 1;
/// `Attempt::flags`: the socket left `SYN_SENT` for `ESTABLISHED` (or `SYN_RECV`, simultaneous open).
pub const FLAG_ANSWERED: u16 = 2;
/// `Attempt::flags`: the `connect()` hook saw this attempt, so `netns_inode` and `dialed_*` are valid.
pub const FLAG_DIALED_KNOWN: u16 = 4;
/// `Attempt::flags`: `connect()` was called but the socket never reached `SYN_SENT` (no route, a
/// local policy): no SYN left. Seen when the socket is destroyed; the errno stays in the syscall.
pub const FLAG_NO_SYN: u16 = 8;
/// `Attempt::flags`: `dialed_*` was read from a socket load balancer's reverse socket NAT map (Cilium's
/// rewrite ran before the `connect()` hook), not from the address the hook was given.
pub const FLAG_DIALED_BY_SOCKET_LB: u16 = 16;

/// Address families as the kernel spells them.
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

/// One TCP connect attempt, from `CLOSE -> SYN_SENT` until it is answered or gives up.
///
/// Kept in the kernel map `ATTEMPTS` (keyed by socket address) and copied into every event about it,
/// so userspace never needs to have seen the start of an attempt to report it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attempt {
    /// Kernel address of the `struct sock`: the join key between hooks. Reused after the socket is freed,
    /// so userspace keys flows by `(sock, start_ns)`.
    pub sock: u64,
    /// `bpf_ktime_get_ns()` when the socket entered `SYN_SENT`.
    pub start_ns: u64,
    /// Network namespace of the connecting socket (its nsfs inode number, as `stat` on
    /// `/proc/PID/ns/net` gives it), from the `connect()` hook; 0 if unknown.
    pub netns_inode: u64,
    /// cgroup v2 id of the connecting task.
    pub cgroup_id: u64,
    /// `bpf_ktime_get_ns()` when the socket left `SYN_SENT` for `CLOSE`, 0 while still open.
    pub closed_ns: u64,
    /// The socket cookie (`SO_COOKIE`) as the socket held it on entering `SYN_SENT`; 0 if nobody
    /// had asked for it. A socket-level load balancer that keys its state by cookie (Cilium's
    /// `connect()` program does) has asked: userspace finds the Service in its maps by it.
    pub cookie: u64,
    /// Thread-group id (what users call the pid) of the task that called `connect()`.
    pub pid: u32,
    /// Thread id of that task.
    pub tid: u32,
    /// `comm` of that thread, NUL-padded.
    pub comm: [u8; TASK_COMM_LEN],
    /// Source address (IPv4 in the first 4 bytes for `AF_INET`).
    pub saddr: [u8; 16],
    /// Destination address as the socket knows it.
    pub daddr: [u8; 16],
    /// Address the application passed to `connect()`, before any socket-level load balancer rewrote it.
    pub dialed_addr: [u8; 16],
    pub family: u16,
    /// Source port, host order. 0 until the kernel assigns it after `SYN_SENT`.
    pub sport: u16,
    /// Destination port, host order.
    pub dport: u16,
    /// Port the application passed to `connect()`, host order.
    pub dialed_port: u16,
    /// SYNs sent so far: 1 + SYN retransmits.
    pub syn_count: u16,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// errno of an ICMP error queued on the socket while in `SYN_SENT` (it arrived while the
    /// application held the socket lock). `connect()` callers read it through `SO_ERROR`, then close.
    pub soft_error: i32,
}
const _: () = assert!(size_of::<Attempt>() == 136);

/// A ring-buffer record about one connect attempt (`EVENT_SYN_RETRANSMIT` or `EVENT_CONNECT_END`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectEvent {
    /// `EVENT_*` kind; first field of every record.
    pub kind: u32,
    /// errno reported on the socket when it closed (`ECONNREFUSED`, `ETIMEDOUT`, ...), 0 if none.
    pub error: i32,
    /// `bpf_ktime_get_ns()` when this event happened.
    pub event_ns: u64,
    pub attempt: Attempt,
}
const _: () = assert!(size_of::<ConnectEvent>() == 152);

/// An address and port in one network namespace: key of per-destination counters, and what the
/// `connect()` hook remembers about a call until the socket enters `SYN_SENT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(
    clippy::pub_underscore_fields,
    reason = "explicit padding of a kernel ABI struct, set by both sides"
)]
pub struct Endpoint {
    pub netns_inode: u64,
    pub addr: [u8; 16],
    /// Host order.
    pub port: u16,
    pub family: u16,
    pub _pad: [u8; 4],
}
const _: () = assert!(size_of::<Endpoint>() == 32);

/// Key of the healthy counters: one destination, one connecting process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(
    clippy::pub_underscore_fields,
    reason = "explicit padding of a kernel ABI struct, set by both sides"
)]
pub struct HealthyKey {
    pub dst: Endpoint,
    /// Thread-group id of the connecting process.
    pub pid: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<HealthyKey>() == 40);

/// Healthy connects from one process to one destination: answered on their first SYN, so they never
/// cross to userspace one by one.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthyStats {
    /// Connects answered on the first SYN.
    pub established: u64,
    /// Sum of their time in `SYN_SENT`, for the mean.
    pub syn_sent_ns_total: u64,
    /// cgroup v2 id of the process (its latest connect).
    pub cgroup_id: u64,
    /// `comm` of the thread of its latest connect.
    pub comm: [u8; TASK_COMM_LEN],
}
const _: () = assert!(size_of::<HealthyStats>() == 40);

/// Indexes of the per-CPU `COUNTERS` array.
pub mod counter {
    /// Connect attempts that entered `SYN_SENT` (seen by the filter).
    pub const ATTEMPTS_STARTED: u32 = 0;
    /// Attempts answered on the first SYN: counted, not sent.
    pub const ESTABLISHED_FIRST_SYN: u32 = 1;
    /// Records written to the ring buffer.
    pub const EVENTS_SENT: u32 = 2;
    /// Records lost because the ring buffer was full. Shown to the user as dropped.
    pub const RINGBUF_FULL: u32 = 3;
    /// Attempts not followed because `ATTEMPTS` was full. Shown to the user as dropped.
    pub const ATTEMPTS_MAP_FULL: u32 = 4;
    /// Attempts whose `SYN_SENT -> ESTABLISHED` run the kernel skipped (nested in the same
    /// program), found answered when their socket was destroyed. Recovered, not lost.
    pub const ANSWERED_SEEN_LATE: u32 = 5;
    /// Destinations whose healthy counter could not be created (`HEALTHY` full).
    pub const HEALTHY_MAP_FULL: u32 = 6;
    /// Attempts destroyed unanswered with no end seen: the close and the error report after it were
    /// both skipped by the kernel, so the outcome is unknown. Shown to the user as dropped.
    pub const END_UNSEEN: u32 = 7;
    /// UDP DNS queries seen leaving a socket (port 53, after the netns filter).
    pub const DNS_QUERIES: u32 = 8;
    /// DNS replies answered fast with NOERROR: counted in `DNS_HEALTHY`, not sent.
    pub const DNS_HEALTHY_REPLIES: u32 = 9;
    /// DNS queries not followed because `PENDING_DNS` could not take them. Shown as dropped.
    pub const DNS_PENDING_FULL: u32 = 10;
    /// DNS records lost because the ring buffer was full. Shown as dropped.
    pub const DNS_RINGBUF_FULL: u32 = 11;
    /// Servers whose healthy DNS counter could not be created.
    pub const DNS_HEALTHY_MAP_FULL: u32 = 12;
    /// UDP datagrams to or from port 53 whose DNS header the hook could not read (user memory
    /// not paged in, a header outside an skb's linear data). Shown as dropped.
    pub const DNS_UNREADABLE: u32 = 13;
    /// Messages of one `sendmmsg`/`recvmmsg` call past the ones the syscall-tracepoint hooks
    /// read (`MAX_MMSG`). Shown as dropped.
    pub const DNS_MMSG_BEYOND: u32 = 14;
    /// SYN retransmits the kernel made (`tcp_sock.total_retrans`) without running the retransmit
    /// program: their live `unanswered` update was never sent. The attempt's final SYN count is
    /// taken from the socket. Shown as dropped.
    pub const SYN_RETRANSMITS_UNSEEN: u32 = 15;
    /// Number of counters; size of the array.
    pub const COUNT: u32 = 16;
}

/// Capacity of `REPLY_LOSSES`: sockets with retransmitted data, node-wide (LRU: a socket that
/// recovered and lives on is the one evicted).
pub const MAX_REPLY_LOSSES: u32 = 8_192;
/// Capacity of `HANDSHAKES`: handshakes whose SYN-ACKs were retransmitted, node-wide (LRU).
pub const MAX_HANDSHAKES: u32 = 4_096;

/// Capacity of `ATTEMPTS`: connect attempts in flight at once (a node rarely has more than a few
/// thousand sockets in `SYN_SENT`; a SYN flood to a black hole is the case this bound is for).
pub const MAX_ATTEMPTS: u32 = 65_536;
/// Capacity of the LRU `HEALTHY` map: distinct (destination, process) pairs with healthy counts.
pub const MAX_HEALTHY_DESTINATIONS: u32 = 16_384;
/// Ring buffer size in bytes (power of two, multiple of the page size).
pub const RING_BUFFER_BYTES: u32 = 1 << 22;

/// Bytes of a DNS question (after the 12-byte header) copied for userspace to parse. Names of up
/// to about 55 bytes fit; longer ones are counted as malformed by userspace.
pub const DNS_QUESTION_BYTES: usize = 64;
/// Capacity of `PENDING_DNS`: UDP DNS queries awaiting their reply, node-wide.
pub const MAX_PENDING_DNS: u32 = 16_384;
/// Capacity of `DNS_HEALTHY`: DNS servers (per network namespace) with healthy counts.
pub const MAX_DNS_SERVERS: u32 = 4_096;
/// Capacity of `DNS_SOCK_ERRORS`: sockets whose query was answered by an ICMP error.
pub const MAX_DNS_SOCK_ERRORS: u32 = 4_096;

/// Key of a query awaiting its reply: one socket in one namespace, one query id. The server is not
/// in the key: the egress hook sees the destination after the sender's own DNAT (a Service address
/// rewritten in `OUTPUT`), the ingress hook sees the reply's source after un-NAT.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DnsKey {
    pub netns_inode: u64,
    /// Which socket: its cookie (`SO_COOKIE`) on the hook tiers that can ask for one, else a
    /// number derived from its kernel address (`DnsConfig::socket_id_key`, top bit set).
    pub socket_cookie: u64,
    /// DNS transaction id.
    pub id: u16,
    pub _pad: [u8; 6],
}
const _: () = assert!(size_of::<DnsKey>() == 24);

/// A query awaiting its reply (`PENDING_DNS`), written by the egress hook in the sender's context.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingDns {
    /// `bpf_ktime_get_ns()` when the query left the socket.
    pub sent_ns: u64,
    pub cgroup_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; TASK_COMM_LEN],
    /// Client address (IPv4 in the first 4 bytes).
    pub client_addr: [u8; 16],
    /// Server address as the packet leaves the socket's namespace (after its own DNAT).
    pub server_addr: [u8; 16],
    /// Remote address of a connected socket (what the application connected to, before DNAT in its
    /// own namespace); zero for unconnected sockets.
    pub dialed_addr: [u8; 16],
    pub client_port: u16,
    pub server_port: u16,
    pub family: u16,
    /// Valid bytes in `question`.
    pub question_len: u16,
    /// DNS header flags word (host order).
    pub flags: u16,
    /// 1: `dialed_addr` was read from a socket load balancer's reverse socket NAT map (Cilium's
    /// connect rewrite had made the socket's remote address the backend).
    pub dialed_by_socket_lb: u8,
    pub _pad: [u8; 5],
    /// The socket's cookie (`SO_COOKIE`) when it has one, 0 if nobody asked for it. Equal to
    /// `DnsKey::socket_cookie` on the hook tiers that key queries by cookie.
    pub cookie: u64,
    /// The question section's first bytes, raw wire format.
    pub question: [u8; DNS_QUESTION_BYTES],
}
const _: () = assert!(size_of::<PendingDns>() == 176);

impl Default for PendingDns {
    fn default() -> PendingDns {
        PendingDns {
            sent_ns: 0,
            cgroup_id: 0,
            pid: 0,
            tid: 0,
            comm: [0; TASK_COMM_LEN],
            client_addr: [0; 16],
            server_addr: [0; 16],
            dialed_addr: [0; 16],
            client_port: 0,
            server_port: 0,
            family: 0,
            question_len: 0,
            flags: 0,
            dialed_by_socket_lb: 0,
            _pad: [0; 5],
            cookie: 0,
            question: [0; DNS_QUESTION_BYTES],
        }
    }
}

/// A ring-buffer record about one DNS reply (`EVENT_DNS_REPLY`): slow, or an error rcode.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsEvent {
    pub kind: u32,
    /// RCODE of the reply (low 4 bits of the flags).
    pub rcode: u8,
    pub _pad: [u8; 3],
    /// `bpf_ktime_get_ns()` when the reply reached the socket.
    pub reply_ns: u64,
    pub key: DnsKey,
    /// Source of the reply as the socket sees it (the Service address after un-NAT).
    pub reply_addr: [u8; 16],
    pub reply_port: u16,
    pub _pad2: [u8; 6],
    pub query: PendingDns,
}
const _: () = assert!(size_of::<DnsEvent>() == 240);

/// Healthy DNS replies from one server (as the reply's source) in one namespace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsHealthyStats {
    pub answered: u64,
    /// Sum of their latencies, for the mean.
    pub latency_ns_total: u64,
}
const _: () = assert!(size_of::<DnsHealthyStats>() == 16);

/// An error the kernel reported on a socket that is not a TCP connect attempt (`DNS_SOCK_ERRORS`):
/// a UDP DNS socket told `ECONNREFUSED` by an ICMP port-unreachable.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockError {
    pub at_ns: u64,
    pub errno: i32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<SockError>() == 16);

/// DNS settings written into the programs' read-only data before load.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsConfig {
    /// Replies slower than this are sent to userspace even when NOERROR.
    pub slow_reply_ns: u64,
    /// 0: DNS sockets are known by their cookie (the hooks can ask the kernel for it). Otherwise
    /// (fentry and kprobe hooks on a `struct sock` they read from an skb or a register, which the
    /// cookie helper does not take) by `(address ^ key) | 1 << 63`: stable for the socket's life,
    /// never equal to a cookie (a counter), and no kernel address in the output.
    pub socket_id_key: u64,
}
const _: () = assert!(size_of::<DnsConfig>() == 16);

/// Bit set in every socket id derived from an address (`DnsConfig::socket_id_key`).
pub const SOCKET_ID_FROM_ADDRESS: u64 = 1 << 63;

/// Where the fentry, kprobe and syscall-tracepoint DNS hooks find what they read, in the running
/// kernel's structures: offsets from its BTF, written by userspace before load.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookOffsets {
    /// `struct sk_buff`: its socket, the start of its buffer, and the network and transport
    /// headers' and the linear data's end offsets from that start (`u16`, `u16`, `u32` on 64-bit
    /// kernels).
    pub skb_sk: u32,
    pub skb_head: u32,
    pub skb_network_header: u32,
    pub skb_transport_header: u32,
    pub skb_tail: u32,
    /// `struct pt_regs` of the calling task: where its syscall's arguments 0 to 5 and its syscall
    /// number are (x86-64: `di`, `si`, `dx`, `r10`, `r8`, `r9`, `orig_ax`; arm64: `orig_x0`,
    /// `regs[1..6]`, `syscallno`).
    pub syscall_args: [u32; 6],
    pub syscall_nr: u32,
    /// `flowi4.uli` and `flowi6.uli`: a UDP datagram's ports (`union flowi_uli`: destination, then
    /// source, network order) where `udp_send_skb()` gets them, before it writes the UDP header.
    pub flowi4_uli: u32,
    pub flowi6_uli: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<HookOffsets>() == 60);

/// This architecture's numbers of the syscalls whose buffers the syscall-tracepoint DNS hooks read
/// (-1 where the architecture has none). The user structures they point at (`msghdr`, `mmsghdr`,
/// `iovec`, `sockaddr_in{,6}`) have one layout on every 64-bit Linux.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallNumbers {
    pub read: i32,
    pub write: i32,
    pub readv: i32,
    pub writev: i32,
    pub sendto: i32,
    pub recvfrom: i32,
    pub sendmsg: i32,
    pub recvmsg: i32,
    pub sendmmsg: i32,
    pub recvmmsg: i32,
}
const _: () = assert!(size_of::<SyscallNumbers>() == 40);

impl Default for SyscallNumbers {
    fn default() -> SyscallNumbers {
        SyscallNumbers {
            read: -1,
            write: -1,
            readv: -1,
            writev: -1,
            sendto: -1,
            recvfrom: -1,
            sendmsg: -1,
            recvmsg: -1,
            sendmmsg: -1,
            recvmmsg: -1,
        }
    }
}

/// Offsets of `struct sock` fields the kernel side reads through a raw tracepoint's `sk` pointer.
/// They differ between kernel builds, so userspace reads them from the running kernel's BTF and
/// writes them into the program's read-only data before load. `struct sock` starts with its
/// `struct sock_common`, so the `skc_` offsets are offsets in `struct sock` too.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockOffsets {
    /// `sock_common.skc_daddr`, IPv4 destination (network order).
    pub skc_daddr: u32,
    /// `sock_common.skc_rcv_saddr`, IPv4 local address.
    pub skc_rcv_saddr: u32,
    /// `sock_common.skc_dport`, destination port (network order).
    pub skc_dport: u32,
    /// `inet_sock.inet_sport`, local port (network order; 0 until `connect()` picks one). Not
    /// `skc_num`: closing a socket releases its port and zeroes that before the state changes.
    pub inet_sport: u32,
    /// `sock_common.skc_family`.
    pub skc_family: u32,
    /// `sock_common.skc_state` (one byte, the TCP state).
    pub skc_state: u32,
    /// `sock_common.skc_v6_daddr`.
    pub skc_v6_daddr: u32,
    /// `sock_common.skc_v6_rcv_saddr`.
    pub skc_v6_rcv_saddr: u32,
    /// `sock_common.skc_cookie`: 0 until someone asks for it (the `connect()` hook and the DNS egress
    /// hook do).
    pub skc_cookie: u32,
    /// `struct sock.sk_protocol` (u16).
    pub sk_protocol: u32,
    /// `struct sock.sk_err`.
    pub sk_err: u32,
    /// `struct sock.sk_error_queue` (a `sk_buff_head`: next, prev).
    pub sk_error_queue: u32,
    /// `struct sk_buff.cb`, where a queued error keeps its `sock_exterr_skb`.
    pub skb_cb: u32,
    /// `struct sock_exterr_skb.ee`, the `sock_extended_err` (errno first, then origin).
    pub exterr_ee: u32,
    /// `tcp_sock.rcv_nxt`: 0 from `connect()` until a SYN-ACK is taken in, and kept after that
    /// (closing, even `tcp_disconnect`, leaves it): tells a socket that was answered, at its end.
    pub tcp_rcv_nxt: u32,
    /// `sock_common.skc_net`: the socket's `struct net *` (a `possible_net_t`, one pointer).
    pub skc_net: u32,
    /// `net.ns.inum`: where in `struct net` its inode number is (`ns` plus `ns_common.inum`). Read
    /// through the socket on every kernel: `bpf_get_netns_cookie` is refused to `cgroup_skb` programs
    /// before 6.x, and userspace has no cookie of a namespace before 5.14 (`SO_NETNS_COOKIE`).
    pub net_inum: u32,
    /// `task_struct.tgid`, `.pid` and `.comm`: the caller of a DNS query, read from the current task
    /// (`cgroup_skb` programs may not call `bpf_get_current_pid_tgid` before 6.x).
    pub task_tgid: u32,
    pub task_pid: u32,
    pub task_comm: u32,
    /// `struct sock.sk_err_soft`.
    pub sk_err_soft: u32,
    /// `tcp_sock.snd_una` and `.snd_nxt`: the oldest unacknowledged byte and the next to send; their
    /// difference is the data in flight that the peer has not acknowledged.
    pub tcp_snd_una: u32,
    pub tcp_snd_nxt: u32,
    /// `struct sock.sk_socket`: the `struct socket` of a socket a process holds (NULL once orphaned).
    pub sk_socket: u32,
    /// `sock_common.skc_num`: the local port in host order; the only local port a request socket
    /// (a handshake in progress) has.
    pub skc_num: u32,
    /// Where the socket's inode number is, from its `struct socket`: `socket_alloc.vfs_inode` minus
    /// `socket_alloc.socket`, plus `inode.i_ino`. Userspace finds the process holding the socket by
    /// that number (`socket:[N]` in `/proc/PID/fd`).
    pub socket_ino: u32,
    /// `struct sock.sk_max_ack_backlog` (u32): `listen()`'s backlog on a listener, copied into every
    /// socket it accepts (`sk_clone_lock` copies the listener and does not reset it), 0 on a socket
    /// that called `connect()`. Tells a server's socket from a client's.
    pub sk_max_ack_backlog: u32,
    /// `tcp_sock.total_retrans`: segments the kernel retransmitted on the socket, SYNs included
    /// (counted before each goes out). What an attempt's SYN count is settled from at its end.
    pub tcp_total_retrans: u32,
}
const _: () = assert!(size_of::<SockOffsets>() == 112);

/// One socket whose data was retransmitted (`REPLY_LOSSES`), from its first data retransmit until it
/// is freed: the server side of a connection whose replies do not reach the client.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyLoss {
    /// Kernel address of the socket.
    pub sock: u64,
    /// `bpf_ktime_get_ns()` of the first and the latest data retransmit.
    pub first_ns: u64,
    pub last_ns: u64,
    pub netns_inode: u64,
    /// The socket's inode number (0 when no process held it any more at the first retransmit).
    pub socket_inode: u64,
    /// Local and peer address; IPv4 in the first 4 bytes.
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub family: u16,
    pub sport: u16,
    pub dport: u16,
    /// TCP state at the latest retransmit (`FIN_WAIT1` and later: the application had closed).
    pub state: u8,
    pub _pad: u8,
    pub retransmits: u32,
    /// Bytes sent and not acknowledged, at the end (`EVENT_REPLY_END`) or at the live report.
    pub unacked: u32,
    /// `sk_err` (or `sk_err_soft`) at the end: `ETIMEDOUT` when the kernel gave up.
    pub error: i32,
    pub _pad2: u32,
}
const _: () = assert!(size_of::<ReplyLoss>() == 96);

/// A handshake in progress on a listening socket, by its namespace and addresses
/// (`HANDSHAKES`): its SYN-ACKs were retransmitted; the child socket of its final ACK has the same
/// key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HandshakeKey {
    pub netns_inode: u64,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub family: u16,
    pub _pad: u16,
}
const _: () = assert!(size_of::<HandshakeKey>() == 48);

/// A ring-buffer record about a socket with retransmitted data (`EVENT_REPLY_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyEvent {
    pub kind: u32,
    pub _pad: u32,
    pub event_ns: u64,
    pub loss: ReplyLoss,
}
const _: () = assert!(size_of::<ReplyEvent>() == 112);

/// Kernel-side filter, written into the program's read-only data before load.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelFilter {
    /// Only follow attempts from this network namespace (its inode number); 0 = every namespace.
    pub netns_inode: u64,
    /// Non-zero: every program returns at once (`tracer trace --hooks-only`, for the benchmark:
    /// what attaching the hooks costs before they do any work). Read-only data, so the verifier
    /// knows it and drops the branch it never takes: a normal run pays nothing for it.
    pub hooks_only: u32,
    /// Non-zero when the TCP state tracepoint is attached (the `tracepoint` TCP tier): an attempt's
    /// close is then seen as it happens. On the `fentry` and `kprobe` tiers only its end is.
    pub state_changes_seen: u32,
}
const _: () = assert!(size_of::<KernelFilter>() == 16);

#[cfg(feature = "user")]
mod user {
    // SAFETY: all of these are repr(C), Copy, without padding and valid for any bit pattern.
    unsafe impl aya::Pod for super::Attempt {}
    unsafe impl aya::Pod for super::ConnectEvent {}
    unsafe impl aya::Pod for super::Endpoint {}
    unsafe impl aya::Pod for super::HealthyStats {}
    unsafe impl aya::Pod for super::HealthyKey {}
    unsafe impl aya::Pod for super::SockOffsets {}
    unsafe impl aya::Pod for super::KernelFilter {}
    unsafe impl aya::Pod for super::DnsKey {}
    unsafe impl aya::Pod for super::PendingDns {}
    unsafe impl aya::Pod for super::DnsEvent {}
    unsafe impl aya::Pod for super::DnsHealthyStats {}
    unsafe impl aya::Pod for super::SockError {}
    unsafe impl aya::Pod for super::DnsConfig {}
    unsafe impl aya::Pod for super::ReplyLoss {}
    unsafe impl aya::Pod for super::ReplyEvent {}
    unsafe impl aya::Pod for super::HandshakeKey {}
    unsafe impl aya::Pod for super::HookOffsets {}
    unsafe impl aya::Pod for super::SyscallNumbers {}
}
