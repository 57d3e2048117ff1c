//! Which hooks each side uses: the cheapest tier the running kernel allows, found by probing
//! before anything is loaded (no side effects: a two-instruction fentry program loaded and closed,
//! the kprobe PMU's presence, tracepoints and functions in the kernel's BTF). The order is by what
//! a tier costs per connect and per packet:
//! - DNS: `fentry` (runs per UDP datagram sent or delivered) > `tracepoint` (per send/receive call
//!   of any socket; Linux 6.3+) > `kprobe` (as fentry, dearer per run) > `cgroup-skb` (every
//!   packet of every socket).
//! - TCP: `fentry` (per connect) > `kprobe` > `tracepoint` (every TCP state change on the node).
//!
//! A tier the kernel then refuses (a program it will not load or attach) is ruled out with the
//! reason and the next one tried (`Ladder::reject`); `--dns-hooks`/`--tcp-hooks` force one, and a
//! forced tier the kernel cannot give is an error.
use std::collections::BTreeMap;

use crate::record::{HookTier, SideTier};

use super::btf::KernelBtf;

/// DNS tiers, best first.
pub const DNS_LADDER: [HookTier; 4] = [
    HookTier::Fentry,
    HookTier::Tracepoint,
    HookTier::Kprobe,
    HookTier::CgroupSkb,
];
/// TCP tiers, best first.
pub const TCP_LADDER: [HookTier; 3] = [HookTier::Fentry, HookTier::Kprobe, HookTier::Tracepoint];

/// Kernel functions the fentry and kprobe tiers hook.
pub const DNS_FUNCTIONS: [&str; 3] = [
    "udp_send_skb",
    "udp_v6_send_skb",
    "__udp_enqueue_schedule_skb",
];
pub const TCP_FUNCTIONS: [&str; 2] = ["tcp_connect", "tcp_init_transfer"];

/// The two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Dns,
    Tcp,
}

impl Side {
    fn option(self) -> &'static str {
        match self {
            Side::Dns => "--dns-hooks",
            Side::Tcp => "--tcp-hooks",
        }
    }

    fn ladder(self) -> &'static [HookTier] {
        match self {
            Side::Dns => &DNS_LADDER,
            Side::Tcp => &TCP_LADDER,
        }
    }
}

/// What the user asked for: a tier per side, or `None` for the best one.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookRequest {
    pub dns: Option<HookTier>,
    pub tcp: Option<HookTier>,
    /// `--no-dns`: no DNS hooks at all.
    pub no_dns: bool,
}

impl HookRequest {
    /// A tier forced on a side it does not exist for (`--tcp-hooks cgroup-skb`) is a usage error,
    /// said before anything is opened.
    pub fn check(&self) -> Result<(), String> {
        for (side, tier) in [(Side::Dns, self.dns), (Side::Tcp, self.tcp)] {
            if let Some(tier) = tier
                && !side.ladder().contains(&tier)
            {
                return Err(format!(
                    "{} {tier}: not a tier of that side (one of {})",
                    side.option(),
                    names(side.ladder())
                ));
            }
        }
        Ok(())
    }
}

fn names(tiers: &[HookTier]) -> String {
    tiers
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the kernel allows, probed once.
pub struct Probes {
    /// `Err(reason)` when the kernel refuses fentry programs.
    pub fentry: Result<(), String>,
    /// `Err(reason)` when there is no kprobe PMU to attach through.
    pub kprobe: Result<(), String>,
    /// `Err(reason)` when the DNS hooks' skb and register offsets are not in the BTF.
    pub hook_offsets: Result<(), String>,
    pub missing_dns_functions: Vec<&'static str>,
    pub missing_tcp_functions: Vec<&'static str>,
    pub sock_length_tracepoints: bool,
    pub state_tracepoint: bool,
    pub error_report_tracepoint: bool,
}

impl Probes {
    /// `fentry` is the outcome of loading a two-instruction fentry program (the caller's).
    pub fn new(
        kernel_btf: &KernelBtf<'_>,
        fentry: Result<(), String>,
        hook_offsets: Result<(), String>,
    ) -> Probes {
        let has = |tp| kernel_btf.first_missing_tracepoint(&[tp]).is_none();
        Probes {
            fentry,
            kprobe: kprobe_pmu(),
            hook_offsets,
            missing_dns_functions: kernel_btf.missing_functions(&DNS_FUNCTIONS),
            missing_tcp_functions: kernel_btf.missing_functions(&TCP_FUNCTIONS),
            sock_length_tracepoints: has("sock_send_length") && has("sock_recv_length"),
            state_tracepoint: has("inet_sock_set_state"),
            error_report_tracepoint: has("inet_sk_error_report"),
        }
    }

    /// Why `tier` cannot serve `side` on this kernel, or `Ok`.
    pub fn allows(&self, side: Side, tier: HookTier) -> Result<(), String> {
        let functions = |missing: &[&str], what| {
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "no {} in the kernel's BTF ({what} cannot attach)",
                    missing.join(", ")
                ))
            }
        };
        let error_report = || {
            if self.error_report_tracepoint {
                Ok(())
            } else {
                Err(
                    "no tracepoint inet_sk_error_report (Linux 5.12+): without the state \
                     tracepoint, a connect's errno is known only from it"
                        .to_string(),
                )
            }
        };
        match (side, tier) {
            (Side::Dns, HookTier::Fentry) => {
                self.fentry.clone()?;
                self.hook_offsets.clone()?;
                functions(&self.missing_dns_functions, "fentry")
            }
            (Side::Dns, HookTier::Tracepoint) => {
                if !self.sock_length_tracepoints {
                    return Err(
                        "no tracepoints sock_send_length and sock_recv_length (Linux 6.3+)".into(),
                    );
                }
                self.hook_offsets.clone()
            }
            (Side::Dns, HookTier::Kprobe) => {
                self.kprobe.clone()?;
                self.hook_offsets.clone()
            }
            (Side::Dns, HookTier::CgroupSkb) => Ok(()),
            (Side::Tcp, HookTier::Fentry) => {
                self.fentry.clone()?;
                functions(&self.missing_tcp_functions, "fentry")?;
                error_report()
            }
            (Side::Tcp, HookTier::Kprobe) => {
                self.kprobe.clone()?;
                error_report()
            }
            (Side::Tcp, HookTier::Tracepoint) => {
                if self.state_tracepoint {
                    Ok(())
                } else {
                    Err("no tracepoint inet_sock_set_state".into())
                }
            }
            (Side::Tcp, HookTier::CgroupSkb) => Err("not a TCP tier".into()),
        }
    }
}

