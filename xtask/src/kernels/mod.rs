//! `cargo xtask kernels`: the kernel matrix. The tracer's real-kernel scenarios (integration tests
//! of the `tests` crate) run on the host kernel and inside qemu VMs booting Debian's own kernels of
//! the series nodes run, amd64 and arm64. Each amd64 VM shares the host's root read-only (9p, under
//! a tmpfs overlay), so it runs the very test binaries and tracer the host built, with the host's
//! ip, nft, dnsmasq, nginx. An arm64 VM gets the same from an arm64 root assembled from Debian's
//! arm64 packages, with the aarch64 tracer and test binaries (`arm64.rs`, `userland.rs`).
//! Prints kernel × scenario (pass/fail) and kernel × capability (what the tracer reported); a
//! kernel that could not be tested (the archive unreachable, the package not cached) is named and
//! fails the run.
mod arm64;
mod debian;
mod initramfs;
mod report;
mod userland;
mod vm;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

pub use debian::Kernel;

use crate::{arch::Arch, dist, run::workspace_root};

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

/// One scenario: an integration test (binary, exact name), what it shows, and the side whose
/// hook tiers it exercises (run again with each other tier of that side the kernel offers).
pub struct Scenario {
    pub binary: &'static str,
    pub test: &'static str,
    pub label: &'static str,
    pub side: Option<Side>,
}

/// The two sides of hook tiers (`tracer --tcp-hooks`, `--dns-hooks`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Tcp,
    Dns,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Tcp => "tcp",
            Side::Dns => "dns",
        }
    }
}

/// The scenarios every kernel must pass with the same verdicts.
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        binary: "tcp_verdicts",
        test: "refused_by_rst_when_nothing_listens",
        label: "refused by RST",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "refused_by_icmp_when_a_reject_rule_answers",
        label: "refused by ICMP (nft reject)",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "unanswered_live_then_abandoned_when_the_client_gives_up",
        label: "unanswered, then abandoned",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "timed_out_when_the_kernel_gives_up",
        label: "timed out",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "tcp_verdicts",
        test: "unreachable_when_no_host_has_the_address",
        label: "unreachable (host)",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "service_backends",
        test: "verdicts_name_the_dropping_backend_and_shares_are_near_half",
        label: "Service: live + dead backend",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "service_backends",
        test: "cilium_socket_lb_before_the_hook_names_the_service_from_its_maps",
        label: "Cilium socket LB: TCP named",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "service_backends",
        test: "cilium_socket_lb_names_an_ipv6_service_from_its_maps",
        label: "Cilium socket LB: IPv6 named",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "dns",
        test: "dns_answered_queries_are_counted_in_the_kernel_not_sent_one_by_one",
        label: "DNS answered (healthy)",
        side: Some(Side::Dns),
    },
    Scenario {
        binary: "dns",
        test: "dns_server_that_drops_queries_gives_unanswered_with_name_and_type",
        label: "DNS unanswered",
        side: Some(Side::Dns),
    },
    Scenario {
        binary: "dns",
        test: "dns_a_and_aaaa_sent_together_by_sendmmsg_are_both_followed",
        label: "DNS A+AAAA in one sendmmsg",
        side: Some(Side::Dns),
    },
    Scenario {
        binary: "dns",
        test: "dns_server_that_rejects_with_icmp_gives_refused",
        label: "DNS refused (ICMP)",
        side: Some(Side::Dns),
    },
    Scenario {
        binary: "dns",
        test: "dns_nginx_resolver_socket_glued_to_a_dead_server_is_a_stuck_socket",
        label: "DNS stuck socket (nginx)",
        side: Some(Side::Dns),
    },
    Scenario {
        binary: "dns",
        test: "dns_to_a_service_rewritten_by_cilium_socket_lb_names_the_service_from_its_maps",
        label: "Cilium socket LB: DNS named",
        side: Some(Side::Dns),
    },
    Scenario {
        binary: "reply_lost",
        test: "replies_cut_on_the_ingress_node_are_lost_and_name_the_snat_address_and_the_client",
        label: "replies lost (return path cut)",
        side: Some(Side::Tcp),
    },
    Scenario {
        binary: "errors_and_lifecycle",
        test: "the_kernel_object_lists_every_capability_in_the_first_and_final_stats",
        label: "kernel capabilities reported",
        side: None,
    },
];

