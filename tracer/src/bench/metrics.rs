//! `tracer bench-metrics --series N` (hidden, used by `cargo xtask bench`): how long the `--metrics`
//! endpoint takes to serve a scrape when `tracer_connects_total` holds N label sets (the cap is
//! 2000). Fills the families through the same sink live tracing uses, serves them on a loopback port
//! the kernel picks, scrapes it over HTTP the way Prometheus does, and prints one JSON line: the
//! median and the slowest scrape in ms, and the body's size.
use std::{
    io::{Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::{
    clock::Timestamp,
    identity::Identity,
    metrics::{
        Metrics, MetricsSink,
        server::{Endpoint, MetricsAddr},
    },
    record::{ConnectRecord, Record},
    sink::Sink as _,
    verdict::Verdict,
};

#[derive(Debug, clap::Args)]
pub struct BenchMetricsArgs {
    /// Distinct label sets of `tracer_connects_total`.
    #[arg(long, default_value_t = 2000)]
    pub series: u32,
    /// Scrapes timed.
    #[arg(long, default_value_t = 50)]
    pub scrapes: u32,
}

fn record(i: u32) -> Record {
    let dst = SocketAddr::from((Ipv4Addr::from(0x0af4_0000 + i), 8080));
    Record::Connect(ConnectRecord {
        time: Timestamp(std::time::SystemTime::now()),
        verdict: Verdict::Abandoned,
        is_final: true,
        src: SocketAddr::from((Ipv4Addr::new(10, 0, 0, 1), 40000)),
        dst,
        dialed: None,
        service: Some(SocketAddr::from((Ipv4Addr::new(10, 96, 0, 10), 80))),
        backend: Some(dst),
        syns: 3,
        syn_sent_ms: 2000,
        errno: None,
        pid: 1,
        tid: 1,
        comm: "bench".into(),
        cgroup_id: 1,
        netns: "bench".into(),
        netns_inode: 1,
        flow: "bench".into(),
        explanation: String::new(),
        identity: Identity {
            src_namespace: Some("default".into()),
            src_owner: Some("Deployment/web".into()),
            dst_service: Some("default/backend".into()),
            ..Identity::default()
        },
        dns: false,
    })
}

/// One scrape: connect, GET, read to the end. Its body length.
fn scrape(addr: SocketAddr) -> anyhow::Result<usize> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n")?;
    let mut answer = Vec::with_capacity(1 << 20);
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("no HTTP answer");
    };
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("scrape answered {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.len())
}

pub fn run(args: &BenchMetricsArgs) -> anyhow::Result<()> {
    let cap = usize::try_from(args.series)?.max(1);
    let (metrics, registry) = Metrics::new("bench", cap);
    let mut sink = MetricsSink { metrics };
    for i in 0..args.series {
        sink.write(&record(i))?;
    }
    let (series, folded) = sink.metrics.connect_series();
    let endpoint = Endpoint::bind(MetricsAddr(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))?;
    let addr = endpoint.local_addr().context("the endpoint's address")?;
    endpoint.serve(registry)?;
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..args.scrapes.max(1) {
        let start = Instant::now();
        bytes = scrape(addr)?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{}",
        serde_json::json!({
            "series": series,
            "folded": folded,
            "body_bytes": bytes,
            "median_ms": times[times.len() / 2],
            "max_ms": times[times.len() - 1],
        })
    );
    Ok(())
}
