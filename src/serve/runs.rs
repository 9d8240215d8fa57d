//! `/v1/runs`: workflow runs started, shown, followed, resumed and
//! cancelled over HTTP. A run is stored before its first step and at every
//! step after, under this process's claim, exactly as `flowc run` stores
//! it, so `flowc resume`, `flowc worker` and other servers see the same
//! run. Its JSON is `flowc run --json`'s run object.
//!
//! The execution is [`crate::stored_run`]'s, the one the command line uses.

use super::AppState;
use super::auth::{Tenant, new_id, owned_program};
use super::error::{ApiError, Body, Id, from_body_rejection};
use super::metrics::Metrics;
use super::programs::Version;
use crate::runtime::model_step::Model;
use crate::runtime::workflow::{RunStatus, StepProgress, WorkflowRun};
use crate::store::{Cancel, Claim, StoreError, StoredRun};
use crate::stored_run::{Execution, Hooks};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::sync::Arc;

/// This server's claim on a run, for a lease from now: a server that dies
/// mid-step leaves the run to a worker after it.
fn claim(state: &AppState, version: &Version) -> Claim {
    crate::stored_run::claim_at(&state.holder, version.tool_env.clock.as_ref())
}

fn owned(tenant: &Tenant, id: &str) -> Result<String, ApiError> {
    owned_program(tenant, id).map(str::to_string).ok_or_else(|| ApiError::no_run(id))
}

/// The run's JSON, with its data in the order of its program's schema
/// when this server has the version it ran on.
fn run_json(state: &AppState, program: &str, stored: &StoredRun) -> serde_json::Value {
    match state.programs.version(program, &stored.program_hash) {
        Some(version) => stored.run.to_json(&version.ir),
        None => stored.run.to_json_without_program(),
    }
}

/// `POST /v1/runs {"program", "flow"?, "data"?, "context"?, "wait"?}`: starts
/// a run and answers 201 with the run where it stopped (completed,
/// failed, waiting…); with `"wait": false`, 202 at once with the run as
/// stored, which goes on in the background.
pub async fn create(
    State(state): State<Arc<AppState>>,
    tenant: Tenant,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| from_body_rejection(&rejection))?;
    let body = Body::parse(&body, &["program", "flow", "data", "context", "wait"])?;
    let name = body.required_str("program")?.to_string();
    let version = state.programs.current(&name).ok_or_else(|| ApiError::no_program(&name))?;
    let flow = match body.optional_str("flow")? {
        Some(flow) => version
            .ir
            .flow_by_name(flow)
            .ok_or_else(|| ApiError::invalid(format!("`flow`: the program `{name}` has no flow `{flow}`")))?,
        None => version
            .ir
            .default_flow
            .or_else(|| (version.ir.flows.len() == 1).then_some(crate::ir::FlowId(0)))
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "missing field `flow`: the program `{name}` has several flows and no default"
                ))
            })?,
    };
    let context = super::sessions::context(&version.ir, &body.optional_object("context")?)?;
    let data = body.optional_object("data")?;
    let wait = body.optional_bool("wait")?.unwrap_or(true);
    let mut run = crate::runtime::workflow::start(&version.ir, &version.tool_env, flow, &data, context)
        .map_err(|error| ApiError::invalid(format!("`data`: {error}")))?;
    run.run = new_id(&tenant, &name, &run.run);
    let started = Arc::clone(&state);
    let (stored, version, model) = started
        .blocking(move |state| {
            // Before the run is stored: a model that cannot be had leaves
            // nothing. Building one may read a recording: off the workers.
            let model = model_for(&version)?;
            let claim = claim(state, &version);
            let mut stored = StoredRun {
                run,
                program: version.path.display().to_string(),
                program_hash: version.hash.clone(),
                version: 1,
                due_at: None,
            };
            for _ in 0..100 {
                if super::caps::create_run(state, &tenant, &stored, &claim)? {
                    return Ok((stored, version, model));
                }
                stored.run.run = new_id(&tenant, &name, &version.tool_env.ids.next_id());
            }
            Err(ApiError::internal("every new run id tried was taken"))
        })
        .await?;
    Metrics::add(&state.metrics.runs_started, 1);
    let program = version.name.clone();
    if !wait {
        let shown = run_json(&state, &program, &stored);
        let background = Arc::clone(&state);
        let task = tokio::task::spawn_blocking(move || {
            let mut stored = stored;
            if let Err(error) = execute(&background, &mut stored, &version, model.as_ref()) {
                eprintln!("warning: run {} stopped: {}", stored.run.run, error.message);
            }
        });
        state.background.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(task);
        return Ok((StatusCode::ACCEPTED, Json(shown)).into_response());
    }
    let shown = state
        .blocking(move |state| {
            let mut stored = stored;
            execute(state, &mut stored, &version, model.as_ref())?;
            Ok(run_json(state, &program, &stored))
        })
        .await?;
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// The model the program's model steps ask, on the provider its
/// conversations use; none for a program that asks none, which then runs
/// whatever the provider. A provider that cannot be built is a 502
/// `model_unavailable`, as for a turn, asked before the run is stored or
/// claimed so that it leaves nothing behind.
fn model_for(version: &Version) -> Result<Option<Model>, ApiError> {
    if !crate::ir::walk::asks_model(&version.ir) {
        return Ok(None);
    }
    version.model().map(Some).map_err(|error| {
        ApiError::new(StatusCode::BAD_GATEWAY, "model_unavailable", format!("no model for the model steps: {error}"))
    })
}

