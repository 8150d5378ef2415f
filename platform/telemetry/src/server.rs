//! The metrics listener: `/metrics` in the Prometheus text format,
//! `/healthz` (the process answers) and `/readyz` (the node should be
//! sent traffic: in a cluster, while its heartbeat is current), on its own
//! port, apart from the public one.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::Source;

/// Whether the node should be sent traffic now.
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// Always ready: a node alone is ready while it answers.
pub fn always_ready() -> Readiness {
    Arc::new(|| true)
}

/// Serves the sources' metrics on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    sources: Vec<Arc<dyn Source>>,
    ready: Readiness,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let sources = Arc::new(sources);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!("metrics listener: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let (sources, ready) = (sources.clone(), ready.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let (sources, ready) = (sources.clone(), ready.clone());
                async move { Ok::<_, Infallible>(answer(req.uri().path(), &sources, &*ready)) }
            });
            let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
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
