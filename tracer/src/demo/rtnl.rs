//! The few rtnetlink requests the demo's namespaces need (what `ip link/addr/route/neigh add` send),
//! so the static binary builds them with nothing else installed. A socket belongs to the namespace
//! it was created in: each `Rtnl` is opened on a short-lived thread that entered its namespace.
use std::{
    fs::File,
    io,
    net::{IpAddr, Ipv4Addr},
    os::fd::AsRawFd as _,
    path::{Path, PathBuf},
};

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_route::{
    AddressFamily, RouteNetlinkMessage,
    address::{AddressAttribute, AddressMessage},
    link::{InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage},
    neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState},
    route::{
        RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
        RouteType,
    },
};
use netlink_sys::{Socket, SocketAddr as NetlinkAddr, protocols::NETLINK_ROUTE};

#[derive(Debug, thiserror::Error)]
pub enum RtnlError {
    #[error("cannot open a netlink socket in {netns}: {source}")]
    Open { netns: PathBuf, source: io::Error },
    #[error("{what} in {netns}: {source}")]
    Request {
        what: String,
        netns: PathBuf,
        source: io::Error,
    },
    #[error("{what} in {netns}: the kernel's answer does not parse: {reason}")]
    Decode {
        what: String,
        netns: PathBuf,
        reason: String,
    },
}

/// Room for one answer: an ACK or an error with the request echoed.
const RECV_BUFFER_BYTES: usize = 16 * 1024;

/// An rtnetlink socket in one network namespace.
pub struct Rtnl {
    socket: Socket,
    netns: PathBuf,
    seq: u32,
}

