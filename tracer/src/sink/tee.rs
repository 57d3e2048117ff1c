//! One record to two sinks: the output (or the TUI's channel) and the metrics (`--metrics`).
use std::io;

use super::Sink;
use crate::record::Record;

pub struct Tee {
    pub first: Box<dyn Sink>,
    pub second: Box<dyn Sink>,
}

impl Sink for Tee {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        // The second sees every record even when the first fails (a closed pipe ends the run, and
        // the final stats still reach the metrics).
        let second = self.second.write(record);
        self.first.write(record).and(second)
    }

    fn flush(&mut self) -> io::Result<()> {
        let second = self.second.flush();
        self.first.flush().and(second)
    }
}
