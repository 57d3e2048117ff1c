//! Stage 6: where records go. A sink writes into a buffer and is flushed once per batch, so a slow
//! terminal or disk never stalls the ring-buffer consumer for long.
pub mod channel;
pub mod json;
mod json_connect;
mod json_values;
pub mod output_file;
pub mod tee;
pub mod text;

use std::io;

use crate::record::Record;

pub trait Sink {
    fn write(&mut self, record: &Record) -> io::Result<()>;
    fn flush(&mut self) -> io::Result<()>;
}
