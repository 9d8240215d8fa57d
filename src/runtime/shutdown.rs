//! A graceful stop the operator asked for (SIGTERM or SIGINT to `flowc
//! worker` or `flowc run`): one process-wide flag that the workflow runner
//! reads before each step and exec tools read while their child runs.
//!
//! Process-wide because a stop concerns the whole process, and because the
//! signal handler that sets it knows nothing of the runs in flight. The
//! step in flight finishes if it can within the grace period; after it,
//! exec tools kill their child's process group and the runner records the
//! step as interrupted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static DEADLINE: Mutex<Option<Instant>> = Mutex::new(None);
/// Set by an exec tool that killed its child because the grace period was
/// over, so the runner can tell an interruption from a failure.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks the process to stop after the step in flight, which has `grace`
/// to finish. A second request keeps the first deadline.
pub fn request(grace: Duration) {
    if let Ok(mut deadline) = DEADLINE.lock()
        && deadline.is_none()
    {
        *deadline = Some(Instant::now() + grace);
    }
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for: start no new step or run.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// When the step in flight must be over, once a stop was asked for.
pub fn deadline() -> Option<Instant> {
    if !requested() {
        return None;
    }
    DEADLINE.lock().ok().and_then(|deadline| *deadline)
}

/// Whether the grace period is over.
pub fn grace_over() -> bool {
    deadline().is_some_and(|deadline| Instant::now() >= deadline)
}

/// An exec tool killed its child at the end of the grace period.
pub fn note_interrupted() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether a tool was interrupted since the last call (and forgets it).
pub fn take_interrupted() -> bool {
    INTERRUPTED.swap(false, Ordering::SeqCst)
}