/// kprobes attach through the kprobe PMU (`perf_event_open`); a kernel built without kprobes has
/// none.
fn kprobe_pmu() -> Result<(), String> {
    let pmu = std::path::Path::new("/sys/bus/event_source/devices/kprobe/type");
    if pmu.exists() {
        Ok(())
    } else {
        Err(format!(
            "no kprobe PMU ({} is absent: a kernel without CONFIG_KPROBES)",
            pmu.display()
        ))
    }
}

/// The tier chosen for each side, and the record of what was passed over.
pub struct Ladder {
    request: HookRequest,
    dns: SideTier,
    tcp: SideTier,
}

impl Ladder {
    /// The best allowed tier per side, or an error when a forced one is not allowed or a side has
    /// none (TCP always needs one; DNS is then off, see `choose`).
    pub fn new(request: HookRequest, probes: &Probes) -> Result<Ladder, String> {
        let mut ladder = Ladder {
            request,
            dns: SideTier::default(),
            tcp: SideTier::default(),
        };
        for side in [Side::Dns, Side::Tcp] {
            let mut not_used = BTreeMap::new();
            let mut available = Vec::new();
            for &tier in side.ladder() {
                match probes.allows(side, tier) {
                    Ok(()) => available.push(tier),
                    Err(why) => {
                        not_used.insert(tier, why);
                    }
                }
            }
            let record = ladder.side_mut(side);
            record.available = available;
            record.not_used = not_used;
            ladder.choose(side)?;
        }
        Ok(ladder)
    }

    fn side_mut(&mut self, side: Side) -> &mut SideTier {
        match side {
            Side::Dns => &mut self.dns,
            Side::Tcp => &mut self.tcp,
        }
    }

    fn forced(&self, side: Side) -> Option<HookTier> {
        match side {
            Side::Dns => self.request.dns,
            Side::Tcp => self.request.tcp,
        }
    }

