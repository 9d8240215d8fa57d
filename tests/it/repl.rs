//! The REPL as a person uses it: `flowc run flows/booking.flow` on a
//! pseudo-terminal, driven by what it prints. Every wait is for text (the
//! `you> ` prompt, a reply) and is bounded, so a hang fails the test
//! instead of stalling CI.

use crate::support::{root, temp_dir};
use rexpect::process::WaitStatus;
use rexpect::session::{Options, PtySession, spawn_with_options};
use std::path::Path;
use std::process::Command;

/// The longest any single wait may take.
const WAIT_MS: u64 = 20_000;
const PROMPT: &str = "you> ";

pub(crate) struct Repl {
    session: PtySession,
}

impl Repl {
    /// Starts the REPL in `dir` (where `/save` writes) on the booking example.
    pub(crate) fn start(dir: &Path) -> Repl {
        let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
        command
            .arg("run")
            .arg(root().join("flows/booking.flow"))
            .current_dir(dir)
            .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
            .env("FLOWC_SEED", "7")
            .env("NO_COLOR", "1")
            // A real terminal type, so rustyline edits lines in raw mode
            // (Ctrl-C and Ctrl-D are keys, not signals).
            .env("TERM", "xterm")
            .env_remove("FLOWC_PROVIDER")
            .env_remove("FLOWC_MODEL");
        let options = Options::new().timeout_ms(Some(WAIT_MS)).strip_ansi_escape_codes(true);
        let session = match spawn_with_options(command, options) {
            Ok(session) => session,
            Err(error) => panic!("cannot start flowc on a pty: {error}"),
        };
        let mut repl = Repl { session };
        repl.expect("/help for commands, Ctrl-D to quit.");
        repl.expect(PROMPT);
        repl
    }

    /// Waits for `text` (ASCII); returns what came before it.
    fn expect(&mut self, text: &str) -> String {
        match self.session.exp_string(text) {
            Ok(before) => utf8(&before),
            Err(error) => panic!("waiting for {text:?}: {error}"),
        }
    }

    /// Types a line and presses Enter.
    fn type_line(&mut self, line: &str) {
        self.type_keys(line);
        self.type_keys("\r");
    }

    fn type_keys(&mut self, keys: &str) {
        let sent = self.session.send(keys).and_then(|_| self.session.flush());
        if let Err(error) = sent {
            panic!("cannot type {keys:?}: {error}");
        }
    }

    fn control(&mut self, key: char) {
        if let Err(error) = self.session.send_control(key) {
            panic!("cannot send Ctrl-{key}: {error}");
        }
    }

    /// Says something and waits for the reply and the next prompt; returns
    /// everything printed in between (reply and trace line).
    pub(crate) fn say(&mut self, line: &str, reply: &str) -> String {
        self.type_line(line);
        let mut printed = self.expect(reply);
        printed.push_str(reply);
        printed.push_str(&self.expect(PROMPT));
        printed
    }

    /// Runs a slash command and returns its output up to the next prompt.
    fn command(&mut self, line: &str) -> String {
        self.type_line(line);
        self.expect(PROMPT)
    }

    /// Ctrl-D: the REPL must end by itself, with exit code 0.
    pub(crate) fn quit_with_ctrl_d(mut self) {
        self.control('d');
        if let Err(error) = self.session.exp_eof() {
            panic!("the REPL did not exit on Ctrl-D: {error}");
        }
        match self.session.process().wait() {
            Ok(WaitStatus::Exited(_, code)) => assert_eq!(code, 0),
            other => panic!("the REPL ended with {other:?}"),
        }
    }
}

/// rexpect hands over the terminal's bytes one char per byte: decode them
/// as the UTF-8 they are (the trace line holds `·`).
fn utf8(latin1: &str) -> String {
    let bytes: Vec<u8> = latin1.chars().map(|character| u8::try_from(u32::from(character)).unwrap_or(b'?')).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn a_person_books_a_room_and_looks_at_the_data_and_the_trace() {
    let dir = temp_dir("repl-booking");
    let mut repl = Repl::start(&dir);

    let help = repl.command("/help");
    for command in ["/data", "/trace", "/reset", "/save FILE", "/load FILE", "/quit"] {
        assert!(help.contains(command), "/help lists {command}: {help}");
    }
    let printed = repl.say("Hi, I'd like to book a hotel room", "Which hotel would you like to book?");
    assert!(printed.contains("[booking/ask_hotel · ran ask_hotel · needs_input · 1 model call]"), "{printed}");
    repl.say("The Grand Hotel, please", "For which date?");
    repl.say("2026-12-04", "How many guests?");
    repl.say("2 guests", "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    let booked = repl.say("yes", "Booked! Your confirmation number is GH-28745CD2.");
    assert!(booked.contains("[no flow · ran confirm, book · flow_complete · 1 model call]"), "{booked}");

    let data = repl.command("/data");
    assert!(data.contains(r#""hotel": "Grand Hotel""#), "{data}");
    assert!(data.contains(r#""guests": 2"#), "{data}");
    assert!(data.contains(r#""booking_id": "GH-28745CD2""#), "{data}");

    let trace = repl.command("/trace");
    assert!(trace.contains(r#""directives": []"#), "{trace}");
    assert!(trace.contains(r#""event": "step_executed""#), "{trace}");
    assert!(trace.contains(r#""tool": "book_hotel""#), "{trace}");
    assert!(trace.contains(r#""stopped_reason": "flow_complete""#), "{trace}");

    let unknown = repl.command("/frobnicate");
    assert!(unknown.contains("unknown command /frobnicate"), "{unknown}");
    repl.quit_with_ctrl_d();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_person_saves_resets_loads_and_cancels_a_line_with_ctrl_c() {
    let dir = temp_dir("repl-session");
    let mut repl = Repl::start(&dir);
    repl.say("Hi, I'd like to book a hotel room", "Which hotel would you like to book?");
    repl.say("The Grand Hotel, please", "For which date?");

    let saved = repl.command("/save booking.json");
    assert!(saved.contains("saved to booking.json"), "{saved}");
    let file = match std::fs::read_to_string(dir.join("booking.json")) {
        Ok(text) => text,
        Err(error) => panic!("/save wrote no file: {error}"),
    };
    let session: serde_json::Value = serde_json::from_str(&file).unwrap_or_default();
    assert_eq!(session["data"]["hotel"], "Grand Hotel", "{file}");
    assert_eq!(session["turns"], 2);

    let reset = repl.command("/reset");
    assert!(reset.contains("started over"), "{reset}");
    let data = repl.command("/data");
    assert!(data.contains("{}"), "the data is gone after /reset: {data}");
    assert!(repl.command("/trace").contains("no turn yet"));

    let loaded = repl.command("/load booking.json");
    assert!(loaded.contains("loaded booking.json"), "{loaded}");
    let data = repl.command("/data");
    assert!(data.contains(r#""hotel": "Grand Hotel""#), "{data}");
    // The loaded conversation goes on where it was saved.
    repl.say("2026-12-04", "How many guests?");

    let missing = repl.command("/load nowhere.json");
    assert!(missing.contains("cannot load nowhere.json"), "{missing}");

    // Ctrl-C throws away a half-typed line: it is never sent as a message.
    repl.type_keys("2 gue");
    repl.control('c');
    repl.expect(PROMPT);
    let data = repl.command("/data");
    assert!(!data.contains("guests"), "the cancelled line was not answered: {data}");
    repl.say("3 guests", "Shall I book Grand Hotel on 2026-12-04 for 3 guests?");
    repl.quit_with_ctrl_d();
    let _ = std::fs::remove_dir_all(&dir);
}
