//! `cargo xtask kernels`: the kernel matrix. The tracer's real-kernel scenarios (integration tests
//! of the `tests` crate) run on the host kernel and inside qemu VMs booting Debian's own kernels of
//! the series nodes run. Each VM shares the host's root read-only (9p, under a tmpfs overlay), so it
//! runs the very test binaries and tracer the host built, with the host's ip, nft, dnsmasq, nginx.
//! Prints kernel × scenario (pass/fail) and kernel × capability (what the tracer reported).
mod debian;
mod initramfs;
mod report;
mod vm;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

pub use debian::Kernel;
pub use vm::boot;

use crate::{run::workspace_root, shell::cargo};

/// The series production nodes run.
const SERIES: &[debian::Series] = &[
    debian::Series {
        name: "5.10",
        suite: "bullseye",
    },
    debian::Series {
        name: "6.1",
        suite: "bookworm",
    },
    debian::Series {
        name: "6.12",
        suite: "bookworm",
    },
];

/// One scenario: an integration test (binary, exact name) and what it shows.
pub struct Scenario {
    pub binary: &'static str,
    pub test: &'static str,
    pub label: &'static str,
}

/// The scenarios every kernel must pass with the same verdicts.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        binary: "tcp_verdicts",
        test: "refused_by_rst_when_nothing_listens",
        label: "refused by RST",
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "refused_by_icmp_when_a_reject_rule_answers",
        label: "refused by ICMP (nft reject)",
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "unanswered_live_then_abandoned_when_the_client_gives_up",
        label: "unanswered, then abandoned",
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "timed_out_when_the_kernel_gives_up",
        label: "timed out",
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "unreachable_when_no_host_has_the_address",
        label: "unreachable (host)",
    },
    Scenario {
        binary: "service_backends",
        test: "verdicts_name_the_dropping_backend_and_shares_are_near_half",
        label: "Service: live + dead backend",
    },
    Scenario {
        binary: "service_backends",
        test: "cilium_socket_lb_before_the_hook_names_the_service_from_its_maps",
        label: "Cilium socket LB: TCP named",
    },
    Scenario {
        binary: "service_backends",
        test: "cilium_socket_lb_names_an_ipv6_service_from_its_maps",
        label: "Cilium socket LB: IPv6 named",
    },
    Scenario {
        binary: "dns",
        test: "dns_answered_queries_are_counted_in_the_kernel_not_sent_one_by_one",
        label: "DNS answered (healthy)",
    },
    Scenario {
        binary: "dns",
        test: "dns_server_that_drops_queries_gives_unanswered_with_name_and_type",
        label: "DNS unanswered",
    },
    Scenario {
        binary: "dns",
        test: "dns_server_that_rejects_with_icmp_gives_refused",
        label: "DNS refused (ICMP)",
    },
    Scenario {
        binary: "dns",
        test: "dns_nginx_resolver_socket_glued_to_a_dead_server_is_a_stuck_socket",
        label: "DNS stuck socket (nginx)",
    },
    Scenario {
        binary: "dns",
        test: "dns_to_a_service_rewritten_by_cilium_socket_lb_names_the_service_from_its_maps",
        label: "Cilium socket LB: DNS named",
    },
    Scenario {
        binary: "reply_lost",
        test: "replies_cut_on_the_ingress_node_are_lost_and_name_the_snat_address_and_the_client",
        label: "replies lost (return path cut)",
    },
    Scenario {
        binary: "errors_and_lifecycle",
        test: "the_kernel_object_lists_every_capability_in_the_first_and_final_stats",
        label: "kernel capabilities reported",
    },
];

#[derive(clap::Args, Default)]
pub struct KernelsArgs {
    /// Only these kernels: `host`, or a series (`5.10`, `6.1`, `6.12`). Repeatable; all by default.
    #[arg(long = "kernel", value_name = "KERNEL")]
    pub kernels: Vec<String>,
}

/// What to run the scenarios on.
enum Target {
    Host,
    Vm(&'static debian::Series),
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Host => "host",
            Target::Vm(s) => s.name,
        }
    }
}

