//! A tenant's actors: listed (by class, name prefix, a page at a time),
//! shown (what they store, whether awake, their sockets, their last
//! event), deleted (as their own `delete-self`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmkeep_actors::EventError;
use wasmkeep_core::names::{decode, encode};
use wasmkeep_core::{ActorKey, Address, MailboxKey, RawAddress, Refusal};
use wasmkeep_storage::ActorRecord;

use super::apps::find;
use super::{ApiError, Caller, Service};
use crate::token::Scope;

/// The most actors one page lists.
pub const PAGE_MAX: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    class: Option<String>,
    #[serde(default)]
    prefix: String,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn actor_json(service: &Service, app: wasmkeep_core::AppId, a: &ActorRecord) -> Value {
    let key = MailboxKey { app, address: RawAddress { class: a.class.clone(), name: a.name.as_bytes().to_vec() } };
    let state = service.node.actor_state(&key);
    json!({
        "class": a.class,
        "name": a.name,
        "resident": state.awake,
        "keys": a.keys,
        "bytes": a.bytes,
        "sockets": state.sockets,
        "last_event": state.last_event,
        "owner": a.owner,
    })
}

/// `GET /v1/apps/{app}/actors` (read).
pub async fn list(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path(app): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let app = find(&service, tenant, &app).await?;
    let limit = query.limit.unwrap_or(100);
    if limit == 0 || limit > PAGE_MAX {
        return Err(ApiError::bad_request(format!("limit must be 1-{PAGE_MAX}")));
    }
    // The cursor is the last actor of the page before: `class/<encoded name>`.
    let after = match &query.cursor {
        Some(cursor) => {
            let bad = || ApiError::bad_request("cursor: not one this API gave");
            let (class, name) = cursor.split_once('/').ok_or_else(bad)?;
            let name = String::from_utf8(decode(name).map_err(|_| bad())?).map_err(|_| bad())?;
            Some((class.to_owned(), name))
        }
        None => None,
    };
    let after = after.as_ref().map(|(c, n)| (c.as_str(), n.as_str()));
    let actors = service.store.actors(app.id, query.class.as_deref(), &query.prefix, after, limit).await?;
    let cursor =
        (actors.len() == limit).then(|| actors.last().map(|a| format!("{}/{}", a.class, encode(&a.name)))).flatten();
    let listed: Vec<Value> = actors.iter().map(|a| actor_json(&service, app.id, a)).collect();
    Ok(Json(json!({"actors": listed, "cursor": cursor})))
}

/// The actor a route names, its name percent-decoded as in `/actor/` paths.
fn address(class: &str, name: &str) -> Result<Address, ApiError> {
    Address::parse(&format!("{class}/{name}")).map_err(|e| ApiError::bad_request(format!("actor: {e}")))
}

/// `GET /v1/apps/{app}/actors/{class}/{name}` (read).
pub async fn show(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path((app, class, name)): Path<(String, String, String)>,
) -> Result<Json<Value>, ApiError> {
    let tenant = caller.tenant(Scope::Read)?;
    let app = find(&service, tenant, &app).await?;
    let actor = ActorKey { app: app.id, address: address(&class, &name)? };
    let record = service.store.actor(&actor).await?.ok_or_else(|| ApiError::not_found("no such actor"))?;
    Ok(Json(actor_json(&service, app.id, &record)))
}

/// `DELETE /v1/apps/{app}/actors/{class}/{name}` (deploy).
pub async fn delete(
    State(service): State<Arc<Service>>,
    caller: Caller,
    Path((app, class, name)): Path<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let tenant = caller.tenant(Scope::Deploy)?;
    let app = find(&service, tenant, &app).await?;
    let address = address(&class, &name)?;
    match service.node.delete_actor(&app, RawAddress::from(&address)).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(EventError::Refused(Refusal::NoSuchActor)) => Err(ApiError::not_found("no such actor")),
        Err(EventError::Refused(Refusal::NoSuchClass)) => Err(ApiError::not_found("no such actor class")),
        Err(e) => Err(ApiError::internal(e)),
    }
}
