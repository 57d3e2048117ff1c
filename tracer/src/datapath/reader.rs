//! The thread that reads the node's datapath every interval. It enters the node's network namespace
//! once (`--conntrack-netns`; `host` is the tracer's own): the tools it runs are children of this
//! thread and so start in that namespace too, and `/proc/thread-self/net` is that namespace's. A
//! tool that hangs delays only this thread, never the ring buffer.
use std::{
    path::PathBuf,
    sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel},
    time::Duration,
};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::{
    Reader, Snapshot, Unread, cilium::CiliumServices, iptables::Iptables, ipvs::Ipvs,
    nftables::Nftables,
};

/// The sources read, in the order they are reported; Cilium's maps from `cilium_bpffs`.
fn sources(cilium_bpffs: PathBuf) -> Vec<Box<dyn Reader + Send>> {
    vec![
        Box::new(Iptables),
        Box::new(Nftables),
        Box::new(Ipvs),
        Box::new(CiliumServices { dir: cilium_bpffs }),
    ]
}

pub struct DatapathReader {
    /// One snapshot per interval; the first right at start.
    pub snapshots: UnboundedReceiver<Snapshot>,
    /// Dropping it stops the thread at its next wake-up. Kept when no thread runs, so that
    /// `snapshots` waits forever rather than ending.
    _stop: Sender<()>,
    _idle: Option<UnboundedSender<Snapshot>>,
}

impl DatapathReader {
    pub fn start(
        netns: Option<PathBuf>,
        cilium_bpffs: PathBuf,
        interval: Duration,
    ) -> DatapathReader {
        let (tx, snapshots) = unbounded_channel();
        let (stop, stopped) = channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("datapath-read".into())
            .spawn(move || run(netns.as_deref(), cilium_bpffs, interval, &tx, &stopped));
        if let Err(e) = spawned {
            eprintln!("tracer: warning: cannot start the datapath audit thread: {e}");
        }
        DatapathReader {
            snapshots,
            _stop: stop,
            _idle: None,
        }
    }

    /// No audit (no cluster state to judge against): `snapshots` never yields.
    pub fn idle() -> DatapathReader {
        let (tx, snapshots) = unbounded_channel();
        let (stop, _) = channel::<()>();
        DatapathReader {
            snapshots,
            _stop: stop,
            _idle: Some(tx),
        }
    }
}

fn run(
    netns: Option<&std::path::Path>,
    cilium_bpffs: PathBuf,
    interval: Duration,
    tx: &UnboundedSender<Snapshot>,
    stopped: &Receiver<()>,
) {
    let sources = sources(cilium_bpffs);
    if let Some(path) = netns
        && let Err(e) = crate::netns::enter(path)
    {
        let reads = sources
            .iter()
            .map(|s| (s.source(), Err(Unread::Failed(e.to_string()))))
            .collect();
        let _ = tx.send(Snapshot { reads });
        return;
    }
    loop {
        let reads = sources.iter().map(|s| (s.source(), s.read())).collect();
        if tx.send(Snapshot { reads }).is_err() {
            return;
        }
        match stopped.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}
