//! The playground `flowc serve` shows at `GET /`: one HTML page, its style
//! and its scripts, all compiled into the binary (no CDN, nothing fetched
//! from elsewhere), and the one read-only route the page needs beyond the
//! API: a program's graph.
//!
//! The page talks to the server only through the public API (sessions,
//! messages with server-sent events, runs and their event stream), so
//! what it shows is what any client gets.

mod graph;

pub use graph::graph_json;

use crate::ir::Program;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use std::sync::Arc;

/// The programs a server holds, by name, as the page's routes read them.
/// The server implements it over whatever it reloads programs into; the
/// page asks for the program again on every request, so an edit on disk
/// shows on the next graph it draws.
pub trait Catalog: Send + Sync + 'static {
    /// The program served under `name` now.
    fn program(&self, name: &str) -> Option<Arc<Program>>;
}

const INDEX_HTML: &str = include_str!("page/index.html");
const APP_CSS: &str = include_str!("page/app.css");
const APP_JS: &str = include_str!("page/app.js");
const GRAPH_JS: &str = include_str!("page/graph.js");
const ICON_SVG: &str = include_str!("page/icon.svg");

/// Scripts and styles from this server only, no inline script, no framing:
/// the page shows text models wrote, which must never run as code.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The page's routes, to be merged into the server's router (whatever its
/// state: these carry their own).
pub fn router<S: Clone + Send + Sync + 'static>(catalog: Arc<dyn Catalog>) -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/playground/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route("/playground/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/playground/graph.js", get(|| async { asset("text/javascript; charset=utf-8", GRAPH_JS) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", ICON_SVG) }))
        .route("/v1/programs/{name}/graph", get(program_graph))
        .with_state(catalog)
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

async fn program_graph(State(catalog): State<Arc<dyn Catalog>>, Path(name): Path<String>) -> Response {
    match catalog.program(&name) {
        Some(program) => axum::Json(graph_json(&name, &program)).into_response(),
        None => unknown_program(&name),
    }
}

/// The API's error shape (`{"error": {"code", "message"}}`), 404 like an
/// unknown program everywhere else.
fn unknown_program(name: &str) -> Response {
    let body =
        json!({ "error": { "code": "unknown_program", "message": format!("no program is served as `{name}`") } });
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    struct One(Arc<Program>);

    impl Catalog for One {
        fn program(&self, name: &str) -> Option<Arc<Program>> {
            (name == "booking").then(|| self.0.clone())
        }
    }

    fn app() -> Router {
        let text = include_str!("../../flows/booking.flow");
        let compilation = crate::pipeline::compile(&SourceFile::new("booking.flow", text));
        router(Arc::new(One(Arc::new(compilation.ir))))
    }

    async fn get(path: &str) -> (StatusCode, axum::http::HeaderMap, String) {
        let response = app().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
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
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "the page must not load anything from elsewhere"
        );
        assert!(!html.contains("<script>"), "no inline script: the policy forbids it");
    }

    #[tokio::test]
    async fn graphs_are_served_by_program_name() {
        let (status, _, body) = get("/v1/programs/booking/graph").await;
        assert_eq!(status, StatusCode::OK);
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["program"], "booking");
        let (status, _, body) = get("/v1/programs/nope/graph").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["error"]["code"], "unknown_program");
    }
}
