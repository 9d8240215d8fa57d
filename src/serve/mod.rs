//! `flowc serve`: conversations and workflow runs behind an HTTP API (axum
//! on a multi-thread tokio runtime). The turn and the stores are
//! synchronous: every turn, step and store call runs on tokio's blocking
//! pool, never on an async worker.
//!
//! This file holds the server's state, the route table (which the router
//! and the OpenAPI document are both built from) and starting and stopping
//! the server. Handlers live per resource: `sessions` (with the turn and
//! its server-sent events in `turn`), `runs`; `auth` decides who asks,
//! `cache` keeps the sessions last saved, `error` is the one error shape, `metrics` the Prometheus text,
//! `openapi` the document, `programs` the programs by name.

#![warn(missing_docs)]

pub mod auth;
pub(crate) mod cache;
pub mod caps;
pub(crate) mod error;
pub mod listen;
pub(crate) mod metrics;
pub(crate) mod news;
pub(crate) mod openapi;
pub(crate) mod page;
pub mod programs;
pub(crate) mod runs;
pub(crate) mod sessions;
pub(crate) mod timed;
pub(crate) mod turn;

use crate::store::{Store, StoreLocation};
use auth::Auth;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use error::ApiError;
use metrics::Metrics;
use programs::{ProgramSettings, Programs};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The request body limit when none is configured: far above any message
/// or run input, far below what could hurt the server.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// Everything `flowc serve` was asked for.
pub struct ServeOptions {
    /// The program files to serve, each under its program's name.
    pub files: Vec<PathBuf>,
    /// Where to listen; port 0 picks a free port ([`Running::addr`] says which).
    pub addr: SocketAddr,
    /// Where sessions and runs are kept.
    pub store: StoreLocation,
    /// Who may call the API.
    pub auth: Auth,
    /// Allows listening beyond loopback without authentication.
    pub insecure_open: bool,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// How the programs are compiled and run (provider, limits).
    pub settings: ProgramSettings,
    /// How often `GET /v1/runs/{id}/events` reads a running run again.
    pub run_poll: Duration,
    /// How long a client may take to send a request's head, and its body.
    pub deadlines: listen::Deadlines,
    /// The caps on a tenant's sessions and runs and on the server's
    /// connections and requests (none by default).
    pub caps: caps::Caps,
}

/// What every handler shares.
pub(crate) struct AppState {
    pub programs: Programs,
    pub store: Arc<dyn Store>,
    /// The sessions this server last saved, checked by every save's
    /// compare-and-swap.
    pub sessions: cache::SessionCache,
    pub auth: Auth,
    pub metrics: Metrics,
    pub body_limit: usize,
    pub run_poll: Duration,
    pub body_timeout: Duration,
    pub caps: caps::Caps,
    /// Runs saved, for the clients following their events.
    pub run_news: news::RunNews,
    /// This process's name on the runs it claims.
    pub holder: String,
    /// Runs started with `"wait": false`, finished before the process exits.
    pub background: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Whether the store's calls may run on an async worker: SQLite's
    /// commit is local and short, while PostgreSQL's client blocks on a
    /// round trip (and on a runtime of its own, which a worker cannot enter).
    pub inline_store: bool,
}

impl AppState {
    /// Compiles the programs and opens the store.
    pub fn new(options: &ServeOptions) -> Result<Arc<AppState>, String> {
        let store: Arc<dyn Store> = Arc::from(crate::store::open(&options.store).map_err(|error| error.to_string())?);
        let programs = Programs::load(&options.files, options.settings.clone(), Some(Arc::clone(&store)))?;
        let run_news = news::RunNews::default();
        if let StoreLocation::Postgres(url) = &options.store {
            run_news.listen_postgres(url.clone());
        }
        let metrics = Metrics { model_latency: programs.model_latency(), ..Metrics::default() };
        Ok(Arc::new(AppState {
            programs,
            store,
            sessions: cache::SessionCache::new(cache::DEFAULT_CAPACITY),
            auth: options.auth.clone(),
            metrics,
            body_limit: options.body_limit,
            run_poll: options.run_poll,
            body_timeout: options.deadlines.body,
            caps: options.caps,
            run_news,
            holder: crate::stored_run::holder_name("serve-"),
            background: Mutex::new(Vec::new()),
            inline_store: matches!(options.store, StoreLocation::Sqlite(_)),
        }))
    }

