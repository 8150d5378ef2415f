//! A tenant's apps and their versions: create, list, delete, upload a
//! version (checked whole before anything is stored), activate one.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmkeep_actors::DeployFailure;
use wasmkeep_core::plan::Plan;
use wasmkeep_core::{AppName, AppRef, TenantId, host};
use wasmkeep_storage::AppRecord;

use super::{ApiError, Caller, Service};
use crate::bundle;
use crate::token::Scope;

/// The caller's tenant's app `name`: `404` alike for a name nobody has, a
/// name another tenant has, and a name that is not valid.
pub(crate) async fn find(service: &Service, tenant: &TenantId, name: &str) -> Result<Arc<AppRef>, ApiError> {
    Ok(find_with_record(service, tenant, name).await?.0)
}

/// As `find`, with the app's record as the store has it.
async fn find_with_record(
    service: &Service,
    tenant: &TenantId,
    name: &str,
) -> Result<(Arc<AppRef>, AppRecord), ApiError> {
    let name = AppName::parse(name).map_err(|_| ApiError::no_such_app())?;
    let record = service.store.find_app(tenant.as_str(), name.as_str()).await?.ok_or_else(ApiError::no_such_app)?;
    let reference = Arc::new(AppRef { id: record.id, tenant: tenant.clone(), name });
    // The node holds every app of the store (loaded at start, added on creation).
    if service.node.app_ref(record.id).is_none() {
        service.node.restore((*reference).clone()).await.map_err(|e| match e {
            // The tenant's compiles are queued full, or the node is stopping: retry.
            DeployFailure::CompilesFull(full) => ApiError::busy(full.to_string()),
            other => ApiError::internal(other),
        })?;
    }
    Ok((reference, record))
}

/// The plan of the caller's tenant.
pub(crate) async fn plan_of(service: &Service, tenant: &TenantId) -> Result<Arc<Plan>, ApiError> {
    let record =
        service.store.tenant(tenant.as_str()).await?.ok_or_else(|| ApiError::internal("a token's tenant is gone"))?;
    service.plans.get(&record.plan).cloned().ok_or_else(|| ApiError::internal(format!("no plan `{}`", record.plan)))
}

fn url(service: &Service, tenant: &TenantId, app: &AppName) -> String {
    let host = host::app_host(app, tenant, &service.base_domain);
    match service.public_port {
        Some(port) => format!("{}://{host}:{port}/", service.public_scheme),
        None => format!("{}://{host}/", service.public_scheme),
    }
}

fn app_json(service: &Service, tenant: &TenantId, record: &AppRecord) -> Value {
    let url = AppName::parse(&record.name).map(|name| url(service, tenant, &name)).ok();
    json!({"app": record.name, "active_version": record.active, "url": url})
}

/// `GET /v1/apps` (read).
pub async fn list(State(service): State<Arc<Service>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let apps = service.store.apps(tenant.as_str()).await?;
    Ok(Json(json!({"apps": apps.iter().map(|a| app_json(&service, tenant, a)).collect::<Vec<_>>()})))
}

/// `GET /v1/apps/{app}` (read).
pub async fn show(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let (_, record) = find_with_record(&service, tenant, &name).await?;
    Ok(Json(app_json(&service, tenant, &record)))
}

