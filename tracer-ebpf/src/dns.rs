//! What every DNS hook does once it has found a query or a reply, whatever tier it is (packets at
//! the cgroup root, the UDP send and receive functions, the socket send and receive tracepoints):
//! a query is remembered in `PENDING_DNS` by (namespace, socket, query id); a reply takes its query
//! out and is counted per server when fast and NOERROR, or sent to userspace (`EVENT_DNS_REPLY`).
//! Queries nobody answers stay until userspace expires them.
use tracer_common::{
    AF_INET, DNS_QUESTION_BYTES, DnsEvent, DnsHealthyStats, DnsKey, EVENT_DNS_REPLY, Endpoint,
    PendingDns, SOCKET_ID_FROM_ADDRESS,
    cilium::{REVERSE_SK4_BOUND, RevSk4Key},
    counter,
};

use crate::{
    maps::{CILIUM_REVERSE_SK4, EVENTS, cilium_reverse_sk, count, filter, now_ns},
    maps_dns::{DNS_HEALTHY, DNS_SOCK_ANSWERED, PENDING_DNS, QUERY_SCRATCH, dns_config},
    sock_fields,
};

pub const DNS_PORT: u16 = 53;
pub const DNS_HEADER_LEN: usize = 12;
pub const IPPROTO_UDP: u16 = 17;
/// `BPF_NOEXIST`: a retransmitted query (same socket, same id) keeps its first send time.
const BPF_NOEXIST: u64 = 1;
const E2BIG: i32 = 7;

/// A UDP datagram's two ends, as a hook found them. IPv4 in the first 4 bytes; ports host order.
pub struct Datagram {
    pub family: u16,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
}

/// The socket a query or reply belongs to: its namespace, the id `PENDING_DNS` knows it by, and
/// its cookie when it has one.
pub struct DnsSocket {
    pub netns_inode: u64,
    pub id: u64,
    pub cookie: u64,
}

impl DnsSocket {
    /// The socket at kernel address `sock` (a number), known by its cookie on the tiers that can
    /// ask for one (`cookie`, from `bpf_get_socket_cookie`), by its address otherwise. `None` when
    /// the namespace filter excludes it.
    pub fn of(sock: u64, cookie: Option<u64>) -> Option<DnsSocket> {
        let netns_inode = if sock == 0 {
            0
        } else {
            sock_fields::netns_inode(sock)
        };
        let wanted = filter().netns_inode;
        if wanted != 0 && wanted != netns_inode {
            return None;
        }
        let (id, cookie) = match cookie {
            Some(cookie) => (cookie, cookie),
            None => (socket_id(sock), sock_fields::cookie(sock)),
        };
        Some(DnsSocket {
            netns_inode,
            id,
            cookie,
        })
    }
}

/// The id of a socket known by its address (`DnsConfig::socket_id_key`).
pub fn socket_id(sock: u64) -> u64 {
    (sock_fields::as_number(sock) ^ dns_config().socket_id_key) | SOCKET_ID_FROM_ADDRESS
}

/// Whether a DNS header's flags say it is a query (QR clear) or a response.
pub fn is_response(header: &[u8; DNS_HEADER_LEN]) -> bool {
    header[2] & 0x80 != 0
}

fn query_id(header: &[u8; DNS_HEADER_LEN]) -> u16 {
    u16::from_be_bytes([header[0], header[1]])
}

/// Remembers a query leaving `socket`. `connected_v4` is the remote address of a connected IPv4
/// socket (zero otherwise); `question` copies the question's first bytes and returns how many;
/// `caller` fills in the sending task, however the hook can know it.
#[expect(
    clippy::inline_always,
    reason = "each hook's copy keeps its own closures inlined; a call frame would cost 5.10 and 6.1 \
              stack they do not have beside a `PendingDns`"
)]
#[inline(always)]
pub fn store_query(
    socket: &DnsSocket,
    dgram: &Datagram,
    header: &[u8; DNS_HEADER_LEN],
    connected_v4: [u8; 4],
    question: impl FnOnce(&mut [u8; DNS_QUESTION_BYTES]) -> u16,
    caller: impl FnOnce(&mut PendingDns),
) -> Option<()> {
    if is_response(header) {
        return None; // a response sent to port 53 is not a query
    }
    count(counter::DNS_QUERIES);
    let key = DnsKey {
        netns_inode: socket.netns_inode,
        socket_cookie: socket.id,
        id: query_id(header),
        _pad: [0; 6],
    };
    let pending = QUERY_SCRATCH.get_ptr_mut(0)?;
    // SAFETY: a per-CPU map value, this program's alone while it runs on this CPU.
    let pending = unsafe { &mut *pending };
    // Filled in place: a `PendingDns` built on the stack first would not fit beside the
    // tracepoint tier's frames on kernels that count the stack of two calls together.
    // SAFETY: `pending` is a valid, exclusive map value; all-zero is a valid `PendingDns`.
    unsafe { core::ptr::write_bytes(core::ptr::from_mut(pending), 0, 1) };
    pending.sent_ns = now_ns();
    pending.client_addr = dgram.src;
    pending.server_addr = dgram.dst;
    pending.client_port = dgram.sport;
    pending.server_port = dgram.dport;
    pending.family = dgram.family;
    pending.flags = u16::from_be_bytes([header[2], header[3]]);
    pending.cookie = socket.cookie;
    caller(pending);
    if dgram.family == AF_INET && connected_v4 != [0; 4] {
        pending.dialed_addr[..4].copy_from_slice(&connected_v4);
        if socket.cookie != 0 && cilium_reverse_sk() & REVERSE_SK4_BOUND != 0 {
            // Cilium's socket LB connected it to the backend; its map, read while the socket
            // lives, says which Service was dialled (it is gone once the socket is released).
            let entry = RevSk4Key {
                cookie: socket.cookie,
                address: connected_v4,
                port: dgram.dport.to_be_bytes(),
                pad: [0; 2],
            };
            // SAFETY: the value is copied out at once.
            if let Some(service) = unsafe { CILIUM_REVERSE_SK4.get(&entry) } {
                pending.dialed_addr[..4].copy_from_slice(&service.address);
                pending.dialed_by_socket_lb = 1;
            }
        }
    }
    pending.question_len = question(&mut pending.question);
    if let Err(e) = PENDING_DNS.insert(&key, pending, BPF_NOEXIST)
        && e == -E2BIG
    {
        count(counter::DNS_PENDING_FULL);
    }
    Some(())
}

