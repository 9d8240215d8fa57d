//! The playground `flowc serve` shows at `GET /`: one HTML page, its style
//! and its scripts, all compiled into the binary (no CDN, nothing fetched
//! from elsewhere), and the two read-only routes the page needs beyond the
//! API: a program's graph (`GET /v1/programs/{name}/graph`) and what its
//! test files reach on it (`GET /v1/programs/{name}/coverage`).
//!
//! The page talks to the server only through the public API (sessions,
//! messages with server-sent events, runs and their event stream), so
//! what it shows is what any client gets.

mod graph;

pub use graph::{coverage_json, graph_json};

use super::AppState;
use super::auth::Tenant;
use super::error::{ApiError, Name};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;

const INDEX_HTML: &str = include_str!("page/index.html");
const APP_CSS: &str = include_str!("page/app.css");
const APP_JS: &str = include_str!("page/app.js");
const GRAPH_JS: &str = include_str!("page/graph.js");
const ICON_SVG: &str = include_str!("page/icon.svg");

/// Scripts and styles from this server only, no inline script, no framing:
/// the page shows text models wrote, which must never run as code.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The page's routes, merged into the server's router: the page and its
/// files, open to all like any login page (they hold no data). The graph
/// route is the API's (in [`super::routes`] and the OpenAPI document),
/// behind its tokens like `GET /v1/programs`.
pub fn router() -> Router<Arc<AppState>> {
    assets()
}

/// The page and its embedded files.
fn assets<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/playground/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route("/playground/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/playground/graph.js", get(|| async { asset("text/javascript; charset=utf-8", GRAPH_JS) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", ICON_SVG) }))
}

async fn index() -> Response {
    let mut response = asset("text/html; charset=utf-8", INDEX_HTML);
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    response
}

/// An embedded file. `no-cache` rather than a lifetime: the files change
/// with the binary, and revalidating a few kilobytes on loopback is cheap.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        body,
    )
        .into_response()
}

/// The graph of the program's current version: a program edited on disk
/// is compiled again first, as a new session would see it.
pub async fn program_graph(
    State(state): State<Arc<AppState>>,
    _tenant: Tenant,
    Name(name): Name,
) -> Result<Response, ApiError> {
    let graph = state
        .blocking(move |state| {
            let version = state.programs.current(&name).ok_or_else(|| ApiError::no_program(&name))?;
            Ok(graph_json(&name, &version.ir))
        })
        .await?;
    Ok(axum::Json(graph).into_response())
}

/// What the program's test files (the `*.test.yaml` beside it naming it)
/// reach when their cases run now, against its current version: `flowc
/// test --coverage` as the graph's overlay. The cases run on each file's
/// own model (offline unless the file says otherwise), one after another.
pub async fn program_coverage(
    State(state): State<Arc<AppState>>,
    _tenant: Tenant,
    Name(name): Name,
) -> Result<Response, ApiError> {
    let coverage = state
        .blocking(move |state| {
            let version = state.programs.current(&name).ok_or_else(|| ApiError::no_program(&name))?;
            Ok(coverage_json(&name, &version.path, &version.ir))
        })
        .await?;
    Ok(axum::Json(coverage).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn get(path: &str) -> (StatusCode, axum::http::HeaderMap, String) {
        let app: Router = assets();
        let response = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn the_page_loads_only_its_own_embedded_files() {
        let (status, headers, html) = get("/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("script-src 'self'"));
        // Every script and stylesheet the page names is one this router serves.
        for reference in ["/playground/app.css", "/playground/graph.js", "/playground/app.js", "/favicon.svg"] {
            assert!(html.contains(reference), "{reference}");
            let (status, headers, body) = get(reference).await;
            assert_eq!(status, StatusCode::OK, "{reference}");
            assert!(!body.is_empty());
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        for file in [INDEX_HTML, APP_CSS, APP_JS, GRAPH_JS] {
            // The SVG namespace is a name, not an address anything loads.
            let file = file.replace("http://www.w3.org/2000/svg", "");
            assert!(!file.contains("http://") && !file.contains("https://"), "nothing is loaded from elsewhere");
        }
        assert!(!html.contains("<script>"), "no inline script: the policy forbids it");
    }
}
