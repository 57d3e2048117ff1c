//! Stage 7: the live TUI (`tracer tui`) and its replay (`tracer replay`), and the same table as text
//! (`tracer summary`).
//!
//! `state.rs` (the incident model of `incidents/` and how the user looks at it) -> `view/`
//! (widgets rendering `&State`, one file per pane) <- `keys.rs` (key -> action) <- `app.rs` (the
//! loop: keys, frame tick, batches of records). `terminal.rs` owns the real terminal; `advice.rs`
//! says what to check next per verdict; `summary.rs` prints the ranked table. Records arrive on a
//! channel: from `live.rs` through `sink::channel`, or from `replay.rs`. The Cluster view
//! (`--prometheus`) has its own state (`cluster_state.rs`), pane (`view/cluster.rs`) and a task
//! asking Prometheus (`cluster_poll.rs`).
pub mod advice;
pub mod app;
pub mod cluster_poll;
pub mod cluster_state;
pub mod keys;
pub mod state;
pub mod summary;
pub mod terminal;
pub mod view;

use std::{
    path::Path,
    sync::{Arc, atomic::AtomicU64},
    time::SystemTime,
};

use anyhow::Context as _;
use tokio::sync::mpsc;

use self::{
    app::{Clock, Options},
    cluster_state::{ClusterPane, ClusterUpdate},
    state::State,
    terminal::Session,
};
use crate::{
    args::{ReplayArgs, SummaryArgs, TuiArgs},
    live,
    record::Record,
    replay,
    sink::{Sink, channel::ChannelSink},
    sweep::client::Prometheus,
};

/// Records buffered between the pipeline and the TUI: about a second at 50k records/s. Past that
/// they are dropped and counted in the header rather than stalling the ring-buffer consumer.
const CHANNEL_CAPACITY: usize = 65_536;

fn options(clock: Clock) -> Options {
    Options {
        clock,
        copy_file: Some(std::env::temp_dir().join("tracer-row.json")),
        osc52: true,
    }
}

/// The node's name for the header (the hostname is the Kubernetes node name on most clusters).
fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string())
}

/// `--prometheus`: the Cluster view's pane and its poller; a closed channel without it.
fn cluster_view(
    args: &TuiArgs,
    prometheus: Option<Prometheus>,
) -> (Option<ClusterPane>, mpsc::Receiver<ClusterUpdate>) {
    match prometheus {
        Some(p) => (
            Some(ClusterPane::new(
                p.url(),
                args.cluster_window,
                args.cluster_refresh,
            )),
            cluster_poll::spawn(p, args.cluster_window, args.cluster_refresh),
        ),
        None => (None, mpsc::channel(1).1),
    }
}

pub async fn live(args: TuiArgs) -> anyhow::Result<()> {
    // What can be refused is refused before the terminal is taken over, in one plain line.
    let prometheus = args
        .prometheus
        .as_deref()
        .map(Prometheus::new)
        .transpose()?;
    if args.cluster_only {
        return cluster_only(&args, prometheus).await;
    }
    live::check_before_start(&args.pipeline)?;
    let metrics = live::metrics_endpoint(&args.pipeline)?;
    let (tx, mut records) = mpsc::channel(CHANNEL_CAPACITY);
    let dropped = Arc::new(AtomicU64::new(0));
    let sink: Box<dyn Sink> = Box::new(ChannelSink::new(tx, Arc::clone(&dropped)));
    let mut state = State::new(format!("node {}", node_name()), Some(SystemTime::now()));
    let mut session = Session::start(true).context("cannot start the terminal UI")?;
    let (pane, mut cluster) = cluster_view(&args, prometheus);
    if let Some(pane) = pane {
        state = state.with_cluster(pane);
    }
    let mut events = terminal::spawn_input();
    let options = options(Clock::Wall);
    let result = {
        let pipeline = live::run_with_sink(args.trace_args(), sink, metrics);
        let app = app::run_with_cluster(
            &mut session.terminal,
            &mut state,
            &mut events,
            &mut records,
            &mut cluster,
            &dropped,
            &options,
        );
        tokio::pin!(pipeline, app);
        tokio::select! {
            r = &mut app => r.map_err(anyhow::Error::from),
            r = &mut pipeline => match r {
                // Tracing ended (--duration): the screen stays until the user quits.
                Ok(()) => (&mut app).await.map_err(anyhow::Error::from),
                Err(e) => Err(e),
            },
        }
        // Leaving this block drops the pipeline, which detaches the kernel programs.
    };
    session.finish();
    result
}

/// `--cluster-only`: the Cluster view alone; nothing on this node is traced or attached.
async fn cluster_only(args: &TuiArgs, prometheus: Option<Prometheus>) -> anyhow::Result<()> {
    let (Some(pane), mut cluster) = cluster_view(args, prometheus) else {
        anyhow::bail!("--cluster-only needs --prometheus URL");
    };
    let mut state = State::cluster_only(pane.url.clone(), pane);
    // Nothing sends records; the sender stays so the source is not reported ended.
    let (_records_tx, mut records) = mpsc::channel::<Record>(1);
    let dropped = AtomicU64::new(0);
    let mut session = Session::start(false).context("cannot start the terminal UI")?;
    let mut events = terminal::spawn_input();
    let result = app::run_with_cluster(
        &mut session.terminal,
        &mut state,
        &mut events,
        &mut records,
        &mut cluster,
        &dropped,
        &options(Clock::Wall),
    )
    .await;
    session.finish();
    Ok(result?)
}

pub async fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    // Every line is checked before the terminal is touched; the records are read again as they
    // are fed, so the file is never held in memory.
    let checked = replay::check(&args.file)?;
    for warning in checked.skipped.warnings(&args.file) {
        eprintln!("tracer: warning: {warning}");
    }
    let reader = replay::Reader::open_first(&args.file, checked.bytes)?;
    let (tx, mut records) = mpsc::channel::<Record>(CHANNEL_CAPACITY);
    let mut state = State::new(format!("replay {}", file_name(&args.file)), None);
    let notes = checked.skipped.notes();
    if !notes.is_empty() {
        state.status = Some(notes.join("; "));
    }
    state.skipped = checked.skipped;
    let mut session = Session::start(false).context("cannot start the terminal UI")?;
    let mut events = terminal::spawn_input();
    let dropped = AtomicU64::new(0);
    let options = options(Clock::Records);
    let feeder = tokio::spawn(replay::feed(reader, args.speed, tx));
    let result = app::run(
        &mut session.terminal,
        &mut state,
        &mut events,
        &mut records,
        &dropped,
        &options,
    )
    .await;
    feeder.abort();
    session.finish();
    result?;
    // The file changed under the second read (rewritten, truncated): said after the screen closes.
    match feeder.await {
        Ok(Err(e)) => Err(e.into()),
        _ => Ok(()),
    }
}

/// `tracer summary`: the file read one record at a time into the model, then the table.
pub fn summary(args: &SummaryArgs) -> anyhow::Result<String> {
    let mut reader = replay::Reader::open(&args.file)?;
    let mut state = State::new(file_name(&args.file), None);
    while let Some(timed) = reader.next_record()? {
        state.apply(timed.record);
    }
    for warning in reader.skipped().warnings(&args.file) {
        eprintln!("tracer: warning: {warning}");
    }
    Ok(summary::render_with_notes(
        &state,
        &reader.skipped().notes(),
    ))
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