#[derive(clap::Args, Default)]
pub struct KernelsArgs {
    /// Only these kernels: `host`, or a series (`5.10`, `6.1`, `6.12`). Repeatable; all by default.
    #[arg(long = "kernel", value_name = "KERNEL")]
    pub kernels: Vec<String>,
    /// The kernels' architecture: `amd64` (the host and x86-64 VMs) or `arm64` (emulated VMs).
    #[arg(long, value_enum, default_value_t = Arch::Amd64)]
    pub arch: Arch,
    /// Where the hook tiers other than a kernel's default are forced and their side's scenarios
    /// run again: on `every` VM kernel, or only on the `newest` amd64 one (what `cargo xtask
    /// test` runs: it offers every tier).
    #[arg(long, value_enum, default_value_t = TierScope::Every)]
    pub forced_tiers: TierScope,
}

/// Which kernels run the forced hook tiers (`KernelsArgs::forced_tiers`).
#[derive(clap::ValueEnum, Clone, Copy, Default, PartialEq, Eq, Debug)]
pub enum TierScope {
    #[default]
    Every,
    Newest,
}

/// What to run the scenarios on.
pub enum Target {
    Host,
    Vm(&'static debian::Series, Arch),
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Host => "host",
            Target::Vm(s, _) => s.name,
        }
    }

    /// The architecture of the tracer and test binaries it runs.
    pub fn arch(&self) -> Arch {
        match self {
            Target::Host => Arch::host(),
            Target::Vm(_, arch) => *arch,
        }
    }

    /// Whether the other hook tiers are forced here too. The host runs the tiers its own kernel
    /// chooses (this development kernel refuses fentry and has no kprobes).
    fn forces_tiers(&self, scope: TierScope) -> bool {
        match self {
            Target::Host => false,
            Target::Vm(series, arch) => {
                scope == TierScope::Every
                    || (*arch == Arch::host()
                        && SERIES.last().is_some_and(|s| s.name == series.name))
            }
        }
    }

    /// `6.12 arm64`, for a kernel that has no release to show.
    fn label(&self) -> String {
        match self {
            Target::Host => "host".into(),
            Target::Vm(s, arch) => format!("{} {}", s.name, arch.debian_name()),
        }
    }
}

/// The newest series on `arch`: what `cargo xtask test` runs on an architecture it emulates.
pub fn newest(arch: Arch) -> Target {
    Target::Vm(SERIES.last().unwrap_or(&SERIES[0]), arch)
}

/// The tracer and the test binaries (by name) of one architecture, copied for the VMs.
type Copied = (PathBuf, Vec<(String, PathBuf)>);

/// The matrix made ready to run: the test binaries of each architecture built and copied, each
/// kernel and userland downloaded. Preparing builds and downloads but runs no VM, so it can go on
/// beside other work.
pub struct Prepared {
    targets: Vec<Target>,
    scope: TierScope,
    root: PathBuf,
    work: PathBuf,
    built: Vec<(Arch, Copied)>,
    sources: Sources,
    kernels: Vec<Option<Result<Kernel, String>>>,
    already_run: Vec<String>,
}