/// Runs `stored` from where it stands to where it stops, saving it at every
/// step under this process's claim, then releases it. A cancel met on the
/// way is an answer, not an error: `stored` is then the run as cancelled.
fn execute(state: &AppState, stored: &mut StoredRun, version: &Version, model: Option<&Model>) -> Result<(), ApiError> {
    let execution = Execution {
        store: state.store.as_ref(),
        program: &version.ir,
        tools: version.tools(),
        tool_env: &version.tool_env,
        limits: version.limits.run,
        model,
    };
    let hooks = Hooks {
        on_progress: &mut |_: &StepProgress| {},
        on_saved: &mut |run: &WorkflowRun| state.run_news.saved(&run.run),
    };
    match execution.execute(stored, &claim(state, version), hooks) {
        Ok(()) | Err(StoreError::RunCancelled { .. }) => Ok(()),
        Err(error) => Err(state.store_error(error)),
    }
}

fn load(state: &AppState, id: &str) -> Result<StoredRun, ApiError> {
    state.store.load_run(id).map_err(|error| state.store_error(error))?.ok_or_else(|| ApiError::no_run(id))
}

/// `GET /v1/runs/{id}`.
pub async fn show(State(state): State<Arc<AppState>>, tenant: Tenant, Id(id): Id) -> Result<Response, ApiError> {
    let program = owned(&tenant, &id)?;
    let shown = state.blocking(move |state| Ok(run_json(state, &program, &load(state, &id)?))).await?;
    Ok(Json(shown).into_response())
}

/// `POST /v1/runs/{id}/resume {"now"?}`: goes on with a waiting run once it
/// is due (at once with `"now": true`), or with one a limit paused, as
/// `flowc resume` does; answers the run where it stopped.
pub async fn resume(
    State(state): State<Arc<AppState>>,
    tenant: Tenant,
    Id(id): Id,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let program = owned(&tenant, &id)?;
    let body = body.map_err(|rejection| from_body_rejection(&rejection))?;
    let now = if body.iter().all(u8::is_ascii_whitespace) {
        false
    } else {
        Body::parse(&body, &["now"])?.optional_bool("now")?.unwrap_or(false)
    };
    let shown = state
        .blocking(move |state| {
            let stored = load(state, &id)?;
            if stored.run.status.has_ended() {
                return Err(ApiError::conflict(format!(
                    "run `{id}` has ended ({}): there is nothing to resume",
                    stored.run.status.as_str()
                ))
                .with_code("run_ended"));
            }
            let version = state.programs.version(&program, &stored.program_hash).ok_or_else(|| {
                ApiError::conflict(format!(
                    "run `{id}` started on a version of `{program}` this server does not have (hash {}); \
                         a run goes on only with the program it started with",
                    stored.program_hash
                ))
                .with_code("incompatible_program")
            })?;
            let model = model_for(&version)?;
            let claim = claim(state, &version);
            let not_due = stored.due_at.is_some_and(|due| due > claim.now);
            if stored.run.status == RunStatus::Waiting && !now && not_due {
                return Err(ApiError::conflict(format!(
                    "run `{id}` waits until {}; send {{\"now\": true}} to resume it early",
                    stored.run.resume_at.clone().unwrap_or_default()
                ))
                .with_code("not_due"));
            }
            let mut claimed =
                state.store.claim_run(&id, &claim, now).map_err(|error| state.store_error(error))?.ok_or_else(
                    || {
                        ApiError::conflict(format!("run `{id}` is being run by another process; try again later"))
                            .with_code("run_busy")
                    },
                )?;
            execute(state, &mut claimed, &version, model.as_ref())?;
            Ok(run_json(state, &program, &claimed))
        })
        .await?;
    Ok(Json(shown).into_response())
}