impl Rtnl {
    /// A socket in the namespace at `netns` (`/run/netns/NAME`).
    pub fn open_in(netns: &Path) -> Result<Rtnl, RtnlError> {
        let path = netns.to_path_buf();
        let socket = std::thread::spawn(move || -> io::Result<Socket> {
            // Only this disposable thread moves.
            crate::netns::enter(&path).map_err(io::Error::other)?;
            let mut socket = Socket::new(NETLINK_ROUTE)?;
            socket.bind_auto()?;
            socket.connect(&NetlinkAddr::new(0, 0))?;
            Ok(socket)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
        .map_err(|source| RtnlError::Open {
            netns: netns.into(),
            source,
        })?;
        Ok(Rtnl {
            socket,
            netns: netns.into(),
            seq: 0,
        })
    }

    /// `ip link add NAME type veth peer name PEER netns PEER_NS`: the peer is created directly in
    /// the other namespace, so neither end ever exists in the host's.
    pub fn add_veth(&mut self, name: &str, peer: &str, peer_ns: &File) -> Result<(), RtnlError> {
        let mut peer_msg = LinkMessage::default();
        peer_msg.attributes = vec![
            LinkAttribute::IfName(peer.into()),
            LinkAttribute::NetNsFd(peer_ns.as_raw_fd()),
        ];
        let mut link = LinkMessage::default();
        link.attributes = vec![
            LinkAttribute::IfName(name.into()),
            LinkAttribute::LinkInfo(vec![
                LinkInfo::Kind(InfoKind::Veth),
                LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer_msg))),
            ]),
        ];
        self.create(
            &format!("adding veth {name} (peer {peer})"),
            RouteNetlinkMessage::NewLink(link),
        )
    }

    /// `ip link set NAME up`.
    pub fn set_up(&mut self, name: &str) -> Result<(), RtnlError> {
        let mut link = LinkMessage::default();
        link.header.flags = LinkFlags::Up;
        link.header.change_mask = LinkFlags::Up;
        link.attributes = vec![LinkAttribute::IfName(name.into())];
        self.request(
            &format!("setting {name} up"),
            RouteNetlinkMessage::SetLink(link),
            NLM_F_REQUEST | NLM_F_ACK,
        )
    }

    /// `ip addr add IP/PREFIX dev NAME`.
    pub fn add_address(&mut self, name: &str, ip: Ipv4Addr, prefix: u8) -> Result<(), RtnlError> {
        let index = self.index_of(name)?;
        let mut address = AddressMessage::default();
        address.header.family = AddressFamily::Inet;
        address.header.prefix_len = prefix;
        address.header.index = index;
        address.attributes = vec![
            AddressAttribute::Local(IpAddr::V4(ip)),
            AddressAttribute::Address(IpAddr::V4(ip)),
        ];
        self.create(
            &format!("adding {ip}/{prefix} to {name}"),
            RouteNetlinkMessage::NewAddress(address),
        )
    }

    /// `ip route add NET/PREFIX dev NAME`: a network on the link, no gateway.
    pub fn add_link_route(
        &mut self,
        name: &str,
        net: Ipv4Addr,
        prefix: u8,
    ) -> Result<(), RtnlError> {
        let index = self.index_of(name)?;
        let mut route = RouteMessage::default();
        route.header.address_family = AddressFamily::Inet;
        route.header.destination_prefix_length = prefix;
        route.header.table = RouteHeader::RT_TABLE_MAIN;
        route.header.protocol = RouteProtocol::Boot;
        route.header.scope = RouteScope::Link;
        route.header.kind = RouteType::Unicast;
        route.attributes = vec![
            RouteAttribute::Destination(RouteAddress::Inet(net)),
            RouteAttribute::Oif(index),
        ];
        self.create(
            &format!("adding the route {net}/{prefix} dev {name}"),
            RouteNetlinkMessage::NewRoute(route),
        )
    }

    /// `ip neigh add IP lladdr MAC dev NAME nud permanent`: frames to `ip` go to `mac`, with no
    /// ARP asked first.
    pub fn add_permanent_neighbour(
        &mut self,
        name: &str,
        ip: Ipv4Addr,
        mac: [u8; 6],
    ) -> Result<(), RtnlError> {
        let index = self.index_of(name)?;
        let mut neighbour = NeighbourMessage::default();
        neighbour.header.family = AddressFamily::Inet;
        neighbour.header.ifindex = index;
        neighbour.header.state = NeighbourState::Permanent;
        neighbour.attributes = vec![
            NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)),
            NeighbourAttribute::LinkLayerAddress(mac.to_vec()),
        ];
        self.create(
            &format!("adding the neighbour {ip} on {name}"),
            RouteNetlinkMessage::NewNeighbour(neighbour),
        )
    }

    /// The interface index of `name` (`if_nametoindex`, asked in this socket's namespace).
    fn index_of(&mut self, name: &str) -> Result<u32, RtnlError> {
        let what = format!("looking up link {name}");
        let mut link = LinkMessage::default();
        link.attributes = vec![LinkAttribute::IfName(name.into())];
        let reply = self.exchange(&what, RouteNetlinkMessage::GetLink(link), NLM_F_REQUEST)?;
        match reply {
            Some(RouteNetlinkMessage::NewLink(found)) => Ok(found.header.index),
            _ => Err(RtnlError::Decode {
                what,
                netns: self.netns.clone(),
                reason: "no link message in the answer".into(),
            }),
        }
    }

    fn create(&mut self, what: &str, message: RouteNetlinkMessage) -> Result<(), RtnlError> {
        self.request(
            what,
            message,
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Sends a request that is answered by an ACK (or an error).
    fn request(
        &mut self,
        what: &str,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<(), RtnlError> {
        self.exchange(what, message, flags).map(drop)
    }

    /// Sends one request and reads its one answer: a message (for a GET), an ACK, or an error.
    fn exchange(
        &mut self,
        what: &str,
        message: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Option<RouteNetlinkMessage>, RtnlError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut request = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        request.finalize();
        let mut buf = vec![0; request.buffer_len()];
        request.serialize(&mut buf);
        let failed = |source: io::Error| RtnlError::Request {
            what: what.into(),
            netns: self.netns.clone(),
            source,
        };
        self.socket.send(&buf, 0).map_err(failed)?;
        let mut answer = Vec::with_capacity(RECV_BUFFER_BYTES);
        self.socket.recv(&mut answer, 0).map_err(failed)?;
        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&answer).map_err(|e| {
            RtnlError::Decode {
                what: what.into(),
                netns: self.netns.clone(),
                reason: e.to_string(),
            }
        })?;
        match parsed.payload {
            NetlinkPayload::InnerMessage(inner) => Ok(Some(inner)),
            NetlinkPayload::Error(e) => match e.code {
                None => Ok(None),
                Some(code) => Err(failed(io::Error::from_raw_os_error(-code.get()))),
            },
            _ => Ok(None),
        }
    }
}
