//! `POST /v1/sessions/{id}/messages`: one turn of a stored conversation,
//! answered with exactly `flowc run --json`'s turn object, or, asked for
//! with `Accept: text/event-stream`, as server-sent events: the reply's
//! text as it is written (`text`), then the turn's events (`event`), then
//! the turn object (`turn`), or an `error`.
//!
//! A turn loads the session, runs on a runtime of the session's program
//! version and saves with a compare-and-swap on the version it loaded: a
//! session another request (or server) changed meanwhile is a 409 and
//! nothing of the turn is kept. A client that drops a stream does not stop
//! its turn: the turn is committed, and `GET /v1/sessions/{id}` shows it.
//!
//! Where a turn runs: one that only computes (the offline model, builtin
//! or in-process tools, [`super::programs::Version::in_process`]) on a
//! local store (SQLite) runs on the async worker that read its request;
//! every other turn, which may wait seconds on a model, a tool or a
//! database, on the blocking pool. Handing a turn to the pool and its
//! answer back costs two thread wake-ups, which for a computed turn were
//! more CPU than the turn itself. A turn on a worker hands its save to the
//! store and awaits it ([`crate::store::commit_turn_queued`]): the worker
//! serves other requests while the save is committed, and their saves
//! join the same transaction (SQLite's group commit).

use super::AppState;
use super::auth::Tenant;
use super::error::{ApiError, Body, Id, from_body_rejection};
use super::metrics::Metrics;
use super::programs::Version;
use super::sessions::owned;
use crate::runtime::actions::ActionError;
use crate::runtime::engine::{StreamSink, TurnError};
use crate::runtime::events::TurnResult;
use crate::runtime::model_step::ModelStepError;
use crate::runtime::session::{Session, adopt};
use crate::store::{StoreError, Swap};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc;

/// What a streamed turn sends, in order.
enum Streamed {
    Text(String),
    Done(Box<Result<TurnResult, ApiError>>),
}

pub async fn message(
    State(state): State<Arc<AppState>>,
    tenant: Tenant,
    Id(id): Id,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let program = owned(&tenant, &id)?;
    let body = body.map_err(|rejection| from_body_rejection(&rejection))?;
    let body = Body::parse(&body, &["text", "version"])?;
    let text = body.required_str("text")?.to_string();
    let expected = body.optional_u64("version")?;
    let streamed = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !streamed {
        if state.inline_store && state.programs.in_process(&program) {
            // `None`: the program was edited into one whose turns may
            // block; the turn had not started, it goes to the pool.
            if let Some(result) = run_turn(&state, &id, &program, &text, expected, None, Place::Worker).await {
                return Ok(Json(result?.to_json_line()).into_response());
            }
        }
        let result = state.blocking(move |state| run_on_pool(state, &id, &program, &text, expected, None)).await?;
        return Ok(Json(result.to_json_line()).into_response());
    }
    let (sender, receiver) = mpsc::unbounded_channel();
    let worker = Arc::clone(&state);
    tokio::task::spawn_blocking(move || {
        let text_sender = sender.clone();
        // A send fails only once the client is gone; the turn goes on.
        let sink = Box::new(move |piece: &str| {
            let _ = text_sender.send(Streamed::Text(piece.to_string()));
        });
        let result = run_on_pool(&worker, &id, &program, &text, expected, Some(sink));
        let _ = sender.send(Streamed::Done(Box::new(result)));
    });
    let open = super::StreamOpen::new(&state);
    let stream = futures_util::stream::unfold(
        (receiver, Vec::<SseEvent>::new(), false, open),
        |(mut receiver, mut queue, done, open)| async move {
            if let Some(event) = queue.pop() {
                return Some((Ok::<_, Infallible>(event), (receiver, queue, done, open)));
            }
            if done {
                return None;
            }
            let event = match receiver.recv().await? {
                Streamed::Text(piece) => {
                    SseEvent::default().event("text").data(serde_json::json!({ "text": piece }).to_string())
                }
                Streamed::Done(finished) => {
                    // Queued last first: `pop` takes from the end.
                    match *finished {
                        Ok(result) => {
                            queue.push(SseEvent::default().event("turn").data(result.to_json_line().to_string()));
                            for event in result.events.iter().rev() {
                                let data = serde_json::to_string(event).unwrap_or_default();
                                queue.push(SseEvent::default().event("event").data(data));
                            }
                            SseEvent::default().comment("turn finished")
                        }
                        Err(error) => {
                            queue.push(SseEvent::default().event("error").data(error.body().to_string()));
                            SseEvent::default().comment("turn failed")
                        }
                    }
                }
            };
            // Only the end of the turn queues events: once they are queued,
            // the stream ends after them.
            let finished = !queue.is_empty();
            Some((Ok(event), (receiver, queue, finished, open)))
        },
    );
    Ok((StatusCode::OK, Sse::new(stream).keep_alive(KeepAlive::default())).into_response())
}

