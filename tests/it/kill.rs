//! kill -9 at any moment of a `flowc run --session` conversation leaves the
//! store as before a turn or after it: 200 children are killed mid-run,
//! each going on with the one session the ones before left, and the session
//! always loads with every turn a child reported and every stored turn
//! whole. Each kill waits for the child's first turn (an event, not a
//! delay that a loaded machine stretches), then lets it go on for a
//! varying moment, so every kill lands mid-conversation.

use crate::support::{stderr, temp_dir};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const KILLS: usize = 200;

/// Turns small and many: each message moves the conversation on.
use crate::workflows::BOOKING as PROGRAM;

fn flowc(dir: &std::path::Path, store: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
    command
        .args(args)
        .current_dir(dir)
        .env("FLOWC_STORE", store)
        .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
        .env("NO_COLOR", "1")
        .env_remove("FLOWC_PROVIDER")
        .env_remove("FLOWC_MODEL");
    command
}

fn stored_session(dir: &std::path::Path, store: &str) -> Value {
    let output = flowc(dir, store, &["sessions", "show", "k", "--json"]).output();
    let Ok(output) = output else {
        panic!("flowc sessions show did not start");
    };
    let said = stderr(&output);
    let none_yet = said.contains("there is no session `k`") || said.contains("there is no store");
    if output.status.code() == Some(2) && none_yet {
        return serde_json::json!({ "turns": 0, "transcript": [] });
    }
    assert_eq!(output.status.code(), Some(0), "the session loads after a kill: {}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_default()
}

#[cfg(unix)]
#[test]
fn kill_9_mid_turn_never_loses_a_committed_turn_nor_tears_one() {
    let dir = temp_dir("kill");
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    assert!(std::fs::write(dir.join("booking.flow"), PROGRAM).is_ok());
    let script: String =
        (0..400).map(|index| if index % 3 == 0 { "I want to book the Ritz\n" } else { "2\n" }).collect();
    // A fixed xorshift: the kill moments vary but every run of the test
    // sees the same ones.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut reported = 0u64;
    let mut mid_conversation = 0;
    for kill in 0..KILLS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_micros(state % 20_000);
        let child = flowc(&dir, &store, &["run", "booking.flow", "--session", "k", "--json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            panic!("flowc did not start");
        };
        if let Some(mut stdin) = child.stdin.take() {
            // The child may die before it reads everything.
            let _ = stdin.write_all(script.as_bytes());
        }
        let mut printed = String::new();
        let mut stdout = child.stdout.take().map(BufReader::new);
        if let Some(stdout) = stdout.as_mut() {
            // The first turn printed: the conversation is under way.
            let _ = stdout.read_line(&mut printed);
        }
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        if let Some(stdout) = stdout.as_mut() {
            let _ = stdout.read_to_string(&mut printed);
        }
        let mut errors = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut errors);
        }
        assert!(!errors.contains("error"), "kill {kill}: the child failed instead of being killed: {errors}");
        // A turn is printed after it commits: every printed turn is stored.
        let turns = printed.lines().filter(|line| line.starts_with('{')).count() as u64;
        if turns > 0 {
            mid_conversation += 1;
        }
        reported += turns;
        if kill % 20 == 19 || kill == KILLS - 1 {
            let session = stored_session(&dir, &store);
            let stored = session["turns"].as_u64().unwrap_or_default();
            // At most one turn per kill committed without being printed.
            assert!(stored >= reported, "kill {kill}: {stored} turns stored, {reported} reported");
            assert!(stored <= reported + kill as u64 + 1, "kill {kill}: {stored} stored, {reported} reported");
            let transcript = session["transcript"].as_array().map_or(0, Vec::len) as u64;
            assert_eq!(transcript, stored * 2, "kill {kill}: every stored turn is whole");
        }
    }
    assert_eq!(mid_conversation, KILLS, "every kill lands mid-conversation, after its first turn");
    let leftovers: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| (name.ends_with(".lock") && name != "flowc.db.lock") || name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no lock or temporary file outlives a killed process: {leftovers:?}");
    // The store's open lock is a file that stays, locked with flock while
    // a store is open: the kernel drops a killed process's lock with it.
    let open_lock = std::fs::File::open(dir.join("flowc.db.lock"));
    let Ok(open_lock) = open_lock else {
        panic!("the store has no open-lock file: {open_lock:?}");
    };
    // SAFETY: flock on a descriptor the File owns.
    let free = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&open_lock), libc::LOCK_EX | libc::LOCK_NB) == 0 };
    assert!(free, "a killed process's open lock outlived it");
    eprintln!("kill -9: {KILLS} kills, {mid_conversation} mid-conversation, {reported} turns reported, all stored");
    let _ = std::fs::remove_dir_all(&dir);
}
