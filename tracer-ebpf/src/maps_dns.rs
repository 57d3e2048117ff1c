//! Maps and settings of the DNS hooks (`dns.rs` and the hooks that call it, and the ICMP case in
//! `inet_sk_error_report.rs`). Kept apart from `maps.rs` so the TCP maps can change independently.
use aya_ebpf::{
    macros::map,
    maps::{HashMap, LruHashMap, LruPerCpuHashMap, PerCpuArray},
};
use tracer_common::{
    DnsConfig, DnsHealthyStats, DnsKey, Endpoint, HookOffsets, MAX_DNS_SERVERS,
    MAX_DNS_SOCK_ERRORS, MAX_PENDING_DNS, PendingDns, SockError, SyscallNumbers,
};

/// UDP DNS queries awaiting their reply. The reply removes its query; userspace removes the ones
/// older than `--dns-timeout` (reported `unanswered` or `refused`). A plain hash, not LRU, so a full
/// map is a counted loss (`DNS_PENDING_FULL`) rather than a silent eviction.
#[map]
pub static PENDING_DNS: HashMap<DnsKey, PendingDns> = HashMap::with_max_entries(MAX_PENDING_DNS, 0);

/// Where the egress hook builds a query before storing it: a `PendingDns` on the 512-byte BPF stack,
/// beside the program's other locals, is more than 5.10 to 6.12 accept.
#[map]
pub static QUERY_SCRATCH: PerCpuArray<PendingDns> = PerCpuArray::with_max_entries(1, 0);

/// Healthy replies per server (the reply's source, per namespace): counted, not sent one by one.
#[map]
pub static DNS_HEALTHY: LruPerCpuHashMap<Endpoint, DnsHealthyStats> =
    LruPerCpuHashMap::with_max_entries(MAX_DNS_SERVERS, 0);

/// `ECONNREFUSED` reported on a socket that is not a TCP connect attempt, by socket cookie: a
/// connected UDP socket whose query came back as ICMP port-unreachable. Read by userspace when it
/// expires that socket's pending queries.
#[map]
pub static DNS_SOCK_ERRORS: LruHashMap<u64, SockError> =
    LruHashMap::with_max_entries(MAX_DNS_SOCK_ERRORS, 0);

/// Last time (`bpf_ktime_get_ns`) a socket got a reply to one of its queries, by socket cookie:
/// tells userspace a socket's run of unanswered queries ended, without sending healthy replies.
#[map]
pub static DNS_SOCK_ANSWERED: LruHashMap<u64, u64> =
    LruHashMap::with_max_entries(MAX_DNS_SOCK_ERRORS, 0);

/// Set by userspace before load.
#[unsafe(no_mangle)]
static DNS_CONFIG: DnsConfig = DnsConfig {
    slow_reply_ns: 500_000_000,
    socket_id_key: 0,
};

pub fn dns_config() -> DnsConfig {
    // SAFETY: plain static; the volatile read stops the compiler from folding the default.
    unsafe { core::ptr::read_volatile(&raw const DNS_CONFIG) }
}

/// Set by userspace before load from the running kernel's BTF (`sk_buff` and `pt_regs` fields).
#[unsafe(no_mangle)]
static HOOK_OFFSETS: HookOffsets = HookOffsets {
    skb_sk: 0,
    skb_head: 0,
    skb_network_header: 0,
    skb_transport_header: 0,
    skb_tail: 0,
    syscall_args: [0; 6],
    syscall_nr: 0,
    flowi4_uli: 0,
    flowi6_uli: 0,
    _pad: 0,
};

pub fn hook_offsets() -> HookOffsets {
    // SAFETY: as for DNS_CONFIG.
    unsafe { core::ptr::read_volatile(&raw const HOOK_OFFSETS) }
}

/// Set by userspace before load: this architecture's syscall numbers.
#[unsafe(no_mangle)]
static SYSCALLS: SyscallNumbers = SyscallNumbers {
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
};

pub fn syscalls() -> SyscallNumbers {
    // SAFETY: as for DNS_CONFIG.
    unsafe { core::ptr::read_volatile(&raw const SYSCALLS) }
}
