//! What runs beside the load in each round: nothing, this tracer, this tracer with every program
//! returning at once (what the hooks alone cost), `conntrack -E` (in the node namespace), or a
//! bpftrace printer on the tracer's own tracepoints, or this tracer with `--metrics` on a loopback
//! port and a scraper reading it every second. Each runs as a child process
//! writing to a file; `Running` stops it (SIGTERM/SIGINT, then SIGKILL after a bound) on Drop.
use std::{
    fs::File,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{interrupted, testbed::Testbed, tiers::Setup};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    None,
    Tracer,
    /// `tracer trace --hooks-only`: the same programs attached, each returning at once.
    HooksOnly,
    Conntrack,
    Bpftrace,
    /// `tracer trace --metrics 127.0.0.1:PORT`, scraped every second while the load runs.
    Metrics,
}

impl Peer {
    pub const ALL: [Peer; 6] = [
        Peer::None,
        Peer::Tracer,
        Peer::HooksOnly,
        Peer::Conntrack,
        Peer::Bpftrace,
        Peer::Metrics,
    ];

    /// The name `--peers` takes.
    pub fn short(self) -> &'static str {
        match self {
            Peer::None => "none",
            Peer::Tracer => "tracer",
            Peer::HooksOnly => "hooks",
            Peer::Conntrack => "conntrack",
            Peer::Bpftrace => "bpftrace",
            Peer::Metrics => "metrics",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Peer::None => "no tracer",
            Peer::Tracer => "this tracer",
            Peer::HooksOnly => "its hooks, empty",
            Peer::Conntrack => "conntrack -E",
            Peer::Bpftrace => "bpftrace printer",
            Peer::Metrics => "this tracer, --metrics scraped every second",
        }
    }
}

/// The bpftrace peer: every state change and every retransmit, one line each (what a person would
/// write to watch connects with bpftrace).
const BPFTRACE_SCRIPT: &str = r#"
tracepoint:sock:inet_sock_set_state /args->protocol == 6/ {
  printf("%d %s state %d->%d %d\n", pid, comm, args->oldstate, args->newstate, args->dport);
}
tracepoint:tcp:tcp_retransmit_skb {
  printf("%d %s retransmit state %d %d\n", pid, comm, args->state, args->dport);
}
"#;

