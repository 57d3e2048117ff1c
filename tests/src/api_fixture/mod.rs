//! A FIXTURE, not a Kubernetes API server: an HTTP/1.1 server on 127.0.0.1 (std `TcpListener`, one
//! thread per connection) that answers the requests a list+watch client and its on-demand lookups
//! make, in the API's JSON shapes (k8s.io/apimachinery `metav1.List`, `metav1.Status`,
//! `metav1.WatchEvent`; objects as the k8s-openapi 0.29 types read them, Kubernetes 1.33 to 1.37):
//!
//! - lists of the four kinds the tracer follows, cluster-wide or in a namespace, paginated
//!   (`limit`, `continue`), filtered by `fieldSelector` (the field labels the API server supports
//!   for each kind; others are its `400`) and `labelSelector`;
//! - one object by name (`404 NotFound` when absent);
//! - watches: chunked streams of `ADDED`/`MODIFIED`/`DELETED` for the changes made since the
//!   given `resourceVersion` (filtered like lists), `BOOKMARK`s when asked for, ended after
//!   `timeoutSeconds`; a watch from a `resourceVersion` older than the events kept is told `ERROR`
//!   `410` in the stream, as the API server does after compaction;
//! - faults set at any time ([`Fault`]): refused connections, accepted ones never answered, every
//!   request one HTTP status, and the broken watches of issue 27 (a non-JSON line, an `ERROR` 500
//!   event, `410` on every watch, an `ERROR` 410 event on every watch);
//! - every request logged with its time, verb, kind and selectors ([`ApiFixture::log`]), so tests
//!   and benchmarks count what a client asked.
//!
//! Objects come from a kubectl-format snapshot ([`ApiFixture::serve`]), or from a large generated
//! cluster ([`ApiFixture::synthetic`], `synthetic.rs`); changes made with [`ApiFixture::change`]
//! reach watches. Replies can also be scripted per path, in order ([`ApiFixture::list`],
//! [`ApiFixture::watch`], [`ApiFixture::gone`]); once a path's script has run out it is answered
//! from the objects. [`ApiFixture::stop`] ends open watches and stops accepting connections (the API
//! "goes away").
//!
//! The one API fixture of the workspace: the root tests use it from this crate, the tracer's watch
//! tests (`tracer/tests/cluster_watch.rs`) and `cargo xtask bench`/`soak` include it as a module.
mod http;
pub mod objects;
pub mod selectors;
pub mod synthetic;

use std::{
    collections::{HashMap, VecDeque},
    fmt::Write as _,
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use self::{
    http::Request,
    objects::{Route, Store},
    selectors::{FieldSelector, LabelSelector},
};
pub use self::{objects::Kind, synthetic::Synthetic};

/// What the API does wrong, from the moment it is set until the next [`ApiFixture::set_fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Nothing listens: connections are refused (and open ones dropped).
    Refuse,
    /// Connections are accepted and never answered.
    Hang,
    /// Every request is answered with this HTTP status and a `Status` body.
    Status(u16),
    /// Watches answer `200`, then (after [`BROKEN_AFTER`]) a line that is not JSON (a proxy's
    /// error page), then nothing.
    WatchNotJson,
    /// Watches answer `200`, then (after [`BROKEN_AFTER`]) an `ERROR` event with code 500, and end.
    WatchError500,
    /// Watches are answered `410 Gone`.
    WatchGone,
    /// Watches answer `200`, then (after [`BROKEN_AFTER`]) an `ERROR` event with code 410, and end.
    WatchGoneEvent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    List,
    Watch,
    Get,
}

/// One request as the fixture saw it.
#[derive(Debug, Clone)]
pub struct Logged {
    pub at: Instant,
    pub verb: Verb,
    /// `None` for a path that names no kind the fixture serves.
    pub kind: Option<Kind>,
    pub path: String,
    pub field_selector: String,
    pub label_selector: String,
    /// The HTTP status of the answer (200 for a watch stream; 0: never answered).
    pub status: u16,
    /// `list limit=500 fieldSelector=spec.nodeName=n1`, `watch rv=12`, `get`.
    pub line: String,
}