/// Pairs a reply that reached `socket` with its query. `from` is the reply's source where the hook
/// sees it; otherwise the query's server stands for it (the syscall tracepoints see only the bytes
/// the application read).
pub fn pair_reply(
    socket: &DnsSocket,
    header: &[u8; DNS_HEADER_LEN],
    from: Option<(u16, [u8; 16], u16)>,
) -> Option<()> {
    if !is_response(header) {
        return None;
    }
    let key = DnsKey {
        netns_inode: socket.netns_inode,
        socket_cookie: socket.id,
        id: query_id(header),
        _pad: [0; 6],
    };
    let pending = PENDING_DNS.get_ptr(&key)?;
    let now = now_ns();
    // SAFETY: map value pointer from a successful lookup, read before the remove below.
    let (sent_ns, family, addr, port) = unsafe {
        (
            (*pending).sent_ns,
            (*pending).family,
            (*pending).server_addr,
            (*pending).server_port,
        )
    };
    let (family, addr, port) = from.unwrap_or((family, addr, port));
    let latency = now.saturating_sub(sent_ns);
    let rcode = header[3] & 0x0f;
    if rcode == 0 && latency < dns_config().slow_reply_ns {
        count(counter::DNS_HEALTHY_REPLIES);
        healthy(
            Endpoint {
                netns_inode: socket.netns_inode,
                addr,
                port,
                family,
                _pad: [0; 4],
            },
            latency,
        );
    } else {
        match EVENTS.reserve::<DnsEvent>(0) {
            Some(mut entry) => {
                let ev = entry.as_mut_ptr();
                // SAFETY: `ev` points at the reserved record, `pending` at a live map value.
                unsafe {
                    (*ev).kind = EVENT_DNS_REPLY;
                    (*ev).rcode = rcode;
                    (*ev)._pad = [0; 3];
                    (*ev).reply_ns = now;
                    (*ev).key = key;
                    (*ev).reply_addr = addr;
                    (*ev).reply_port = port;
                    (*ev)._pad2 = [0; 6];
                    (*ev).query = *pending;
                }
                entry.submit(0);
                count(counter::EVENTS_SENT);
            }
            None => count(counter::DNS_RINGBUF_FULL),
        }
    }
    let _ = PENDING_DNS.remove(&key);
    let _ = DNS_SOCK_ANSWERED.insert(&socket.id, &now, 0);
    Some(())
}

fn healthy(server: Endpoint, latency: u64) {
    if let Some(stats) = DNS_HEALTHY.get_ptr_mut(&server) {
        // SAFETY: per-CPU value, no concurrent writer on this CPU.
        unsafe {
            (*stats).answered += 1;
            (*stats).latency_ns_total += latency;
        }
        return;
    }
    let stats = DnsHealthyStats {
        answered: 1,
        latency_ns_total: latency,
    };
    if DNS_HEALTHY.insert(&server, &stats, 0).is_err() {
        count(counter::DNS_HEALTHY_MAP_FULL);
    }
}

/// How many question bytes to copy when `available` (at least 1) follow the header: in
/// `1..=DNS_QUESTION_BYTES` by construction (the mask is what the verifier checks), `available`
/// itself when smaller. Callers check for 0 first: a helper refuses a zero-length copy.
#[expect(
    clippy::inline_always,
    reason = "inlined so the verifier sees the masked bounds at the copy"
)]
#[inline(always)]
pub fn question_len(available: usize) -> usize {
    ((available.min(DNS_QUESTION_BYTES).wrapping_sub(1)) & (DNS_QUESTION_BYTES - 1)) + 1
}
