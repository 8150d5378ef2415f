//! Tenants: sign-up, and the operator's view of them (list, plan,
//! suspend, resume).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Request, State};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmkeep_core::TenantId;
use wasmkeep_storage::{TenantRecord, TokenRecord};

use super::auth::{authenticate, client};
use super::error::read_json;
use super::{ApiError, Caller, Service, SignupMode, unix_now};
use crate::token::{Scope, Secret, TokenHash};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signup {
    name: String,
    #[serde(default)]
    signup_key: Option<String>,
    /// The operator may choose the plan; a sign-up gets the default one.
    #[serde(default)]
    plan: Option<String>,
}

/// `POST /v1/tenants`: a new tenant and its first (admin) token, shown
/// once.
pub async fn signup(
    State(service): State<Arc<Service>>,
    request: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (parts, body) = request.into_parts();
    let operator = match authenticate(&parts, &service).await? {
        Some(caller) => {
            caller.operator().map_err(|_| ApiError::forbidden("a tenant's token cannot sign up tenants"))?;
            true
        }
        None => false,
    };
    if !operator {
        if service.signup == SignupMode::Closed {
            return Err(ApiError::forbidden("sign-up is closed: the operator creates tenants"));
        }
        service.limits.signup(client(&parts))?;
    }
    let request: Signup = read_json(&service, None, body).await?;
    if !operator && service.signup == SignupMode::Key {
        let presented = request.signup_key.as_deref().unwrap_or_default();
        let matches = service.signup_key.is_some_and(|key| TokenHash::hash(&service.pepper, presented) == key);
        if !matches {
            let refused = ApiError::forbidden("sign-up needs the operator's sign-up key (`signup_key`)");
            return Err(service.limits.failure(client(&parts), refused));
        }
    }
    let tenant = TenantId::parse(&request.name).map_err(|e| ApiError::bad_request(format!("name: {e}")))?;
    let plan_name = match request.plan {
        Some(_) if !operator => return Err(ApiError::forbidden("only the operator chooses a plan at sign-up")),
        Some(plan) => plan,
        None => service.default_plan.clone(),
    };
    let plan = service.plans.get(&plan_name).ok_or_else(|| ApiError::bad_request(format!("no plan `{plan_name}`")))?;
    let secret = Secret::generate();
    let now = unix_now();
    let record = TenantRecord { id: tenant.to_string(), plan: plan_name.clone(), suspended: false, created: now };
    let token = TokenRecord {
        id: super::tokens::new_id(),
        tenant: Some(tenant.to_string()),
        scope: Scope::Admin.as_str().into(),
        hash: TokenHash::hash(&service.pepper, secret.as_str()).to_hex(),
        created: now,
    };
    if !service.store.create_tenant(&record, &token).await? {
        return Err(ApiError::new(StatusCode::CONFLICT, format!("tenant name `{tenant}` is taken")));
    }
    service.node.set_tenant_plan(&tenant, Some(plan.clone()));
    tracing::info!(%tenant, plan = %plan_name, "tenant signed up");
    let answer = json!({"tenant": tenant.as_str(), "token": secret.as_str(), "token_id": token.id, "plan": plan_name});
    Ok((StatusCode::CREATED, Json(answer)))
}

fn tenant_json(t: &TenantRecord) -> Value {
    json!({"tenant": t.id, "plan": t.plan, "suspended": t.suspended, "created": t.created})
}

/// `GET /v1/tenants` (operator).
pub async fn list(State(service): State<Arc<Service>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.operator()?;
    let tenants = service.store.tenants().await?;
    Ok(Json(json!({"tenants": tenants.iter().map(tenant_json).collect::<Vec<_>>()})))
}

/// The tenant an operator's route names, if it exists.
async fn existing(service: &Service, name: &str) -> Result<(TenantId, TenantRecord), ApiError> {
    let missing = || ApiError::not_found("no such tenant");
    let id = TenantId::parse(name).map_err(|_| missing())?;
    let record = service.store.tenant(id.as_str()).await?.ok_or_else(missing)?;
    Ok((id, record))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetPlan {
    plan: String,
}

/// `PUT /v1/tenants/{tenant}/plan` (operator): takes effect on the
/// tenant's next events.
pub async fn set_plan(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Result<Json<Value>, ApiError> {
    caller.operator()?;
    let (tenant, _) = existing(&service, &name).await?;
    let SetPlan { plan: plan_name } = read_json(&service, None, body).await?;
    let plan = service.plans.get(&plan_name).ok_or_else(|| ApiError::bad_request(format!("no plan `{plan_name}`")))?;
    service.store.set_plan(tenant.as_str(), &plan_name).await?;
    service.node.set_tenant_plan(&tenant, Some(plan.clone()));
    let (_, record) = existing(&service, &name).await?;
    Ok(Json(tenant_json(&record)))
}

async fn set_suspended(
    service: &Service,
    caller: &Caller,
    name: &str,
    suspended: bool,
) -> Result<Json<Value>, ApiError> {
    caller.operator()?;
    let (tenant, _) = existing(service, name).await?;
    service.store.set_suspended(tenant.as_str(), suspended).await?;
    service.node.set_suspended(&tenant, suspended);
    let (_, record) = existing(service, name).await?;
    Ok(Json(tenant_json(&record)))
}

/// `POST /v1/tenants/{tenant}/suspend` (operator): its apps answer `503`,
/// its data stays.
pub async fn suspend(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    set_suspended(&service, &caller, &name, true).await
}

/// `POST /v1/tenants/{tenant}/resume` (operator).
pub async fn resume(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    set_suspended(&service, &caller, &name, false).await
}

/// `POST /v1/node/drain` (operator): the node drains, then stops.
pub async fn drain(
    State(service): State<Arc<Service>>,
    caller: Caller,
) -> Result<(http::StatusCode, Json<Value>), ApiError> {
    caller.operator()?;
    service.drain.notify_one();
    let answer = json!({"node": service.node.id(), "state": "draining"});
    Ok((http::StatusCode::ACCEPTED, Json(answer)))
}