/// Builds what the scenarios need (the release tracer, the test binaries), runs them on every
/// chosen kernel, prints the tables, and fails if any scenario failed anywhere.
pub fn run(args: &KernelsArgs, tracer: &Path) -> anyhow::Result<()> {
    let targets = chosen_targets(&args.kernels)?;
    let root = workspace_root()?;
    let work = root.join("target/kernel-matrix");
    // The VMs read the host's files as they are now: copies, so a rebuild meanwhile changes nothing.
    let bin = work.join("bin");
    let _ = std::fs::remove_dir_all(&bin);
    std::fs::create_dir_all(&bin)?;
    let mut binaries = Vec::new();
    for (name, exe) in test_binaries()? {
        let copy = bin.join(&name);
        std::fs::copy(&exe, &copy).with_context(|| format!("copying {}", exe.display()))?;
        binaries.push((name, copy));
    }
    let tracer_copy = bin.join("tracer");
    std::fs::copy(tracer, &tracer_copy).with_context(|| format!("copying {}", tracer.display()))?;
    let tracer = tracer_copy.as_path();

    let needs_vm = targets.iter().any(|t| matches!(t, Target::Vm(_)));
    let online = if needs_vm {
        let suites: Vec<&str> = SERIES.iter().map(|s| s.suite).collect();
        debian::refresh(&suites)?
    } else {
        false
    };
    let mut outcomes = Vec::new();
    for target in &targets {
        let started = std::time::Instant::now();
        let outcome = match target {
            Target::Host => vm::run_on_host(&root, tracer, &binaries, &work)?,
            Target::Vm(series) => {
                let kernel = debian::kernel(series, online)?;
                vm::run_in_vm(&kernel, &root, tracer, &binaries, &work)?
            }
        };
        eprintln!(
            "xtask: kernel {} ({}): {} of {} scenarios passed in {:.0} s; log {}",
            target.name(),
            outcome.release,
            outcome.passed(),
            SCENARIOS.len(),
            started.elapsed().as_secs_f64(),
            outcome.log.display()
        );
        outcomes.push(outcome);
    }
    println!("{}", report::tables(&outcomes));
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| o.passed() < SCENARIOS.len())
        .map(|o| format!("{} ({})", o.release, o.log.display()))
        .collect();
    if !failed.is_empty() {
        bail!("kernel matrix: scenarios failed on {}", failed.join(", "));
    }
    Ok(())
}

/// The newest Debian kernel of series `name` (`6.12`, ...), downloaded once and then cached, for
/// booting a VM of one's own (the archive unreachable: the newest cached one).
pub fn debian_kernel(name: &str) -> anyhow::Result<Kernel> {
    let series = SERIES.iter().find(|s| s.name == name).with_context(|| {
        format!(
            "unknown kernel series {name}: one of {}",
            SERIES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )
    })?;
    let online = debian::refresh(&[series.suite])?;
    debian::kernel(series, online)
}

fn chosen_targets(names: &[String]) -> anyhow::Result<Vec<Target>> {
    let all = || {
        std::iter::once(Target::Host)
            .chain(SERIES.iter().map(Target::Vm))
            .collect::<Vec<_>>()
    };
    if names.is_empty() {
        return Ok(all());
    }
    names
        .iter()
        .map(|name| {
            all()
                .into_iter()
                .find(|t| t.name() == name)
                .with_context(|| {
                    format!(
                        "unknown kernel {name}: choose host or one of {}",
                        SERIES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
                    )
                })
        })
        .collect()
}

/// The integration test binaries by target name (`tcp_verdicts` -> its executable), built now.
fn test_binaries() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let out = cargo()
        .args([
            "test",
            "--package",
            "tests",
            "--no-run",
            "--message-format=json",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("building the integration tests")?;
    if !out.status.success() {
        bail!("building the integration tests failed");
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let (Some(name), Some(exe)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) && SCENARIOS.iter().any(|s| s.binary == name)
        {
            binaries.push((name.to_string(), PathBuf::from(exe)));
        }
    }
    for scenario in SCENARIOS {
        if !binaries.iter().any(|(name, _)| name == scenario.binary) {
            bail!("no test binary {} was built", scenario.binary);
        }
    }
    Ok(binaries)
}
