//! Taking connections: each accepted socket is served as HTTP/1.1 by hyper
//! with a deadline on its request head (a client that sends its headers
//! byte by byte, or never finishes them, is closed when it runs out), and
//! every request body must arrive whole within its own deadline (else 408).
//! On shutdown the listener closes and open connections finish what they
//! are answering. `axum::serve` sets no deadline at all, hence this file.
//!
//! Beyond the server's cap on open connections (`max_connections`), a
//! connection is still taken, answered 503 `overloaded` with `Retry-After`
//! once its request's head has arrived, and closed: the client learns why
//! instead of waiting in the listen queue. Those answers are capped too (as
//! many as the cap again, and never fewer than 32); past that a connection
//! is closed at once.

use super::AppState;
use super::caps::{Held, overloaded};
use super::error::ApiError;
use super::metrics::Metrics;
use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The deadline for a request's head when none is configured: far more
/// than any real client needs on any network, short enough that thousands
/// of idle half-open connections cannot pile up.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The deadline for a whole request body when none is configured.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection may take for each part of a request.
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    /// From the connection's start (or the end of the previous answer on a
    /// kept-alive connection, so an idle connection is closed after it
    /// too) to the end of a request's head.
    pub header: Duration,
    /// From the end of the head to the end of the body.
    pub body: Duration,
}

impl Default for Deadlines {
    fn default() -> Deadlines {
        Deadlines { header: DEFAULT_HEADER_TIMEOUT, body: DEFAULT_BODY_TIMEOUT }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then waits for
/// the connections still answering.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    deadlines: Deadlines,
    state: &Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) {
    let max = state.caps.connections;
    // The connections being refused: bounded, so a flood past the cap
    // costs at most as many sockets again (and a few dozen more).
    let refusing = Arc::new(AtomicU64::new(0));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors (or a connection reset before it was
                // taken): taking the next one at once would spin.
                eprintln!("warning: flowc serve: cannot take a connection: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are small and written whole: no need to wait for more.
        let _ = stream.set_nodelay(true);
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(deadlines.header);
        let Some(held) = Held::take(state, |metrics| &metrics.connections_open, max) else {
            Metrics::add(&state.metrics.rejected_connections, 1);
            refuse(stream, &builder, &refusing, max.unwrap_or_default());
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A connection's end, timed out or reset, is no one's error.
            let _ = connection.await;
            drop(held);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The fewest connections past the cap answered with a 503 at once (more
/// are closed unanswered).
const REFUSING_AT_LEAST: usize = 32;

/// Answers one request on a connection past the cap with 503 and closes
/// it, unless as many are being refused already (then it is closed at
/// once).
fn refuse(
    stream: tokio::net::TcpStream,
    builder: &hyper::server::conn::http1::Builder,
    refusing: &Arc<AtomicU64>,
    max: usize,
) {
    // Never fewer than a few dozen: with a cap of 1, a client retrying at
    // once would find the last refusal still closing and be reset instead
    // of answered.
    let bound = u64::try_from(max.max(REFUSING_AT_LEAST)).unwrap_or(u64::MAX);
    if refusing.fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| (now < bound).then_some(now + 1)).is_err() {
        return;
    }
    let mut builder = builder.clone();
    builder.keep_alive(false);
    let answer = hyper::service::service_fn(move |_request: Request<hyper::body::Incoming>| async move {
        Ok::<_, std::convert::Infallible>(overloaded("connections", max).into_response())
    });
    let connection = builder.serve_connection(TokioIo::new(stream), answer);
    let refusing = Arc::clone(refusing);
    tokio::spawn(async move {
        let _ = connection.await;
        refusing.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Reads the whole body of `request` within `deadline` and at most
/// `limit` bytes, and hands the request on with it: a client trickling
/// its body gets a 408, one sending more than it may a 413, and no
/// handler waits on either.
pub(crate) async fn whole_body(request: Request, limit: usize, deadline: Duration) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, axum::body::Body::from(bytes))),
        Ok(Err(error)) => {
            // axum names no type for "over the limit" (it wraps
            // http-body-util's), only its text: look for that down the chain.
            let mut over = false;
            let mut cause: Option<&dyn std::error::Error> = Some(&error);
            while let Some(current) = cause {
                over |= current.to_string().contains("length limit");
                cause = current.source();
            }
            if over {
                Err(super::error::too_large().into_response())
            } else {
                Err(ApiError::invalid(format!("the request body could not be read: {error}")).into_response())
            }
        }
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!("the request body did not arrive within {} s", deadline.as_secs_f64()),
        )
        .into_response()),
    }
}
