//! The API's one error shape, `{"error": {"code", "message"}}`, with the
//! HTTP status each code answers with; and how the store's and the request
//! body's failures map onto it, and the path's: a route's `{id}` or
//! `{name}` that is not UTF-8 once percent-decoded names nothing there
//! can be, and is the route's 404 in the same shape ([`Id`], [`Name`]),
//! where axum's own extractor answers a 400 in plain text.

use crate::store::StoreError;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

/// A route's `{id}` (a session's or a run's).
pub struct Id(pub String);

/// A route's program `{name}`.
pub struct Name(pub String);

/// The route's one path parameter. One that does not decode names
/// nothing (`code`, 404); any other rejection is the router's own wiring
/// gone wrong (no such parameter), a 500 as axum answers it.
async fn path_param<S: Send + Sync>(parts: &mut Parts, state: &S, code: &'static str) -> Result<String, ApiError> {
    Path::<String>::from_request_parts(parts, state).await.map(|Path(param)| param).map_err(|rejection| match rejection
    {
        PathRejection::FailedToDeserializePathParams(_) => {
            ApiError::new(StatusCode::NOT_FOUND, code, format!("nothing is named so: {}", rejection.body_text()))
        }
        other => ApiError::internal(other.body_text()),
    })
}

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Id, ApiError> {
        path_param(parts, state, "not_found").await.map(Id)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Name, ApiError> {
        path_param(parts, state, "program_not_found").await.map(Name)
    }
}

/// An error answered to a client. `code` is stable (clients branch on it);
/// `message` is for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds the client is asked to wait before trying again
    /// (`Retry-After`), when waiting is what helps.
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), retry_after: None }
    }

    /// 400: the body (or a query parameter) is not what the route takes.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", message)
    }

    /// 404 for a session or run that does not exist or belongs to another
    /// tenant: the two are answered alike, so ids are never confirmed.
    pub fn no_session(id: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "session_not_found", format!("there is no session `{id}`"))
    }

    pub fn no_run(id: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "run_not_found", format!("there is no run `{id}`"))
    }

    pub fn no_program(name: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "program_not_found",
            format!("there is no program `{name}` (GET /v1/programs lists them)"),
        )
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "version_conflict", message)
    }

    /// 500 for what the server itself failed at; the message still says what.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The same error under a more precise code.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = code;
        self
    }

    /// The same error, asking the client to wait `seconds` first.
    pub fn with_retry_after(mut self, seconds: u32) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match &error {
            StoreError::Conflict { .. } | StoreError::RunConflict { .. } => ApiError::conflict(error.to_string()),
            StoreError::RunCancelled { .. } => ApiError::conflict(error.to_string()).with_code("run_cancelled"),
            StoreError::InvalidId { .. } => ApiError::new(StatusCode::NOT_FOUND, "not_found", error.to_string()),
            StoreError::Io { .. } | StoreError::Open { .. } | StoreError::WriteRefused { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", error.to_string())
            }
            StoreError::Corrupt { .. } => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "store_corrupt", error.to_string())
            }
        }
    }
}

/// What a request body failed at: the body limit (413), anything else the
/// transport reports (400).
pub fn from_body_rejection(rejection: &axum::extract::rejection::BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large()
    } else {
        ApiError::invalid(format!("cannot read the request body: {}", rejection.body_text()))
    }
}

/// 413: the body is over the server's limit (`--max-body`).
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        "the request body is larger than the server takes (--max-body)",
    )
}

/// A JSON request body read field by field, so that a 400 names the field.
pub struct Body {
    object: serde_json::Map<String, serde_json::Value>,
}

impl Body {
    /// Parses `bytes` as a JSON object whose keys are all in `allowed`.
    pub fn parse(bytes: &[u8], allowed: &[&str]) -> Result<Body, ApiError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::invalid("the request body is empty: send a JSON object"));
        }
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|error| ApiError::invalid(format!("the request body is not valid JSON: {error}")))?;
        let serde_json::Value::Object(object) = value else {
            return Err(ApiError::invalid("the request body must be a JSON object"));
        };
        if let Some(unknown) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
            let known: Vec<String> = allowed.iter().map(|key| format!("`{key}`")).collect();
            return Err(ApiError::invalid(format!("unknown field `{unknown}` (the fields are {})", known.join(", "))));
        }
        Ok(Body { object })
    }

    pub fn required_str(&self, field: &str) -> Result<&str, ApiError> {
        self.optional_str(field)?.ok_or_else(|| ApiError::invalid(format!("missing field `{field}` (a string)")))
    }

    pub fn optional_str(&self, field: &str) -> Result<Option<&str>, ApiError> {
        match self.object.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(ApiError::invalid(format!("`{field}` must be a string"))),
        }
    }

    pub fn optional_object(&self, field: &str) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
        match self.object.get(field) {
            None | Some(serde_json::Value::Null) => Ok(serde_json::Map::new()),
            Some(serde_json::Value::Object(object)) => Ok(object.clone()),
            Some(_) => Err(ApiError::invalid(format!("`{field}` must be a JSON object"))),
        }
    }

    pub fn optional_bool(&self, field: &str) -> Result<Option<bool>, ApiError> {
        match self.object.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::Bool(flag)) => Ok(Some(*flag)),
            Some(_) => Err(ApiError::invalid(format!("`{field}` must be true or false"))),
        }
    }

    pub fn optional_u64(&self, field: &str) -> Result<Option<u64>, ApiError> {
        match self.object.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .map(Some)
                .ok_or_else(|| ApiError::invalid(format!("`{field}` must be a whole number, 0 or more"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_error_names_the_field() {
        let missing = Body::parse(br#"{"data": {}}"#, &["program", "data"])
            .and_then(|body| body.required_str("program").map(str::to_string));
        assert_eq!(missing.map_err(|error| error.message), Err("missing field `program` (a string)".to_string()));
        let wrong = Body::parse(br#"{"program": 3}"#, &["program"])
            .and_then(|body| body.required_str("program").map(str::to_string));
        assert_eq!(wrong.map_err(|error| error.message), Err("`program` must be a string".to_string()));
        let unknown = Body::parse(br#"{"programme": "x"}"#, &["program"]).map(|_| ());
        assert_eq!(
            unknown.map_err(|error| error.message),
            Err("unknown field `programme` (the fields are `program`)".to_string())
        );
    }

    #[test]
    fn malformed_json_and_non_objects_are_400() {
        for text in [&b"{"[..], b"[1]", b"  ", b"\"text\""] {
            let error = Body::parse(text, &[]).map(|_| ()).err();
            assert_eq!(error.map(|error| (error.status, error.code)), Some((StatusCode::BAD_REQUEST, "invalid_body")));
        }
    }

    #[test]
    fn a_conflict_is_409_and_the_store_being_down_is_503() {
        let conflict = ApiError::from(StoreError::Conflict { id: "s".into(), stored: 2, expected: 1 });
        assert_eq!((conflict.status, conflict.code), (StatusCode::CONFLICT, "version_conflict"));
        let down = ApiError::from(StoreError::Io { id: "s".into(), message: "gone".into() });
        assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
