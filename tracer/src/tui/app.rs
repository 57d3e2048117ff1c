//! The event loop: keys, a frame tick and batches of records in one `tokio::select!`. Generic over
//! the ratatui `Backend` so tests run it on a `TestBackend`.
//!
//! Under load (tens of thousands of records a second) records are taken in batches and the screen
//! is drawn at a fixed frame rate, never once per record, so a key press waits at most for one batch.
use std::{
    io::{self, Write as _},
    path::PathBuf,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime},
};

use crossterm::event::Event;
use ratatui::{Terminal, backend::Backend};
use tokio::sync::mpsc;

use super::{
    cluster_state::ClusterUpdate,
    keys,
    state::{Effect, State},
    view,
};
use crate::record::Record;

/// 10 frames a second: ages and counts move smoothly, and drawing costs little under load.
pub const FRAME: Duration = Duration::from_millis(100);
/// Records applied per loop turn; one batch takes a few milliseconds, which bounds key latency.
const BATCH: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot draw on the terminal: {0}")]
    Draw(String),
}

/// Which clock ages are measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Live: wall time moves the model forward at every frame.
    Wall,
    /// Replay and tests: the records' own times, so a replay shows the ages it had.
    Records,
}

#[derive(Debug)]
pub struct Options {
    pub clock: Clock,
    /// Where `y` writes the selected row; `None` disables the file.
    pub copy_file: Option<PathBuf>,
    /// Also put the copied row on the clipboard with OSC 52 (a real terminal only).
    pub osc52: bool,
}

/// Runs until the user quits. Records stop arriving when the source ends; the screen stays.
pub async fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    state: &mut State,
    events: &mut mpsc::Receiver<Event>,
    records: &mut mpsc::Receiver<Record>,
    channel_dropped: &AtomicU64,
    options: &Options,
) -> Result<(), AppError> {
    // No Cluster view: a channel that is closed from the start.
    let (_, mut cluster) = mpsc::channel(1);
    run_with_cluster(
        terminal,
        state,
        events,
        records,
        &mut cluster,
        channel_dropped,
        options,
    )
    .await
}

/// `run`, with the Cluster view's answers from Prometheus (`cluster_poll.rs`) as a fourth source.
pub async fn run_with_cluster<B: Backend>(
    terminal: &mut Terminal<B>,
    state: &mut State,
    events: &mut mpsc::Receiver<Event>,
    records: &mut mpsc::Receiver<Record>,
    cluster: &mut mpsc::Receiver<ClusterUpdate>,
    channel_dropped: &AtomicU64,
    options: &Options,
) -> Result<(), AppError> {
    let mut cluster_open = true;
    let mut frame = tokio::time::interval(FRAME);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut batch = Vec::with_capacity(BATCH);
    let mut events_open = true;
    let mut records_open = true;
    loop {
        tokio::select! {
            // Keys first, then the frame, then records: the frame comes before records so a
            // source that is always ready cannot starve the screen.
            biased;
            event = events.recv(), if events_open => match event {
                Some(Event::Key(key)) => {
                    let Some(action) = keys::action(key, state.editing.is_some()) else { continue };
                    match state.act(action) {
                        Effect::Quit => return Ok(()),
                        Effect::Copy(json) => state.status = Some(copy(&json, options)),
                        Effect::CopyPromql(text) => {
                            state.status = Some(copy_promql(&text, options));
                        }
                        Effect::None => {}
                    }
                    // Answer the key now rather than at the next frame.
                    draw(terminal, state)?;
                }
                Some(Event::Resize(..)) => draw(terminal, state)?,
                Some(_) => {}
                None => events_open = false,
            },
            update = cluster.recv(), if cluster_open => match update {
                Some(update) => state.apply_cluster(update),
                None => cluster_open = false,
            },
            _ = frame.tick() => {
                state.channel_dropped = channel_dropped.load(Ordering::Relaxed);
                if options.clock == Clock::Wall {
                    state.tick(SystemTime::now());
                }
                draw(terminal, state)?;
            }
            n = records.recv_many(&mut batch, BATCH), if records_open => {
                if n == 0 {
                    records_open = false;
                    state.source_ended = true;
                }
                for record in batch.drain(..) {
                    state.apply(record);
                }
            }
        }
    }
}

pub fn draw<B: Backend>(terminal: &mut Terminal<B>, state: &mut State) -> Result<(), AppError> {
    let size = terminal.size().map_err(|e| AppError::Draw(e.to_string()))?;
    state.page = view::page_rows(size.height, state);
    terminal
        .draw(|frame| view::draw(frame, state))
        .map_err(|e| AppError::Draw(e.to_string()))?;
    Ok(())
}

/// Puts the row where a person can paste it; returns what happened, for the footer.
pub fn copy(json: &str, options: &Options) -> String {
    let mut done = Vec::new();
    if let Some(path) = &options.copy_file {
        match std::fs::write(path, format!("{json}\n")) {
            Ok(()) => done.push(format!("wrote {}", path.display())),
            Err(e) => done.push(format!("cannot write {}: {e}", path.display())),
        }
    }
    if options.osc52 {
        match osc52(json) {
            Ok(()) => done.push("clipboard (OSC 52)".to_string()),
            Err(e) => done.push(format!("clipboard failed: {e}")),
        }
    }
    if done.is_empty() {
        "nowhere to copy to".into()
    } else {
        format!("copied the row as JSON: {}", done.join(", "))
    }
}

/// The Cluster view's row as `PromQL` to paste into Grafana: to the clipboard and to a `.promql`
/// file beside the row file.
pub fn copy_promql(text: &str, options: &Options) -> String {
    let mut done = Vec::new();
    if let Some(path) = options
        .copy_file
        .as_ref()
        .map(|p| p.with_extension("promql"))
    {
        match std::fs::write(&path, text) {
            Ok(()) => done.push(format!("wrote {}", path.display())),
            Err(e) => done.push(format!("cannot write {}: {e}", path.display())),
        }
    }
    if options.osc52 {
        match osc52(text) {
            Ok(()) => done.push("clipboard (OSC 52)".to_string()),
            Err(e) => done.push(format!("clipboard failed: {e}")),
        }
    }
    if done.is_empty() {
        "nowhere to copy to".into()
    } else {
        format!("copied the row's PromQL: {}", done.join(", "))
    }
}

/// OSC 52 sets the terminal's clipboard, also over ssh and in tmux (`set-clipboard on`).
fn osc52(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    write!(out, "\x1b]52;c;{}\x07", base64(text.as_bytes()))?;
    out.flush()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }
}
