//! What the tracer can do on the running kernel. A missing kernel feature costs one capability,
//! never the run: each is `full`, `degraded` (with what is missing and what it costs) or `off`. The
//! list goes into the first and final `stats` records, and each degradation is said once on stderr.
use std::collections::BTreeMap;

use crate::record::{Capability, HookTiers, KernelInfo};

/// Capability names, as they appear in `stats.kernel.capabilities`.
pub const CGROUP_V2: &str = "cgroup_v2";
pub const CONNECT_ERRORS: &str = "connect_errors";
pub const DNS: &str = "dns";
pub const DNS_REFUSED: &str = "dns_refused";
pub const DIALLED_BEFORE_SOCKET_LB: &str = "dialled_before_socket_lb";
pub const SKIPPED_RUNS_COUNTED: &str = "skipped_runs_counted";
pub const DNS_UNREAD_REPLIES: &str = "dns_unread_replies";

/// Filled in while the kernel side loads.
#[derive(Clone)]
pub struct Capabilities {
    release: String,
    states: BTreeMap<String, Capability>,
    hooks: HookTiers,
}

impl Default for Capabilities {
    fn default() -> Capabilities {
        Capabilities::new()
    }
}

impl Capabilities {
    pub fn new() -> Capabilities {
        Capabilities {
            release: kernel_release(),
            states: BTreeMap::new(),
            hooks: HookTiers::default(),
        }
    }

    /// The hook tier each side runs on.
    pub fn set_hooks(&mut self, hooks: HookTiers) {
        self.hooks = hooks;
    }

    /// Lines for stderr: each side's tier (`tracer: hooks: tcp=fentry dns=fentry`), then why not
    /// a better one, a line each.
    pub fn hooks_lines(&self) -> Vec<String> {
        let sides = [("tcp", &self.hooks.tcp), ("dns", &self.hooks.dns)];
        let mut lines = vec![format!(
            "tracer: hooks: {}",
            sides
                .iter()
                .map(|(name, s)| format!("{name}={}", s.tier.map_or("off", |t| t.name())))
                .collect::<Vec<_>>()
                .join(" ")
        )];
        for (name, side) in sides {
            for (tier, why) in &side.not_used {
                lines.push(format!("tracer: hooks: {name} not on {tier}: {why}"));
            }
        }
        lines
    }

    pub fn full(&mut self, name: &str) {
        self.states.insert(name.into(), Capability::Full);
    }

    pub fn degraded(&mut self, name: &str, reason: impl Into<String>) {
        self.states.insert(
            name.into(),
            Capability::Degraded {
                reason: reason.into(),
            },
        );
    }

    pub fn off(&mut self, name: &str, reason: impl Into<String>) {
        self.states.insert(
            name.into(),
            Capability::Off {
                reason: reason.into(),
            },
        );
    }

    pub fn is_full(&self, name: &str) -> bool {
        matches!(self.states.get(name), Some(Capability::Full))
    }

    /// One sentence per capability that is not full, for stderr. `--no-dns` is the user's choice,
    /// not the kernel's: said by the "attached" line instead.
    pub fn warnings(&self) -> Vec<String> {
        self.states
            .iter()
            .filter_map(|(name, c)| match c {
                Capability::Degraded { reason } => Some(format!(
                    "tracer: degraded on kernel {}: {name}: {reason}",
                    self.release
                )),
                Capability::Off { reason } if !reason.starts_with("--no-dns") => Some(format!(
                    "tracer: off on kernel {}: {name}: {reason}",
                    self.release
                )),
                Capability::Full | Capability::Off { .. } => None,
            })
            .collect()
    }

    pub fn info(&self) -> KernelInfo {
        KernelInfo {
            release: self.release.clone(),
            capabilities: self.states.clone(),
            hooks: self.hooks.clone(),
        }
    }
}

/// `uname -r`.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_name_each_capability_that_is_not_full_once() {
        let mut c = Capabilities::new();
        c.full(CONNECT_ERRORS);
        c.degraded(
            DNS_REFUSED,
            "no tracepoint X: refused queries read as unanswered",
        );
        c.off(DNS, "--no-dns");
        let warnings = c.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("dns_refused: no tracepoint X"),
            "{warnings:?}"
        );
        let info = c.info();
        assert_eq!(info.degraded(), vec![DNS, DNS_REFUSED]);
        let json = serde_json::to_string(&info.capabilities).expect("serialize");
        assert_eq!(
            json,
            r#"{"connect_errors":{"state":"full"},"dns":{"state":"off","reason":"--no-dns"},"dns_refused":{"state":"degraded","reason":"no tracepoint X: refused queries read as unanswered"}}"#
        );
    }
}
