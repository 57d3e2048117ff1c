//! A ctnetlink client: look up one conntrack entry by its original tuple, or dump the table, in a
//! chosen network namespace.
//!
//! Why ctnetlink (and not a kernel hook) for the backend of a kube-proxy Service: the socket only knows
//! the Service address; the DNAT'd backend lives in the conntrack entry of the node's namespace. Reading
//! it from userspace costs nothing on the packet path, and we only ask for the few attempts that need
//! attention. (fentry/kprobes on `nf_nat` are not available here; a netfilter BPF link or tc program would
//! add work to every packet of the node.) A netlink socket stays in the namespace it was created in, so
//! it is created on a short-lived thread that entered that namespace.
use std::{
    io,
    net::{IpAddr, SocketAddr},
    os::fd::AsRawFd,
    path::Path,
};

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla as _,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
    conntrack::{
        ConntrackAttribute, ConntrackMessage, IPTuple, ProtoInfo, ProtoInfoTCP, ProtoTuple,
        Protocol, Status, Tuple,
    },
};
use netlink_sys::{Socket, SocketAddr as NetlinkAddr, protocols::NETLINK_NETFILTER};

/// One direction of a connection as conntrack records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Direction {
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// The conntrack states the tracer cares about, from `CTA_PROTOINFO_TCP_STATE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpState {
    SynSent,
    SynRecv,
    Established,
    Other(u8),
}

/// One conntrack entry (TCP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: u32,
    pub original: Direction,
    pub reply: Direction,
    /// The reply has been seen (not `[UNREPLIED]`).
    pub replied: bool,
    /// `[ASSURED]`: for TCP, the client acknowledged the server's SYN-ACK through this node (its
    /// socket got the answer), not merely that a SYN-ACK passed here.
    pub assured: bool,
    /// Destination NAT happened: `reply.src` is the backend of `original.dst`.
    pub dst_nat: bool,
    pub tcp_state: Option<TcpState>,
    /// Seconds until conntrack forgets it.
    pub timeout_s: u32,
}

