//! The operator's caps on what one `flowc serve` takes: per tenant, the
//! sessions it keeps in the store and its workflow runs not yet ended
//! (beyond them a 429 naming the cap); per process, the connections open
//! and the requests being answered at once (beyond them a 503 with
//! `Retry-After`). Read from `[serve]` in `flowc.toml` (and the flags over
//! it); a cap not set is no cap.
//!
//! The tenant caps count what the store holds, so they hold across every
//! process sharing it, and the count and the insert are one atomic step in
//! the store ([`crate::store::SessionStore::create_session`],
//! [`crate::store::RunStore::create_run`]): creations racing at a cap
//! never pass it.

use super::AppState;
use super::auth::Tenant;
use super::error::ApiError;
use super::metrics::Metrics;
use crate::runtime::session::Session;
use crate::store::{Cap, Claim, Created, StoreError, StoredRun};
use axum::http::StatusCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The keys of `[serve]` this module reads.
pub const KEYS: [&str; 4] = ["max_sessions_per_tenant", "max_runs_per_tenant", "max_connections", "max_requests"];

/// How long a client refused for overload is asked to wait, in seconds:
/// a request in flight ends in milliseconds, so a second is plenty and
/// keeps a retrying crowd from coming back at once.
pub const OVERLOAD_RETRY_AFTER: u32 = 1;

/// The caps, each off when `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// Sessions one tenant may keep in the store (`max_sessions_per_tenant`).
    pub sessions_per_tenant: Option<u64>,
    /// Workflow runs of one tenant not yet ended: running, waiting or
    /// paused (`max_runs_per_tenant`).
    pub runs_per_tenant: Option<u64>,
    /// Connections open at once (`max_connections`); one more is answered
    /// 503 and closed.
    pub connections: Option<usize>,
    /// Requests answered at once (`max_requests`); one more is answered 503.
    /// `/healthz` and `/metrics` are never refused, so an overloaded server
    /// can still be watched.
    pub requests: Option<usize>,
}

impl Caps {
    /// The caps of a parsed `flowc.toml`'s `[serve]` table (no table: none).
    pub fn from_table(config: &toml::Table) -> Result<Caps, String> {
        let Some(serve) = config.get("serve").and_then(toml::Value::as_table) else {
            return Ok(Caps::default());
        };
        // `tokens` is `serve::auth`'s table; every other key must be a cap,
        // so a misspelt cap is refused rather than silently off.
        if let Some(unknown) = serve.keys().find(|key| key.as_str() != "tokens" && !KEYS.contains(&key.as_str())) {
            return Err(format!("unknown key `{unknown}` in [serve] (it takes `tokens`, {})", KEYS.join(", ")));
        }
        let number = |key: &str| -> Result<Option<u64>, String> {
            match serve.get(key) {
                None => Ok(None),
                Some(value) => value
                    .as_integer()
                    .and_then(|number| u64::try_from(number).ok())
                    .filter(|number| *number > 0)
                    .map(Some)
                    .ok_or_else(|| format!("[serve] `{key}` must be a whole number, 1 or more")),
            }
        };
        let size = |key: &str| -> Result<Option<usize>, String> {
            number(key)?
                .map(|number| usize::try_from(number).map_err(|_| format!("[serve] `{key}` is too large")))
                .transpose()
        };
        Ok(Caps {
            sessions_per_tenant: number("max_sessions_per_tenant")?,
            runs_per_tenant: number("max_runs_per_tenant")?,
            connections: size("max_connections")?,
            requests: size("max_requests")?,
        })
    }
}

/// The id prefix of every session and run `tenant` creates.
fn prefix(tenant: &Tenant) -> String {
    format!("{}_", tenant.0)
}

/// Stores `session`, new, unless `tenant` already keeps as many sessions
/// as its cap allows (a 429): `Ok(false)` when its id is taken (the caller
/// tries another). Runs where the creation runs: the blocking pool, or on
/// SQLite the async worker.
pub(crate) fn create_session(state: &AppState, tenant: &Tenant, session: &Session) -> Result<bool, ApiError> {
    let created = match state.caps.sessions_per_tenant {
        // No cap: the plain first save (on SQLite, group-committed with
        // the turns' saves).
        None => state.store.save(session, 0, &[]).map(|()| Created::Stored),
        Some(max) => state.store.create_session(session, &Cap { prefix: &prefix(tenant), max }),
    };
    match created {
        Ok(Created::Stored) => Ok(true),
        Ok(Created::Full { kept }) => {
            Metrics::add(&state.metrics.rejected_sessions, 1);
            let max = state.caps.sessions_per_tenant.unwrap_or(kept);
            // No Retry-After: the count goes down only when a session is deleted.
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_sessions",
                format!(
                    "tenant `{}` keeps {kept} sessions, the most this server allows (max_sessions_per_tenant = {max}): \
                     delete one (DELETE /v1/sessions/{{id}}) before starting another",
                    tenant.0
                ),
            ))
        }
        Err(StoreError::Conflict { .. }) => Ok(false),
        Err(error) => Err(state.store_error(error)),
    }
}

