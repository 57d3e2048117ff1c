//! Replies that do not reach the peer (the server side of incident 002: the SNAT state on the return
//! path was gone). A socket a listener accepted that retransmits data gets an entry in `REPLY_LOSSES` at its first data
//! retransmit; at `REPLY_LIVE_AT` unacknowledged retransmits it is reported live; when it is freed
//! with data still unacknowledged (the kernel gave up, or the application closed and the orphan
//! gave up), the end is reported. Healthy sockets never get here: retransmits are rare, and the end
//! of a socket without an entry costs one array read (`REPLY_LOSSES_OPEN`).
use core::intrinsics::{AtomicOrdering, atomic_xadd};

use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, LruHashMap};
use tracer_common::{
    EVENT_REPLY_END, EVENT_REPLY_RETRANSMIT, HANDSHAKE_LIVE_AT, HandshakeKey, MAX_HANDSHAKES,
    MAX_REPLY_LOSSES, REPLY_LIVE_AT, ReplyEvent, ReplyLoss, STATE_SYN_RECV, counter,
};

use crate::{
    maps::{EVENTS, count, filter, now_ns},
    sock_fields,
};

/// Sockets with retransmitted data, by socket address.
#[map]
pub static REPLY_LOSSES: LruHashMap<u64, ReplyLoss> =
    LruHashMap::with_max_entries(MAX_REPLY_LOSSES, 0);

/// How many entries `REPLY_LOSSES` holds (never below the truth: up before an insert, down after a
/// remove; an LRU eviction leaves it high, which only costs lookups): zero answers "no entry" at the
/// end of every other socket.
#[map]
static REPLY_LOSSES_OPEN: Array<u64> = Array::with_max_entries(1, 0);

/// Handshakes whose SYN-ACKs were retransmitted, until the final ACK makes their child socket
/// (`handshake_completed`) or userspace takes them out as given up.
#[map]
pub static HANDSHAKES: LruHashMap<HandshakeKey, ReplyLoss> =
    LruHashMap::with_max_entries(MAX_HANDSHAKES, 0);

/// How many entries `HANDSHAKES` may hold (as `REPLY_LOSSES_OPEN`; userspace lowers it when it
/// takes entries out): zero answers "none" at every accepted connection.
#[map]
pub static HANDSHAKES_OPEN: Array<u64> = Array::with_max_entries(1, 0);

const TCP_ESTABLISHED: u8 = 1;
const TCP_FIN_WAIT1: u8 = 4;
const TCP_CLOSE_WAIT: u8 = 8;
const TCP_LAST_ACK: u8 = 9;
const TCP_CLOSING: u8 = 11;

/// A retransmit in a state other than `SYN_SENT`: data (or a FIN) the peer did not acknowledge.
pub fn retransmitted(sk: u64, state: u8) {
    if !matches!(
        state,
        TCP_ESTABLISHED | TCP_FIN_WAIT1 | TCP_CLOSE_WAIT | TCP_LAST_ACK | TCP_CLOSING
    ) {
        return;
    }
    let key = sock_fields::as_number(sk);
    let now = now_ns();
    if let Some(loss) = REPLY_LOSSES.get_ptr_mut(&key) {
        // SAFETY: a map value pointer, valid for the program's run; one socket's retransmits are
        // serialised by its lock.
        let loss = unsafe { &mut *loss };
        loss.retransmits = loss.retransmits.saturating_add(1);
        loss.last_ns = now;
        loss.state = state;
        if loss.retransmits == REPLY_LIVE_AT {
            loss.unacked = sock_fields::unacked(sk);
            emit(EVENT_REPLY_RETRANSMIT, loss);
        }
        return;
    }
    let netns_inode = sock_fields::netns_inode(sk);
    let only = filter().netns_inode;
    if only != 0 && netns_inode != only {
        return;
    }
    // A client's own data (a request, its FIN) unacknowledged is not a server's lost reply, and its
    // local port is an ephemeral one: only sockets a listener accepted are followed.
    if !sock_fields::accepted(sk) {
        return;
    }
    let loss = first_retransmit(key, now, netns_inode, sk, sock_fields::addrs(sk), state);
    add(&REPLY_LOSSES_OPEN, 1);
    if REPLY_LOSSES.insert(&key, &loss, 0).is_err() {
        add(&REPLY_LOSSES_OPEN, -1);
    }
}

/// A SYN-ACK sent again for the request `request` of listener `listener`.
pub fn synack_retransmitted(listener: u64, request: u64) {
    let addrs = sock_fields::request_addrs(request);
    let netns_inode = sock_fields::netns_inode(request);
    let only = filter().netns_inode;
    if only != 0 && netns_inode != only {
        return;
    }
    let key = handshake_key(netns_inode, &addrs);
    let now = now_ns();
    if let Some(loss) = HANDSHAKES.get_ptr_mut(&key) {
        // SAFETY: a map value pointer, valid for the program's run.
        let loss = unsafe { &mut *loss };
        loss.retransmits = loss.retransmits.saturating_add(1);
        loss.last_ns = now;
        if loss.retransmits == HANDSHAKE_LIVE_AT {
            emit(EVENT_REPLY_RETRANSMIT, loss);
        }
        return;
    }
    let loss = first_retransmit(
        sock_fields::as_number(request),
        now,
        netns_inode,
        listener,
        addrs,
        STATE_SYN_RECV,
    );
    add(&HANDSHAKES_OPEN, 1);
    if HANDSHAKES.insert(&key, &loss, 0).is_err() {
        add(&HANDSHAKES_OPEN, -1);
    }
}

