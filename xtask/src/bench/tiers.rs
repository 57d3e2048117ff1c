//! Which hooks a tracer round uses: the tier of each side, as the tracer chose it (`auto`) or forced
//! (`--dns-hooks TIER`, `--tcp-hooks TIER`), and what the tracer says the kernel allows (the
//! `hooks` object of its stats records' `kernel` object). A tracer without those flags has one
//! design, today's: DNS on the per-packet `cgroup_skb` pair, TCP on `inet_sock_set_state`.
use std::{fmt, path::Path, process::Command, str::FromStr};

use anyhow::{Context as _, bail};
use serde_json::Value;

/// The DNS side's hooks, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DnsTier {
    Fentry,
    Tracepoint,
    Kprobe,
    /// Today's per-packet `cgroup_skb` egress/ingress pair.
    CgroupSkb,
}

/// The TCP side's hooks, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TcpTier {
    Fentry,
    Kprobe,
    /// Today's `inet_sock_set_state`: every state change of every socket.
    Tracepoint,
}

impl DnsTier {
    pub fn name(self) -> &'static str {
        match self {
            DnsTier::Fentry => "fentry",
            DnsTier::Tracepoint => "tracepoint",
            DnsTier::Kprobe => "kprobe",
            DnsTier::CgroupSkb => "cgroup-skb",
        }
    }

    /// Whether the tier's programs run for every packet of every socket (the last tier only).
    pub fn per_packet(self) -> bool {
        self == DnsTier::CgroupSkb
    }
}

impl TcpTier {
    pub fn name(self) -> &'static str {
        match self {
            TcpTier::Fentry => "fentry",
            TcpTier::Kprobe => "kprobe",
            TcpTier::Tracepoint => "tracepoint",
        }
    }
}

impl FromStr for DnsTier {
    type Err = String;
    fn from_str(s: &str) -> Result<DnsTier, String> {
        [
            DnsTier::Fentry,
            DnsTier::Tracepoint,
            DnsTier::Kprobe,
            DnsTier::CgroupSkb,
        ]
        .into_iter()
        .find(|t| t.name() == s)
        .ok_or_else(|| format!("unknown DNS hook tier {s:?}"))
    }
}

impl FromStr for TcpTier {
    type Err = String;
    fn from_str(s: &str) -> Result<TcpTier, String> {
        [TcpTier::Fentry, TcpTier::Kprobe, TcpTier::Tracepoint]
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown TCP hook tier {s:?}"))
    }
}

/// The tier of each side in one tracer run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiers {
    pub dns: DnsTier,
    pub tcp: TcpTier,
}

impl Tiers {
    /// What a tracer without tier flags runs.
    pub const TODAYS_DESIGN: Tiers = Tiers {
        dns: DnsTier::CgroupSkb,
        tcp: TcpTier::Tracepoint,
    };
}

impl fmt::Display for Tiers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DNS {}, TCP {}", self.dns.name(), self.tcp.name())
    }
}

/// What the tracer reported about its hooks: the tier each side got and every tier the kernel
/// allows, best first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookReport {
    pub chosen: Tiers,
    pub dns_available: Vec<DnsTier>,
    pub tcp_available: Vec<TcpTier>,
    /// False for a tracer that reports no `hooks` object (today's design, no tier flags).
    pub reported: bool,
    /// Better tiers the tracer did not use here, each with its reason ("DNS fentry: ...").
    pub not_used: Vec<String>,
}

impl HookReport {
    pub fn todays_design() -> HookReport {
        HookReport {
            chosen: Tiers::TODAYS_DESIGN,
            dns_available: vec![DnsTier::CgroupSkb],
            tcp_available: vec![TcpTier::Tracepoint],
            reported: false,
            not_used: Vec::new(),
        }
    }

    /// From a stats record's `kernel` object: its `hooks`, or today's design when it has none.
    pub fn from_kernel_object(kernel: &Value) -> anyhow::Result<HookReport> {
        let Some(hooks) = kernel.get("hooks") else {
            return Ok(HookReport::todays_design());
        };
        let (dns, dns_available) = side::<DnsTier>(hooks, "dns")?;
        let (tcp, tcp_available) = side::<TcpTier>(hooks, "tcp")?;
        let not_used = [("DNS", "dns"), ("TCP", "tcp")]
            .into_iter()
            .flat_map(|(label, side)| {
                hooks[side]["not_used"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(move |(tier, why)| {
                        format!("{label} {tier}: {}", why.as_str().unwrap_or_default())
                    })
            })
            .collect();
        Ok(HookReport {
            chosen: Tiers { dns, tcp },
            dns_available,
            tcp_available,
            reported: true,
            not_used,
        })
    }

    /// The first stats record's `kernel` object of a tracer's JSON-lines output.
    pub fn from_output(text: &str) -> anyhow::Result<HookReport> {
        let kernel = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| {
                (v.get("kind").and_then(Value::as_str) == Some("stats"))
                    .then(|| v.get("kernel").cloned())
                    .flatten()
            })
            .context("the tracer wrote no stats record with a kernel object")?;
        HookReport::from_kernel_object(&kernel)
    }
}

