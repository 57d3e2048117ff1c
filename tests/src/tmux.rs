//! A real terminal for the TUI: a tmux server of our own (its own socket), running one command in
//! a window of a fixed size, read back with `capture-pane`. Killed when dropped.
use std::{
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server running `command` (through `sh -c`) in a `width` x `height` window. The pane
    /// stays after the command exits, so what it left can be read.
    pub fn start(name: &str, command: &str, width: u16, height: u16) -> Tmux {
        assert!(
            Command::new("tmux").arg("-V").output().is_ok(),
            "tmux is not installed; the terminal tests need it (cargo xtask setup installs it)"
        );
        let tmux = Tmux {
            socket: format!("tracer-test-{name}-{}", std::process::id()),
        };
        // Read as the server starts, which `new-session` waits for: removed after.
        let conf =
            crate::temp_file::temp_file(&format!("{name}.tmux.conf"), "set -g remain-on-exit on\n");
        tmux.run(&[
            "-f",
            &conf,
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "-s",
            "t",
            command,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// Keys by tmux name (`Enter`, `Escape`, `Tab`, `q`).
    pub fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.run(&["send-keys", "-t", "t", key]);
        }
    }

    /// Waits until `ready(screen)`; fails naming `what` with the last screen.
    pub fn wait_until(&self, what: &str, within: Duration, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what} within {within:?}; the screen was:\n{screen}"
            );
            sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
