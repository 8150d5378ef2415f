//! `GET /v1/usage`: what each of the tenant's apps used since the node
//! started (its counters live in the node), with what it stores and its
//! open sockets now.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::{ApiError, Caller, Service};
use crate::token::Scope;

/// `GET /v1/usage` (read).
pub async fn usage(State(service): State<Arc<Service>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let mut apps = Vec::new();
    for app in service.store.apps(tenant.as_str()).await? {
        let used = service.node.usage(app.id);
        let stored = service.store.app_bytes(app.id).await?;
        let n = |f: fn(&wasmkeep_actors::Usage) -> u64| used.as_ref().map_or(0, f);
        apps.push(json!({
            "app": app.name,
            "requests": n(|u| u.requests),
            "events": n(|u| u.events),
            "cpu_ms": n(|u| u.cpu_micros) / 1000,
            "wall_ms": n(|u| u.wall_micros) / 1000,
            "storage_bytes": stored,
            "sockets": n(|u| u.sockets as u64),
            "egress_requests": n(|u| u.egress_requests),
            "egress_bytes": n(|u| u.egress_bytes),
        }));
    }
    Ok(Json(json!({"since": service.started, "apps": apps})))
}