    /// Runs `work` (a turn, a step, a store call) on the blocking pool.
    pub async fn blocking<T: Send + 'static>(
        self: &Arc<AppState>,
        work: impl FnOnce(&AppState) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let state = Arc::clone(self);
        tokio::task::spawn_blocking(move || work(&state))
            .await
            .map_err(|error| ApiError::internal(format!("the request's work stopped: {error}")))?
    }

    /// Counts a store failure (conflicts are the client's to retry, not
    /// the store's fault) and passes it on.
    pub fn store_error(&self, error: crate::store::StoreError) -> ApiError {
        use crate::store::StoreError;
        if !matches!(
            error,
            StoreError::Conflict { .. } | StoreError::RunConflict { .. } | StoreError::RunCancelled { .. }
        ) {
            Metrics::add(&self.metrics.store_errors, 1);
        }
        ApiError::from(error)
    }
}

/// An event stream counted open (`flowc_event_streams_open`) for as long
/// as its response lives: it is dropped when the stream ends or its client
/// goes away.
pub(crate) struct StreamOpen(Arc<AppState>);

impl StreamOpen {
    pub fn new(state: &Arc<AppState>) -> StreamOpen {
        Metrics::add(&state.metrics.event_streams_open, 1);
        StreamOpen(Arc::clone(state))
    }
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        self.0.metrics.event_streams_open.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One route of the API: the router and the OpenAPI document are both
/// made from [`routes`], so neither has a route the other lacks.
pub(crate) struct Route {
    pub method: Method,
    pub path: &'static str,
    pub handler: MethodRouter<Arc<AppState>>,
}

fn route(method: Method, path: &'static str, handler: MethodRouter<Arc<AppState>>) -> Route {
    Route { method, path, handler }
}

/// Every route of the API.
pub(crate) fn routes() -> Vec<Route> {
    vec![
        route(Method::GET, "/healthz", on(MethodFilter::GET, health)),
        route(Method::GET, "/metrics", on(MethodFilter::GET, metrics_text)),
        route(Method::GET, "/openapi.json", on(MethodFilter::GET, openapi::document)),
        route(Method::GET, "/v1/programs", on(MethodFilter::GET, programs_list)),
        route(Method::GET, "/v1/programs/{name}/graph", on(MethodFilter::GET, page::program_graph)),
        route(Method::GET, "/v1/programs/{name}/coverage", on(MethodFilter::GET, page::program_coverage)),
        route(Method::POST, "/v1/sessions", on(MethodFilter::POST, sessions::create)),
        route(Method::GET, "/v1/sessions", on(MethodFilter::GET, sessions::list)),
        route(Method::GET, "/v1/sessions/{id}", on(MethodFilter::GET, sessions::show)),
        route(Method::DELETE, "/v1/sessions/{id}", on(MethodFilter::DELETE, sessions::delete)),
        route(Method::POST, "/v1/sessions/{id}/messages", on(MethodFilter::POST, turn::message)),
        route(Method::POST, "/v1/runs", on(MethodFilter::POST, runs::create)),
        route(Method::GET, "/v1/runs/{id}", on(MethodFilter::GET, runs::show)),
        route(Method::GET, "/v1/runs/{id}/events", on(MethodFilter::GET, runs::events)),
        route(Method::POST, "/v1/runs/{id}/resume", on(MethodFilter::POST, runs::resume)),
        route(Method::POST, "/v1/runs/{id}/cancel", on(MethodFilter::POST, runs::cancel)),
    ]
}

/// The API's operations, as method and path template, in the order the
/// OpenAPI document lists them.
pub fn operations() -> Vec<(Method, &'static str)> {
    routes().into_iter().map(|route| (route.method, route.path)).collect()
}

/// The API's router, with its state. The playground's routes (`GET /`,
/// owned by `page.rs`) are merged in here, beside the API's.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new();
    for Route { path, handler, .. } in routes() {
        router = router.route(path, handler);
    }
    router = router.merge(page::router());
    router
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), count_request))
        .layer(axum::extract::DefaultBodyLimit::max(state.body_limit))
        .with_state(state)
}

async fn count_request(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    // Health and metrics are never refused: an overloaded server can
    // still be watched.
    let watched = matches!(request.uri().path(), "/healthz" | "/metrics");
    let held = if watched {
        None
    } else {
        match caps::Held::take(&state, |metrics| &metrics.requests_in_flight, state.caps.requests) {
            Some(held) => Some(held),
            None => {
                Metrics::add(&state.metrics.rejected_requests, 1);
                Metrics::add(&state.metrics.requests, 1);
                return caps::overloaded("requests", state.caps.requests.unwrap_or_default()).into_response();
            }
        }
    };
    let response = if announces_too_much(&request, state.body_limit) {
        // Answered before a byte of the body is read: a client announcing a
        // gigabyte is not waited for.
        error::too_large().into_response()
    } else {
        match listen::whole_body(request, state.body_limit, state.body_timeout).await {
            Ok(request) => next.run(request).await,
            Err(response) => response,
        }
    };
    drop(held);
    Metrics::add(&state.metrics.requests, 1);
    state.metrics.request_latency.observe(started.elapsed());
    response
}

