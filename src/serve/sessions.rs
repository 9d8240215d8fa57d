//! `/v1/sessions`: creating, showing, listing and deleting conversations.
//! A session's id names its tenant and program ([`super::auth::new_id`]);
//! the turn itself is [`super::turn`].

use super::AppState;
use super::auth::{Tenant, new_id, owned_program};
use super::error::{ApiError, Body, Id, from_body_rejection};
use super::metrics::Metrics;
use crate::ir::Program;
use crate::runtime::session::{Data, Session, ordered_data};
use crate::runtime::validate::validate;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The most sessions one page lists.
pub const MAX_PAGE: usize = 500;
const DEFAULT_PAGE: usize = 50;

/// `POST /v1/sessions {"program", "context"?, "data"?}` → 201 `{"id"}`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    tenant: Tenant,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|rejection| from_body_rejection(&rejection))?;
    let body = Body::parse(&body, &["program", "context", "data"])?;
    let name = body.required_str("program")?.to_string();
    let version = state.programs.current(&name).ok_or_else(|| ApiError::no_program(&name))?;
    if !version.converses() {
        return Err(ApiError::invalid(format!(
            "`program`: `{name}` holds only workflows; start a run with POST /v1/runs"
        )));
    }
    let mut session = Session::new(String::new(), version.hash.clone());
    session.data = fields(&version.ir, &body.optional_object("data")?, "data")?;
    session.context = context(&version.ir, &body.optional_object("context")?)?;
    session.version = 1;
    let save = move |state: &AppState| {
        // Seeded ids (FLOWC_SEED) repeat across processes: an id the
        // store already has takes the next.
        for _ in 0..100 {
            session.id = new_id(&tenant, &name, &version.tool_env.ids.next_id());
            if super::caps::create_session(state, &tenant, &session)? {
                let id = session.id.clone();
                state.sessions.put(Arc::new(session));
                return Ok(id);
            }
        }
        Err(ApiError::internal("every new session id tried was taken"))
    };
    // A local store's count and insert are short: they run here, not on
    // the blocking pool (see `super::turn` on where turns run).
    let id = if state.inline_store { save(&state)? } else { state.blocking(save).await? };
    Metrics::add(&state.metrics.sessions_created, 1);
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id })).into_response()).into_response())
}

/// The validated `data` of a new session or run: every key a field of the
/// program, every value of its type.
pub fn fields(
    program: &Program,
    values: &serde_json::Map<String, serde_json::Value>,
    what: &str,
) -> Result<Data, ApiError> {
    let mut data = Data::new();
    for (name, value) in values {
        let Some(field) = program.fields.iter().find(|field| field.name == *name) else {
            return Err(ApiError::invalid(format!("`{what}.{name}`: the program has no field `{name}`")));
        };
        let value =
            validate(value, &field.ty).map_err(|reason| ApiError::invalid(format!("`{what}.{name}`: {reason}")))?;
        data.insert(name.clone(), value);
    }
    Ok(data)
}

/// The validated `context`: every key one the program declares.
pub fn context(program: &Program, values: &serde_json::Map<String, serde_json::Value>) -> Result<Data, ApiError> {
    let mut data = Data::new();
    for (name, value) in values {
        let Some(key) = program.context.iter().find(|key| key.name == *name) else {
            return Err(ApiError::invalid(format!("`context.{name}`: the program declares no context key `{name}`")));
        };
        let value =
            validate(value, &key.ty).map_err(|reason| ApiError::invalid(format!("`context.{name}`: {reason}")))?;
        data.insert(name.clone(), value);
    }
    Ok(data)
}

/// The program an id of this tenant names, or the 404 of a session that
/// is not there.
pub fn owned(tenant: &Tenant, id: &str) -> Result<String, ApiError> {
    owned_program(tenant, id).map(str::to_string).ok_or_else(|| ApiError::no_session(id))
}

/// `GET /v1/sessions/{id}`: where the conversation stands, its data and
/// its whole transcript.
pub async fn show(State(state): State<Arc<AppState>>, tenant: Tenant, Id(id): Id) -> Result<Response, ApiError> {
    let program = owned(&tenant, &id)?;
    let shown = state
        .blocking(move |state| {
            let session = state.store.load(&id).map_err(|error| state.store_error(error))?;
            let session = session.ok_or_else(|| ApiError::no_session(&id))?;
            let transcript = state.store.transcript(&id).map_err(|error| state.store_error(error))?;
            let current =
                state.programs.version(&program, &session.program_hash).or_else(|| state.programs.current(&program));
            let data = match &current {
                Some(version) => serde_json::Value::Object(ordered_data(&version.ir, &session.data)),
                None => serde_json::to_value(&session.data).unwrap_or_default(),
            };
            Ok(serde_json::json!({
                "id": session.id,
                "program": program,
                "version": session.version,
                "turns": session.turns,
                "flow": session.flow_name,
                "step": session.step_name,
                "data": data,
                "context": session.context,
                "tokens": session.usage,
                "history": transcript,
            }))
        })
        .await?;
    Ok(Json(shown).into_response())
}

/// `DELETE /v1/sessions/{id}` → 204.
pub async fn delete(State(state): State<Arc<AppState>>, tenant: Tenant, Id(id): Id) -> Result<Response, ApiError> {
    owned(&tenant, &id)?;
    state
        .blocking(move |state| {
            // Forgotten first and again after: a turn of this server
            // finishing meanwhile must not leave it behind (its save
            // would fail on the deleted row anyway).
            state.sessions.forget(&id);
            let deleted = state.store.delete(&id);
            state.sessions.forget(&id);
            match deleted {
                Ok(true) => Ok(()),
                Ok(false) => Err(ApiError::no_session(&id)),
                Err(error) => Err(state.store_error(error)),
            }
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, serde::Deserialize)]
pub struct ListQuery {
    program: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// `GET /v1/sessions?program=&limit=&after=`: this tenant's sessions in id
/// order, a page at a time; `next` is the `after` of the next page.
pub async fn list(
    State(state): State<Arc<AppState>>,
    tenant: Tenant,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) =
        query.map_err(|rejection| ApiError::invalid(format!("the query string: {}", rejection.body_text())))?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::invalid(format!("`limit` must be 1 to {MAX_PAGE}")));
    }
    if let Some(program) = &query.program
        && state.programs.current(program).is_none()
    {
        return Err(ApiError::no_program(program));
    }
    let page = state
        .blocking(move |state| {
            let all = state.store.list().map_err(|error| state.store_error(error))?;
            let mine = all.into_iter().filter(|summary| {
                owned_program(&tenant, &summary.id)
                    .is_some_and(|program| query.program.as_deref().is_none_or(|wanted| wanted == program))
                    && query.after.as_deref().is_none_or(|after| summary.id.as_str() > after)
            });
            let mut page: Vec<_> = mine.take(limit + 1).collect();
            let more = page.len() > limit;
            page.truncate(limit);
            let next = if more { page.last().map(|summary| summary.id.clone()) } else { None };
            let sessions: Vec<_> = page
                .into_iter()
                .map(|summary| {
                    let program = owned_program(&tenant, &summary.id).unwrap_or_default().to_string();
                    serde_json::json!({
                        "id": summary.id,
                        "program": program,
                        "flow": summary.flow,
                        "step": summary.step,
                        "turns": summary.turns,
                        "version": summary.version,
                        "updated_at": summary.updated_at,
                    })
                })
                .collect();
            Ok(serde_json::json!({ "sessions": sessions, "next": next }))
        })
        .await?;
    Ok(Json(page).into_response())
}
