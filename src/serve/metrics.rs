//! The server's counters, gauges and latency histograms, and their
//! Prometheus text for `GET /metrics`. Plain atomics: a turn adds to them
//! without a lock.

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A latency histogram: counts per bucket (not cumulative), the count
/// and the sum of the observations in microseconds.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        if let Some(bucket) =
            BUCKETS.iter().position(|bound| seconds <= *bound).and_then(|index| self.buckets.get(index))
        {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, bucket) in BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1_000_000.0;
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}\n{name}_sum {sum}\n{name}_count {count}");
    }
}

#[derive(Default)]
pub struct Metrics {
    pub turns: AtomicU64,
    pub turns_failed: AtomicU64,
    pub model_calls: AtomicU64,
    pub tokens_prompt: AtomicU64,
    pub tokens_completion: AtomicU64,
    pub tokens_cached: AtomicU64,
    pub store_errors: AtomicU64,
    pub conflicts: AtomicU64,
    pub sessions_created: AtomicU64,
    pub runs_started: AtomicU64,
    /// Turns run a second time, on the stored session, because the copy
    /// this server kept was stale (another process saved the session).
    pub stale_sessions: AtomicU64,
    pub turns_in_flight: AtomicU64,
    /// Server-sent event streams a client is reading now (a streamed turn,
    /// a run's events): one left open after its client went is a leak.
    pub event_streams_open: AtomicU64,
    pub requests: AtomicU64,
    /// Refused at a cap (`serve::caps`): sessions and runs of a tenant
    /// (429), connections and requests beyond the server's (503).
    pub rejected_sessions: AtomicU64,
    pub rejected_runs: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub rejected_requests: AtomicU64,
    /// Connections open now, and requests being answered now (`/healthz`
    /// and `/metrics` left out), the gauges the caps hold.
    pub connections_open: AtomicU64,
    pub requests_in_flight: AtomicU64,
    pub turn_latency: Histogram,
    pub request_latency: Histogram,
    /// Each model call of a turn, timed by the provider the turn's runtime
    /// holds (`serve::timed`); shared with the programs that build them.
    pub model_latency: Arc<Histogram>,
}

impl Metrics {
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }

    /// The Prometheus text exposition. `open_sessions` is the number of
    /// sessions in the store, counted by the caller.
    pub fn render(&self, open_sessions: Option<u64>) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, &AtomicU64, &str); 11] = [
            ("flowc_turns_total", "Conversation turns answered.", &self.turns, ""),
            ("flowc_turns_failed_total", "Turns that failed (model, tool or store error).", &self.turns_failed, ""),
            ("flowc_model_calls_total", "Model calls made by turns.", &self.model_calls, ""),
            ("flowc_tokens_total", "Tokens spent by turns.", &self.tokens_prompt, "kind=\"prompt\""),
            ("flowc_tokens_total", "", &self.tokens_completion, "kind=\"completion\""),
            ("flowc_tokens_total", "", &self.tokens_cached, "kind=\"cached\""),
            ("flowc_store_errors_total", "Store operations that failed (conflicts excluded).", &self.store_errors, ""),
            (
                "flowc_version_conflicts_total",
                "Turns refused because the session changed meanwhile.",
                &self.conflicts,
                "",
            ),
            ("flowc_sessions_created_total", "Sessions created by this process.", &self.sessions_created, ""),
            ("flowc_runs_started_total", "Workflow runs started by this process.", &self.runs_started, ""),
            (
                "flowc_stale_sessions_total",
                "Turns run again on the stored session: another process had saved it since this one kept it.",
                &self.stale_sessions,
                "",
            ),
        ];
        for (name, help, counter, labels) in counters {
            if !help.is_empty() {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            }
            let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
            let _ = writeln!(out, "{name}{labels} {}", counter.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP flowc_http_requests_total HTTP requests answered.\n# TYPE flowc_http_requests_total counter\nflowc_http_requests_total {}",
            self.requests.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP flowc_turns_in_flight Turns running now.\n# TYPE flowc_turns_in_flight gauge\nflowc_turns_in_flight {}",
            self.turns_in_flight.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP flowc_event_streams_open Server-sent event streams open now.\n# TYPE flowc_event_streams_open gauge\nflowc_event_streams_open {}",
            self.event_streams_open.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP flowc_rejected_total Requests refused at a cap: a tenant's sessions or runs (429), the server's connections or requests (503).\n# TYPE flowc_rejected_total counter"
        );
        for (reason, counter) in [
            ("sessions", &self.rejected_sessions),
            ("runs", &self.rejected_runs),
            ("connections", &self.rejected_connections),
            ("requests", &self.rejected_requests),
        ] {
            let _ = writeln!(out, "flowc_rejected_total{{reason=\"{reason}\"}} {}", counter.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP flowc_connections_open HTTP connections open now.\n# TYPE flowc_connections_open gauge\nflowc_connections_open {}",
            self.connections_open.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP flowc_requests_in_flight Requests being answered now (health and metrics left out).\n# TYPE flowc_requests_in_flight gauge\nflowc_requests_in_flight {}",
            self.requests_in_flight.load(Ordering::Relaxed)
        );
        if let Some(open) = open_sessions {
            let _ = writeln!(
                out,
                "# HELP flowc_sessions_open Sessions in the store.\n# TYPE flowc_sessions_open gauge\nflowc_sessions_open {open}"
            );
        }
        self.turn_latency.write(&mut out, "flowc_turn_duration_seconds", "Time to answer a turn, store included.");
        self.request_latency.write(&mut out, "flowc_http_request_duration_seconds", "Time to answer an HTTP request.");
        self.model_latency.write(
            &mut out,
            "flowc_model_call_duration_seconds",
            "Time each model call of a turn took (a streamed understand call: until the reply starts).",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_cumulatively_in_its_buckets() {
        let metrics = Metrics::default();
        metrics.turn_latency.observe(Duration::from_micros(300));
        metrics.turn_latency.observe(Duration::from_millis(3));
        Metrics::add(&metrics.turns, 2);
        let text = metrics.render(Some(5));
        assert!(text.contains("flowc_turn_duration_seconds_bucket{le=\"0.0005\"} 1\n"), "{text}");
        assert!(text.contains("flowc_turn_duration_seconds_bucket{le=\"0.005\"} 2\n"), "{text}");
        assert!(text.contains("flowc_turn_duration_seconds_count 2\n"), "{text}");
        assert!(text.contains("flowc_turns_total 2\n"), "{text}");
        assert!(text.contains("flowc_sessions_open 5\n"), "{text}");
        assert!(text.contains("flowc_tokens_total{kind=\"cached\"} 0\n"), "{text}");
        assert!(text.contains("flowc_rejected_total{reason=\"connections\"} 0\n"), "{text}");
    }
}
