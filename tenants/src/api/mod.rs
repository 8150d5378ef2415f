//! The provisioning API (`/v1`, JSON; `tenants/openapi.yaml` is its
//! document). Each resource is its own file; authentication is one
//! extractor (`auth`), answers to failures are made in one place (`error`),
//! and the per-address rate limits are one layer of state (`limits`).

mod actors;
mod apps;
mod auth;
mod error;
pub mod limits;
mod logs;
mod telemetry;
mod tenants;
mod tokens;
pub mod usage;
mod values;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{MethodRouter, delete, get, post, put};
use wasmkeep_actors::Node;
use wasmkeep_core::host::BaseDomain;
use wasmkeep_storage::Store;

pub use auth::Caller;
pub use error::ApiError;
pub use limits::RateLimits;

use crate::plans::Plans;
use crate::token::{Pepper, TokenHash};

/// The OpenAPI document of this API, served at `/v1/openapi.yaml`.
pub const OPENAPI: &str = include_str!("../../openapi.yaml");

/// Who may sign up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignupMode {
    /// Anyone who reaches the API.
    Open,
    /// Whoever holds the operator's sign-up key.
    Key,
    /// Only the operator, with the operator's token.
    Closed,
}

/// The provisioning API's state: the node it deploys to, the store of
/// accounts, the server's secrets and the operator's settings.
pub struct Service {
    pub node: Node,
    pub store: Arc<dyn Store>,
    pub plans: Plans,
    pub default_plan: String,
    pub signup: SignupMode,
    /// The sign-up key's keyed hash (`key` mode), compared like a token.
    pub signup_key: Option<TokenHash>,
    pub pepper: Pepper,
    pub base_domain: BaseDomain,
    /// How an app's URL is written back to its deployer: the public port's
    /// scheme and port (`http`, `:8080`).
    pub public_scheme: String,
    pub public_port: Option<u16>,
    pub limits: RateLimits,
    /// When the node started (unix seconds): usage counts from here.
    pub started: i64,
    /// Told when the operator asks this node to drain and stop.
    pub drain: Arc<tokio::sync::Notify>,
    /// True once the node stops: a log tail ends then.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// Tenants' own trace exports, if the operator lets them have them.
    pub exports: Option<Arc<wasmkeep_telemetry::tenant_export::TenantExports>>,
}

/// The bytes of one value.
pub const VALUE_BYTES_MAX: usize = 64 * 1024;
/// The bytes of a JSON request other than an upload.
pub const JSON_BYTES_MAX: usize = 64 * 1024;

/// Every route the API serves, as `tenants/openapi.yaml` documents them
/// (a test holds the two equal).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/openapi.yaml"),
    ("POST", "/v1/tenants"),
    ("GET", "/v1/tenants"),
    ("PUT", "/v1/tenants/{tenant}/plan"),
    ("POST", "/v1/tenants/{tenant}/suspend"),
    ("POST", "/v1/tenants/{tenant}/resume"),
    ("POST", "/v1/node/drain"),
    ("POST", "/v1/tokens"),
    ("GET", "/v1/tokens"),
    ("DELETE", "/v1/tokens/{id}"),
    ("GET", "/v1/apps"),
    ("PUT", "/v1/apps/{app}"),
    ("GET", "/v1/apps/{app}"),
    ("DELETE", "/v1/apps/{app}"),
    ("POST", "/v1/apps/{app}/versions"),
    ("GET", "/v1/apps/{app}/versions"),
    ("POST", "/v1/apps/{app}/versions/{version}/activate"),
    ("GET", "/v1/apps/{app}/values"),
    ("PUT", "/v1/apps/{app}/values/{name}"),
    ("DELETE", "/v1/apps/{app}/values/{name}"),
    ("GET", "/v1/apps/{app}/actors"),
    ("GET", "/v1/apps/{app}/actors/{class}/{name}"),
    ("DELETE", "/v1/apps/{app}/actors/{class}/{name}"),
    ("GET", "/v1/apps/{app}/logs"),
    ("GET", "/v1/usage"),
    ("PUT", "/v1/telemetry"),
    ("GET", "/v1/telemetry"),
    ("DELETE", "/v1/telemetry"),
];

