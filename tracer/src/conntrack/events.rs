//! Conntrack entries that were destroyed before we could look them up.
//!
//! When a backend answers a SYN with a RST (a pod selected by a Service that does not listen), the
//! node's conntrack removes the entry at once, so the lookup made when the refusal reaches us misses.
//! The destroy event still carries both tuples. We join the destroy-event group in the node's namespace
//! with a socket filter, run by the kernel, that only lets through entries that were DNAT'd and never
//! saw a reply: healthy connections are never delivered. What gets through is kept briefly, by
//! original tuple, to back up the lookup.
use std::{
    collections::VecDeque,
    io,
    net::SocketAddr,
    os::fd::AsRawFd,
    path::Path,
    time::{Duration, Instant},
};

use hashbrown::HashMap;
use netlink_sys::Socket;

use super::netlink::{ConntrackError, Direction, parse, socket_in};

/// `NFNLGRP_CONNTRACK_DESTROY`.
const GROUP_DESTROY: u32 = 3;
/// How long a destroyed entry stays findable: far longer than the time between the kernel destroying
/// it and our ring-buffer consumer asking (microseconds to milliseconds).
const KEEP: Duration = Duration::from_mins(1);
/// Bound on destroyed entries kept.
const MAX_KEPT: usize = 65_536;
/// Receive buffer: bursts of black-holed or refused connects must not overflow it.
const RCVBUF_BYTES: usize = 4 << 20;

pub struct DestroyedNat {
    socket: Socket,
    backends: HashMap<Direction, SocketAddr>,
    order: VecDeque<(Instant, Direction)>,
    /// Destroy events the kernel could not queue (receive buffer full).
    pub lost: u64,
}

impl DestroyedNat {
    pub fn open(netns_path: Option<&Path>) -> Result<DestroyedNat, ConntrackError> {
        let socket = socket_in(netns_path)?;
        socket.set_rx_buf_sz(RCVBUF_BYTES)?;
        attach_unreplied_dnat_filter(&socket)?;
        socket.add_membership(GROUP_DESTROY)?;
        socket.set_non_blocking(true)?;
        Ok(DestroyedNat {
            socket,
            backends: HashMap::new(),
            order: VecDeque::new(),
            lost: 0,
        })
    }

    /// The backend of a recently destroyed entry whose original direction is `original`.
    pub fn backend_of(&mut self, original: Direction) -> Option<SocketAddr> {
        self.drain();
        self.backends.get(&original).copied()
    }

    /// Reads every queued destroy event without blocking.
    fn drain(&mut self) {
        let now = Instant::now();
        loop {
            match self.socket.recv_from_full() {
                Ok((bytes, _)) => {
                    let Ok(parsed) = parse(&bytes) else { continue };
                    for entry in parsed.entries {
                        if let Some(backend) = entry.backend() {
                            self.backends.insert(entry.original, backend);
                            self.order.push_back((now, entry.original));
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.lost += 1,
                Err(_) => break,
            }
        }
        while self
            .order
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > KEEP || self.order.len() > MAX_KEPT)
        {
            if let Some((_, original)) = self.order.pop_front() {
                self.backends.remove(&original);
            }
        }
    }
}

/// A classic BPF filter, run by the kernel on each event before it is queued: accept only messages
/// whose `CTA_STATUS` has `DST_NAT` set and `SEEN_REPLY` clear.
fn attach_unreplied_dnat_filter(socket: &Socket) -> io::Result<()> {
    const NLMSG_AND_NFGENMSG: u32 = 16 + 4;
    const CTA_STATUS: u32 = 3;
    const SEEN_REPLY: u32 = 1 << 1;
    const DST_NAT: u32 = 1 << 5;
    // Ancillary load: A = offset of the netlink attribute of type X, searched from offset A.
    const SKF_AD_NLATTR: u32 = 0xffff_f000 + 12;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let program = [
        op(0x00, 0, 0, NLMSG_AND_NFGENMSG),   // ld #20
        op(0x01, 0, 0, CTA_STATUS),           // ldx #CTA_STATUS
        op(0x20, 0, 0, SKF_AD_NLATTR),        // ld nlattr: A = offset of CTA_STATUS or 0
        op(0x15, 4, 0, 0),                    // jeq #0 -> drop (no status)
        op(0x07, 0, 0, 0),                    // tax
        op(0x40, 0, 0, 4),                    // ld [x + 4]: the status, big-endian
        op(0x54, 0, 0, SEEN_REPLY | DST_NAT), // and #(SEEN_REPLY|DST_NAT)
        op(0x15, 1, 0, DST_NAT),              // jeq #DST_NAT -> accept
        op(0x06, 0, 0, 0),                    // drop: ret #0
        op(0x06, 0, 0, u32::MAX),             // accept: ret #-1
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: fprog points at `program`, which outlives the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&raw const fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
