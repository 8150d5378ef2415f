//! An app's values: set, listed by name, deleted. A value is never
//! answered, logged or put in an error; the store holds it sealed.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use http::StatusCode;
use serde_json::{Value, json};

use super::apps::find;
use super::error::read_body;
use super::{ApiError, Caller, Service, VALUE_BYTES_MAX};
use crate::bundle::check_value_name;
use crate::token::Scope;

/// `PUT /v1/apps/{app}/values/{name}` (deploy): the body is the value
/// (UTF-8 text, at most 64 KiB).
pub async fn set(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path((app, name)): Path<(String, String)>,
    body: axum::body::Body,
) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant(Scope::Deploy)?;
    let app = find(&service, tenant, &app).await?;
    check_value_name(&name).map_err(ApiError::bad_request)?;
    let bytes = read_body(&service, Some(tenant), body, VALUE_BYTES_MAX, "the value").await?;
    let value = std::str::from_utf8(&bytes).map_err(|_| ApiError::bad_request("a value is UTF-8 text"))?;
    service.node.set_value(app.id, &name, value).await.map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/apps/{app}/values` (read): the names only.
pub async fn list(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(app): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let app = find(&service, tenant, &app).await?;
    let names: Vec<String> = service.store.values(app.id).await?.into_keys().collect();
    Ok(Json(json!({"values": names})))
}

/// `DELETE /v1/apps/{app}/values/{name}` (deploy).
pub async fn delete(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path((app, name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant(Scope::Deploy)?;
    let app = find(&service, tenant, &app).await?;
    match service.node.delete_value(app.id, &name).await.map_err(ApiError::internal)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::not_found("no such value")),
    }
}
