//! The real terminal: raw mode and the alternate screen via `ratatui::try_init` (whose panic hook
//! restores the terminal), keys read on a thread, and stderr kept off the screen while the TUI owns
//! it (the live pipeline warns on stderr; those lines are printed after the TUI closes).
use std::{
    fs::File,
    io::{self, Read as _, Seek as _},
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
    sync::atomic::{AtomicI32, Ordering},
};

use crossterm::event::Event;
use ratatui::DefaultTerminal;
use tokio::sync::mpsc;

/// The real stderr while it is redirected, for the panic hook; -1 when not redirected.
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

pub struct Session {
    pub terminal: DefaultTerminal,
    stderr: Option<StderrCapture>,
}

impl Session {
    /// `capture_stderr`: hold what is written to stderr until the end (live tracing writes there).
    pub fn start(capture_stderr: bool) -> io::Result<Session> {
        // The terminal first: when there is none, the error goes to the real stderr.
        let terminal = ratatui::try_init()?;
        let stderr = if capture_stderr {
            match StderrCapture::start() {
                Ok(capture) => Some(capture),
                Err(e) => {
                    ratatui::restore();
                    return Err(e);
                }
            }
        } else {
            None
        };
        // Runs before ratatui's hook (which restores the terminal, then prints the panic): the
        // panic message must reach the real stderr, not the capture file.
        let ratatui_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
            if saved >= 0 {
                // SAFETY: `saved` is a descriptor we dup'ed and still own; dup2 onto 2 only
                // replaces our redirection.
                unsafe { libc::dup2(saved, libc::STDERR_FILENO) };
            }
            ratatui_hook(info);
        }));
        Ok(Session { terminal, stderr })
    }

    /// Restores the terminal and stderr, then prints what was written to stderr meanwhile.
    pub fn finish(self) {
        ratatui::restore();
        if let Some(capture) = self.stderr {
            match capture.finish() {
                Ok(text) => eprint!("{text}"),
                Err(e) => {
                    eprintln!("tracer: cannot read back the messages written during the TUI: {e}");
                }
            }
        }
    }
}

/// Reads terminal events on a thread (crossterm's `read` blocks) and forwards them to the loop.
pub fn spawn_input() -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(256);
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if tx.blocking_send(event).is_err() {
                break;
            }
        }
    });
    rx
}

/// stderr (fd 2) redirected to an unlinked temporary file.
struct StderrCapture {
    saved: OwnedFd,
    file: File,
}

impl StderrCapture {
    fn start() -> io::Result<StderrCapture> {
        let path = std::env::temp_dir().join(format!("tracer-tui-stderr-{}", std::process::id()));
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Unlinked at once: nothing is left behind, even on a crash.
        std::fs::remove_file(&path)?;
        // SAFETY: dup on fd 2, which is open for the whole process; the result is checked.
        let saved = unsafe { libc::dup(libc::STDERR_FILENO) };
        if saved < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `saved` is a fresh descriptor that nothing else owns.
        let saved = unsafe { OwnedFd::from_raw_fd(saved) };
        // SAFETY: both descriptors are open; dup2 atomically points fd 2 at the file.
        if unsafe { libc::dup2(file.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
            return Err(io::Error::last_os_error());
        }
        SAVED_STDERR.store(saved.as_raw_fd(), Ordering::SeqCst);
        Ok(StderrCapture { saved, file })
    }

    fn finish(mut self) -> io::Result<String> {
        SAVED_STDERR.store(-1, Ordering::SeqCst);
        // SAFETY: `saved` is open and ours; this puts the real stderr back on fd 2.
        if unsafe { libc::dup2(self.saved.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut text = String::new();
        self.file.rewind()?;
        self.file.read_to_string(&mut text)?;
        Ok(text)
    }
}
