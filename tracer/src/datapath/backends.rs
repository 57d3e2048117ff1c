//! The backends the node's Service rules allow for each Service address, as last read: the backend
//! of a connect that conntrack cannot name. A SYN DNAT'd to an address on the node's bridge that
//! nobody answers waits for ARP before its conntrack entry is confirmed (the bridge confirms it on
//! the way out), so `conntrack -L` has no entry while the SYNs are retried and after the
//! `EHOSTUNREACH`; when the rules send that Service address to one backend only, that backend is
//! where the SYNs went.
use std::{
    collections::{BTreeSet, HashMap},
    net::SocketAddr,
};

use super::{Entry, Snapshot, Source};
use crate::identity::cluster::Proto;

#[derive(Debug, Default)]
pub struct RuleBackends {
    /// Each source's entries at its last successful read: a failed read keeps the previous ones.
    by_source: HashMap<Source, Vec<Entry>>,
}

impl RuleBackends {
    pub fn update(&mut self, snapshot: &Snapshot) {
        for (source, read) in &snapshot.reads {
            if let Ok(entries) = read {
                self.by_source.insert(*source, entries.clone());
            }
        }
    }

    /// The backend, when every source that holds `service` sends it to that one backend only.
    pub fn only_backend(&self, service: SocketAddr, proto: Proto) -> Option<SocketAddr> {
        let backends: BTreeSet<SocketAddr> = self
            .by_source
            .values()
            .flatten()
            .filter(|e| e.service == service && e.proto == proto)
            .map(|e| e.backend)
            .collect();
        let mut only = backends.into_iter();
        match (only.next(), only.next()) {
            (Some(backend), None) => Some(backend),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Unread;

    fn entry(service: &str, backend: &str) -> Entry {
        Entry {
            service: service.parse().expect("addr"),
            proto: Proto::Tcp,
            backend: backend.parse().expect("addr"),
            location: "KUBE-SEP-X".into(),
            name_hint: None,
        }
    }

    #[test]
    fn one_backend_is_named_two_are_not_and_a_failed_read_keeps_the_last() {
        let mut rules = RuleBackends::default();
        rules.update(&Snapshot {
            reads: vec![
                (
                    Source::Iptables,
                    Ok(vec![
                        entry("10.96.0.10:80", "10.244.1.30:8080"),
                        entry("10.96.0.11:80", "10.244.1.31:8080"),
                        entry("10.96.0.11:80", "10.244.1.32:8080"),
                    ]),
                ),
                (Source::Ipvs, Err(Unread::Absent("no ip_vs".into()))),
            ],
        });
        let svc = |s: &str| s.parse::<SocketAddr>().expect("addr");
        assert_eq!(
            rules.only_backend(svc("10.96.0.10:80"), Proto::Tcp),
            Some(svc("10.244.1.30:8080"))
        );
        assert_eq!(rules.only_backend(svc("10.96.0.11:80"), Proto::Tcp), None);
        assert_eq!(rules.only_backend(svc("10.96.0.10:80"), Proto::Udp), None);
        assert_eq!(rules.only_backend(svc("10.96.0.12:80"), Proto::Tcp), None);
        rules.update(&Snapshot {
            reads: vec![(Source::Iptables, Err(Unread::Failed("timeout".into())))],
        });
        assert_eq!(
            rules.only_backend(svc("10.96.0.10:80"), Proto::Tcp),
            Some(svc("10.244.1.30:8080")),
            "a failed read says nothing new"
        );
    }
}