/// Stores `stored`, a new run held by `claim`, unless `tenant` already has
/// as many runs not yet ended as its cap allows (a 429): `Ok(false)` when
/// its id is taken (the caller tries another). Runs on the blocking pool.
pub(crate) fn create_run(
    state: &AppState,
    tenant: &Tenant,
    stored: &StoredRun,
    claim: &Claim,
) -> Result<bool, ApiError> {
    let created = match state.caps.runs_per_tenant {
        None => state.store.save_run(stored, 0, Some(claim)).map(|()| Created::Stored),
        Some(max) => state.store.create_run(stored, Some(claim), &Cap { prefix: &prefix(tenant), max }),
    };
    match created {
        Ok(Created::Stored) => Ok(true),
        Ok(Created::Full { kept }) => {
            Metrics::add(&state.metrics.rejected_runs, 1);
            let max = state.caps.runs_per_tenant.unwrap_or(kept);
            // No Retry-After either: a waiting run may wait for days;
            // cancelling one (POST /v1/runs/{id}/cancel) frees its place at once.
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_runs",
                format!(
                    "tenant `{}` has {kept} runs not yet ended, the most this server allows (max_runs_per_tenant = {max}): \
                     wait for one to end or cancel one (POST /v1/runs/{{id}}/cancel)",
                    tenant.0
                ),
            ))
        }
        Err(StoreError::RunConflict { .. }) => Ok(false),
        Err(error) => Err(state.store_error(error)),
    }
}

/// The 503 of a server at its cap of `what` (connections or requests).
pub(crate) fn overloaded(what: &str, max: usize) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "overloaded",
        format!("the server is answering as many {what} as it takes ({max}): try again shortly"),
    )
    .with_retry_after(OVERLOAD_RETRY_AFTER)
}

/// Counts something open (a connection, a request) in one of the
/// server's gauges for as long as it lives.
pub(crate) struct Held {
    state: Arc<AppState>,
    gauge: fn(&Metrics) -> &AtomicU64,
}

impl Held {
    /// One more in `gauge`, unless `max` are open already.
    pub fn take(state: &Arc<AppState>, gauge: fn(&Metrics) -> &AtomicU64, max: Option<usize>) -> Option<Held> {
        let max = max.map_or(u64::MAX, |max| u64::try_from(max).unwrap_or(u64::MAX));
        gauge(&state.metrics)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| (open < max).then_some(open + 1))
            .ok()
            .map(|_| Held { state: Arc::clone(state), gauge })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        (self.gauge)(&self.state.metrics).fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(text: &str) -> Result<Caps, String> {
        Caps::from_table(&text.parse().expect("TOML"))
    }

    #[test]
    fn a_serve_key_neither_caps_nor_tokens_is_refused() {
        assert!(caps("[serve]\ntoken = \"x\"\n").expect_err("refused").contains("unknown key `token` in [serve]"));
        assert_eq!(caps("[serve.tokens]\nacme = \"acme-secret-0123456789\"\n"), Ok(Caps::default()));
    }

    #[test]
    fn caps_read_from_the_serve_table_and_are_off_unless_set() {
        assert_eq!(caps(""), Ok(Caps::default()));
        assert_eq!(
            caps("[serve]\nmax_sessions_per_tenant = 100\nmax_requests = 64\n"),
            Ok(Caps { sessions_per_tenant: Some(100), requests: Some(64), ..Caps::default() })
        );
        assert_eq!(
            caps("[serve]\nmax_connections = 0\n"),
            Err("[serve] `max_connections` must be a whole number, 1 or more".to_string())
        );
        assert!(caps("[serve]\nmax_runs_per_tenant = \"ten\"\n").is_err());
    }

    #[test]
    fn overload_asks_the_client_to_come_back() {
        let error = overloaded("requests", 8);
        assert_eq!(
            (error.status, error.code, error.retry_after),
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded", Some(1))
        );
    }
}