/// The final ACK came: the child socket `child` of a handshake is established.
pub fn handshake_completed(child: u64) {
    if held(&HANDSHAKES_OPEN) == 0 {
        return;
    }
    let key = handshake_key(sock_fields::netns_inode(child), &sock_fields::addrs(child));
    if HANDSHAKES.remove(&key).is_ok() {
        add(&HANDSHAKES_OPEN, -1);
    }
}

/// An error reported on a socket that is not a connect attempt: kept on its entry, if it has one
/// (the application's read of the error clears `sk_err` before the socket is freed).
pub fn error_reported(sk: u64, error: i32) {
    if error == 0 || held(&REPLY_LOSSES_OPEN) == 0 {
        return;
    }
    if let Some(loss) = REPLY_LOSSES.get_ptr_mut(&sock_fields::as_number(sk)) {
        // SAFETY: as in `retransmitted`.
        unsafe { (*loss).error = error };
    }
}

/// The kernel closed a connection the application still held: its error (`ETIMEDOUT` when it gave
/// up on the replies) is kept on the entry, if any. Before 5.11 (no `inet_sk_error_report`) this is
/// where a time-out is seen.
pub fn closing(sk: u64) {
    if held(&REPLY_LOSSES_OPEN) == 0 {
        return;
    }
    if let Some(loss) = REPLY_LOSSES.get_ptr_mut(&sock_fields::as_number(sk)) {
        let error = sock_fields::error(sk);
        // SAFETY: as in `retransmitted`.
        unsafe {
            if (*loss).error == 0 && error != 0 {
                (*loss).error = error;
            }
        }
    }
}

/// The count a one-word gate holds (1 if it cannot be read: then the table is looked at).
fn held(counter: &Array<u64>) -> u64 {
    // SAFETY: an aligned array value; a torn read of a u64 cannot happen.
    counter
        .get_ptr(0)
        .map_or(1, |n| unsafe { core::ptr::read_volatile(n) })
}

/// The socket is freed: its entry, if any, ends.
pub fn destroyed(sk: u64) {
    if held(&REPLY_LOSSES_OPEN) == 0 {
        return;
    }
    let key = sock_fields::as_number(sk);
    let Some(loss) = REPLY_LOSSES.get_ptr_mut(&key) else {
        return;
    };
    // SAFETY: as in `retransmitted`.
    let loss = unsafe { &mut *loss };
    loss.unacked = sock_fields::unacked(sk);
    if loss.error == 0 {
        let error = sock_fields::error(sk);
        loss.error = if error != 0 {
            error
        } else {
            sock_fields::soft_error(sk)
        };
    }
    if loss.unacked > 0 || loss.retransmits >= REPLY_LIVE_AT {
        emit(EVENT_REPLY_END, loss);
    }
    if REPLY_LOSSES.remove(&key).is_ok() {
        add(&REPLY_LOSSES_OPEN, -1);
    }
}

/// The entry of a socket (or request) at its first retransmit; the process is found from
/// `holder`'s inode (the socket itself, or the listener of a request).
fn first_retransmit(
    sock: u64,
    now: u64,
    netns_inode: u64,
    holder: u64,
    addrs: sock_fields::Addrs,
    state: u8,
) -> ReplyLoss {
    ReplyLoss {
        sock,
        first_ns: now,
        last_ns: now,
        netns_inode,
        socket_inode: sock_fields::socket_inode(holder),
        saddr: addrs.saddr,
        daddr: addrs.daddr,
        family: addrs.family,
        sport: addrs.sport,
        dport: addrs.dport,
        state,
        _pad: 0,
        retransmits: 1,
        unacked: 0,
        error: 0,
        _pad2: 0,
    }
}

fn handshake_key(netns_inode: u64, addrs: &sock_fields::Addrs) -> HandshakeKey {
    HandshakeKey {
        netns_inode,
        saddr: addrs.saddr,
        daddr: addrs.daddr,
        sport: addrs.sport,
        dport: addrs.dport,
        family: addrs.family,
        _pad: 0,
    }
}

fn add(counter: &Array<u64>, delta: i64) {
    if let Some(open) = counter.get_ptr_mut(0) {
        // SAFETY: an aligned array value shared by all CPUs, changed only atomically.
        unsafe {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(open, delta.cast_unsigned())
        };
    }
}

/// Sends one record; a full ring buffer is counted, never silent. Rare records: each wakes the
/// reader.
fn emit(kind: u32, loss: &ReplyLoss) {
    match EVENTS.reserve::<ReplyEvent>(0) {
        Some(mut entry) => {
            entry.write(ReplyEvent {
                kind,
                _pad: 0,
                event_ns: now_ns(),
                loss: *loss,
            });
            entry.submit(0);
            count(counter::EVENTS_SENT);
        }
        None => count(counter::RINGBUF_FULL),
    }
}
