//! The `--metrics` endpoint: `GET /metrics` (any path) answers the registry in the `OpenMetrics`
//! text format. The listener is bound while the options are checked, before anything is attached
//! (a taken port is one sentence, not a half-started tracer); it is served from a thread with its
//! own event loop, so encoding a scrape never holds up the ring-buffer loop. The thread ends with
//! the process.
use std::{
    convert::Infallible,
    net::{SocketAddr, TcpListener},
    sync::Arc,
};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, header, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;

/// A client that sends no request within this long is dropped (it holds a task and a socket).
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What Prometheus asks for and gets.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `--metrics ADDR`: `IP:PORT`, `[IPv6]:PORT`, or `:PORT` for every address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsAddr(pub SocketAddr);

impl std::str::FromStr for MetricsAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let full = if t.starts_with(':') {
            format!("0.0.0.0{t}")
        } else {
            t.to_string()
        };
        full.parse::<SocketAddr>().map(MetricsAddr).map_err(|_| {
            format!(
                "'{s}' is not an address to listen on: give IP:PORT (like 0.0.0.0:9090) or :PORT"
            )
        })
    }
}

/// A bound listener, not yet served.
pub struct Endpoint {
    listener: TcpListener,
}

impl Endpoint {
    pub fn bind(addr: MetricsAddr) -> anyhow::Result<Endpoint> {
        let listener = TcpListener::bind(addr.0)
            .with_context(|| format!("cannot listen on {} for --metrics", addr.0))?;
        listener
            .set_nonblocking(true)
            .context("setting the --metrics listener non-blocking")?;
        Ok(Endpoint { listener })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `registry` from a thread of its own until the process exits.
    pub fn serve(self, registry: Registry) -> anyhow::Result<()> {
        let registry = Arc::new(registry);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the --metrics event loop")?;
        std::thread::Builder::new()
            .name("tracer-metrics".into())
            .spawn(move || runtime.block_on(accept_loop(self.listener, registry)))
            .context("starting the --metrics thread")?;
        Ok(())
    }
}

async fn accept_loop(listener: TcpListener, registry: Arc<Registry>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tracer: warning: --metrics endpoint down: {e}");
            return;
        }
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors and the like: wait and take the next one.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let registry = Arc::clone(&registry);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                std::future::ready(Ok::<_, Infallible>(answer(&request, &registry)))
            });
            // A client that goes away mid-answer is no concern of the tracer's.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(request: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    let response =
        if request.method() == hyper::Method::GET || request.method() == hyper::Method::HEAD {
            let mut body = String::with_capacity(64 * 1024);
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => Response::builder()
                    .header(header::CONTENT_TYPE, CONTENT_TYPE)
                    .body(Full::new(Bytes::from(body))),
                Err(_) => Response::builder()
                    .status(StatusCode::INTERNAL_SERVER_ERROR)
                    .body(Full::new(Bytes::from_static(
                        b"encoding the metrics failed\n",
                    ))),
            }
        } else {
            Response::builder()
                .status(StatusCode::METHOD_NOT_ALLOWED)
                .body(Full::new(Bytes::from_static(b"GET only\n")))
        };
    response.unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
