//! The REPL on a pseudo-terminal, against a fake OpenAI server whose
//! replies stream slowly: the reply shows as it is written and is printed
//! once; Ctrl-C during a model call cancels the turn and leaves the
//! session unchanged.

#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use crate::fake::{self, Facts, FakeServer};
use crate::support::root;
use serde_json::json;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
/// Between two pieces of a streamed reply.
const PACE: Duration = Duration::from_millis(400);

/// A child process whose stdin, stdout and stderr are one terminal.
struct Pty {
    master: std::fs::File,
    child: Child,
    output: String,
}

impl Pty {
    fn spawn(args: &[&str], env: &[(&str, &str)]) -> Pty {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors; the other arguments may be null.
        let opened =
            unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned here.
        let (master, slave) = unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) };
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&master), libc::F_GETFL);
            libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&master), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
        command
            .args(args)
            .current_dir(root())
            .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
            .env("FLOWC_SEED", "7")
            .env("NO_COLOR", "1")
            // rustyline reads a plain line on a terminal it does not know.
            .env("TERM", "dumb");
        for variable in ["FLOWC_PROVIDER", "FLOWC_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"] {
            command.env_remove(variable);
        }
        command
            .envs(env.iter().copied())
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe; the terminal on
        // stdin becomes the new session's controlling terminal, so that
        // Ctrl-C on it sends SIGINT.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("flowc starts");
        Pty { master, child, output: String::new() }
    }

    fn send(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Reads what the terminal shows.
    fn read(&mut self) {
        let mut buffer = [0u8; 4096];
        loop {
            match self.master.read(&mut buffer) {
                Ok(0) => return,
                Ok(read) => self.output.push_str(&String::from_utf8_lossy(&buffer[..read])),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return,
                // EIO: the child closed the terminal.
                Err(_) => return,
            }
        }
    }

    /// Waits until the terminal has shown `needle` after position `from`;
    /// returns where it ends.
    fn expect(&mut self, needle: &str, from: usize) -> usize {
        let deadline = Instant::now() + WAIT;
        loop {
            self.read();
            if let Some(at) = self.output[from..].find(needle) {
                return from + at + needle.len();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the terminal never showed {needle:?}; it shows:\n{}", self.output);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait(&mut self) -> Option<i32> {
        let deadline = Instant::now() + WAIT;
        loop {
            self.read();
            if let Some(status) = self.child.try_wait().unwrap() {
                self.read();
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("flowc did not quit; the terminal shows:\n{}", self.output);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn replies_stream_into_the_repl_once_and_ctrl_c_cancels_a_turn() {
    let facts = Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({"flow": "booking"})),
        ("The Grand Hotel, please", json!({"fields": {"hotel": "The Grand Hotel"}})),
    ]);
    let server =
        FakeServer::start(Arc::new(move |request: &fake::Request, _| fake::openai_answer(&facts, request).paced(PACE)));
    let base_url = format!("{}/v1", server.url);
    let mut pty = Pty::spawn(
        &["run", "flows/booking.flow", "--provider", "openai", "--base-url", &base_url],
        &[("OPENAI_API_KEY", "test-key-7f3a9c21")],
    );
    let at = pty.expect("you> ", 0);
    pty.send("Hi, I'd like to book a hotel room\n");
    // The first piece shows while the rest is still on its way.
    let first = pty.expect("Which h", at);
    assert!(!pty.output[first..].contains("to book?"), "the reply streams:\n{}", pty.output);
    let end = pty.expect("[booking/ask_hotel", first);
    let turn = &pty.output[at..end];
    assert_eq!(turn.matches("Which hotel would you like to book?").count(), 1, "printed once:\n{turn}");

    // Ctrl-C while the reply streams: the turn fails, the session stays.
    let at = pty.expect("you> ", end);
    pty.send("The Grand Hotel, please\n");
    let first = pty.expect("For whi", at);
    pty.send("\x03");
    let end = pty.expect("(the session is unchanged)", first);
    assert!(pty.output[at..end].contains("error: model call failed (cancelled)"), "{}", pty.output);
    let at = pty.expect("you> ", end);
    pty.send("/data\n");
    let end = pty.expect("{}", at);
    assert!(!pty.output[at..end].contains("Grand Hotel"), "no data was written:\n{}", pty.output);

    pty.expect("you> ", end);
    pty.send("\x04");
    assert_eq!(pty.wait(), Some(0), "{}", pty.output);
}
