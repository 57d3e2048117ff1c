//! The real binary in a real terminal (tmux): what a person sees after typing, and that the terminal
//! is back in cooked mode after a panic in the TUI's terminal session (`examples/tui_panic.rs`).
//! `cargo xtask test` installs tmux; without it these tests fail.
use std::{
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

const TRACER: &str = env!("CARGO_BIN_EXE_tracer");
const DEAD_BACKEND: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/tui/a_dead_backend.jsonl"
);

/// `examples/tui_panic.rs`, which `cargo test` builds beside the test binaries.
fn tui_panic_example() -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>/deps");
    let example = profile_dir.join("examples/tui_panic");
    assert!(
        example.exists(),
        "{} was not built: `cargo test -p tracer` builds it, as does `cargo build -p tracer --example tui_panic`",
        example.display()
    );
    example.display().to_string()
}

#[path = "../../tests/src/temp_file.rs"]
mod temp_file;
use temp_file::temp_file;

/// One tmux server of our own (its own socket), killed when the test ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A tmux server running `command`. `cargo xtask test` installs tmux; without it this test
    /// fails rather than pass having checked nothing.
    fn start(name: &str, command: &str) -> Tmux {
        assert!(
            Command::new("tmux").arg("-V").output().is_ok(),
            "tmux is not installed; the terminal tests need it (cargo xtask setup installs it)"
        );
        let tmux = Tmux {
            socket: format!("tracer-test-{name}-{}", std::process::id()),
        };
        // Keep the pane after the program exits, so we can read what it left behind; set in the
        // config so it holds from the first instant (a quick exit would otherwise end the server).
        let conf = temp_file(&format!("{name}.tmux.conf"), "set -g remain-on-exit on\n");
        tmux.run(&[
            "-f",
            &conf,
            "new-session",
            "-d",
            "-x",
            "100",
            "-y",
            "30",
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

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.run(&["send-keys", "-t", "t", key]);
        }
    }

    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
    }

    /// Waits until the screen shows `needle`; fails with the last screen.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {needle:?}; the screen was:\n{screen}"
            );
            sleep(Duration::from_millis(50));
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

/// The table's selected row (drawn with `>`).
fn selected_row(screen: &str) -> &str {
    screen.lines().find(|l| l.starts_with('>')).unwrap_or("")
}

#[test]
fn replay_in_a_terminal_answers_filter_view_help_and_quit() {
    // The shell prints the exit code into the pane: tmux's own `pane_dead_status` was seen empty
    // after a clean exit on a loaded machine.
    let script = temp_file(
        "replay.sh",
        format!("{TRACER} replay {DEAD_BACKEND} --speed 0; echo exit=$?; sleep 60"),
    );
    let tmux = Tmux::start("replay", &format!("sh {script}"));
    let screen = tmux.wait_for("ENDED");
    assert!(screen.contains("replay a_dead_backend.jsonl"), "{screen}");
    assert!(
        selected_row(&screen).contains("abandoned"),
        "worst first:\n{screen}"
    );
    assert!(
        selected_row(&screen).contains("10.244.1.30:8080"),
        "{screen}"
    );

    tmux.text("/");
    tmux.wait_for("filter: /");
    tmux.text("1.11");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("filter: 1.11");
    assert!(
        selected_row(&screen).contains("slow"),
        "only the healthy backend's row:\n{screen}"
    );
    assert!(!screen.contains("10.244.1.30:8080"), "{screen}");

    tmux.keys(&["Escape", "Tab"]);
    let screen = tmux.wait_for("SERVICE / BACKEND");
    assert!(screen.contains("├ 10.244.1.30:8080"), "{screen}");
    assert!(
        screen.contains("100%"),
        "the dead backend fails every connect:\n{screen}"
    );

    tmux.text("?");
    tmux.wait_for("Keys (? or Esc closes)");

    tmux.text("q");
    let screen = tmux.wait_for("exit=");
    assert!(screen.contains("exit=0"), "q quits cleanly:\n{screen}");
    assert!(
        !tmux.screen().contains("SERVICE / BACKEND"),
        "the alternate screen is gone"
    );
}

#[test]
fn a_panic_restores_the_terminal() {
    // The shell reports the exit code and the terminal modes after the tracer panicked in raw mode.
    let script = format!(
        "RUST_BACKTRACE=0 {} {DEAD_BACKEND}; echo exit=$?; \
         echo modes: $(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo); \
         sleep 60",
        tui_panic_example()
    );
    let script = temp_file("panic.sh", &script);
    let tmux = Tmux::start("panic", &format!("sh {script}"));
    let screen = tmux.wait_for("modes:");
    assert!(
        screen.contains("exit=101"),
        "a panic exits with 101:\n{screen}"
    );
    assert!(
        screen.contains("panicking on purpose inside the TUI"),
        "the panic message reaches the user:\n{screen}"
    );
    let modes = screen
        .lines()
        .find(|l| l.starts_with("modes:"))
        .unwrap_or("");
    assert!(
        modes.contains(" icanon") && modes.contains(" echo"),
        "cooked mode is back: {modes}"
    );
    assert!(
        !modes.contains("-icanon") && !modes.contains("-echo"),
        "still raw: {modes}"
    );
}

/// Issue 27: records `replay` skipped (a newer tracer's kinds, a last line a crash cut short) were
/// said on stderr, under the closed screen, and in a footer the first key cleared; the header now
/// says how many for as long as the screen is up.
#[test]
fn replay_shows_the_records_it_skipped_in_its_header() {
    let good = std::fs::read_to_string(DEAD_BACKEND).expect("fixture");
    let newer = r#"{"schema":1,"kind":"quic_handshake","time":"2026-11-30T16:40:01.000Z"}"#;
    let last = good.lines().last().expect("a last line");
    let cut = &good[..good.len() - last.len() / 2 - 1];
    let file = temp_file("skipped.jsonl", format!("{newer}\n{newer}\n{cut}"));
    let script = temp_file(
        "skipped.sh",
        format!("{TRACER} replay {file} --speed 0 2>/dev/null; echo exit=$?; sleep 60"),
    );
    let tmux = Tmux::start("skipped", &format!("sh {script}"));
    let screen = tmux.wait_for("ENDED");
    let header = screen.lines().next().unwrap_or("");
    assert!(
        header.contains("skipped 3 (unknown kind 2, cut last line 1)"),
        "{screen}"
    );
    // A key clears the footer's status; the header keeps the count.
    tmux.keys(&["Tab"]);
    let screen = tmux.wait_for("SERVICE / BACKEND");
    let header = screen.lines().next().unwrap_or("");
    assert!(header.contains("skipped 3"), "{screen}");
    tmux.text("q");
    let screen = tmux.wait_for("exit=");
    assert!(screen.contains("exit=0"), "{screen}");
}
