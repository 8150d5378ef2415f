//! The edge request's span (kind server), the root of a request's trace
//! on this node: a child of the client's trace when its `traceparent` is
//! taken, the parent of what the request runs (its front, its actor's
//! event), whose context the envelope carries on.

use tracing::field::Empty;
use wasmkeep_core::{TraceContext, head};
use wasmkeep_telemetry::traces::{self, TARGET};

/// The span of `request`, and the context its work is to carry: the span's
/// own, or with tracing off the client's as it came (none when `trust` is
/// false: the client's context goes no further).
pub(crate) fn open(request: &http::Request<hyper::body::Incoming>, trust: bool) -> (tracing::Span, TraceContext) {
    let client = if trust { head::read_trace(request.headers()) } else { TraceContext::default() };
    let host = request.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let span = tracing::info_span!(
        target: TARGET,
        parent: None,
        "http.request",
        otel.name = %request.method(),
        otel.kind = "server",
        http.request.method = %request.method(),
        url.path = request.uri().path(),
        server.address = host,
        http.response.status_code = Empty,
        wasmkeep.tenant = Empty,
        wasmkeep.app = Empty,
    );
    traces::adopt(&span, &client);
    let carried = traces::carried(&span, &client);
    (span, carried)
}

/// Notes the app the request was routed to.
pub(crate) fn routed(span: &tracing::Span, app: &wasmkeep_core::AppRef) {
    span.record("wasmkeep.tenant", app.tenant.as_str());
    span.record("wasmkeep.app", app.name.as_str());
}

/// Notes the answer's status.
pub(crate) fn answered(span: &tracing::Span, status: http::StatusCode) {
    span.record("http.response.status_code", status.as_u16());
}

/// Fails the span with the failure's name.
pub(crate) fn failed(span: &tracing::Span, failure: &wasmkeep_core::Failure) {
    traces::failed(span, failure.label());
}