/// One side of `kernel.hooks`: its tier and the tiers available.
fn side<T: FromStr<Err = String>>(hooks: &Value, name: &str) -> anyhow::Result<(T, Vec<T>)> {
    let side = hooks
        .get(name)
        .with_context(|| format!("kernel.hooks has no {name:?}"))?;
    let tier = side
        .get("tier")
        .and_then(Value::as_str)
        .with_context(|| format!("kernel.hooks.{name} has no tier"))?
        .parse()
        .map_err(anyhow::Error::msg)?;
    let available = side
        .get("available")
        .and_then(Value::as_array)
        .with_context(|| format!("kernel.hooks.{name} has no available list"))?
        .iter()
        .map(|v| {
            v.as_str()
                .context("a tier name that is not a string")?
                .parse()
                .map_err(anyhow::Error::msg)
        })
        .collect::<anyhow::Result<Vec<T>>>()?;
    Ok((tier, available))
}

/// How a round runs the tracer: each side at the tracer's own choice or forced, and whether its
/// programs return at once (`--hooks-only`: the cost of being attached, with no work), and
/// whether the TCP tracepoint tier's `inet_sock_set_state` is left unattached (what that one
/// program costs: the question of deciding "answered" lazily on a kernel without fentry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub dns: Option<DnsTier>,
    pub tcp: Option<TcpTier>,
    pub hooks_only: bool,
    pub unattached_set_state: bool,
}

/// The tracer's benchmark-only switch (read by its loader) that leaves `inet_sock_set_state` out.
pub const UNATTACHED_SET_STATE_ENV: &str = "TRACER_BENCH_UNATTACHED_SET_STATE";

impl Setup {
    pub const AUTO: Setup = Setup {
        dns: None,
        tcp: None,
        hooks_only: false,
        unattached_set_state: false,
    };

    /// The tracer's own choice with `inet_sock_set_state` left unattached.
    pub const AUTO_WITHOUT_SET_STATE: Setup = Setup {
        unattached_set_state: true,
        ..Setup::AUTO
    };

    pub fn empty(self) -> Setup {
        Setup {
            hooks_only: true,
            ..self
        }
    }

    /// The tracer's arguments for this setup (after `trace`).
    pub fn args(self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(t) = self.dns {
            args.extend(["--dns-hooks".to_string(), t.name().to_string()]);
        }
        if let Some(t) = self.tcp {
            args.extend(["--tcp-hooks".to_string(), t.name().to_string()]);
        }
        if self.hooks_only {
            args.push("--hooks-only".into());
        }
        args
    }

    /// The tracer's environment for this setup.
    pub fn envs(self) -> Vec<(&'static str, &'static str)> {
        if self.unattached_set_state {
            vec![(UNATTACHED_SET_STATE_ENV, "1")]
        } else {
            Vec::new()
        }
    }

    /// The tiers this setup gets, given what the tracer chooses by itself.
    pub fn tiers(self, auto: Tiers) -> Tiers {
        Tiers {
            dns: self.dns.unwrap_or(auto.dns),
            tcp: self.tcp.unwrap_or(auto.tcp),
        }
    }

    /// A short label: "auto (DNS tracepoint, TCP tracepoint)", "DNS cgroup-skb forced".
    pub fn label(self, auto: Tiers) -> String {
        let mut forced = Vec::new();
        if let Some(t) = self.dns {
            forced.push(format!("DNS {}", t.name()));
        }
        if let Some(t) = self.tcp {
            forced.push(format!("TCP {}", t.name()));
        }
        let mut label = if forced.is_empty() {
            format!("auto ({auto})")
        } else {
            format!("{} forced", forced.join(", "))
        };
        if self.unattached_set_state {
            label.push_str(", inet_sock_set_state unattached");
        }
        if self.hooks_only {
            label.push_str(", empty");
        }
        label
    }
}

/// What the tracer binary offers: whether it takes the tier flags, and its choice on this kernel.
#[derive(Debug, Clone)]
pub struct Offer {
    pub flags: bool,
    pub report: HookReport,
}

