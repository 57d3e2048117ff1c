//! The demo's address plan, which the namespaces (`bed.rs`), the cluster state written for the
//! tracer (`cluster.rs`) and the client's traffic (`traffic.rs`) all follow.
use std::net::Ipv4Addr;

/// The pods' network; the client is on it too, one veth away.
pub const POD_NET: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 0);
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// The web Service, in front of a live pod and a deleted one still in its endpoints.
pub const WEB_SERVICE: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 96, 0, 10), 80);
pub const WEB_LIVE: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 10);
pub const WEB_DEAD: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 11);
pub const WEB_PORT: u16 = 8080;
/// A pod where nothing listens: refused by RST.
pub const NOT_LISTENING: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 250, 0, 12), 8080);
/// A Service without endpoints: kube-proxy's REJECT, refused by ICMP.
pub const NO_ENDPOINTS: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 96, 0, 20), 80);
/// The DNS Service, first in front of a deleted DNS pod, then the live one.
pub const DNS_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 53);
pub const DNS_LIVE: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 53);
pub const DNS_DEAD: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 54);
