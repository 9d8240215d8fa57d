//! News that a workflow run was saved, for the clients following its
//! events (`GET /v1/runs/{id}/events`): pushed, not polled. A run this
//! process executes is announced by the execution itself, on every save;
//! on PostgreSQL, saves by other processes (servers, workers, `flowc
//! resume`) arrive by `LISTEN` on the store's run-events channel. Only a
//! SQLite store shared with other processes leaves followers to read the
//! run again every `--events-poll`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::broadcast;

/// Saves announced and not yet taken by a slow follower before it must read
/// the run again to catch up.
const BACKLOG: usize = 1024;

/// How long the listening thread waits before it looks at the stop flag,
/// and before it connects again after losing its connection.
const LISTEN_TICK: Duration = Duration::from_millis(500);

/// The ids of runs as they are saved.
pub struct RunNews {
    sender: broadcast::Sender<Arc<str>>,
    stop: Arc<AtomicBool>,
}

impl Default for RunNews {
    fn default() -> RunNews {
        RunNews { sender: broadcast::channel(BACKLOG).0, stop: Arc::new(AtomicBool::new(false)) }
    }
}

impl RunNews {
    /// Announces that run `id` was saved.
    pub fn saved(&self, id: &str) {
        // No follower at all is the usual case, not an error.
        let _ = self.sender.send(Arc::from(id));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.sender.subscribe()
    }

    /// Forwards the run saves other processes announce on the PostgreSQL
    /// store at `url`, from a thread of its own, until this is dropped. A
    /// lost connection is opened again; meanwhile followers poll.
    pub fn listen_postgres(&self, url: String) {
        let sender = self.sender.clone();
        let stop = Arc::clone(&self.stop);
        let spawned = std::thread::Builder::new().name("flowc-serve-run-news".to_string()).spawn(move || {
            let mut warned = false;
            while !stop.load(Ordering::Relaxed) {
                if let Err(message) = forward(&url, &sender, &stop) {
                    if !warned {
                        eprintln!(
                            "warning: flowc serve: cannot listen for run events on the store ({message}); \
                             followers read runs again every --events-poll"
                        );
                        warned = true;
                    }
                    std::thread::sleep(LISTEN_TICK);
                }
            }
        });
        if let Err(error) = spawned {
            eprintln!("warning: flowc serve: cannot start listening for run events ({error}); followers poll");
        }
    }
}

impl Drop for RunNews {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One listening connection: forwards every notification until it breaks
/// or `stop` is set.
fn forward(url: &str, sender: &broadcast::Sender<Arc<str>>, stop: &AtomicBool) -> Result<(), String> {
    use postgres::fallible_iterator::FallibleIterator;
    let mut client = crate::store::postgres_tls::connect(url)?;
    client
        .batch_execute(&format!("LISTEN {}", crate::store::postgres::RUN_EVENTS))
        .map_err(|error| error.to_string())?;
    while !stop.load(Ordering::Relaxed) {
        let mut notifications = client.notifications();
        let mut waiting = notifications.timeout_iter(LISTEN_TICK);
        while let Some(notification) = waiting.next().map_err(|error| error.to_string())? {
            let _ = sender.send(Arc::from(notification.payload()));
        }
    }
    Ok(())
}

/// Waits until run `id` is announced saved, news may have been missed (a
/// follower that fell behind reads the run again), or `poll` passed.
pub async fn wait_for(news: &mut broadcast::Receiver<Arc<str>>, id: &str, poll: Duration) {
    let deadline = tokio::time::sleep(poll);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            () = &mut deadline => return,
            received = news.recv() => match received {
                Ok(saved) if &*saved == id => return,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => {
                    deadline.await;
                    return;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_follower_wakes_on_its_run_and_not_on_others() {
        let news = RunNews::default();
        let mut receiver = news.subscribe();
        news.saved("other");
        news.saved("mine");
        // A poll far longer than any test: only the news can end the wait.
        wait_for(&mut receiver, "mine", Duration::from_secs(3600)).await;
        assert!(receiver.is_empty(), "the news up to its run was taken");
    }

    #[tokio::test]
    async fn a_follower_that_fell_behind_reads_again() {
        let news = RunNews::default();
        let mut receiver = news.subscribe();
        for _ in 0..=BACKLOG {
            news.saved("other");
        }
        wait_for(&mut receiver, "mine", Duration::from_secs(3600)).await;
    }
}