/// `PUT /v1/apps/{app}` (deploy): `201` when made, `200` when it was there.
pub async fn create(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let tenant = caller.tenant(Scope::Deploy)?;
    let app_name = AppName::parse(&name).map_err(|e| ApiError::bad_request(format!("app name: {e}")))?;
    if let Some(record) = service.store.find_app(tenant.as_str(), app_name.as_str()).await? {
        return Ok((StatusCode::OK, Json(app_json(&service, tenant, &record))));
    }
    let plan = plan_of(&service, tenant).await?;
    let have = service.store.apps(tenant.as_str()).await?.len();
    if have >= plan.apps as usize {
        return Err(ApiError::forbidden(format!(
            "quota apps: the plan allows {} apps; delete one or change plans",
            plan.apps
        )));
    }
    let id = service.store.ensure_app(tenant.as_str(), app_name.as_str()).await?;
    service
        .node
        .restore(AppRef { id, tenant: tenant.clone(), name: app_name.clone() })
        .await
        .map_err(ApiError::internal)?;
    let record = AppRecord { id, tenant: tenant.to_string(), name: app_name.to_string(), active: None };
    Ok((StatusCode::CREATED, Json(app_json(&service, tenant, &record))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    #[serde(default)]
    unused: bool,
}

/// `DELETE /v1/apps/{app}` (admin): its sockets close, its actors, their
/// storage, its versions and values go. With `?unused=true` (deploy),
/// only an app that never held a version or a value, as a refused first
/// deploy leaves it: the CLI takes it back, so that it holds no slot of
/// the plan's apps, with the token that made it.
pub async fn delete(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
    Query(query): Query<DeleteQuery>,
) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant(if query.unused { Scope::Deploy } else { Scope::Admin })?;
    let app = find(&service, tenant, &name).await?;
    if query.unused {
        let held = !service.store.versions(app.id).await?.is_empty() || !service.store.values(app.id).await?.is_empty();
        if held {
            return Err(ApiError::new(StatusCode::CONFLICT, "the app holds versions or values: it is in use"));
        }
    }
    service.node.delete_app(app.id).await.map_err(ApiError::internal)?;
    tracing::info!(app = %app, "app deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// A deploy's refusal as its uploader reads it.
fn refused(e: DeployFailure) -> ApiError {
    match e {
        DeployFailure::Store(e) => ApiError::internal(e),
        DeployFailure::Stored(e) => ApiError::internal(e),
        DeployFailure::NoSuchVersion(n) => ApiError::not_found(format!("no version {n}")),
        DeployFailure::CompilesFull(full) => ApiError::busy(full.to_string()),
        other => ApiError::bad_request(other.to_string()),
    }
}

/// `POST /v1/apps/{app}/versions` (deploy): a bundle (see `bundle`), at
/// most the plan's upload bytes; compiled here, once.
pub async fn upload(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let tenant = caller.tenant(Scope::Deploy)?;
    let app = find(&service, tenant, &name).await?;
    let plan = plan_of(&service, tenant).await?;
    let limit = usize::try_from(plan.upload_bytes).unwrap_or(usize::MAX);
    let reading = super::bodies::Reading { tenant: Some(tenant), upload: true, limit, what: "the upload" };
    let (body, share) = service.bodies.read(body, reading).await?;
    // The rest runs on a task of its own, to its end even when the client
    // leaves: the share (and the tenant's upload in flight) is held for as
    // long as the bundle's bytes and the components decoded from them are,
    // however long the compile waits for its turn.
    let version = tokio::spawn(add_version(service.clone(), app.clone(), plan, body, share))
        .await
        .map_err(|e| ApiError::internal(format!("an upload's task failed: {e}")))??;
    Ok((StatusCode::CREATED, Json(json!({"app": app.name.as_str(), "version": version}))))
}

/// The upload's version, from its bundle: decoded off the request threads,
/// compiled in the tenant's turn, stored; the plan's oldest inactive
/// versions beyond those it keeps go.
async fn add_version(
    service: Arc<Service>,
    app: Arc<AppRef>,
    plan: Arc<Plan>,
    body: bytes::Bytes,
    share: super::bodies::BodyShare,
) -> Result<i64, ApiError> {
    let decoding = service.bodies.beside(&share, body.len() as u64 / 4 * 3, "the upload").await?;
    let upload_bytes = plan.upload_bytes;
    let spec = tokio::task::spawn_blocking(move || bundle::parse(&body, upload_bytes))
        .await
        .map_err(|e| ApiError::internal(format!("an upload's parse failed: {e}")))?
        .map_err(ApiError::bad_request)?;
    // The body is gone: its share stands for the components from here.
    drop(decoding);
    let added = service.node.add_version(app.tenant.as_str(), app.name.as_str(), spec).await.map_err(refused)?;
    tracing::info!(app = %app, version = added.version, "version uploaded");
    let versions = service.store.versions(app.id).await?;
    let mut over = versions.len().saturating_sub(plan.versions_kept as usize);
    for old in &versions {
        if over == 0 {
            break;
        }
        if service.store.delete_version(app.id, old.number).await? {
            over -= 1;
        }
    }
    drop(share);
    Ok(added.version)
}

/// `GET /v1/apps/{app}/versions` (read), oldest first.
pub async fn versions(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let (app, record) = find_with_record(&service, tenant, &name).await?;
    let versions = service.store.versions(app.id).await?;
    let listed: Vec<Value> = versions
        .iter()
        .map(|v| {
            let manifest: Value = serde_json::from_str(&v.manifest).unwrap_or(Value::Null);
            json!({
                "version": v.number,
                "active": record.active == Some(v.number),
                "front": manifest.get("front").cloned().unwrap_or(Value::Bool(false)),
                "classes": manifest.get("classes").cloned().unwrap_or(Value::Array(vec![])),
                "values": manifest.get("required_values").cloned().unwrap_or(Value::Array(vec![])),
                "env": manifest.get("env").cloned().unwrap_or(Value::Object(Default::default())),
            })
        })
        .collect();
    Ok(Json(json!({"versions": listed})))
}

/// `POST /v1/apps/{app}/versions/{version}/activate` (deploy): the deploy
/// rules of docs/spec/actors-and-admission.md §7; an older version may be
/// activated again.
pub async fn activate(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path((name, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Deploy)?;
    let app = find(&service, tenant, &name).await?;
    let number: i64 = version.parse().map_err(|_| ApiError::not_found(format!("no version {version}")))?;
    service.node.activate(&app, number).await.map_err(|e| match e {
        // It was checked at upload: failing now is the host's fault.
        DeployFailure::Component { .. } | DeployFailure::Front(_) => ApiError::internal(e),
        other => refused(other),
    })?;
    tracing::info!(app = %app, version = number, "version activated");
    Ok(Json(json!({"app": app.name.as_str(), "active_version": number, "url": url(&service, tenant, &app.name)})))
}