/// A peer process; stopped and reaped on Drop.
pub struct Running {
    child: Child,
    /// Signal that makes it exit cleanly (writing its final records).
    stop_signal: i32,
    pub output: PathBuf,
    stopped: bool,
    /// The `--metrics` scraper of the metrics peer.
    scraper: Option<Scraper>,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Stops the process cleanly and waits (bounded); SIGKILL if it does not exit in time.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        if let Some(scraper) = self.scraper.take() {
            scraper.stop()?;
        }
        let pid = i32::try_from(self.child.id())?;
        // SAFETY: kill(2) on our own child, not yet reaped, so the pid is still ours.
        unsafe { libc::kill(pid, self.stop_signal) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            // Peers exit in their own way on a signal; what they wrote is checked by the caller.
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        bail!(
            "peer writing {} did not stop within 15 s; killed",
            self.output.display()
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.stopped
            && let Err(e) = self.stop()
        {
            eprintln!("bench: {e:#}");
        }
    }
}

/// Starts `peer` writing to a file in `dir`; returns when it is attached. `None` for no peer.
pub fn start(
    peer: Peer,
    tracer: &Path,
    tracer_args: &[String],
    bed: &Testbed,
    dir: &Path,
    round: usize,
) -> anyhow::Result<Option<Running>> {
    let output = dir.join(format!(
        "round{round}-{}.out",
        peer.name().replace(' ', "_")
    ));
    match peer {
        Peer::None => Ok(None),
        Peer::Tracer | Peer::HooksOnly => {
            let mut args = tracer_args.to_vec();
            if peer == Peer::HooksOnly {
                args.push("--hooks-only".into());
            }
            start_tracer_with(tracer, &args, output).map(Some)
        }
        Peer::Metrics => {
            let port = free_loopback_port()?;
            let mut cmd = Command::new(tracer);
            cmd.args(["trace", "--format", "json", "--output"])
                .arg(&output)
                .args(tracer_args)
                .arg(format!("--metrics=127.0.0.1:{port}"));
            let mut running = start_tracer(cmd, output)?;
            running.scraper = Some(Scraper::start(port));
            Ok(Some(running))
        }
        Peer::Conntrack => {
            let mut cmd = bed.node.command("conntrack");
            cmd.args(["-E", "-p", "tcp"])
                .stdout(File::create(&output)?)
                .stderr(Stdio::null());
            let child = cmd.spawn().context("starting conntrack -E")?;
            let mut running = Running {
                child,
                stop_signal: libc::SIGTERM,
                output,
                stopped: false,
                scraper: None,
            };
            // conntrack subscribes to its netlink groups at once; give it a moment, and make sure
            // it did not exit (missing module, no permission).
            std::thread::sleep(Duration::from_millis(300));
            if let Some(status) = running.child.try_wait()? {
                running.stopped = true;
                bail!("conntrack -E exited at start: {status}");
            }
            Ok(Some(running))
        }
        Peer::Bpftrace => {
            let mut cmd = Command::new("bpftrace");
            cmd.arg("-o")
                .arg(&output)
                .args(["-e", BPFTRACE_SCRIPT])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let child = cmd.spawn().context("starting bpftrace")?;
            let mut running = Running {
                child,
                stop_signal: libc::SIGINT,
                output,
                stopped: false,
                scraper: None,
            };
            // bpftrace writes "Attaching N probes..." to its output once the probes are attached.
            wait_for(&mut running, Duration::from_secs(30), |text| {
                text.contains("Attaching")
            })?;
            // The message comes just before the attach itself.
            std::thread::sleep(Duration::from_millis(300));
            Ok(Some(running))
        }
    }
}

/// How long a tracer may take to load and attach its programs: a minute here, more in a VM under
/// TCG, where the verifier runs some fifty times slower.
pub static ATTACH_LIMIT_SECS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(60);

/// Starts `tracer trace` with `args`, writing JSON lines to `output`; returns once it is attached.
pub fn start_tracer_with(
    tracer: &Path,
    args: &[String],
    output: PathBuf,
) -> anyhow::Result<Running> {
    let mut cmd = Command::new(tracer);
    cmd.args(["trace", "--format", "json", "--output"])
        .arg(&output)
        .args(args);
    start_tracer(cmd, output)
}

/// Starts `tracer trace` as `setup` says, writing JSON lines to `output`; returns once attached.
pub fn start_tracer_setup(tracer: &Path, setup: Setup, output: PathBuf) -> anyhow::Result<Running> {
    let mut cmd = Command::new(tracer);
    cmd.args(["trace", "--format", "json", "--output"])
        .arg(&output)
        .args(setup.args())
        .envs(setup.envs());
    start_tracer(cmd, output)
}

/// Starts the tracer (`cmd`); returns once it says it is attached. Its stderr is drained by a thread.
pub fn start_tracer(mut cmd: Command, output: PathBuf) -> anyhow::Result<Running> {
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the tracer")?;
    let stderr = child.stderr.take().context("tracer stderr")?;
    let (tx, rx) = mpsc::channel();
    // Its last lines, for the error when it does not start.
    let last = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let last_lines = std::sync::Arc::clone(&last);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("attached") {
                let _ = tx.send(());
            } else if !line.contains("stopped") {
                eprintln!("bench: tracer: {line}");
                if let Ok(mut last) = last_lines.lock() {
                    if last.len() == 3 {
                        last.remove(0);
                    }
                    last.push(line);
                }
            }
        }
    });
    let said = move || {
        // Give the reader a moment for the last lines of an exited tracer.
        std::thread::sleep(Duration::from_millis(100));
        last.lock().map(|l| l.join(" / ")).unwrap_or_default()
    };
    let mut running = Running {
        child,
        stop_signal: libc::SIGTERM,
        output,
        stopped: false,
        scraper: None,
    };
    let limit = ATTACH_LIMIT_SECS.load(std::sync::atomic::Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(limit);
    // Until it says it is attached, exits, or the limit passes.
    loop {
        if rx.recv_timeout(Duration::from_millis(200)).is_ok() {
            return Ok(running);
        }
        if let Some(status) = running.child.try_wait()? {
            running.stopped = true;
            bail!(
                "the tracer exited before it attached ({status}): {}",
                said()
            );
        }
        if Instant::now() > deadline || interrupted() {
            break;
        }
    }
    let _ = running.child.kill();
    let _ = running.child.wait();
    running.stopped = true;
    bail!("the tracer did not attach within {limit} s: {}", said())
}

fn wait_for(
    running: &mut Running,
    limit: Duration,
    ready: impl Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !interrupted() {
        if ready(&std::fs::read_to_string(&running.output).unwrap_or_default()) {
            return Ok(());
        }
        if let Some(status) = running.child.try_wait()? {
            running.stopped = true;
            bail!("{} exited at start: {status}", running.output.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!(
        "peer writing {} was not ready within {limit:?}",
        running.output.display()
    )
}

/// A loopback port free now, for the metrics peer's endpoint (it binds it a moment later).
fn free_loopback_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .context("finding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// GETs the tracer's `--metrics` endpoint every second, as a Prometheus would (faster than the
/// usual 15 to 60 s), until stopped; every scrape must answer 200.
struct Scraper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<anyhow::Result<u64>>,
}

impl Scraper {
    fn start(port: u16) -> Scraper {
        use std::io::{Read as _, Write as _};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let addr = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
            let mut scrapes = 0u64;
            // Bounded: at most one scrape a second for an hour.
            for _ in 0..3600 {
                if flag.load(std::sync::atomic::Ordering::Relaxed) || interrupted() {
                    break;
                }
                let mut stream =
                    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                        .with_context(|| format!("scraping {addr}"))?;
                stream.set_read_timeout(Some(Duration::from_secs(10)))?;
                stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")?;
                let mut answer = Vec::new();
                stream.read_to_end(&mut answer)?;
                if !answer.starts_with(b"HTTP/1.0 200") && !answer.starts_with(b"HTTP/1.1 200") {
                    bail!("a scrape of {addr} did not answer 200");
                }
                scrapes += 1;
                let next = Instant::now() + Duration::from_secs(1);
                while Instant::now() < next && !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            Ok(scrapes)
        });
        Scraper { stop, thread }
    }

    fn stop(self) -> anyhow::Result<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the metrics scraper panicked"))?
    }
}
