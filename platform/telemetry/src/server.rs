//! The metrics listener: `/metrics` in the Prometheus text format,
//! `/healthz` (the process answers) and `/readyz` (the node should be
//! sent traffic: in a cluster, while its heartbeat is current), on its own
//! port, apart from the public one.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use tokio::net::TcpListener;
use wasmkeep_core::Limits;

use crate::Source;

/// Whether the node should be sent traffic now.
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// Always ready: a node alone is ready while it answers.
pub fn always_ready() -> Readiness {
    Arc::new(|| true)
}

/// Serves the sources' metrics on `listener` until `shutdown` completes,
/// its connections bounded and watched as the public port's, within the
/// metrics listener's own share of the process's descriptors.
pub async fn serve(
    listener: TcpListener,
    limits: &Limits,
    sources: Vec<Arc<dyn Source>>,
    ready: Readiness,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let budget = limits.descriptor_budget(wasmkeep_listener::raise_descriptor_limit());
    let rules = wasmkeep_listener::Rules {
        name: "metrics",
        bound: budget.metrics,
        times: limits.connection_times(),
        head_bytes: limits.head_bytes,
    };
    let sources = Arc::new(sources);
    let handler = move |request: http::Request<hyper::body::Incoming>, _| {
        let answer = answer(request.uri().path(), &sources, &*ready);
        std::future::ready(answer)
    };
    wasmkeep_listener::serve(listener, rules, None, handler, shutdown).await;
    Ok(())
}

fn answer(path: &str, sources: &[Arc<dyn Source>], ready: &(dyn Fn() -> bool + Send + Sync)) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => {
            let refs: Vec<&dyn Source> = sources.iter().map(|s| &**s).collect();
            (StatusCode::OK, crate::CONTENT_TYPE, crate::render(&refs))
        }
        "/healthz" => (StatusCode::OK, "text/plain; charset=utf-8", "ok\n".to_owned()),
        "/readyz" if ready() => (StatusCode::OK, "text/plain; charset=utf-8", "ready\n".to_owned()),
        "/readyz" => (StatusCode::SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", "not ready\n".to_owned()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /metrics, /healthz or /readyz\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_follows_the_readiness_and_healthz_does_not() {
        assert_eq!(answer("/readyz", &[], &|| true).status(), StatusCode::OK);
        assert_eq!(answer("/readyz", &[], &|| false).status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer("/healthz", &[], &|| false).status(), StatusCode::OK);
        assert_eq!(answer("/nope", &[], &|| true).status(), StatusCode::NOT_FOUND);
    }
}