/// Where a turn runs: on an async worker only if its program version
/// only computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Worker,
    Pool,
}

/// [`run_turn`] on a thread of the blocking pool, which may block: the
/// turn's save is waited for there.
fn run_on_pool(
    state: &AppState,
    id: &str,
    program: &str,
    text: &str,
    expected: Option<u64>,
    stream: Option<StreamSink>,
) -> Result<TurnResult, ApiError> {
    block_on(run_turn(state, id, program, text, expected, stream, Place::Pool))
        .unwrap_or_else(|| Err(ApiError::internal("a turn on the blocking pool was sent elsewhere")))
}

/// Runs `future` to its end on this thread, parking it while the future
/// waits. On the pool a turn's future never waits (its save blocks), so
/// this polls it once. Not tokio's `block_on`: that enters the runtime's
/// context, where a blocking HTTP client (a real model's provider) refuses
/// to run.
fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return value;
        }
        std::thread::park();
    }
}

/// One turn: load, run, save. `stream` receives the reply as it is
/// written. `None` when it was to run on a worker but its program
/// version may block: nothing was done, it is for the blocking pool.
/// On a worker, the save is awaited: the worker serves other requests
/// while the store commits it.
async fn run_turn(
    state: &AppState,
    id: &str,
    program: &str,
    text: &str,
    expected: Option<u64>,
    stream: Option<StreamSink>,
    place: Place,
) -> Option<Result<TurnResult, ApiError>> {
    let started = Instant::now();
    let in_flight = InFlight::new(&state.metrics);
    let result = turn_inner(state, id, program, text, expected, stream, place).await;
    drop(in_flight);
    let result = match result {
        Err(Attempt::Blocks) => return None,
        other => other.map_err(Attempt::into_error),
    };
    match &result {
        Ok(turn) => {
            Metrics::add(&state.metrics.turns, 1);
            Metrics::add(&state.metrics.model_calls, u64::from(turn.llm_calls));
            Metrics::add(&state.metrics.tokens_prompt, turn.tokens.prompt);
            Metrics::add(&state.metrics.tokens_completion, turn.tokens.completion);
            Metrics::add(&state.metrics.tokens_cached, turn.tokens.cached);
            state.metrics.turn_latency.observe(started.elapsed());
        }
        Err(error) if error.status == StatusCode::CONFLICT => Metrics::add(&state.metrics.conflicts, 1),
        Err(error) if error.status.is_server_error() => Metrics::add(&state.metrics.turns_failed, 1),
        Err(_) => {}
    }
    Some(result)
}

