//! A tenant's own trace export: where its apps' spans go (an OTLP/HTTP
//! endpoint and headers). Set whole, shown without the headers' values,
//! removed. The store holds it sealed; every node of a cluster puts it in
//! place within a second.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use http::StatusCode;
use serde_json::{Value, json};
use wasmkeep_telemetry::tenant_export::{ExportSettings, TenantExports};

use super::error::read_body;
use super::{ApiError, Caller, JSON_BYTES_MAX, Service};
use crate::token::Scope;

fn exports(service: &Service) -> Result<&Arc<TenantExports>, ApiError> {
    service.exports.as_ref().ok_or_else(|| {
        ApiError::forbidden(
            "this node does not send tenants' traces to their own endpoints (the operator's [telemetry] tenant_export)",
        )
    })
}

fn shown(tenant: &str, settings: &ExportSettings, exports: &TenantExports) -> Value {
    let counts = exports.counts(tenant);
    json!({
        "endpoint": settings.endpoint,
        "headers": settings.headers.keys().collect::<Vec<_>>(),
        "spans": {"exported": counts.exported, "dropped": counts.dropped, "failed": counts.failed},
    })
}

/// `PUT /v1/telemetry` (admin): `{"endpoint": "https://…", "headers": {…}}`.
pub async fn set(
    State(service): State<Arc<Service>>,
    caller: Caller,
    body: axum::body::Body,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Admin)?;
    let exports = exports(&service)?;
    let bytes = read_body(&service, Some(tenant), body, JSON_BYTES_MAX, "the request").await?;
    let settings: ExportSettings = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(format!("expected {{\"endpoint\": URL, \"headers\": {{name: value}}}}: {e}"))
    })?;
    exports.check_resolved(&settings).await.map_err(ApiError::bad_request)?;
    let plain = serde_json::to_vec(&settings).map_err(ApiError::internal)?;
    let sealed = service.node.seal_telemetry(tenant.as_str(), &plain);
    if !service.store.set_telemetry(tenant.as_str(), Some(&sealed)).await? {
        return Err(ApiError::internal("a token's tenant is gone"));
    }
    exports.set(tenant.as_str(), Some(settings.clone())).map_err(ApiError::bad_request)?;
    Ok(Json(shown(tenant.as_str(), &settings, exports)))
}

/// `GET /v1/telemetry` (read): the endpoint, the headers' names, and what
/// this node did with the tenant's spans.
pub async fn show(State(service): State<Arc<Service>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let exports = exports(&service)?;
    let stored = service.store.telemetry_of(tenant.as_str()).await?;
    let settings = stored
        .and_then(|sealed| service.node.open_telemetry(tenant.as_str(), &sealed))
        .and_then(|plain| serde_json::from_slice::<ExportSettings>(&plain).ok())
        .ok_or_else(|| ApiError::not_found("no trace export is set; PUT /v1/telemetry sets one"))?;
    Ok(Json(shown(tenant.as_str(), &settings, exports)))
}

/// `DELETE /v1/telemetry` (admin).
pub async fn remove(State(service): State<Arc<Service>>, caller: Caller) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant(Scope::Admin)?;
    let exports = exports(&service)?;
    if service.store.telemetry_of(tenant.as_str()).await?.is_none() {
        return Err(ApiError::not_found("no trace export is set"));
    }
    service.store.set_telemetry(tenant.as_str(), None).await?;
    exports.set(tenant.as_str(), None).map_err(ApiError::bad_request)?;
    Ok(StatusCode::NO_CONTENT)
}
