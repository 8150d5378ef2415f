//! A tenant's API tokens: made (the secret shown once), listed (never
//! the secret), revoked (refused from the next request on).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmkeep_storage::{Revoked, TokenRecord};

use super::error::read_json;
use super::{ApiError, Caller, Service, unix_now};
use crate::token::{Scope, Secret, TokenHash};

/// A token's public id: `tok_` and 16 hex digits, random.
pub(crate) fn new_id() -> String {
    let mut bytes = [0u8; 8];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system's random source");
    format!("tok_{}", hex::encode(bytes))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewToken {
    scope: String,
}

fn token_json(t: &TokenRecord) -> Value {
    json!({"id": t.id, "scope": t.scope, "created": t.created})
}

/// `POST /v1/tokens` `{"scope": "read"}` (admin).
pub async fn create(
    State(service): State<Arc<Service>>,
    caller: Caller,
    body: axum::body::Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let tenant = caller.tenant(Scope::Admin)?;
    let NewToken { scope } = read_json(&service, Some(tenant), body).await?;
    let scope = Scope::parse(&scope).map_err(|e| ApiError::bad_request(format!("scope: {e}")))?;
    let secret = Secret::generate();
    let record = TokenRecord {
        id: new_id(),
        tenant: Some(tenant.to_string()),
        scope: scope.as_str().into(),
        hash: TokenHash::hash(&service.pepper, secret.as_str()).to_hex(),
        created: unix_now(),
    };
    service.store.add_token(&record).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": record.id, "scope": record.scope, "token": secret.as_str()}))))
}

/// `GET /v1/whoami` (any token): the tenant the token acts for (`null`
/// for the operator's), its scope and id, the tenant's plan.
pub async fn whoami(State(service): State<Arc<Service>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let plan = match &caller.tenant {
        Some(tenant) => service.store.tenant(tenant.as_str()).await?.map(|r| r.plan),
        None => None,
    };
    Ok(Json(json!({
        "tenant": caller.tenant.as_ref().map(|t| t.as_str()),
        "scope": caller.scope.as_str(),
        "token": caller.token_id,
        "plan": plan,
        "suspended": caller.suspended,
    })))
}

/// `GET /v1/tokens` (admin): ids, scopes and times, never secrets.
pub async fn list(State(service): State<Arc<Service>>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Admin)?;
    let tokens = service.store.tokens(Some(tenant.as_str())).await?;
    Ok(Json(json!({"tokens": tokens.iter().map(token_json).collect::<Vec<_>>()})))
}

/// `DELETE /v1/tokens/{id}` (admin). A token may revoke itself.
pub async fn revoke(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant(Scope::Admin)?;
    match service.store.revoke_token(Some(tenant.as_str()), &id).await? {
        Revoked::Yes => Ok(StatusCode::NO_CONTENT),
        Revoked::NoSuchToken => Err(ApiError::not_found("no such token")),
        Revoked::LastAdmin => Err(ApiError::new(
            StatusCode::CONFLICT,
            "this is the account's last admin token; create another admin token first",
        )),
    }
}