impl Entry {
    /// The backend a DNAT'd connection was sent to.
    pub fn backend(&self) -> Option<SocketAddr> {
        (self.dst_nat && self.reply.src != self.original.dst).then_some(self.reply.src)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    #[error("cannot open a conntrack netlink socket in {netns}: {source}")]
    Open { netns: String, source: io::Error },
    #[error("conntrack netlink request failed: {0}")]
    Io(#[from] io::Error),
    #[error("malformed conntrack netlink reply: {0}")]
    Decode(String),
}

const CTA_ID: u16 = 12;
const TCP_CONNTRACK_SYN_SENT: u8 = 1;
const TCP_CONNTRACK_SYN_RECV: u8 = 2;
const TCP_CONNTRACK_ESTABLISHED: u8 = 3;

/// Room for one netlink datagram: the kernel sizes dump datagrams to at most 32 KiB.
const RECV_BUFFER_BYTES: usize = 64 * 1024;

pub struct Conntrack {
    socket: Socket,
    seq: u32,
    /// Reused for every datagram: one `recv` per reply, no allocation (a lookup is asked for every
    /// attempt that needs attention, so its cost is per event).
    recv_buf: Vec<u8>,
    send_buf: Vec<u8>,
}

impl Conntrack {
    /// A client for the conntrack table of the namespace at `netns_path` (None: our own).
    pub fn open(netns_path: Option<&Path>) -> Result<Conntrack, ConntrackError> {
        Ok(Conntrack {
            socket: socket_in(netns_path)?,
            seq: 0,
            recv_buf: Vec::with_capacity(RECV_BUFFER_BYTES),
            send_buf: Vec::new(),
        })
    }

    /// The TCP entry whose original direction is `original`, if conntrack has one.
    pub fn get(&mut self, original: Direction) -> Result<Option<Entry>, ConntrackError> {
        self.get_proto(original, Protocol::Tcp)
    }

    /// The UDP entry whose original direction is `original` (a DNS query's), if any.
    pub fn get_udp(&mut self, original: Direction) -> Result<Option<Entry>, ConntrackError> {
        self.get_proto(original, Protocol::Udp)
    }

    /// The TCP entry whose reply direction is `reply`: a server's socket (local -> peer) is the
    /// reply direction of the connection its node translated, so the original names the real
    /// client and the address it connected to.
    pub fn get_by_reply(&mut self, reply: Direction) -> Result<Option<Entry>, ConntrackError> {
        self.get_tuple(
            ConntrackAttribute::CtaTupleReply(tuple_of(reply, Protocol::Tcp)),
            reply,
            Protocol::Tcp,
        )
    }

    fn get_proto(
        &mut self,
        original: Direction,
        proto: Protocol,
    ) -> Result<Option<Entry>, ConntrackError> {
        self.get_tuple(
            ConntrackAttribute::CtaTupleOrig(tuple_of(original, proto)),
            original,
            proto,
        )
    }

    fn get_tuple(
        &mut self,
        tuple: ConntrackAttribute,
        direction: Direction,
        proto: Protocol,
    ) -> Result<Option<Entry>, ConntrackError> {
        let family = family_of(direction.dst.ip());
        match self.request(
            family,
            ConntrackMessage::Get(vec![tuple]),
            NLM_F_REQUEST,
            proto,
        ) {
            Ok(mut entries) => Ok(entries.pop()),
            // ENOENT: no such entry (not NAT'd, or already gone).
            Err(ConntrackError::Io(e)) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every TCP entry of the table (IPv4 and IPv6).
    pub fn dump(&mut self) -> Result<Vec<Entry>, ConntrackError> {
        self.request(
            NetfilterProtoFamily::Unspec,
            ConntrackMessage::Get(vec![]),
            NLM_F_REQUEST | NLM_F_DUMP,
            Protocol::Tcp,
        )
    }

    fn request(
        &mut self,
        family: NetfilterProtoFamily,
        message: ConntrackMessage,
        flags: u16,
        proto: Protocol,
    ) -> Result<Vec<Entry>, ConntrackError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut request = NetlinkMessage::new(
            header,
            NetlinkPayload::InnerMessage(NetfilterMessage::new(
                NetfilterHeader::new(family, 0, 0),
                message,
            )),
        );
        request.finalize();
        self.send_buf.clear();
        self.send_buf.resize(request.buffer_len(), 0);
        request.serialize(&mut self.send_buf);
        self.socket.send(&self.send_buf, 0)?;

        let mut entries = Vec::new();
        let dump = flags & NLM_F_DUMP != 0;
        loop {
            self.recv_buf.clear();
            // MSG_TRUNC: the datagram's real length, so a truncated one is an error, not a
            // silently partial reply.
            let len = self.socket.recv(&mut self.recv_buf, libc::MSG_TRUNC)?;
            if len > self.recv_buf.len() {
                return Err(ConntrackError::Decode(format!(
                    "a {len}-byte datagram does not fit the {RECV_BUFFER_BYTES}-byte buffer"
                )));
            }
            let parsed = parse_proto(&self.recv_buf, proto)?;
            entries.extend(parsed.entries);
            if parsed.done || !dump {
                return Ok(entries);
            }
        }
    }
}

/// One direction of a connection as ctnetlink spells it.
fn tuple_of(direction: Direction, proto: Protocol) -> Vec<Tuple> {
    vec![
        Tuple::Ip(vec![
            IPTuple::SourceAddress(direction.src.ip()),
            IPTuple::DestinationAddress(direction.dst.ip()),
        ]),
        Tuple::Proto(vec![
            ProtoTuple::Protocol(proto),
            ProtoTuple::SourcePort(direction.src.port()),
            ProtoTuple::DestinationPort(direction.dst.port()),
        ]),
    ]
}

/// A ctnetlink socket created in the namespace at `netns_path` (None: our own), from a short-lived
/// thread that entered it: the socket stays in that namespace for its whole life.
pub(super) fn socket_in(netns_path: Option<&Path>) -> Result<Socket, ConntrackError> {
    let name = netns_path.map_or_else(|| "this namespace".into(), |p| p.display().to_string());
    let open = |path: Option<std::path::PathBuf>| -> io::Result<Socket> {
        if let Some(path) = path {
            let ns = std::fs::File::open(&path)?;
            // SAFETY: setns on a valid namespace fd; only this disposable thread moves.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let mut socket = Socket::new(NETLINK_NETFILTER)?;
        socket.bind_auto()?;
        socket.connect(&NetlinkAddr::new(0, 0))?;
        Ok(socket)
    };
    let path = netns_path.map(Path::to_path_buf);
    std::thread::spawn(move || open(path))
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
        .map_err(|source| ConntrackError::Open {
            netns: name,
            source,
        })
}

/// What one buffer from a ctnetlink socket holds.
pub(super) struct Parsed {
    pub entries: Vec<Entry>,
    /// The reply to a request is complete (`NLMSG_DONE` or an ACK).
    pub done: bool,
}

/// Entries of every conntrack message in `bytes` (`CT_NEW` from gets and dumps, `CT_DELETE` from
/// destroy events); a netlink error becomes `Err`.
pub(super) fn parse(bytes: &[u8]) -> Result<Parsed, ConntrackError> {
    parse_proto(bytes, Protocol::Tcp)
}

/// `parse`, keeping the entries of `proto`.
fn parse_proto(bytes: &[u8], proto: Protocol) -> Result<Parsed, ConntrackError> {
    let mut parsed = Parsed {
        entries: Vec::new(),
        done: false,
    };
    let mut offset = 0;
    while offset < bytes.len() {
        let message = NetlinkMessage::<NetfilterMessage>::deserialize(&bytes[offset..])
            .map_err(|e| ConntrackError::Decode(e.to_string()))?;
        let len = message.header.length as usize;
        match message.payload {
            NetlinkPayload::InnerMessage(NetfilterMessage {
                inner:
                    NetfilterMessageInner::Conntrack(
                        ConntrackMessage::New(attributes) | ConntrackMessage::Delete(attributes),
                    ),
                ..
            }) => parsed.entries.extend(entry_from_proto(&attributes, proto)),
            NetlinkPayload::Error(e) if e.code.is_some() => {
                return Err(ConntrackError::Io(e.to_io()));
            }
            NetlinkPayload::Done(_) | NetlinkPayload::Error(_) => parsed.done = true,
            _ => {}
        }
        if len == 0 {
            break;
        }
        offset += len;
    }
    Ok(parsed)
}

fn family_of(ip: IpAddr) -> NetfilterProtoFamily {
    if ip.is_ipv4() {
        NetfilterProtoFamily::IPv4
    } else {
        NetfilterProtoFamily::IPv6
    }
}

fn direction_from(tuples: &[Tuple]) -> Option<(Direction, Option<Protocol>)> {
    let (mut src, mut dst, mut sport, mut dport, mut proto) = (None, None, None, None, None);
    for t in tuples {
        match t {
            Tuple::Ip(ips) => {
                for ip in ips {
                    match ip {
                        IPTuple::SourceAddress(a) => src = Some(*a),
                        IPTuple::DestinationAddress(a) => dst = Some(*a),
                        _ => {}
                    }
                }
            }
            Tuple::Proto(parts) => {
                for p in parts {
                    match p {
                        ProtoTuple::Protocol(p) => proto = Some(*p),
                        ProtoTuple::SourcePort(p) => sport = Some(*p),
                        ProtoTuple::DestinationPort(p) => dport = Some(*p),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some((
        Direction {
            src: SocketAddr::new(src?, sport?),
            dst: SocketAddr::new(dst?, dport?),
        },
        proto,
    ))
}

/// An entry of `proto` from a `CT_NEW` message's attributes; None for other protocols or incomplete
/// entries.
fn entry_from_proto(attributes: &[ConntrackAttribute], proto: Protocol) -> Option<Entry> {
    let (mut original, mut reply, mut status, mut state, mut timeout, mut id) =
        (None, None, Status::empty(), None, 0, 0);
    for a in attributes {
        match a {
            ConntrackAttribute::CtaTupleOrig(t) => original = direction_from(t),
            ConntrackAttribute::CtaTupleReply(t) => reply = direction_from(t).map(|(d, _)| d),
            ConntrackAttribute::CtaStatus(s) => status = *s,
            ConntrackAttribute::CtaTimeout(t) => timeout = *t,
            ConntrackAttribute::CtaProtoInfo(infos) => {
                for info in infos {
                    if let ProtoInfo::TCP(tcp) = info {
                        for field in tcp {
                            if let ProtoInfoTCP::State(s) = field {
                                state = Some(match *s {
                                    TCP_CONNTRACK_SYN_SENT => TcpState::SynSent,
                                    TCP_CONNTRACK_SYN_RECV => TcpState::SynRecv,
                                    TCP_CONNTRACK_ESTABLISHED => TcpState::Established,
                                    other => TcpState::Other(other),
                                });
                            }
                        }
                    }
                }
            }
            ConntrackAttribute::Other(nla) if nla.kind() == CTA_ID => {
                let mut value = [0u8; 4];
                if nla.value_len() == 4 {
                    nla.emit_value(&mut value);
                    id = u32::from_be_bytes(value);
                }
            }
            _ => {}
        }
    }
    let (original, found) = original?;
    if found != Some(proto) {
        return None;
    }
    Some(Entry {
        id,
        original,
        reply: reply?,
        replied: status.contains(Status::SeenReply),
        assured: status.contains(Status::Assured),
        dst_nat: status.contains(Status::DstNat),
        tcp_state: state,
        timeout_s: timeout,
    })
}
