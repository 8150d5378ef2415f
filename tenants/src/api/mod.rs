//! The provisioning API (`/v1`, JSON; `tenants/openapi.yaml` is its
//! document). Each resource is its own file; authentication is one
//! extractor (`auth`), answers to failures are made in one place (`error`),
//! and the per-address rate limits are one layer of state (`limits`).

mod actors;
mod apps;
mod auth;
mod bodies;
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
use wasmkeep_core::connection::ConnectionTimes;
use wasmkeep_core::host::BaseDomain;
use wasmkeep_storage::Store;

pub use auth::Caller;
pub use bodies::BodyBudget;
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
    /// What the API's request bodies hold, across the node and per tenant.
    pub bodies: BodyBudget,
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
    ("GET", "/v1/whoami"),
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
        ("GET", "/v1/whoami") => get(tokens::whoami),
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
/// `tls` is given (HTTP/2 or HTTP/1.1 by ALPN). Its connections are bounded
/// and watched as the public port's, within the API's own share of the
/// process's descriptors; an answer may take its time (a tail follows).
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Arc<Service>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = service.node.limits().clone();
    let budget = limits.descriptor_budget(wasmkeep_listener::raise_descriptor_limit());
    let rules = wasmkeep_listener::Rules {
        name: "provisioning API",
        bound: budget.api,
        times: ConnectionTimes { answers_may_wait: true, ..limits.connection_times() },
        head_bytes: limits.head_bytes,
    };
    let router = router(service);
    let handler = move |mut request: http::Request<hyper::body::Incoming>, peer: SocketAddr| {
        request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        let mut router = router.clone();
        async move {
            match tower_service::Service::call(&mut router, request).await {
                Ok(answer) => answer,
                Err(never) => match never {},
            }
        }
    };
    wasmkeep_listener::serve(listener, rules, tls, handler, shutdown).await;
    Ok(())
}

/// Seconds since the epoch, as the store records times.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
