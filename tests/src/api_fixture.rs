//! A FIXTURE, not a Kubernetes API server: serves a kubectl-format snapshot the way the API lists it,
//! for the tracer's `--kubeconfig` path end to end. Plain HTTP on 127.0.0.1 (std `TcpListener`);
//! `GET <collection>` answers a `List` of that kind's items with a `resourceVersion`, and
//! `GET <collection>?watch=true...` holds the watch open, sending nothing, until the fixture is
//! dropped. The watch protocol itself (events, bookmarks, 410 Gone) is tested beside the client, in
//! `tracer/src/identity/watch.rs`.
use std::{
    io::{BufRead as _, BufReader, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use serde_json::{Value, json};

pub struct ApiFixture {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ApiFixture {
    /// Serves the items of `snapshot` (a `v1/List` as `kubectl get ... -o json` writes it).
    pub fn serve(snapshot: &Value) -> ApiFixture {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fixture API server");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let items: Arc<Vec<Value>> =
            Arc::new(snapshot["items"].as_array().cloned().unwrap_or_default());
        let stop = Arc::new(AtomicBool::new(false));
        let stop_thread = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stop_thread.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (items, stop) = (Arc::clone(&items), Arc::clone(&stop_thread));
                        std::thread::spawn(move || answer(conn, &items, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        ApiFixture {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// A kubeconfig file whose current context is this server.
    pub fn kubeconfig(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fx\n  cluster:\n    server: http://{}\n\
                 users:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: fx\n    user: u\n\
                 current-context: c\n",
                self.addr
            ),
        )
        .expect("write kubeconfig");
        path
    }
}

impl Drop for ApiFixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn answer(conn: TcpStream, items: &[Value], stop: &AtomicBool) {
    let _ = conn.set_nonblocking(false);
    let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header == "\r\n" => break,
            Ok(_) => {}
        }
    }
    let target = request.split_whitespace().nth(1).unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut out = conn;
    if query.split('&').any(|kv| kv == "watch=true") {
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        let _ = out.flush();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        return;
    }
    let kind = match path.rsplit('/').next().unwrap_or("") {
        "pods" => "Pod",
        "services" => "Service",
        "endpointslices" => "EndpointSlice",
        "nodes" => "Node",
        _ => "",
    };
    let of_kind: Vec<&Value> = items.iter().filter(|i| i["kind"] == kind).collect();
    let body = json!({"apiVersion": "v1", "kind": format!("{kind}List"),
                      "metadata": {"resourceVersion": "1"}, "items": of_kind})
    .to_string();
    let _ = write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = out.flush();
}
