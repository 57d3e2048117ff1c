//! Maps shared by the hooks, and the two helpers every hook uses: `count` and `emit`.
use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{Array, HashMap, LruHashMap, LruPerCpuHashMap, PerCpuArray, RingBuf},
};
use tracer_common::{
    Attempt, ConnectEvent, EVENT_SYN_RETRANSMIT, HealthyKey, HealthyStats, KernelFilter,
    MAX_ATTEMPTS, MAX_HEALTHY_DESTINATIONS, RING_BUFFER_BYTES, SockOffsets,
    cilium::{RevSk4Key, RevSk4Value, RevSk6Key, RevSk6Value},
    counter,
};

/// The LRU map written on every connect keeps one LRU list per CPU: no cross-CPU lock on insert. Each
/// CPU then holds at most `max_entries / CPUs`; its entries are counters (`HEALTHY`), so that is
/// plenty.
const BPF_F_NO_COMMON_LRU: u32 = 2;

/// Records for userspace: only attempts that need attention.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(RING_BUFFER_BYTES, 0);

/// Open connect attempts by socket address, from the `connect()` hook to their end. A plain hash
/// (not LRU) so that a full map is a counted failure (`ATTEMPTS_MAP_FULL`) rather than a silent
/// eviction. (Socket-local storage was measured too: it allocates and frees per connect, which cost
/// more than the lookups it saves.)
#[map]
pub static ATTEMPTS: HashMap<u64, Attempt> = HashMap::with_max_entries(MAX_ATTEMPTS, 0);

/// How many open attempts in `ATTEMPTS` hash to each slot (`attempts.rs`): a counting filter in
/// front of the table. Nearly every socket that ends has no attempt (the server side of every
/// connection, and clients whose attempt ended when they were answered), and a lookup that misses in
/// the hash table cost about 250 ns in the benchmark; a zero here answers "no attempt" from 32 KiB
/// that stay in cache. Shared by all CPUs, changed only with atomic adds.
#[map]
pub static OPEN_BY_SLOT: Array<u64> = Array::with_max_entries(1 << OPEN_SLOT_BITS, 0);

/// log2 of the number of `OPEN_BY_SLOT` slots. With the benchmark's ~1400 attempts open at once,
/// 4096 slots send ~30% of the sockets on to the table; 16384 sent fewer but cost more per run (the
/// 128 KiB array misses the cache itself).
pub const OPEN_SLOT_BITS: u32 = 12;

/// Where the state-change program builds the attempt of a socket the `connect()` hook did not see:
/// an `Attempt` on the 512-byte BPF stack, beside that program's other frames, is more than 5.10
/// and 6.1 accept ("combined stack size of 2 calls is 544").
#[map]
pub static ATTEMPT_SCRATCH: PerCpuArray<Attempt> = PerCpuArray::with_max_entries(1, 0);

/// Sockets whose attempt the `connect()` hook found no room for, already counted in
/// `ATTEMPTS_MAP_FULL`. The state-change program opens attempts for sockets the hook never saw
/// (kernel sockets); this tells it that one was seen, so the loss is not counted twice. Written only
/// while the table is full; LRU, since only the last few matter (the state change follows the hook
/// inside the same `connect()`). Left over: the entry of a socket that failed before `SYN_SENT`
/// stays until evicted, and a kernel socket reusing its address meanwhile, with the table still full,
/// would go uncounted; not worth a second lookup at every socket's end.
#[map]
pub static UNSTORED: LruHashMap<u64, u8> = LruHashMap::with_max_entries(1024, 0);

/// Healthy connects per destination, read (and summed over CPUs) by userspace periodically. Per-CPU so
/// the hot path needs no atomics.
#[map]
pub static HEALTHY: LruPerCpuHashMap<HealthyKey, HealthyStats> =
    LruPerCpuHashMap::with_max_entries(MAX_HEALTHY_DESTINATIONS, BPF_F_NO_COMMON_LRU);

/// Per-CPU counters, indexed by `tracer_common::counter`.
#[map]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

/// Cilium's reverse socket NAT maps (`tracer_common::cilium`): userspace binds these to Cilium's
/// pinned maps before load when they are there with the layouts we know, and says so in
/// `CILIUM_REVERSE_SK`; otherwise they stay one-entry maps nobody writes and are never read.
#[map]
pub static CILIUM_REVERSE_SK4: LruHashMap<RevSk4Key, RevSk4Value> =
    LruHashMap::with_max_entries(1, 0);
#[map]
pub static CILIUM_REVERSE_SK6: LruHashMap<RevSk6Key, RevSk6Value> =
    LruHashMap::with_max_entries(1, 0);

/// `tracer_common::cilium::REVERSE_SK{4,6}_BOUND` bits, set by userspace before load.
#[unsafe(no_mangle)]
static CILIUM_REVERSE_SK: u32 = 0;