/// Builds what the scenarios need (the test binaries of each architecture; `tracers` holds the
/// static tracer of each) and downloads every kernel, one after the other. The VMs that force
/// other hook tiers skip those `already_run` names (`tcp:tracepoint`): the same run tested them
/// elsewhere.
pub fn prepare(
    targets: Vec<Target>,
    tracers: &[(Arch, PathBuf)],
    scope: TierScope,
    already_run: Vec<String>,
) -> anyhow::Result<Prepared> {
    let root = workspace_root()?;
    let work = root.join("target/kernel-matrix");
    let mut arches: Vec<Arch> = targets.iter().map(Target::arch).collect();
    arches.dedup();
    // The VMs read the binaries as they are now: copies, so a rebuild meanwhile changes nothing.
    let mut built = Vec::new();
    for arch in arches {
        let tracer = tracers
            .iter()
            .find(|(a, _)| *a == arch)
            .map(|(_, t)| t)
            .with_context(|| format!("no {} tracer was built", arch.debian_name()))?;
        built.push((arch, binaries_of(arch, tracer, &work)?));
    }
    let mut sources = Sources {
        suites: targets
            .iter()
            .filter_map(|t| match t {
                Target::Host => None,
                Target::Vm(series, arch) => Some((*arch, series.suite)),
            })
            .collect(),
        ..Sources::default()
    };
    let kernels = sources.all_kernels(&targets)?;
    Ok(Prepared {
        targets,
        scope,
        root,
        work,
        built,
        sources,
        kernels,
        already_run,
    })
}

/// Builds what the scenarios need, runs them on every target, prints the tables, and fails if
/// any scenario failed anywhere or a kernel could not be tested.
pub fn run(
    targets: Vec<Target>,
    tracers: &[(Arch, PathBuf)],
    scope: TierScope,
) -> anyhow::Result<()> {
    prepare(targets, tracers, scope, Vec::new())?
        .run()?
        .report()
}

/// What the scenarios gave on each kernel of one or more `Prepared`, and the architectures whose
/// archive could not be reached.
pub struct Ran {
    outcomes: Vec<report::Outcome>,
    offline: Vec<Arch>,
}

impl Ran {
    /// `self`'s kernels, then `other`'s, in one table.
    pub fn and(mut self, other: Ran) -> Ran {
        self.outcomes.extend(other.outcomes);
        self.offline.extend(other.offline);
        self
    }

    /// Prints the tables; fails if any scenario failed anywhere or a kernel could not be tested.
    pub fn report(self) -> anyhow::Result<()> {
        println!("{}", report::tables(&self.outcomes));
        verdict(&self.outcomes, &self.offline)
            .map_err(|why| anyhow::anyhow!("kernel matrix: {why}"))
    }
}

impl Prepared {
    /// Runs the scenarios: the host first and alone, then the VMs side by side.
    pub fn run(self) -> anyhow::Result<Ran> {
        let Prepared {
            targets,
            scope,
            root,
            work,
            built,
            sources,
            kernels,
            already_run,
        } = self;
        let binaries_for = |arch: Arch| {
            built
                .iter()
                .find(|(a, _)| *a == arch)
                .map(|(_, b)| b)
                .context("binaries of the architecture")
        };
        let sources = &sources;
        let run_one = |target: &Target, kernel: Option<&Result<Kernel, String>>| {
            let started = std::time::Instant::now();
            let (tracer, binaries) = binaries_for(target.arch())?;
            let forcing = if target.forces_tiers(scope) {
                vm::Forcing::OtherTiers {
                    already_run: &already_run,
                }
            } else {
                vm::Forcing::No
            };
            let outcome = match (target, kernel) {
                (Target::Vm(_, arch), Some(Ok(kernel))) => {
                    let mut outcome = if *arch == Arch::host() {
                        vm::run_in_vm(kernel, &root, tracer, binaries, &work, forcing)?
                    } else {
                        match sources.userland_of(*arch) {
                            Some(Ok(userland)) => arm64::run_in_vm(
                                kernel, userland, tracer, binaries, &work, forcing,
                            )?,
                            Some(Err(why)) => {
                                report::Outcome::untested(kernel.release.clone(), why)
                            }
                            None => {
                                report::Outcome::untested(kernel.release.clone(), "no userland")
                            }
                        }
                    };
                    if let Some(note) = &kernel.note {
                        outcome.note = Some(match outcome.note {
                            Some(other) => format!("{other}; {note}"),
                            None => note.clone(),
                        });
                    }
                    outcome
                }
                (Target::Vm(..), Some(Err(why))) => report::Outcome::untested(target.label(), why),
                _ => vm::run_on_host(&root, tracer, binaries, &work)?,
            };
            let (passed, ran) = outcome.tally();
            eprintln!(
                "xtask: kernel {} ({}): {passed} of {ran} scenario runs passed in {:.0} s; log {}",
                target.label(),
                outcome.release,
                started.elapsed().as_secs_f64(),
                outcome.log.display()
            );
            anyhow::Ok(outcome)
        };
        let mut outcomes: Vec<Option<report::Outcome>> = targets.iter().map(|_| None).collect();
        // The host first and alone: its scenarios time SYN retransmits on this machine's CPUs.
        for (i, target) in targets.iter().enumerate() {
            if matches!(target, Target::Host) {
                outcomes[i] = Some(run_one(target, None)?);
            }
        }
        let vms: Vec<_> = targets
            .iter()
            .zip(&kernels)
            .enumerate()
            .filter(|(_, (t, _))| !matches!(t, Target::Host))
            .collect();
        let done = side_by_side(vms, vm_jobs(), |(target, kernel)| {
            run_one(target, kernel.as_ref())
        });
        for (i, outcome) in done {
            outcomes[i] = Some(outcome?);
        }
        let outcomes: Vec<report::Outcome> = outcomes.into_iter().flatten().collect();
        let offline: Vec<Arch> = sources
            .online
            .iter()
            .filter(|(_, online)| !online)
            .map(|(arch, _)| *arch)
            .collect();
        Ok(Ran { outcomes, offline })
    }
}