impl Logged {
    /// A pod list or watch without a node or address selector: every pod of the cluster.
    #[must_use]
    pub fn is_cluster_wide_pod_request(&self) -> bool {
        self.kind == Some(Kind::Pod)
            && self.verb != Verb::Get
            && !self.path.contains("/namespaces/")
            && !self.field_selector.contains("spec.nodeName=")
            && !self.field_selector.contains("status.podIP=")
    }
}

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

struct State {
    store: Store,
    lists: HashMap<String, VecDeque<Reply>>,
    watches: HashMap<String, VecDeque<Reply>>,
    log: Vec<Logged>,
    fault: Fault,
    /// Moves when open connections must end (stop, refusal).
    generation: u64,
    stopped: bool,
    /// Moves when open watches must end with `ERROR` 410.
    expiry: u64,
    bookmark_every: Duration,
    /// Longest a watch stays open whatever `timeoutSeconds` asks (the API server's own limit).
    watch_limit: Duration,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled on every change, fault and stop: open watches look again.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub struct ApiFixture {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ApiFixture {
    /// An API with nothing in it until replies are scripted or objects changed.
    #[must_use]
    pub fn start() -> ApiFixture {
        ApiFixture::serve(&json!({"items": []}))
    }

    /// Serves the items of `snapshot` (a `v1/List` as `kubectl get ... -o json` writes it) by kind.
    #[must_use]
    pub fn serve(snapshot: &Value) -> ApiFixture {
        ApiFixture::with_store(Store::snapshot(snapshot))
    }

    /// Serves a large generated cluster (see `synthetic.rs`).
    #[must_use]
    pub fn synthetic(cluster: Synthetic) -> ApiFixture {
        ApiFixture::with_store(Store::synthetic(cluster))
    }

    fn with_store(store: Store) -> ApiFixture {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fixture API server");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                store,
                lists: HashMap::new(),
                watches: HashMap::new(),
                log: Vec::new(),
                fault: Fault::None,
                generation: 0,
                stopped: false,
                expiry: 0,
                bookmark_every: Duration::from_mins(1),
                watch_limit: Duration::from_mins(30),
            }),
            changed: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::spawn(move || accept_loop(listener, addr, &s));
        ApiFixture {
            addr,
            shared,
            thread: Some(thread),
        }
    }

    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
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

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// The next list of `path` answers these items at `resource_version`.
    pub fn list(&self, path: &str, resource_version: &str, items: Vec<Value>) {
        let reply = Reply::List {
            resource_version: resource_version.into(),
            items,
        };
        self.state()
            .lists
            .entry(path.into())
            .or_default()
            .push_back(reply);
    }

    /// The next watch of `path` sends these events, then ends (`hold: false`) or stays open.
    pub fn watch(&self, path: &str, events: Vec<Value>, hold: bool) {
        self.state()
            .watches
            .entry(path.into())
            .or_default()
            .push_back(Reply::Watch { events, hold });
    }

    /// The next watch request of `path` gets `410 Gone`.
    pub fn gone(&self, path: &str) {
        self.state()
            .watches
            .entry(path.into())
            .or_default()
            .push_back(Reply::Gone);
    }

    /// Requests for `path` (without its query), in order: `list limit=N [fieldSelector=..]`,
    /// `watch rv=N [fieldSelector=..]`, `get`.
    #[must_use]
    pub fn requests(&self, path: &str) -> Vec<String> {
        self.state()
            .log
            .iter()
            .filter(|l| l.path == path)
            .map(|l| l.line.clone())
            .collect()
    }

    /// Every request so far.
    #[must_use]
    pub fn log(&self) -> Vec<Logged> {
        self.state().log.clone()
    }