/// Which of `CILIUM_REVERSE_SK{4,6}` are Cilium's.
pub fn cilium_reverse_sk() -> u32 {
    // SAFETY: a plain static; the volatile read stops the compiler from folding the default.
    unsafe { core::ptr::read_volatile(&raw const CILIUM_REVERSE_SK) }
}

/// Set by userspace before load (read-only data, so the verifier treats it as a constant).
#[unsafe(no_mangle)]
static FILTER: KernelFilter = KernelFilter {
    netns_inode: 0,
    hooks_only: 0,
    state_changes_seen: 1,
};

/// Set by userspace before load from the running kernel's BTF.
#[unsafe(no_mangle)]
static SOCK_OFFSETS: SockOffsets = SockOffsets {
    skc_daddr: 0,
    skc_rcv_saddr: 0,
    skc_dport: 0,
    inet_sport: 0,
    skc_family: 0,
    skc_state: 0,
    skc_v6_daddr: 0,
    skc_v6_rcv_saddr: 0,
    skc_cookie: 0,
    sk_protocol: 0,
    sk_err: 0,
    sk_error_queue: 0,
    skb_cb: 0,
    exterr_ee: 0,
    tcp_rcv_nxt: 0,
    skc_net: 0,
    net_inum: 0,
    task_tgid: 0,
    task_pid: 0,
    task_comm: 0,
    sk_err_soft: 0,
    tcp_snd_una: 0,
    tcp_snd_nxt: 0,
    sk_socket: 0,
    skc_num: 0,
    socket_ino: 0,
    sk_max_ack_backlog: 0,
    tcp_total_retrans: 0,
};

pub fn sock_offsets() -> SockOffsets {
    // SAFETY: as for FILTER.
    unsafe { core::ptr::read_volatile(&raw const SOCK_OFFSETS) }
}

pub fn filter() -> KernelFilter {
    // SAFETY: FILTER is a plain static; the volatile read stops the compiler from folding the default.
    unsafe { core::ptr::read_volatile(&raw const FILTER) }
}

/// Whether the TCP state tracepoint is attached (`KernelFilter::state_changes_seen`).
pub fn state_changes_seen() -> bool {
    filter().state_changes_seen != 0
}

/// `tracer trace --hooks-only`: every program returns before doing anything.
pub fn hooks_only() -> bool {
    filter().hooks_only != 0
}

pub fn count(index: u32) {
    count_by(index, 1);
}

pub fn count_by(index: u32, n: u64) {
    if let Some(slot) = COUNTERS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *slot += n };
    }
}

/// The task running now, as recorded with every attempt and query: only meaningful where the hook
/// runs in the caller's context (`connect()`, a socket send), not in softirq.
pub struct Caller {
    pub cgroup_id: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; tracer_common::TASK_COMM_LEN],
}

pub fn caller(pid_tgid: u64) -> Caller {
    Caller {
        // SAFETY: helper without preconditions.
        cgroup_id: unsafe { aya_ebpf::helpers::bpf_get_current_cgroup_id() },
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        comm: aya_ebpf::helpers::bpf_get_current_comm().unwrap_or_default(),
    }
}

pub fn now_ns() -> u64 {
    // SAFETY: helper without preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// `bpf_ringbuf_submit` flags and `bpf_ringbuf_query` selector.
const BPF_RB_NO_WAKEUP: u64 = 1;
const BPF_RB_AVAIL_DATA: u64 = 0;
/// Unread bytes past which an attempt's end wakes the reader anyway: an eighth of the ring.
const WAKE_ABOVE_BYTES: u64 = RING_BUFFER_BYTES as u64 / 8;

/// Whether submitting a record wakes the reader. A wakeup is an interrupt-work item in the kernel
/// and a context switch of the tracer, per record: an attempt's end (most records) waits for the
/// reader's short drain timer (`tracer/src/live.rs`, `DRAIN_EVERY`) unless the ring is filling
/// up; a SYN retransmit, the live sign of a black hole, wakes it at once.
fn wakeup_flags(kind: u32) -> u64 {
    if kind == EVENT_SYN_RETRANSMIT || EVENTS.query(BPF_RB_AVAIL_DATA) > WAKE_ABOVE_BYTES {
        0 // the kernel's default: wake the reader if it is waiting
    } else {
        BPF_RB_NO_WAKEUP
    }
}

/// Sends one record about `attempt`; a full ring buffer is counted, never silent.
pub fn emit(kind: u32, error: i32, attempt: &Attempt) {
    match EVENTS.reserve::<ConnectEvent>(0) {
        Some(mut entry) => {
            entry.write(ConnectEvent {
                kind,
                error,
                event_ns: now_ns(),
                attempt: *attempt,
            });
            entry.submit(wakeup_flags(kind));
            count(counter::EVENTS_SENT);
        }
        None => count(counter::RINGBUF_FULL),
    }
}
