//! What an operator meets running flowc for months, through the binary: a
//! message over the size bound is refused before anything is stored.

use crate::support::{flowc_env, root, stderr, stdout, temp_dir, unique};
use std::time::Duration;

#[test]
fn a_50_mb_message_is_refused_before_anything_is_stored() {
    let dir = temp_dir(&format!("ops-big-{}", unique()));
    let script = dir.join("big.txt");
    assert!(std::fs::write(&script, format!("hello\n{}\n", "word ".repeat(10 * 1024 * 1024))).is_ok());
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let booking = root().join("flows/booking.flow");
    let booking = booking.to_string_lossy();
    let script = script.to_string_lossy();
    let args = ["run", booking.as_ref(), "--script", script.as_ref(), "--session", "big", "--store", &store, "--json"];
    let output = flowc_env(&dir, &args, &[], Duration::from_secs(120));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(stdout(&output), "", "not even the first line ran");
    assert!(
        stderr(&output).contains("line 2 of `")
            && stderr(&output).contains("is 50.0 MB long, over the maximum message size of 256 KB"),
        "{}",
        stderr(&output)
    );
    let shown = flowc_env(&dir, &["sessions", "show", "big", "--store", &store], &[], Duration::from_secs(60));
    assert_ne!(shown.status.code(), Some(0), "no session was stored: {}", stdout(&shown));

    // Linux caps one argument at 128 KB, below the default bound: the
    // same check under a smaller one.
    let data = format!("{{\"hotel\": \"{}\"}}", "x".repeat(3 * 1024));
    let args = ["run", booking.as_ref(), "--data", &data, "--max-message-bytes", "2048"];
    let output = flowc_env(&dir, &args, &[], Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--data is 3 KB long, over the maximum message size of 2 KB"),
        "{}",
        stderr(&output)
    );
    let smaller = flowc_env(
        &dir,
        &["run", booking.as_ref(), "--script", script.as_ref(), "--max-message-bytes", "100"],
        &[],
        Duration::from_secs(60),
    );
    assert!(stderr(&smaller).contains("maximum message size of 100 bytes"), "{}", stderr(&smaller));
    let _ = std::fs::remove_dir_all(&dir);
}