fn announces_too_much(request: &Request, limit: usize) -> bool {
    request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok())
        .is_some_and(|length| length > limit as u64)
}

async fn unknown_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("there is no route {method} {} (GET /openapi.json lists them)", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method} (GET /openapi.json lists its methods)", uri.path()),
    )
}

async fn health() -> impl IntoResponse {
    axum::Json(serde_json::json!({ "status": "ok" }))
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    // Counted in the store (one query, no session read): what is open
    // across every process sharing it, not only this one.
    let open =
        state.blocking(|state| state.store.count_sessions("").map_err(|error| state.store_error(error))).await.ok();
    let mut text = state.metrics.render(open);
    if let Some((commits, saves)) = state.store.commits() {
        // Saves per transaction (saves / commits): how much SQLite's group
        // commit shares a commit's fixed cost.
        text.push_str(&format!(
            "# HELP flowc_store_commits_total Transactions of session saves the store committed.\n\
             # TYPE flowc_store_commits_total counter\nflowc_store_commits_total {commits}\n\
             # HELP flowc_store_saves_committed_total Session saves those transactions held.\n\
             # TYPE flowc_store_saves_committed_total counter\nflowc_store_saves_committed_total {saves}\n"
        ));
    }
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn programs_list(State(state): State<Arc<AppState>>, _tenant: auth::Tenant) -> Result<Response, ApiError> {
    let info = state.blocking(|state| Ok(state.programs.info())).await?;
    Ok(axum::Json(serde_json::json!({ "programs": info })).into_response())
}

/// A server running on a runtime of its own: what tests, benches and
/// embedders start, and what `flowc serve` waits on.
pub struct Running {
    /// The address the server listens on.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Running {
    /// Stops taking connections, lets open requests finish, and waits.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop_and_wait()
    }

    fn stop_and_wait(&mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err("the server's thread panicked".to_string()),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop_and_wait();
    }
}

/// Binds `options.addr` and serves on a multi-thread runtime of `workers`
/// threads until [`Running::stop`] (or, with `signals`, SIGTERM or Ctrl-C),
/// then drains open requests and background runs.
pub fn start(options: &ServeOptions, workers: usize, signals: bool) -> Result<Running, String> {
    auth::check_bind(options.addr, &options.auth, options.insecure_open)?;
    let state = AppState::new(options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .thread_name("flowc-serve")
        .build()
        .map_err(|error| format!("cannot start the server's runtime: {error}"))?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(options.addr))
        .map_err(|error| format!("cannot listen on {}: {error}", options.addr))?;
    let addr = listener.local_addr().map_err(|error| format!("cannot read the bound address: {error}"))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let deadlines = options.deadlines;
    let thread = std::thread::Builder::new()
        .name("flowc-serve-main".to_string())
        .spawn(move || {
            let held = Arc::clone(&state);
            let served = runtime.block_on(async move {
                let state = held;
                let app = router(Arc::clone(&state));
                let shutdown = async move {
                    if signals {
                        tokio::select! {
                            _ = stopped => {}
                            () = termination() => {}
                        }
                    } else {
                        let _ = stopped.await;
                    }
                };
                listen::serve(listener, app, deadlines, &state, shutdown).await;
                let background: Vec<_> =
                    std::mem::take(&mut *state.background.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                for task in background {
                    let _ = task.await;
                }
                Ok(())
            });
            // The state goes last, on this plain thread once the runtime
            // is gone: a PostgreSQL store's client and a model's blocking
            // HTTP client block when dropped, which panics inside a runtime.
            drop(runtime);
            drop(state);
            served
        })
        .map_err(|error| format!("cannot start the server's thread: {error}"))?;
    Ok(Running { addr, stop: Some(stop), thread: Some(thread) })
}

impl Running {
    /// Waits until the server stops by itself (a signal).
    pub fn wait(mut self) -> Result<(), String> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err("the server's thread panicked".to_string()),
            None => Ok(()),
        }
    }
}

/// SIGTERM (what service managers send) or Ctrl-C.
async fn termination() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
