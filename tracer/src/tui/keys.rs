//! Key -> action. The only place that knows the key bindings (the help overlay lists `HELP`).
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::state::Action;

/// The bindings as the help overlay shows them.
pub const HELP: &[(&str, &str)] = &[
    ("/", "filter by text; Enter keeps it, Esc clears it"),
    (
        "v",
        "cycle the verdict filter: needs attention, each verdict, all",
    ),
    ("s", "cycle the sort: severity, count, recent, destination"),
    ("p", "pause / resume the screen (records are still counted)"),
    (
        "Tab",
        "switch view: Flows, Services, DNS, Cluster (--prometheus)",
    ),
    (
        "Enter",
        "detail: why, what to check next, the timeline; Cluster: PromQL",
    ),
    (
        "y",
        "copy the row (Cluster: its PromQL) to the clipboard and a file",
    ),
    ("Up/Down j/k", "move; PgUp/PgDn, Home/End"),
    ("Esc", "close help, detail or the filter"),
    ("?", "this help"),
    ("q Ctrl-C", "quit"),
];

/// `editing`: a text filter is being typed, so printable keys are text, not commands.
pub fn action(key: KeyEvent, editing: bool) -> Option<Action> {
    // Key release and repeat events exist on some terminals; act on presses only.
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    if editing {
        return match key.code {
            KeyCode::Enter => Some(Action::FilterDone),
            KeyCode::Esc => Some(Action::FilterCancel),
            KeyCode::Backspace => Some(Action::FilterBackspace),
            KeyCode::Char(c) => Some(Action::FilterChar(c)),
            _ => None,
        };
    }
    let action = match key.code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('/') => Action::StartFilter,
        KeyCode::Char('v') => Action::CycleVerdict,
        KeyCode::Char('s') => Action::CycleSort,
        KeyCode::Char('p') => Action::TogglePause,
        KeyCode::Tab | KeyCode::BackTab => Action::NextView,
        KeyCode::Enter => Action::ToggleDetail,
        KeyCode::Char('y') => Action::Copy,
        KeyCode::Char('?') => Action::ToggleHelp,
        KeyCode::Esc => Action::Close,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        _ => return None,
    };
    Some(action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn letters_are_text_while_a_filter_is_typed() {
        assert_eq!(action(key(KeyCode::Char('q')), false), Some(Action::Quit));
        assert_eq!(
            action(key(KeyCode::Char('q')), true),
            Some(Action::FilterChar('q'))
        );
        assert_eq!(action(key(KeyCode::Enter), true), Some(Action::FilterDone));
    }

    #[test]
    fn ctrl_c_quits_even_while_typing() {
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action(ctrl_c, true), Some(Action::Quit));
    }
}