async fn turn_inner(
    state: &AppState,
    id: &str,
    program: &str,
    text: &str,
    expected: Option<u64>,
    mut stream: Option<StreamSink>,
    place: Place,
) -> Result<TurnResult, Attempt> {
    // A streamed turn has sent its reply's text before it commits: it
    // could not be run again unseen, so it starts from the store.
    let cached = if stream.is_none() { state.sessions.get(id) } else { None };
    let cached = cached.filter(|session| expected.is_none_or(|expected| expected == session.version));
    let from_cache = cached.is_some();
    let session = match cached {
        Some(session) => session,
        None => load(state, id, expected).map_err(Attempt::Failed)?,
    };
    match attempt(state, id, program, text, &session, stream.take(), place).await {
        // The cached copy was stale: another process (or `flowc run
        // --session`) saved the session since this server did. Once more
        // on the stored session, which the refused save brought back where
        // the store can (PostgreSQL), else loaded; a conflict then is a
        // real race, the client's.
        Err(Attempt::Conflict(_, stored)) if from_cache => {
            Metrics::add(&state.metrics.stale_sessions, 1);
            let session = match stored {
                Some(stored) => checked(id, Arc::from(stored), expected).map_err(Attempt::Failed)?,
                None => load(state, id, expected).map_err(Attempt::Failed)?,
            };
            attempt(state, id, program, text, &session, None, place).await
        }
        other => other,
    }
}

/// The stored session, checked against the version the client expects.
fn load(state: &AppState, id: &str, expected: Option<u64>) -> Result<Arc<Session>, ApiError> {
    let session =
        state.store.load(id).map_err(|error| state.store_error(error))?.ok_or_else(|| ApiError::no_session(id))?;
    checked(id, Arc::new(session), expected)
}

/// `session`, as stored, if it is at the version the client expects.
fn checked(id: &str, session: Arc<Session>, expected: Option<u64>) -> Result<Arc<Session>, ApiError> {
    if let Some(expected) = expected
        && expected != session.version
    {
        return Err(ApiError::conflict(format!(
            "session `{id}` is at version {}, not {expected}: read it again (GET /v1/sessions/{id}) and retry",
            session.version
        )));
    }
    Ok(session)
}

/// Why one attempt at a turn failed: the compare-and-swap lost (which a
/// stale cached session may explain; with the stored session when the
/// store answered with it), the turn may block and was not run on a
/// worker, or anything else.
enum Attempt {
    Conflict(ApiError, Option<Box<Session>>),
    Blocks,
    Failed(ApiError),
}

impl Attempt {
    fn into_error(self) -> ApiError {
        match self {
            Attempt::Conflict(error, _) | Attempt::Failed(error) => error,
            Attempt::Blocks => ApiError::internal("a turn that may block was not run"),
        }
    }
}

/// Runs the turn on a copy of `session` and commits it with a
/// compare-and-swap on `session`'s version; the committed session is kept
/// for the next turn.
async fn attempt(
    state: &AppState,
    id: &str,
    program: &str,
    text: &str,
    session: &Session,
    stream: Option<StreamSink>,
    place: Place,
) -> Result<TurnResult, Attempt> {
    let (version, adopted) = version_for(state, program, session).map_err(Attempt::Failed)?;
    if place == Place::Worker && !version.in_process {
        return Err(Attempt::Blocks);
    }
    let before = adopted.as_ref().unwrap_or(session);
    let mut runtime = version
        .runtime()
        .map_err(|message| Attempt::Failed(ApiError::new(StatusCode::BAD_GATEWAY, "model_unavailable", message)))?;
    let streaming = stream.is_some();
    if let Some(stream) = stream {
        runtime.set_stream(stream);
    }
    let mut working = before.clone();
    let result = runtime.run_turn(&mut working, text);
    // A runtime that streamed to this request keeps its sink: it is not
    // given back to serve another.
    if streaming {
        drop(runtime);
    } else {
        version.give_back(runtime);
    }
    let result = result.map_err(|error| Attempt::Failed(turn_error(error)))?;
    let saved = match place {
        Place::Worker => {
            crate::store::commit_turn_queued(state.store.as_ref(), &version.ir, before, &mut working).await
        }
        Place::Pool => crate::store::commit_turn_or_stored(state.store.as_ref(), &version.ir, before, &mut working),
    };
    match saved {
        Ok(Swap::Written) => {
            state.sessions.put(Arc::new(working));
            Ok(result)
        }
        Ok(Swap::Stale(stored)) => {
            state.sessions.forget(id);
            let conflict =
                StoreError::Conflict { id: id.to_string(), stored: stored.version, expected: before.version };
            Err(Attempt::Conflict(state.store_error(conflict), Some(stored)))
        }
        Err(error @ StoreError::Conflict { .. }) => {
            state.sessions.forget(id);
            Err(Attempt::Conflict(state.store_error(error), None))
        }
        Err(error) => Err(Attempt::Failed(state.store_error(error))),
    }
}

