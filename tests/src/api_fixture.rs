//! A FIXTURE, not a Kubernetes API server: a scripted HTTP/1.1 server on 127.0.0.1 (std
//! `TcpListener`, one thread per connection) that speaks just enough of the API's JSON for the
//! tracer's list+watch client: `GET <collection>?limit=..` answers a `List` with
//! `metadata.resourceVersion`; `GET <collection>?watch=true&resourceVersion=..` answers a chunked
//! stream of watch events (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`), or an HTTP status
//! (`410 Gone`).
//!
//! The one API fixture of the workspace: the root tests here serve a kubectl-format snapshot with
//! it ([`ApiFixture::serve`]), and the tracer's own watch tests (`tracer/tests/cluster_watch.rs`,
//! which include this file) script the protocol reply by reply ([`ApiFixture::start`]).
//!
//! Replies are scripted per collection path, in order; when a script runs out, lists answer with the
//! snapshot's items of that collection's kind (none for [`ApiFixture::start`]; `resourceVersion` "1")
//! and watches stay open, sending nothing, until [`ApiFixture::stop`], which also stops accepting
//! connections (the API "goes away").
use std::{
    collections::{HashMap, VecDeque},
    io::{BufRead as _, BufReader, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use serde_json::{Value, json};

enum Reply {
    List {
        resource_version: String,
        items: Vec<Value>,
    },
    /// Events, then end the response (`hold: false`) or keep it open until stop.
    Watch {
        events: Vec<Value>,
        hold: bool,
    },
    Gone,
}

#[derive(Default)]
struct Script {
    /// What lists answer once their script has run out.
    snapshot: Vec<Value>,
    lists: HashMap<String, VecDeque<Reply>>,
    watches: HashMap<String, VecDeque<Reply>>,
    log: HashMap<String, Vec<String>>,
}

pub struct ApiFixture {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ApiFixture {
    /// An API with nothing in it until replies are scripted.
    #[must_use]
    pub fn start() -> ApiFixture {
        ApiFixture::serve(&json!({"items": []}))
    }

    /// Lists the items of `snapshot` (a `v1/List` as `kubectl get ... -o json` writes it) by kind;
    /// watches stay open and quiet.
    #[must_use]
    pub fn serve(snapshot: &Value) -> ApiFixture {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fixture API server");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let script = Arc::new(Mutex::new(Script {
            snapshot: snapshot["items"].as_array().cloned().unwrap_or_default(),
            ..Script::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&script), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (s, st) = (Arc::clone(&s), Arc::clone(&st));
                        std::thread::spawn(move || serve(conn, &s, &st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        ApiFixture {
            addr,
            script,
            stop,
            thread: Some(thread),
        }
    }

    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig file whose current context is this server.
    #[must_use]
    pub fn kubeconfig(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fx\n  cluster:\n    server: {}\n\
                 users:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: fx\n    user: u\n\
                 current-context: c\n",
                self.url()
            ),
        )
        .expect("write kubeconfig");
        path
    }

    fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().expect("fixture script")
    }

    /// The next list of `path` answers these items at `resource_version`.
    pub fn list(&self, path: &str, resource_version: &str, items: Vec<Value>) {
        let reply = Reply::List {
            resource_version: resource_version.into(),
            items,
        };
        self.script()
            .lists
            .entry(path.into())
            .or_default()
            .push_back(reply);
    }

    /// The next watch of `path` sends these events, then ends (`hold: false`) or stays open.
    pub fn watch(&self, path: &str, events: Vec<Value>, hold: bool) {
        self.script()
            .watches
            .entry(path.into())
            .or_default()
            .push_back(Reply::Watch { events, hold });
    }

    /// The next watch request gets `410 Gone`.
    pub fn gone(&self, path: &str) {
        self.script()
            .watches
            .entry(path.into())
            .or_default()
            .push_back(Reply::Gone);
    }

    /// Requests for `path`, in order: `list limit=N` or `watch rv=N`.
    #[must_use]
    pub fn requests(&self, path: &str) -> Vec<String> {
        self.script().log.get(path).cloned().unwrap_or_default()
    }

    /// Ends open watches and stops accepting connections.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for ApiFixture {
    fn drop(&mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The kind a collection path lists: `/api/v1/pods` -> `Pod`.
fn kind_of(path: &str) -> &'static str {
    match path.rsplit('/').next().unwrap_or("") {
        "pods" => "Pod",
        "services" => "Service",
        "endpointslices" => "EndpointSlice",
        "nodes" => "Node",
        _ => "",
    }
}

fn serve(conn: TcpStream, script: &Mutex<Script>, stop: &AtomicBool) {
    let _ = conn.set_nonblocking(false);
    let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // Skip the headers.
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let target = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .unwrap_or("")
    };
    let is_watch = param("watch") == "true";
    let reply = {
        let mut s = script.lock().expect("fixture script");
        let entry = if is_watch {
            let bookmarks = if param("allowWatchBookmarks") == "true" {
                ""
            } else {
                " (no bookmarks)"
            };
            format!("watch rv={}{bookmarks}", param("resourceVersion"))
        } else {
            format!("list limit={}", param("limit"))
        };
        s.log.entry(path.to_string()).or_default().push(entry);
        let queue = if is_watch {
            &mut s.watches
        } else {
            &mut s.lists
        };
        let scripted = queue.get_mut(path).and_then(VecDeque::pop_front);
        scripted.unwrap_or_else(|| {
            if is_watch {
                Reply::Watch {
                    events: Vec::new(),
                    hold: true,
                }
            } else {
                let kind = kind_of(path);
                Reply::List {
                    resource_version: "1".into(),
                    items: s
                        .snapshot
                        .iter()
                        .filter(|i| i["kind"] == kind)
                        .cloned()
                        .collect(),
                }
            }
        })
    };
    respond(conn, reply, stop);
}

/// Writes one scripted reply (HTTP/1.1, `Connection: close`).
fn respond(mut out: TcpStream, reply: Reply, stop: &AtomicBool) {
    match reply {
        Reply::List {
            resource_version,
            items,
        } => {
            let body = json!({"apiVersion": "v1", "kind": "List",
                              "metadata": {"resourceVersion": resource_version}, "items": items})
            .to_string();
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Reply::Gone => {
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "too old resource version", "reason": "Expired", "code": 410})
            .to_string();
            let _ = write!(
                out,
                "HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Reply::Watch { events, hold } => {
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            );
            for event in events {
                let line = format!("{event}\n");
                let _ = write!(out, "{:x}\r\n{line}\r\n", line.len());
                let _ = out.flush();
            }
            if hold {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                // The API went away mid-watch: drop the connection without ending the body.
                return;
            }
            let _ = write!(out, "0\r\n\r\n");
        }
    }
    let _ = out.flush();
}
