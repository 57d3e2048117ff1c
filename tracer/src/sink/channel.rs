//! Records into a bounded channel, for the live TUI. Never blocks the ring-buffer consumer: when
//! the TUI falls behind, the record is dropped and counted, and the TUI shows the count in its
//! header. Nothing is lost silently.
use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio::sync::mpsc::{self, error::TrySendError};

use super::Sink;
use crate::record::Record;

pub struct ChannelSink {
    tx: mpsc::Sender<Record>,
    dropped: Arc<AtomicU64>,
}

impl ChannelSink {
    /// `dropped` counts the records the channel had no room for.
    pub fn new(tx: mpsc::Sender<Record>, dropped: Arc<AtomicU64>) -> ChannelSink {
        ChannelSink { tx, dropped }
    }
}

impl Sink for ChannelSink {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        match self.tx.try_send(record.clone()) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            // The TUI is gone: end tracing the way a closed pipe does.
            Err(TrySendError::Closed(_)) => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::StatsRecord;

    #[test]
    fn counts_what_does_not_fit_and_ends_when_the_tui_is_gone() {
        let (tx, rx) = mpsc::channel(1);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut sink = ChannelSink::new(tx, Arc::clone(&dropped));
        let record = Record::Stats(StatsRecord::default());
        sink.write(&record).expect("room for one");
        sink.write(&record).expect("full is not an error");
        sink.write(&record).expect("full is not an error");
        assert_eq!(dropped.load(Ordering::Relaxed), 2);
        drop(rx);
        let e = sink.write(&record).expect_err("closed");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }
}