/// Runs `job` on each `(index, item)` with at most `jobs` at once; the results by index.
fn side_by_side<T: Send, R: Send>(
    items: Vec<(usize, T)>,
    jobs: usize,
    job: impl Fn(T) -> R + Sync,
) -> Vec<(usize, R)> {
    let queue = std::sync::Mutex::new(items);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                while let Some((i, item)) = queue.lock().ok().and_then(|mut q| q.pop()) {
                    let result = job(item);
                    if let Ok(mut done) = done.lock() {
                        done.push((i, result));
                    }
                }
            });
        }
    });
    done.into_inner().unwrap_or_default()
}

/// VMs run at once: their scenarios mostly wait (for SYN retransmits, DNS timeouts, a tracer to
/// start), so three share two cores well. `KM_JOBS` overrides.
fn vm_jobs() -> usize {
    std::env::var("KM_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .filter(|j| *j > 0)
        .unwrap_or(3)
}

/// Whether the matrix passed: every kernel tested, every scenario passed, and each kernel the
/// newest of its series (which only the archive can say: with it unreachable, the cached kernels
/// were tested but the run fails).
fn verdict(outcomes: &[report::Outcome], offline: &[Arch]) -> Result<(), String> {
    let mut problems = Vec::new();
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| o.tested && !o.all_passed())
        .map(|o| format!("{} ({})", o.release, o.log.display()))
        .collect();
    if !failed.is_empty() {
        problems.push(format!("scenarios failed on {}", failed.join(", ")));
    }
    let untested: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.tested)
        .map(|o| o.release.clone())
        .collect();
    if !untested.is_empty() {
        problems.push(format!("could not test {}", untested.join(", ")));
    }
    for arch in offline {
        problems.push(format!(
            "the Debian archive could not be reached for {}, so whether a newer patch release of \
             each series exists is unknown (only cached kernels could be tested)",
            arch.debian_name()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Where kernels and userlands come from: the Debian archive (each architecture's apt state
/// refreshed once per run) or, when it cannot be reached, the cache. What cannot be had is an
/// `Err` with the reason, so the run goes on to the other kernels and then names it.
#[derive(Default)]
struct Sources {
    /// The suites each architecture's targets need (the userland's, bookworm, is among them).
    suites: Vec<(Arch, &'static str)>,
    online: Vec<(Arch, bool)>,
    userlands: Vec<(Arch, Result<userland::Userland, String>)>,
}

impl Sources {
    fn online(&mut self, arch: Arch) -> anyhow::Result<bool> {
        if let Some((_, online)) = self.online.iter().find(|(a, _)| *a == arch) {
            return Ok(*online);
        }
        let mut suites: Vec<&str> = self
            .suites
            .iter()
            .filter(|(a, _)| *a == arch)
            .map(|(_, suite)| *suite)
            .chain((arch != Arch::host()).then_some(userland::SUITE))
            .collect();
        suites.sort_unstable();
        suites.dedup();
        let online = debian::refresh(arch, &suites)?;
        self.online.push((arch, online));
        Ok(online)
    }

    fn kernel(
        &mut self,
        series: &debian::Series,
        arch: Arch,
    ) -> anyhow::Result<Result<debian::Kernel, String>> {
        let online = self.online(arch)?;
        Ok(debian::kernel(series, arch, online).map_err(|why| format!("{why:#}")))
    }

    /// Each target's kernel (`None` for the host), and each other architecture's userland,
    /// downloaded one after the other before any VM runs.
    fn all_kernels(
        &mut self,
        targets: &[Target],
    ) -> anyhow::Result<Vec<Option<Result<Kernel, String>>>> {
        let mut kernels = Vec::new();
        for target in targets {
            kernels.push(match target {
                Target::Host => None,
                Target::Vm(series, arch) => {
                    let kernel = self.kernel(series, *arch)?;
                    if kernel.is_ok() && *arch != Arch::host() {
                        let _ = self.userland(*arch)?;
                    }
                    Some(kernel)
                }
            });
        }
        Ok(kernels)
    }

    /// The guest root of `arch` assembled by `userland`, if it was.
    fn userland_of(&self, arch: Arch) -> Option<&Result<userland::Userland, String>> {
        self.userlands
            .iter()
            .find(|(a, _)| *a == arch)
            .map(|(_, u)| u)
    }

    /// The guest root of an architecture other than the host's.
    fn userland(&mut self, arch: Arch) -> anyhow::Result<&Result<userland::Userland, String>> {
        if !self.userlands.iter().any(|(a, _)| *a == arch) {
            let online = self.online(arch)?;
            let userland = userland::assemble(arch, online)
                .map_err(|why| format!("no {} userland: {why:#}", arch.debian_name()));
            self.userlands.push((arch, userland));
        }
        self.userland_of(arch)
            .context("the userland was just assembled")
    }
}

/// `cargo xtask vm`: boots series `name` (amd64) and runs `script` in it; the console goes to
/// stdout.
pub fn boot_script(name: &str, script: &Path) -> anyhow::Result<()> {
    crate::setup::debian_packages(&["qemu-system-x86", "busybox-static", "xz-utils"])?;
    let body =
        std::fs::read_to_string(script).with_context(|| format!("reading {}", script.display()))?;
    let kernel = debian_kernel(name)?;
    let work = workspace_root()?.join("target/kernel-matrix");
    std::fs::create_dir_all(&work)?;
    let log = work.join(format!("vm-{}.log", kernel.release));
    boot(
        &kernel,
        &body,
        &work,
        &log,
        std::time::Duration::from_mins(20),
    )?;
    print!("{}", std::fs::read_to_string(&log)?);
    Ok(())
}

/// Boots `kernel` (amd64) with the host's root shared read-only and runs `body` once a node's
/// mounts are up; the console text, also kept in `log`.
pub fn boot(
    kernel: &Kernel,
    body: &str,
    work: &Path,
    log: &Path,
    timeout: std::time::Duration,
) -> anyhow::Result<vm::Booted> {
    vm::boot_x86(kernel, body, work, log, timeout)
}

/// The newest amd64 Debian kernel of series `name` (`6.12`, ...), downloaded once and then
/// cached, for booting a VM of one's own (the archive unreachable: the newest cached one).
pub fn debian_kernel(name: &str) -> anyhow::Result<Kernel> {
    let series = SERIES.iter().find(|s| s.name == name).with_context(|| {
        format!(
            "unknown kernel series {name}: one of {}",
            SERIES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )
    })?;
    let online = debian::refresh(Arch::Amd64, &[series.suite])?;
    debian::kernel(series, Arch::Amd64, online)
}

/// The tracer and the test binaries of `arch`, copied under `work`.
fn binaries_of(arch: Arch, tracer: &Path, work: &Path) -> anyhow::Result<Copied> {
    let bin = if arch == Arch::host() {
        work.join("bin")
    } else {
        work.join(format!("bin-{}", arch.debian_name()))
    };
    let _ = std::fs::remove_dir_all(&bin);
    std::fs::create_dir_all(&bin)?;
    let mut binaries = Vec::new();
    for (name, exe) in test_binaries(arch)? {
        let copy = bin.join(&name);
        std::fs::copy(&exe, &copy).with_context(|| format!("copying {}", exe.display()))?;
        binaries.push((name, copy));
    }
    let tracer_copy = bin.join("tracer");
    std::fs::copy(tracer, &tracer_copy).with_context(|| format!("copying {}", tracer.display()))?;
    Ok((tracer_copy, binaries))
}

/// The kernels `args` choose: on amd64 the host and the VMs, on arm64 the VMs.
pub fn chosen_targets(args: &KernelsArgs) -> anyhow::Result<Vec<Target>> {
    let arch = args.arch;
    let all = || {
        let host = (arch == Arch::host()).then_some(Target::Host);
        host.into_iter()
            .chain(SERIES.iter().map(|s| Target::Vm(s, arch)))
            .collect::<Vec<_>>()
    };
    if args.kernels.is_empty() {
        return Ok(all());
    }
    args.kernels
        .iter()
        .map(|name| {
            all()
                .into_iter()
                .find(|t| t.name() == name)
                .with_context(|| {
                    format!(
                        "unknown {} kernel {name}: choose {}{}",
                        arch.debian_name(),
                        if arch == Arch::host() {
                            "host or one of "
                        } else {
                            "one of "
                        },
                        SERIES.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
                    )
                })
        })
        .collect()
}

/// The integration test binaries of `arch` by target name (`tcp_verdicts` -> its executable),
/// built now: for the host, as `cargo test` builds them; for another architecture, static (musl)
/// with the cross toolchain `dist` uses.
fn test_binaries(arch: Arch) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut cmd = if arch == Arch::host() {
        crate::shell::cargo()
    } else {
        dist::cargo_for(arch.musl_target())?.0
    };
    cmd.args([
        "test",
        "--package",
        "tests",
        "--no-run",
        "--message-format=json",
    ]);
    if arch != Arch::host() {
        cmd.args(["--target", arch.musl_target()]);
    }
    let out = cmd
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{Arch, SCENARIOS, report::Outcome, verdict};

    fn passed(release: &str) -> Outcome {
        let mut o = Outcome::untested(release.into(), "");
        o.tested = true;
        o.finished = true;
        o.note = None;
        o.passed = vec![true; SCENARIOS.len()];
        o.log = PathBuf::from(format!("{release}.log"));
        o
    }

    #[test]
    fn every_kernel_tested_and_passed_is_a_pass() {
        assert_eq!(
            verdict(
                &[passed("6.1.0-57-amd64"), passed("6.12.117+deb12-arm64")],
                &[]
            ),
            Ok(())
        );
    }

    #[test]
    fn a_kernel_that_could_not_be_had_is_named_and_fails_the_run() {
        let err = verdict(
            &[
                passed("6.1.0-57-amd64"),
                Outcome::untested("5.10 arm64".into(), "no cached kernel"),
            ],
            &[],
        )
        .expect_err("a kernel was not tested");
        assert_eq!(err, "could not test 5.10 arm64");
    }

    #[test]
    fn an_unreachable_archive_fails_the_run_even_when_the_cache_had_every_kernel() {
        let err = verdict(&[passed("6.1.0-57-amd64")], &[Arch::Amd64]).expect_err("offline");
        assert!(err.contains("could not be reached for amd64"), "{err}");
    }

    #[test]
    fn a_failed_scenario_names_the_kernel_and_its_log() {
        let mut failed = passed("6.12.117+deb12-arm64");
        failed.passed[0] = false;
        let err = verdict(&[failed], &[]).expect_err("a scenario failed");
        assert_eq!(
            err,
            "scenarios failed on 6.12.117+deb12-arm64 (6.12.117+deb12-arm64.log)"
        );
    }
}
