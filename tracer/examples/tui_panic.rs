//! A panic while the TUI owns the terminal, for `tests/tui_terminal.rs`: the terminal session the
//! tracer's TUI uses (raw mode, alternate screen, stderr captured), one frame of a recording drawn,
//! then a panic. The test checks the terminal is back in cooked mode and the message reached the
//! user.
use std::path::PathBuf;

use tracer::{
    replay,
    tui::{state::State, terminal::Session, view},
};

fn main() {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: tui_panic FILE.jsonl"),
    );
    let mut state = State::new("panic test", None);
    for timed in replay::Reader::open(&path).expect("a recording") {
        state.apply(timed.expect("a record").record);
    }
    let mut session = Session::start(true).expect("a terminal");
    session
        .terminal
        .draw(|frame| view::draw(frame, &state))
        .expect("a frame");
    panic!("panicking on purpose inside the TUI");
}