impl Offer {
    /// The setups a round can run, the tracer's own choice first: each other tier of a side the
    /// kernel allows, forced, with the other side at the tracer's choice.
    pub fn setups(&self) -> Vec<Setup> {
        let mut setups = vec![Setup::AUTO];
        if !self.flags {
            return setups;
        }
        for &dns in &self.report.dns_available {
            if dns != self.report.chosen.dns {
                setups.push(Setup {
                    dns: Some(dns),
                    ..Setup::AUTO
                });
            }
        }
        for &tcp in &self.report.tcp_available {
            if tcp != self.report.chosen.tcp {
                setups.push(Setup {
                    tcp: Some(tcp),
                    ..Setup::AUTO
                });
            }
        }
        setups
    }

    /// Today's design as a setup: DNS `cgroup-skb` forced, or the tracer's own choice when that is
    /// it already (a tracer without tier flags has nothing else).
    pub fn reference(&self) -> Setup {
        if self.report.chosen.dns == DnsTier::CgroupSkb || !self.flags {
            Setup::AUTO
        } else {
            Setup {
                dns: Some(DnsTier::CgroupSkb),
                ..Setup::AUTO
            }
        }
    }

    /// The setups that differ in their DNS tier: what the per-packet figures compare.
    pub fn dns_setups(&self) -> Vec<Setup> {
        self.setups()
            .into_iter()
            .filter(|s| s.tcp.is_none())
            .collect()
    }
}

/// What the tracer offers here, from one short start of it (its first stats record's `kernel`).
pub fn probe(tracer: &Path, dir: &Path, flags: bool) -> anyhow::Result<Offer> {
    let output = dir.join("probe.jsonl");
    let mut running = super::peers::start_tracer_with(tracer, &[], output.clone())?;
    running.stop()?;
    let text = std::fs::read_to_string(&output)
        .with_context(|| format!("reading {}", output.display()))?;
    let _ = std::fs::remove_file(&output);
    Ok(Offer {
        flags,
        report: HookReport::from_output(&text)?,
    })
}

/// Whether `tracer trace` takes `--dns-hooks` and `--tcp-hooks`.
pub fn takes_tier_flags(tracer: &Path) -> anyhow::Result<bool> {
    let out = Command::new(tracer)
        .args(["trace", "--help"])
        .output()
        .with_context(|| format!("running {} trace --help", tracer.display()))?;
    if !out.status.success() {
        bail!("{} trace --help failed: {}", tracer.display(), out.status);
    }
    let help = String::from_utf8_lossy(&out.stdout);
    Ok(help.contains("--dns-hooks") && help.contains("--tcp-hooks"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_object_without_hooks_is_todays_design() {
        let kernel = serde_json::json!({"release": "6.18", "capabilities": {}});
        let report = HookReport::from_kernel_object(&kernel).expect("parses");
        assert_eq!(report, HookReport::todays_design());
    }

    #[test]
    fn hooks_give_the_chosen_tiers_and_the_forced_setups() {
        let kernel = serde_json::json!({"hooks": {
            "dns": {"tier": "tracepoint", "available": ["tracepoint", "cgroup-skb"],
                    "not_used": {"fentry": "EPERM at load"}},
            "tcp": {"tier": "tracepoint", "available": ["tracepoint"]}}});
        let report = HookReport::from_kernel_object(&kernel).expect("parses");
        assert_eq!(report.chosen.dns, DnsTier::Tracepoint);
        assert_eq!(report.not_used, ["DNS fentry: EPERM at load"]);
        let offer = Offer {
            flags: true,
            report,
        };
        let setups = offer.setups();
        assert_eq!(setups.len(), 2);
        assert_eq!(setups[1].args(), ["--dns-hooks", "cgroup-skb"]);
        assert_eq!(offer.reference(), setups[1]);
        assert_eq!(
            setups[1].empty().label(offer.report.chosen),
            "DNS cgroup-skb forced, empty"
        );
    }

    #[test]
    fn without_set_state_is_the_own_choice_with_the_loaders_switch() {
        let setup = Setup::AUTO_WITHOUT_SET_STATE;
        assert!(setup.args().is_empty());
        assert_eq!(setup.envs(), [(UNATTACHED_SET_STATE_ENV, "1")]);
        assert!(Setup::AUTO.envs().is_empty());
        let auto = Tiers {
            dns: DnsTier::Tracepoint,
            tcp: TcpTier::Tracepoint,
        };
        assert_eq!(
            setup.empty().label(auto),
            "auto (DNS tracepoint, TCP tracepoint), inet_sock_set_state unattached, empty"
        );
    }

    #[test]
    fn an_unknown_tier_is_an_error_not_a_guess() {
        let kernel = serde_json::json!({"hooks": {
            "dns": {"tier": "xdp", "available": ["xdp"]},
            "tcp": {"tier": "tracepoint", "available": ["tracepoint"]}}});
        assert!(HookReport::from_kernel_object(&kernel).is_err());
    }
}
