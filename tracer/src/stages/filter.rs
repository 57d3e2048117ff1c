//! Stage 4: the filters on destination CIDR and port (`--dst`, `--port`), before anything is
//! named (the namespace filter runs in the kernel).
use std::{
    net::{IpAddr, SocketAddr},
    str::FromStr,
};

/// An IPv4 or IPv6 prefix, `10.96.0.0/12` or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CidrError {
    #[error("'{0}' is not an address or CIDR (like 10.96.0.0/12 or fd00::/8)")]
    Syntax(String),
    #[error("prefix length {prefix} is too long for {addr}")]
    PrefixTooLong { addr: IpAddr, prefix: u8 },
}

impl FromStr for Cidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| CidrError::Syntax(s.into()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().map_err(|_| CidrError::Syntax(s.into()))?,
            None => max,
        };
        if prefix > max {
            return Err(CidrError::PrefixTooLong { addr, prefix });
        }
        Ok(Cidr { addr, prefix })
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Which destinations to report. Empty lists match everything.
#[derive(Debug, Default, Clone)]
pub struct DestinationFilter {
    pub cidrs: Vec<Cidr>,
    pub ports: Vec<u16>,
}

impl DestinationFilter {
    /// A flow matches if any of its destinations does: the socket's, the address the application
    /// dialled, the backend a load balancer chose.
    pub fn matches(&self, dests: &[SocketAddr]) -> bool {
        let cidr_ok = |ip| self.cidrs.is_empty() || self.cidrs.iter().any(|c| c.contains(ip));
        let port_ok = |port| self.ports.is_empty() || self.ports.contains(&port);
        dests.iter().any(|d| cidr_ok(d.ip()) && port_ok(d.port()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn cidr_contains() {
        let c: Cidr = "10.96.0.0/12".parse().expect("cidr");
        assert!(c.contains(ip("10.96.0.10")));
        assert!(c.contains(ip("10.111.255.1")));
        assert!(!c.contains(ip("10.112.0.1")));
        assert!(!c.contains(ip("fd00::1")));
        let all: Cidr = "0.0.0.0/0".parse().expect("cidr");
        assert!(all.contains(ip("192.0.2.1")));
        let one: Cidr = "fd00::1".parse().expect("cidr");
        assert!(one.contains(ip("fd00::1")) && !one.contains(ip("fd00::2")));
    }

    #[test]
    fn bad_cidrs_are_clear_errors() {
        assert!(matches!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::PrefixTooLong { .. })
        ));
        assert!(matches!(
            "banana".parse::<Cidr>(),
            Err(CidrError::Syntax(_))
        ));
        assert!(matches!(
            "10.0.0.0/x".parse::<Cidr>(),
            Err(CidrError::Syntax(_))
        ));
    }

    #[test]
    fn filter_matches_socket_or_dialled_destination() {
        let f = DestinationFilter {
            cidrs: vec!["10.96.0.0/12".parse().expect("cidr")],
            ports: vec![80],
        };
        let addr = |s: &str| s.parse::<SocketAddr>().expect("test address");
        assert!(f.matches(&[addr("10.244.1.5:8080"), addr("10.96.0.10:80")]));
        assert!(!f.matches(&[addr("10.96.0.10:443")]));
        assert!(DestinationFilter::default().matches(&[addr("192.0.2.1:1")]));
    }
}