    /// Sets `side`'s tier: the forced one if allowed, else the best one still allowed.
    fn choose(&mut self, side: Side) -> Result<(), String> {
        if side == Side::Dns && self.request.no_dns {
            self.dns.tier = None;
            return Ok(());
        }
        let forced = self.forced(side);
        let record = self.side_mut(side);
        let tier = match forced {
            Some(tier) => {
                if let Some(why) = record.not_used.get(&tier) {
                    return Err(format!("{} {tier}: {why}", side.option()));
                }
                Some(tier)
            }
            None => side
                .ladder()
                .iter()
                .copied()
                .find(|t| !record.not_used.contains_key(t)),
        };
        record.tier = tier;
        match (side, tier) {
            (Side::Tcp, None) => Err(format!(
                "no way to follow TCP connects on this kernel: {}",
                record
                    .not_used
                    .iter()
                    .map(|(t, why)| format!("{t}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            _ => Ok(()),
        }
    }

    /// The tiers to load now.
    pub fn tiers(&self) -> (Option<HookTier>, HookTier) {
        (self.dns.tier, self.tcp.tier.unwrap_or(HookTier::Tracepoint))
    }

    /// `tier` failed to load or attach on `side`: rule it out and choose again. A forced tier
    /// failing is an error; DNS with no tier left is off (said by the caller).
    pub fn reject(&mut self, side: Side, tier: HookTier, why: String) -> Result<(), String> {
        if self.forced(side) == Some(tier) {
            return Err(format!("{} {tier}: {why}", side.option()));
        }
        let record = self.side_mut(side);
        record.available.retain(|t| *t != tier);
        record.not_used.insert(tier, why);
        self.choose(side)
    }

    /// What each side uses, what it could use, and why not the better tiers (the ones below the
    /// tier in use are not worth a reason).
    pub fn report(&self) -> crate::record::HookTiers {
        let side = |side: Side, record: &SideTier| {
            let rank = |t: &HookTier| side.ladder().iter().position(|x| x == t);
            let mut shown = record.clone();
            let chosen = record.tier.and_then(|t| rank(&t));
            shown
                .not_used
                .retain(|t, _| chosen.is_none_or(|c| rank(t).is_some_and(|r| r < c)));
            shown
        };
        crate::record::HookTiers {
            dns: side(Side::Dns, &self.dns),
            tcp: side(Side::Tcp, &self.tcp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes(fentry: bool, kprobe: bool, sock_length: bool) -> Probes {
        let no = |what: &str| Err(format!("no {what}"));
        Probes {
            fentry: if fentry { Ok(()) } else { no("fentry") },
            kprobe: if kprobe { Ok(()) } else { no("kprobe") },
            hook_offsets: Ok(()),
            missing_dns_functions: vec![],
            missing_tcp_functions: vec![],
            sock_length_tracepoints: sock_length,
            state_tracepoint: true,
            error_report_tracepoint: true,
        }
    }

    #[test]
    fn the_best_allowed_tier_is_chosen_per_side_and_the_better_ones_say_why_not() {
        // This development VM: no fentry, no kprobes, tracepoints.
        let ladder = Ladder::new(HookRequest::default(), &probes(false, false, true)).expect("ok");
        let report = ladder.report();
        assert_eq!(report.dns.tier, Some(HookTier::Tracepoint));
        assert_eq!(
            report.dns.available,
            vec![HookTier::Tracepoint, HookTier::CgroupSkb]
        );
        assert_eq!(
            report.dns.not_used.keys().copied().collect::<Vec<_>>(),
            vec![HookTier::Fentry],
            "kprobe ranks below the tier in use: not listed"
        );
        assert_eq!(report.tcp.tier, Some(HookTier::Tracepoint));
        assert_eq!(
            report.tcp.not_used.keys().copied().collect::<Vec<_>>(),
            vec![HookTier::Fentry, HookTier::Kprobe]
        );
        // A node kernel with everything.
        let ladder = Ladder::new(HookRequest::default(), &probes(true, true, true)).expect("ok");
        assert_eq!(ladder.tiers(), (Some(HookTier::Fentry), HookTier::Fentry));
        // arm64 6.1: kprobes, no fentry, no sock_*_length tracepoints.
        let ladder = Ladder::new(HookRequest::default(), &probes(false, true, false)).expect("ok");
        assert_eq!(ladder.tiers(), (Some(HookTier::Kprobe), HookTier::Kprobe));
    }

    #[test]
    fn a_refused_tier_falls_to_the_next_unless_it_was_forced() {
        let mut ladder =
            Ladder::new(HookRequest::default(), &probes(true, true, true)).expect("ok");
        ladder
            .reject(Side::Dns, HookTier::Fentry, "verifier said no".into())
            .expect("falls back");
        assert_eq!(ladder.tiers().0, Some(HookTier::Tracepoint));
        assert_eq!(
            ladder
                .report()
                .dns
                .not_used
                .get(&HookTier::Fentry)
                .map(String::as_str),
            Some("verifier said no")
        );
        let forced = HookRequest {
            dns: Some(HookTier::Fentry),
            ..HookRequest::default()
        };
        let mut ladder = Ladder::new(forced, &probes(true, true, true)).expect("ok");
        let err = ladder
            .reject(Side::Dns, HookTier::Fentry, "verifier said no".into())
            .expect_err("forced");
        assert_eq!(err, "--dns-hooks fentry: verifier said no");
    }

    #[test]
    fn a_forced_tier_the_kernel_lacks_is_an_error_that_says_why() {
        let forced = HookRequest {
            tcp: Some(HookTier::Fentry),
            ..HookRequest::default()
        };
        let err = Ladder::new(forced, &probes(false, false, true))
            .err()
            .expect("refused");
        assert_eq!(err, "--tcp-hooks fentry: no fentry");
        let wrong_side = HookRequest {
            tcp: Some(HookTier::CgroupSkb),
            ..HookRequest::default()
        };
        assert!(wrong_side.check().is_err());
    }

    #[test]
    fn dns_off_has_no_tier_and_dns_with_no_tier_left_is_off() {
        let request = HookRequest {
            no_dns: true,
            ..HookRequest::default()
        };
        let ladder = Ladder::new(request, &probes(true, true, true)).expect("ok");
        assert_eq!(ladder.tiers().0, None);
        let mut ladder =
            Ladder::new(HookRequest::default(), &probes(false, false, false)).expect("ok");
        assert_eq!(ladder.tiers().0, Some(HookTier::CgroupSkb));
        ladder
            .reject(Side::Dns, HookTier::CgroupSkb, "refused".into())
            .expect("DNS off, not an error");
        assert_eq!(ladder.tiers().0, None);
    }
}