/// The program version the session goes on with: the current one, which
/// adopts it if it started on another (the adopted session is given
/// back); else, when the edit cannot take it, the version it started on,
/// from this server or compiled again from the store's copy, noted with
/// the reason for `GET /v1/programs`. Only a version found nowhere is a
/// 409 `incompatible_program`, saying why on both counts.
fn version_for(
    state: &AppState,
    program: &str,
    session: &Session,
) -> Result<(Arc<Version>, Option<Session>), ApiError> {
    let current = state.programs.current(program).ok_or_else(|| ApiError::no_program(program))?;
    if session.program_hash == current.hash {
        return Ok((current, None));
    }
    let mut adopted = session.clone();
    let incompatible = match adopt(&current.ir, &current.hash, &mut adopted) {
        Ok(()) => return Ok((current, Some(adopted))),
        Err(incompatible) => incompatible,
    };
    match state.programs.version_or_why(program, &session.program_hash) {
        Ok(version) => {
            state.programs.note_older(program, &version, &current.hash, &incompatible.problem);
            Ok((version, None))
        }
        Err(why) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "incompatible_program",
            format!(
                "session `{}` cannot go on with version {} of `{program}`: {}; and the version it started on, {}, {why}\nhelp: {}",
                session.id, current.hash, incompatible.problem, session.program_hash, incompatible.help
            ),
        )),
    }
}

/// A turn counted in `flowc_turns_in_flight` until it is dropped: on a
/// worker, a client that goes away while the turn awaits its save drops
/// the turn's future there (its save, already handed over, is committed
/// all the same, but neither counted as a turn nor kept in the cache).
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn new(metrics: &'a Metrics) -> InFlight<'a> {
        metrics.turns_in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.turns_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn turn_error(error: TurnError) -> ApiError {
    let message = error.to_string();
    match error {
        // A tool or a model step the turn's actions called is a service
        // beyond the server, as the model is: its failure (a call that
        // failed, an answer that did not fit) is a 502. What the program
        // itself could not do (a write out of its field's range, a wait
        // out of range, a model step over its own limit) is the turn's 500.
        TurnError::Provider(_)
        | TurnError::Action(ActionError::Model(ModelStepError::Call { .. } | ModelStepError::Rejected { .. })) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "model_failed", message)
        }
        TurnError::Tool(_) | TurnError::Action(ActionError::Tool(_)) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "tool_failed", message)
        }
        TurnError::ProgramMismatch { .. } => ApiError::new(StatusCode::CONFLICT, "incompatible_program", message),
        TurnError::Action(
            ActionError::InvalidWrite { .. }
            | ActionError::Model(ModelStepError::Limit { .. } | ModelStepError::NoModel { .. }),
        )
        | TurnError::Wait(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "turn_failed", message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn's future dropped while it awaits (its client gone) leaves
    /// the in-flight gauge as it found it.
    #[test]
    fn a_turn_dropped_while_it_awaits_is_no_longer_in_flight() {
        let metrics = Metrics::default();
        let turn = async {
            let _in_flight = InFlight::new(&metrics);
            std::future::pending::<()>().await;
        };
        let mut turn = Box::pin(turn);
        let waker = std::task::Waker::noop();
        let polled = turn.as_mut().poll(&mut std::task::Context::from_waker(waker));
        assert!(polled.is_pending());
        assert_eq!(metrics.turns_in_flight.load(Ordering::Relaxed), 1);
        drop(turn);
        assert_eq!(metrics.turns_in_flight.load(Ordering::Relaxed), 0);
    }
}
