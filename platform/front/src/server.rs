//! The listener: accepts connections and passes each request through the
//! layers.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use wasmkeep_actors::Node;
use wasmkeep_core::Refusal;
use wasmkeep_core::handoff::is_websocket_upgrade;
use wasmkeep_core::path::parse_actor_path;

use crate::error::HttpError;
use crate::{AppRouting, HttpResponse, actor_route, body, edge, front_route, socket_route};

/// What the public port serves.
pub struct PublicPort {
    pub node: Node,
    pub routing: AppRouting,
}

impl PublicPort {
    async fn handle(&self, request: http::Request<Incoming>) -> HttpResponse {
        self.route(request).await.unwrap_or_else(HttpError::into_response)
    }

    async fn route(&self, request: http::Request<Incoming>) -> Result<HttpResponse, HttpError> {
        let (mut parts, incoming) = request.into_parts();
        edge::strip_client_headers(&mut parts);
        let app = self.routing.app_for(&parts).ok_or(HttpError::from(Refusal::NoSuchApp))?;
        let Some(target) = parse_actor_path(parts.uri.path(), parts.uri.query()) else {
            return front_route::handle(&self.node, app, http::Request::from_parts(parts, incoming)).await;
        };
        if is_websocket_upgrade(&parts.method, &parts.headers) {
            return socket_route::upgrade(&self.node, app, target, http::Request::from_parts(parts, incoming)).await;
        }
        let body = body::read(incoming, self.node.limits().body_bytes).await?;
        actor_route::handle(&self.node, app, target, &parts, body).await
    }
}

/// Serves `port` on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, port: PublicPort, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    let port = Arc::new(port);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of descriptors and the like: keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        let port = port.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let port = port.clone();
                async move { Ok::<_, Infallible>(port.handle(req).await) }
            });
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}
