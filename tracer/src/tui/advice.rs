//! "What to check next" for each verdict: the first command a person on call would run. Kept apart
//! from the verdict sentences (`verdict.rs`), which say what happened; these say where to look.
use std::net::SocketAddr;

use crate::verdict::{Cause, Errno, VerdictKind};

/// One line of advice for a verdict and its cause.
pub fn next_check(verdict: VerdictKind, cause: Option<Cause>, backend: SocketAddr) -> String {
    let ip = backend.ip();
    match (verdict, cause) {
        (VerdictKind::Unanswered | VerdictKind::Abandoned | VerdictKind::TimedOut, _) => format!(
            "Is a pod still at {ip}? `kubectl get pods -A -o wide | grep {ip}`; if not, look for a \
             stale endpoint or conntrack entry (`conntrack -L -d {ip}`) and NetworkPolicy drops."
        ),
        (VerdictKind::Refused, Some(Cause::Icmp)) => format!(
            "Does the Service have ready endpoints? `kubectl get endpointslices -A | grep {ip}` and \
             the readiness probes; kube-proxy REJECTs a Service with none (`iptables-save | grep REJECT`)."
        ),
        (VerdictKind::Refused, _) => format!(
            "Does anything listen on {backend}? `kubectl get pods -A -o wide | grep {ip}`, then \
             `ss -ltn` in that pod; compare the Service targetPort with the containerPort."
        ),
        (VerdictKind::Unreachable, Some(Cause::Network)) => format!(
            "Is there a route? `ip route get {ip}` on this node, and the CNI's routes to that pod CIDR."
        ),
        (VerdictKind::Unreachable, _) => format!(
            "Is {ip} still assigned? `kubectl get pods -A -o wide | grep {ip}`, `ip neigh | grep {ip}` \
             and the route to its node."
        ),
        (VerdictKind::Failed, Some(Cause::Errno(Errno(libc::EADDRNOTAVAIL)))) => {
            "Count TIME_WAIT sockets (`ss -tan state time-wait | wc -l`) \
             and `sysctl net.ipv4.ip_local_port_range`; reuse connections."
                .into()
        }
        (VerdictKind::Failed, _) => {
            "A local policy often says no (EACCES/EPERM from a cgroup BPF program, seccomp \
             or an LSM): check the errno against the node's policies."
                .into()
        }
        (VerdictKind::Slow, _) => format!(
            "Look for drops on the path (`nstat -az | grep -i drop`) and the accept queue of the \
             listener at {backend} (`ss -ltn`: Recv-Q against Send-Q)."
        ),
        (VerdictKind::Established, _) => "Nothing to check: answered on the first SYN.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_names_the_backend_address() {
        let addr = |s: &str| s.parse::<SocketAddr>().expect("test address");
        let line = next_check(VerdictKind::Abandoned, None, addr("10.244.1.30:8080"));
        assert!(line.contains("grep 10.244.1.30`"), "{line}");
        let line = next_check(
            VerdictKind::Refused,
            Some(Cause::Icmp),
            addr("[fd00::1]:80"),
        );
        assert!(line.contains("grep fd00::1`"), "{line}");
    }
}