    /// From now on, the API does this wrong (`Fault::None`: nothing).
    pub fn set_fault(&self, fault: Fault) {
        let mut state = self.state();
        if fault == Fault::Refuse || state.fault == Fault::Hang {
            state.generation += 1;
        }
        state.fault = fault;
        drop(state);
        self.shared.changed.notify_all();
    }

    /// How often watches that asked for bookmarks get one (the API server: about a minute).
    pub fn set_bookmark_every(&self, every: Duration) {
        self.state().bookmark_every = every;
    }

    /// Adds or replaces an object of `kind` (by namespace and name), or deletes it; open watches
    /// get the event.
    pub fn change(&self, kind: Kind, object: Value, delete: bool) {
        self.state().store.change(kind, object, delete);
        self.shared.changed.notify_all();
    }

    /// The current `resourceVersion`.
    #[must_use]
    pub fn resource_version(&self) -> u64 {
        self.state().store.rv
    }

    /// Compaction: every open watch ends with an `ERROR` 410 event, and a watch from any earlier
    /// `resourceVersion` gets one too, so every client lists again.
    pub fn expire_watches(&self) {
        let mut state = self.state();
        state.store.compact();
        state.expiry += 1;
        drop(state);
        self.shared.changed.notify_all();
    }

    /// Drops every open connection (open watches end without the end of their body), as an API
    /// server that restarts does.
    pub fn cut_connections(&self) {
        self.state().generation += 1;
        self.shared.changed.notify_all();
    }