/// The handler of one route of `ROUTES`.
fn endpoint(method: &str, path: &str) -> MethodRouter<Arc<Service>> {
    match (method, path) {
        ("GET", "/v1/openapi.yaml") => get(openapi),
        ("POST", "/v1/tenants") => post(tenants::signup),
        ("GET", "/v1/tenants") => get(tenants::list),
        ("PUT", "/v1/tenants/{tenant}/plan") => put(tenants::set_plan),
        ("POST", "/v1/tenants/{tenant}/suspend") => post(tenants::suspend),
        ("POST", "/v1/tenants/{tenant}/resume") => post(tenants::resume),
        ("POST", "/v1/node/drain") => post(tenants::drain),
        ("POST", "/v1/tokens") => post(tokens::create),
        ("GET", "/v1/tokens") => get(tokens::list),
        ("DELETE", "/v1/tokens/{id}") => delete(tokens::revoke),
        ("GET", "/v1/apps") => get(apps::list),
        ("PUT", "/v1/apps/{app}") => put(apps::create),
        ("GET", "/v1/apps/{app}") => get(apps::show),
        ("DELETE", "/v1/apps/{app}") => delete(apps::delete),
        ("POST", "/v1/apps/{app}/versions") => post(apps::upload),
        ("GET", "/v1/apps/{app}/versions") => get(apps::versions),
        ("POST", "/v1/apps/{app}/versions/{version}/activate") => post(apps::activate),
        ("GET", "/v1/apps/{app}/values") => get(values::list),
        ("PUT", "/v1/apps/{app}/values/{name}") => put(values::set),
        ("DELETE", "/v1/apps/{app}/values/{name}") => delete(values::delete),
        ("GET", "/v1/apps/{app}/actors") => get(actors::list),
        ("GET", "/v1/apps/{app}/actors/{class}/{name}") => get(actors::show),
        ("DELETE", "/v1/apps/{app}/actors/{class}/{name}") => delete(actors::delete),
        ("GET", "/v1/apps/{app}/logs") => get(logs::tail),
        ("GET", "/v1/usage") => get(usage::usage),
        ("PUT", "/v1/telemetry") => put(telemetry::set),
        ("GET", "/v1/telemetry") => get(telemetry::show),
        ("DELETE", "/v1/telemetry") => delete(telemetry::remove),
        _ => unreachable!("{method} {path} is in ROUTES without a handler"),
    }
}

/// Every route of the API.
pub fn router(service: Arc<Service>) -> Router {
    ROUTES
        .iter()
        .fold(Router::new(), |router, (method, path)| router.route(path, endpoint(method, path)))
        .fallback(error::no_route)
        .method_not_allowed_fallback(error::no_method)
        // Bodies are read by each handler under its own bound (an upload's
        // is the tenant's plan's).
        .layer(DefaultBodyLimit::disable())
        .with_state(service)
}

async fn openapi() -> impl axum::response::IntoResponse {
    ([(http::header::CONTENT_TYPE, "application/yaml")], OPENAPI)
}

/// Serves the API on `listener` until `shutdown` completes; over TLS when
/// `tls` is given (HTTP/2 or HTTP/1.1 by ALPN).
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Arc<Service>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Some(tls) = tls else {
        let app = router(service).into_make_service_with_connect_info::<SocketAddr>();
        return axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    };
    let router = router(service);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!("provisioning API: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let (tls, router) = (tls.clone(), router.clone());
        tokio::spawn(async move {
            // A handshake gets the time a request head gets on the port.
            let Ok(Ok(stream)) = tokio::time::timeout(std::time::Duration::from_secs(10), tls.accept(stream)).await
            else {
                return;
            };
            let app = router.layer(axum::Extension(axum::extract::ConnectInfo(peer)));
            let service = hyper_util::service::TowerToHyperService::new(app);
            let server = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = server.serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(stream), service).await;
        });
    }
}

/// Seconds since the epoch, as the store records times.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