/// `POST /v1/runs/{id}/cancel`: a waiting, paused or running run is
/// stopped for good, `cancelled`, through the store's own cancel (as
/// `flowc runs cancel`): a process running it finds its next save refused
/// and stops there, and no worker or resume takes it again.
pub async fn cancel(State(state): State<Arc<AppState>>, tenant: Tenant, Id(id): Id) -> Result<Response, ApiError> {
    let program = owned(&tenant, &id)?;
    let shown = state
        .blocking(move |state| {
            let at = state.programs.clock().now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            match state.store.cancel_run(&id, &at).map_err(|error| state.store_error(error))? {
                Cancel::Cancelled(stored) => {
                    state.run_news.saved(&id);
                    Ok(run_json(state, &program, &stored))
                }
                Cancel::Ended(status) => Err(ApiError::conflict(format!(
                    "run `{id}` has ended ({}): there is nothing to cancel",
                    status.as_str()
                ))
                .with_code("run_ended")),
                Cancel::Missing => Err(ApiError::no_run(&id)),
            }
        })
        .await?;
    Ok(Json(shown).into_response())
}

/// `GET /v1/runs/{id}/events`: the run's events as server-sent events,
/// from its first: each `step` event (`step_started`, `step_completed`,
/// `step_failed`, `run_resumed`) with `progress` "step N of M", then one
/// `finished` (or `waiting`, `paused`) event with the run object when it
/// stops. A stopped run's events are replayed from the store; a running
/// one's follow as it is saved, by whichever process runs it.
pub async fn events(State(state): State<Arc<AppState>>, tenant: Tenant, Id(id): Id) -> Result<Response, ApiError> {
    let program = owned(&tenant, &id)?;
    // Listening before the first read: no save after it goes unheard.
    let news = state.run_news.subscribe();
    let first = {
        let id = id.clone();
        state.blocking(move |state| load(state, &id)).await?
    };
    let poll = state.run_poll;
    let open = super::StreamOpen::new(&state);
    let start = (Some(first), 0usize, Vec::<SseEvent>::new(), false, (open, news));
    let stream = futures_util::stream::unfold(start, move |(mut loaded, mut sent, mut queue, mut done, mut held)| {
        let state = Arc::clone(&state);
        let id = id.clone();
        let program = program.clone();
        async move {
            loop {
                if let Some(event) = queue.pop() {
                    return Some((Ok::<_, Infallible>(event), (loaded, sent, queue, done, held)));
                }
                if done {
                    return None;
                }
                let stored = match loaded.take() {
                    Some(stored) => stored,
                    None => {
                        super::news::wait_for(&mut held.1, &id, poll).await;
                        let reload = id.clone();
                        match state.blocking(move |state| load(state, &reload)).await {
                            Ok(stored) => stored,
                            Err(error) => {
                                queue.push(SseEvent::default().event("error").data(error.body().to_string()));
                                done = true;
                                continue;
                            }
                        }
                    }
                };
                let fresh: Vec<SseEvent> =
                    stored.run.events.iter().skip(sent).map(|event| step_event(&stored.run, event)).collect();
                sent = stored.run.events.len().max(sent);
                if stored.run.status != RunStatus::Running {
                    let kind = match stored.run.status {
                        RunStatus::Waiting => "waiting",
                        RunStatus::Paused => "paused",
                        _ => "finished",
                    };
                    queue.push(SseEvent::default().event(kind).data(run_json(&state, &program, &stored).to_string()));
                    done = true;
                }
                queue.extend(fresh.into_iter().rev());
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

fn step_event(run: &WorkflowRun, event: &crate::runtime::workflow_run::RunEvent) -> SseEvent {
    let total = run.steps.len();
    let index = event.step.as_deref().and_then(|step| run.steps.iter().position(|record| record.id == step));
    let progress = index.map(|index| format!("step {} of {total}", index + 1));
    let data = serde_json::json!({ "event": event.event, "step": event.step, "at": event.at, "progress": progress });
    SseEvent::default().event("step").data(data.to_string())
}