    /// Ends open watches and stops accepting connections.
    pub fn stop(&self) {
        let mut state = self.state();
        state.stopped = true;
        state.generation += 1;
        drop(state);
        self.shared.changed.notify_all();
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

fn accept_loop(listener: TcpListener, addr: SocketAddr, shared: &Arc<Shared>) {
    let mut listener = Some(listener);
    loop {
        let (stopped, refuse, generation) = {
            let s = shared.lock();
            (s.stopped, s.fault == Fault::Refuse, s.generation)
        };
        if stopped {
            return;
        }
        if refuse {
            // Closing the listening socket is what makes the kernel refuse connections.
            listener = None;
        } else if listener.is_none() {
            listener = TcpListener::bind(addr).ok();
            if let Some(l) = &listener {
                let _ = l.set_nonblocking(true);
            }
        }
        match listener.as_ref().map(TcpListener::accept) {
            Some(Ok((conn, _))) => {
                let s = Arc::clone(shared);
                std::thread::spawn(move || serve(conn, &s, generation));
            }
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// What one request gets, decided under the lock, written after it.
enum Answer {
    Json(u16, String),
    Hang,
    /// A watch: scripted events (`hold`: then stay open), or the store's events from `rv`.
    ScriptedWatch(Vec<Value>, bool),
    Watch(WatchFrom),
    /// `200`, then these lines, then the stream ends (`hold`: stays open until a fault change).
    BrokenWatch(Vec<String>, bool),
}

/// How long a broken watch ([`Fault::WatchNotJson`], [`Fault::WatchError500`],
/// [`Fault::WatchGoneEvent`]) streams nothing after its `200`.
const BROKEN_AFTER: Duration = Duration::from_millis(200);

struct WatchFrom {
    kind: Kind,
    namespace: Option<String>,
    fields: FieldSelector,
    labels: LabelSelector,
    rv: u64,
    bookmarks: bool,
    timeout: Duration,
}

fn serve(mut conn: TcpStream, shared: &Shared, generation: u64) {
    let _ = conn.set_nonblocking(false);
    let Some(request) = Request::read(&conn) else {
        return;
    };
    let answer = {
        let mut state = shared.lock();
        let (answer, logged) = decide(&mut state, &request);
        state.log.push(logged);
        answer
    };
    match answer {
        Answer::Json(code, body) => http::respond(&mut conn, code, &body),
        Answer::Hang => {
            // Until the fault changes; then the connection closes unanswered.
            let mut state = shared.lock();
            while state.fault == Fault::Hang && state.generation == generation && !state.stopped {
                state = shared
                    .changed
                    .wait_timeout(state, Duration::from_millis(200))
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
        }
        Answer::ScriptedWatch(events, hold) => {
            if !http::start_stream(&mut conn) {
                return;
            }
            for event in events {
                if !http::send_line(&mut conn, &event.to_string()) {
                    return;
                }
            }
            if hold {
                wait_until_gone(shared, generation, |_| false);
                return; // the API went away mid-watch: no end of body
            }
            http::end_stream(&mut conn);
        }
        Answer::BrokenWatch(lines, hold) => {
            if !http::start_stream(&mut conn) {
                return;
            }
            // Broken a moment after the 200, as a proxy's or an etcd's failure is: long enough
            // for a client that takes the 200 for health to say so.
            std::thread::sleep(BROKEN_AFTER);
            for line in lines {
                if !http::send_line(&mut conn, &line) {
                    return;
                }
            }
            if hold {
                let fault = shared.lock().fault;
                wait_until_gone(shared, generation, |s| s.fault != fault);
            } else {
                http::end_stream(&mut conn);
            }
        }
        Answer::Watch(from) => stream_events(&mut conn, shared, generation, &from),
    }
}

/// Waits until the connection's generation ends (stop, refusal) or `done` holds.
fn wait_until_gone(shared: &Shared, generation: u64, done: impl Fn(&State) -> bool) {
    let mut state = shared.lock();
    while state.generation == generation && !state.stopped && !done(&state) {
        state = shared
            .changed
            .wait_timeout(state, Duration::from_millis(200))
            .map_or_else(|e| e.into_inner().0, |r| r.0);
    }
}

fn status_json(code: u16, message: &str) -> String {
    http::status(code, message).to_string()
}

fn error_event(code: u16, message: &str) -> String {
    json!({"type": "ERROR", "object": http::status(code, message)}).to_string()
}

/// The answer to one request, and its log entry.
fn decide(state: &mut State, request: &Request) -> (Answer, Logged) {
    let route = Route::parse(&request.path);
    let is_watch = request.param("watch") == "true" || request.param("watch") == "1";
    let verb = match &route {
        Some(r) if r.name.is_some() => Verb::Get,
        _ if is_watch => Verb::Watch,
        _ => Verb::List,
    };
    let field_selector = request.param("fieldSelector").to_string();
    let label_selector = request.param("labelSelector").to_string();
    let mut line = match verb {
        Verb::Get => match request.param("resourceVersion") {
            "" => "get".to_string(),
            rv => format!("get rv={rv}"),
        },
        Verb::Watch => format!(
            "watch rv={}{}",
            request.param("resourceVersion"),
            if request.param("allowWatchBookmarks") == "true" {
                ""
            } else {
                " (no bookmarks)"
            }
        ),
        Verb::List => {
            let mut l = "list".to_string();
            if !request.param("limit").is_empty() {
                let _ = write!(l, " limit={}", request.param("limit"));
            }
            if !request.param("resourceVersion").is_empty() {
                let _ = write!(l, " rv={}", request.param("resourceVersion"));
            }
            l
        }
    };
    if !field_selector.is_empty() {
        let _ = write!(line, " fieldSelector={field_selector}");
    }
    if !label_selector.is_empty() {
        let _ = write!(line, " labelSelector={label_selector}");
    }
    if !request.param("continue").is_empty() {
        line.push_str(" continue");
    }
    let mut logged = Logged {
        at: Instant::now(),
        verb,
        kind: route.as_ref().map(|r| r.kind),
        path: request.path.clone(),
        field_selector,
        label_selector,
        status: 0,
        line,
    };
    let answer = answer(state, request, route.as_ref(), verb, &logged);
    logged.status = match &answer {
        Answer::Json(code, _) => *code,
        Answer::Hang => 0,
        _ => 200,
    };
    (answer, logged)
}

fn answer(
    state: &mut State,
    request: &Request,
    route: Option<&Route>,
    verb: Verb,
    logged: &Logged,
) -> Answer {
    match state.fault {
        Fault::Hang => return Answer::Hang,
        Fault::Status(code) => {
            return Answer::Json(
                code,
                status_json(code, "the fixture answers every request with this status"),
            );
        }
        Fault::WatchNotJson if verb == Verb::Watch => {
            return Answer::BrokenWatch(
                vec!["<html><body>502 Bad Gateway</body></html>".into()],
                true,
            );
        }
        Fault::WatchError500 if verb == Verb::Watch => {
            return Answer::BrokenWatch(
                vec![error_event(500, "etcdserver: leader changed")],
                false,
            );
        }
        Fault::WatchGone if verb == Verb::Watch => {
            return Answer::Json(410, status_json(410, "too old resource version"));
        }
        Fault::WatchGoneEvent if verb == Verb::Watch => {
            return Answer::BrokenWatch(vec![error_event(410, "too old resource version")], false);
        }
        _ => {}
    }
    let Some(route) = route else {
        return Answer::Json(
            404,
            status_json(404, &format!("the server could not find {}", request.path)),
        );
    };
    let kind = route.kind;
    let fields = match FieldSelector::parse(&logged.field_selector, kind) {
        Ok(f) => f,
        Err(message) => return Answer::Json(400, status_json(400, &message)),
    };
    let labels = match LabelSelector::parse(&logged.label_selector) {
        Ok(l) => l,
        Err(message) => return Answer::Json(400, status_json(400, &message)),
    };
    match verb {
        Verb::Get => get(state, route),
        Verb::List => list(state, request, route, &fields, &labels),
        Verb::Watch => watch(state, request, route, fields, labels),
    }
}

fn get(state: &State, route: &Route) -> Answer {
    let kind = route.kind;
    let name = route.name.as_deref().unwrap_or("");
    let ns = route.namespace.as_deref().unwrap_or("");
    if let Some(mut object) = state.store.get(kind, ns, name) {
        object["kind"] = kind.name().into();
        object["apiVersion"] = kind.api_version().into();
        return Answer::Json(200, object.to_string());
    }
    let mut status = http::status(404, &format!("{} \"{name}\" not found", kind.resource()));
    status["details"] = json!({"name": name, "kind": kind.resource()});
    Answer::Json(404, status.to_string())
}

fn list(
    state: &mut State,
    request: &Request,
    route: &Route,
    fields: &FieldSelector,
    labels: &LabelSelector,
) -> Answer {
    let kind = route.kind;
    if let Some(reply) = state
        .lists
        .get_mut(&request.path)
        .and_then(VecDeque::pop_front)
    {
        return scripted(reply, kind);
    }
    let limit = request.param("limit").parse().unwrap_or(0);
    let start = match request.param("continue") {
        "" => 0,
        token => match token.parse() {
            Ok(p) => p,
            Err(_) => return Answer::Json(400, status_json(400, "invalid continue token")),
        },
    };
    let page = state.store.list(
        kind,
        route.namespace.as_deref(),
        fields,
        labels,
        start,
        limit,
    );
    let mut metadata = json!({"resourceVersion": state.store.rv.to_string()});
    if let Some(next) = page.next {
        metadata["continue"] = next.to_string().into();
    }
    Answer::Json(200, list_body(kind, &metadata, page.items))
}

fn watch(
    state: &mut State,
    request: &Request,
    route: &Route,
    fields: FieldSelector,
    labels: LabelSelector,
) -> Answer {
    let kind = route.kind;
    if let Some(reply) = state
        .watches
        .get_mut(&request.path)
        .and_then(VecDeque::pop_front)
    {
        return scripted(reply, kind);
    }
    let rv = match request.param("resourceVersion") {
        "" | "0" => state.store.rv,
        text => text.parse().unwrap_or(0),
    };
    if rv < state.store.compacted_rv {
        let message = format!(
            "too old resource version: {rv} ({})",
            state.store.compacted_rv
        );
        return Answer::BrokenWatch(vec![error_event(410, &message)], false);
    }
    let timeout = request
        .param("timeoutSeconds")
        .parse()
        .map_or(state.watch_limit, Duration::from_secs)
        .min(state.watch_limit);
    Answer::Watch(WatchFrom {
        kind,
        namespace: route.namespace.clone(),
        fields,
        labels,
        rv,
        bookmarks: request.param("allowWatchBookmarks") == "true",
        timeout,
    })
}

fn list_body(kind: Kind, metadata: &Value, items: Vec<Value>) -> String {
    // List items carry no `kind`/`apiVersion` on the wire (kubectl adds them in its output).
    let items: Vec<Value> = items
        .into_iter()
        .map(|mut item| {
            if let Some(map) = item.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            item
        })
        .collect();
    json!({"apiVersion": kind.api_version(), "kind": format!("{}List", kind.name()),
           "metadata": metadata, "items": items})
    .to_string()
}

fn scripted(reply: Reply, kind: Kind) -> Answer {
    match reply {
        Reply::List {
            resource_version,
            items,
        } => Answer::Json(
            200,
            list_body(kind, &json!({"resourceVersion": resource_version}), items),
        ),
        Reply::Watch { events, hold } => Answer::ScriptedWatch(events, hold),
        Reply::Gone => Answer::Json(410, status_json(410, "too old resource version")),
    }
}

/// A watch answered from the store: every matching change after `from.rv`, bookmarks, until its
/// timeout (a normal end), a compaction (`ERROR` 410) or the API going away (cut).
fn stream_events(conn: &mut TcpStream, shared: &Shared, generation: u64, from: &WatchFrom) {
    if !http::start_stream(conn) {
        return;
    }
    let started = Instant::now();
    let mut last_bookmark = Instant::now();
    let mut cursor = from.rv;
    let expiry = shared.lock().expiry;
    loop {
        let mut lines = Vec::new();
        let mut end = false;
        {
            let mut state = shared.lock();
            if state.generation != generation || state.stopped {
                return;
            }
            if state.expiry == expiry {
                let after = cursor;
                for event in state.store.events.iter().filter(|e| e.rv > after) {
                    cursor = event.rv;
                    let ns = event.object["metadata"]["namespace"].as_str().unwrap_or("");
                    if event.kind == from.kind
                        && from.namespace.as_deref().is_none_or(|n| n == ns)
                        && from.fields.matches(&event.object)
                        && from.labels.matches(&event.object)
                    {
                        lines.push(event.line.clone());
                    }
                }
                if lines.is_empty() {
                    if from.bookmarks && last_bookmark.elapsed() >= state.bookmark_every {
                        last_bookmark = Instant::now();
                        lines.push(
                            json!({"type": "BOOKMARK", "object": {
                                "kind": from.kind.name(), "apiVersion": from.kind.api_version(),
                                "metadata": {"resourceVersion": state.store.rv.to_string()}}})
                            .to_string(),
                        );
                    } else if started.elapsed() >= from.timeout {
                        drop(state);
                        http::end_stream(conn);
                        return;
                    } else {
                        state = shared
                            .changed
                            .wait_timeout(state, Duration::from_millis(100))
                            .map_or_else(|e| e.into_inner().0, |r| r.0);
                        drop(state);
                        continue;
                    }
                }
            } else {
                lines.push(error_event(
                    410,
                    &format!("too old resource version: {cursor} ({})", state.store.rv),
                ));
                end = true;
            }
        }
        for line in &lines {
            if !http::send_line(conn, line) {
                return;
            }
        }
        if end {
            http::end_stream(conn);
            return;
        }
    }
}
