//! `GET /v1/usage`: what each of the tenant's apps used in a period (a UTC
//! calendar month), with what it stores and its open sockets now, and the
//! actors the tenant keeps against its plan's bound; and the recording of
//! the node's counts into the store, per period.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};
use wasmkeep_core::period;
use wasmkeep_storage::UsageCounts;

use super::apps::plan_of;
use super::{ApiError, Caller, Service, unix_now};
use crate::token::Scope;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    period: Option<String>,
}

/// `GET /v1/usage[?period=YYYY-MM]` (read); the current period by default.
pub async fn usage(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Query(query): Query<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let current = period::of(unix_now());
    let asked = query.period.unwrap_or_else(|| current.clone());
    let since = period::start(&asked)
        .ok_or_else(|| ApiError::bad_request(format!("period `{asked}` is not a month as YYYY-MM")))?;
    let plan = plan_of(&service, tenant).await?;
    let mut apps = Vec::new();
    let mut actors = 0;
    for app in service.store.apps(tenant.as_str()).await? {
        let recorded = service.store.usage(app.id, &asked).await?;
        let now = service.node.usage(app.id);
        // What the node counted and has not recorded yet is this period's.
        let used = match (&now, asked == current) {
            (Some(now), true) => recorded.plus(now.counts),
            _ => recorded,
        };
        let stored = service.store.app_bytes(app.id).await?;
        // Kept now, as a creation counts them: whatever the period asked.
        let kept = service.store.app_actors(app.id).await?;
        actors += kept;
        apps.push(json!({
            "app": app.name,
            "requests": used.requests,
            "events": used.events,
            "cpu_ms": used.cpu_micros / 1000,
            "wall_ms": used.wall_micros / 1000,
            "storage_bytes": stored,
            "actors": kept,
            "sockets": now.as_ref().map_or(0, |u| u.sockets),
            "egress_requests": used.egress_requests,
            "egress_bytes": used.egress_bytes,
        }));
    }
    let actors = json!({"stored": actors, "limit": plan.actors});
    Ok(Json(json!({"period": asked, "since": since, "actors": actors, "apps": apps})))
}

/// Adds what the node counted for each app to the store, under the period
/// of now, and takes it off the node's counts (called every minute and
/// when the node stops). A failed write keeps the counts for next time.
pub async fn record(service: &Service) {
    let period = period::of(unix_now());
    let apps = match service.store.all_apps().await {
        Ok(apps) => apps,
        Err(e) => {
            tracing::warn!("recording usage: {e}");
            return;
        }
    };
    for app in apps {
        let Some(used) = service.node.usage(app.id) else { continue };
        let counts: UsageCounts = used.counts;
        if counts.is_zero() {
            continue;
        }
        match service.store.add_usage(app.id, &period, &counts).await {
            Ok(()) => service.node.usage_told(app.id, &counts),
            Err(e) => tracing::warn!(app = %app.name, "recording usage: {e}"),
        }
    }
}
