//! kube-proxy's IPVS mode, read from `/proc/net/ip_vs` as the reading thread's namespace has it
//! (`/proc/thread-self/net/ip_vs`: the reader thread has entered the node's namespace). The file
//! exists only while the `ip_vs` module is loaded: without it IPVS is stated `absent`, not failed.
//!
//! The format (Linux `net/netfilter/ipvs/ip_vs_ctl.c`, `ip_vs_info_seq_show`, unchanged from 2.6
//! to 6.18): addresses and ports in hexadecimal, IPv6 addresses bracketed:
//! ```text
//! IP Virtual Server version 1.2.1 (size=4096)
//! Prot LocalAddress:Port Scheduler Flags
//!   -> RemoteAddress:Port Forward Weight ActiveConn InActConn
//! TCP  0A60000A:0050 rr
//!   -> 0AF4011E:1F90      Masq    1      0          0
//! ```
//! `FWM` (firewall-mark) services have no address and are skipped.
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{Entry, Reader, Source, Unread, parse_proto};
use crate::identity::cluster::Proto;

const PROC_IP_VS: &str = "/proc/thread-self/net/ip_vs";

pub struct Ipvs;

impl Reader for Ipvs {
    fn source(&self) -> Source {
        Source::Ipvs
    }

    fn read(&self) -> Result<Vec<Entry>, Unread> {
        match std::fs::read_to_string(PROC_IP_VS) {
            Ok(text) => Ok(entries(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Unread::Absent(
                "no /proc/net/ip_vs: the ip_vs module is not loaded".into(),
            )),
            Err(e) => Err(Unread::Failed(format!("cannot read /proc/net/ip_vs: {e}"))),
        }
    }
}

/// Every (virtual server -> real server) pair.
pub fn entries(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut current: Option<(SocketAddr, Proto)> = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("->") => {
                let (Some((service, proto)), Some(backend)) =
                    (current, words.next().and_then(address))
                else {
                    continue;
                };
                out.push(Entry {
                    service,
                    proto,
                    backend,
                    location: format!("virtual server {} {service}", super::proto_name(proto)),
                    name_hint: None,
                });
            }
            Some(first) => {
                current = parse_proto(first)
                    .zip(words.next().and_then(address))
                    .map(|(proto, service)| (service, proto));
            }
            None => {}
        }
    }
    out
}

/// `0A60000A:0050` or `[fd00::a]:0050`.
fn address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.rsplit_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = if let Some(v6) = ip.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        IpAddr::V6(v6.parse().ok()?)
    } else {
        IpAddr::V4(Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?))
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_servers_map_to_their_real_servers() {
        let text = "IP Virtual Server version 1.2.1 (size=4096)\n\
                    Prot LocalAddress:Port Scheduler Flags\n  \
                    -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n\
                    TCP  0A60000A:0050 rr\n  \
                    -> 0AF4011E:1F90      Masq    1      0          0\n  \
                    -> 0AF4010B:1F90      Masq    1      3          1\n\
                    UDP  [fd00::a]:0035 rr\n  \
                    -> [fd00:10::5]:0035      Masq    1      0          0\n\
                    FWM  00000001 rr\n  \
                    -> 0AF4011E:1F90      Masq    1      0          0\n";
        let shown: Vec<String> = entries(text)
            .iter()
            .map(|e| format!("{} -> {} ({})", e.service, e.backend, e.location))
            .collect();
        assert_eq!(
            shown,
            [
                "10.96.0.10:80 -> 10.244.1.30:8080 (virtual server tcp 10.96.0.10:80)",
                "10.96.0.10:80 -> 10.244.1.11:8080 (virtual server tcp 10.96.0.10:80)",
                "[fd00::a]:53 -> [fd00:10::5]:53 (virtual server udp [fd00::a]:53)",
            ],
            "the firewall-mark service's real server is not one of the previous service's"
        );
    }
}
