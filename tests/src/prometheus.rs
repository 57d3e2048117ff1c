//! A real Prometheus (Debian's `prometheus` package) in a namespace of the test's, scraping the
//! tracers' `--metrics` endpoints there every second, and its HTTP API as the tests read it.
use std::{
    io::{Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::testbed::Netns;

pub const PORT: u16 = 9090;

pub struct Prometheus {
    child: Child,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus in `ns` on 127.0.0.1:9090, scraping `targets` (`host:port` in `ns`).
    pub fn start(ns: &Netns, targets: &[String]) -> Prometheus {
        let version = Command::new("prometheus")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            version.is_ok_and(|s| s.success()),
            "prometheus is not installed: `cargo xtask setup` installs it (the Debian package \
             `prometheus`)"
        );
        let dir = std::env::temp_dir().join(format!(
            "tracer-prometheus-{}-{}",
            std::process::id(),
            ns.name()
        ));
        std::fs::create_dir_all(&dir).expect("prometheus dir");
        let quoted: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: tracer\n    honor_labels: true\n    \
                 static_configs:\n      - targets: [{}]\n",
                quoted.join(", ")
            ),
        )
        .expect("prometheus config");
        let child = ns.spawn(&[
            "prometheus",
            &format!("--config.file={}", config.display()),
            &format!("--storage.tsdb.path={}", dir.join("data").display()),
            &format!("--web.listen-address=127.0.0.1:{PORT}"),
        ]);
        Prometheus { child, dir }
    }

    pub fn url() -> String {
        format!("http://127.0.0.1:{PORT}")
    }

    /// SIGSTOP: its port still accepts connections (the kernel's backlog), nothing answers them.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Gone: its port refuses.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid, not yet reaped.
        unsafe { libc::kill(pid, signal) };
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One HTTP GET of Prometheus's API inside `ns`; the body, or `None` while nothing listens yet.
fn get(ns: &Netns, path: String) -> Option<String> {
    let request = path.clone();
    ns.run_in("tb-http", move || {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, PORT));
        let mut stream = match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(stream) => stream,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(None),
            Err(e) => return Err(format!("connect {addr}: {e}")),
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .map_err(|e| e.to_string())?;
        write!(
            stream,
            "GET {request} HTTP/1.0\r\nHost: 127.0.0.1:{PORT}\r\nAccept: application/json\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|e| e.to_string())?;
        Ok::<Option<String>, String>(Some(
            answer
                .split_once("\r\n\r\n")
                .map(|(_, body)| body.to_string())
                .unwrap_or_default(),
        ))
    })
    .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

pub fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An instant query's result vector, or `None` while Prometheus is not ready. A query Prometheus
/// refuses fails the test with its message.
pub fn query(ns: &Netns, promql: &str) -> Option<Vec<Value>> {
    let body = get(ns, format!("/api/v1/query?query={}", encode(promql)))?;
    let answer: Value = serde_json::from_str(&body).ok()?;
    assert_eq!(answer["status"], "success", "query {promql}: {answer}");
    answer["data"]["result"].as_array().cloned()
}

/// Polls `promql` until `done(result)` or the deadline; returns the last result.
pub fn wait_for(
    ns: &Netns,
    promql: &str,
    within: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let result = query(ns, promql).unwrap_or_default();
        if done(&result) || Instant::now() > deadline {
            return result;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The `node` labels of a result, sorted like node-1 .. node-10, each once.
pub fn nodes_of(result: &[Value]) -> Vec<String> {
    let mut nodes: Vec<String> = result
        .iter()
        .map(|s| s["metric"]["node"].as_str().unwrap_or("").to_string())
        .collect();
    nodes.sort_by_key(|n| n.trim_start_matches("node-").parse::<usize>().unwrap_or(0));
    nodes.dedup();
    nodes
}
