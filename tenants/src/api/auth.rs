//! Who is calling: the bearer token, checked against its keyed hash in
//! the store on every request (a revoked token fails on the next one).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use http::request::Parts;
use wasmkeep_core::TenantId;

use super::{ApiError, Service};
use crate::token::{Scope, TokenHash, parse_bearer};

/// An authenticated caller: a tenant's token with its scope, or the
/// operator's.
#[derive(Debug, Clone)]
pub struct Caller {
    /// `None` for the operator.
    pub tenant: Option<TenantId>,
    pub scope: Scope,
    pub token_id: String,
    /// The tenant is suspended: it may read, not change anything.
    pub suspended: bool,
}

impl Caller {
    /// The tenant this caller acts for, if its scope allows `needed`.
    pub fn tenant(&self, needed: Scope) -> Result<&TenantId, ApiError> {
        let tenant = self
            .tenant
            .as_ref()
            .ok_or_else(|| ApiError::forbidden("the operator's token acts on tenants (/v1/tenants), not inside one"))?;
        if self.suspended && needed != Scope::Read {
            return Err(ApiError::forbidden("the account is suspended: it may read, not change anything"));
        }
        if !self.scope.allows(needed) {
            return Err(ApiError::forbidden(format!(
                "this token's scope is `{}`; this needs `{}`",
                self.scope.as_str(),
                needed.as_str()
            )));
        }
        Ok(tenant)
    }

    /// Passes only for the operator's token.
    pub fn operator(&self) -> Result<(), ApiError> {
        match self.tenant {
            None => Ok(()),
            Some(_) => Err(ApiError::forbidden("only the operator's token may do this")),
        }
    }
}

/// The address of the client, as the listener saw it.
pub(crate) fn client(parts: &Parts) -> std::net::IpAddr {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |ConnectInfo(a)| a.ip())
}

/// The caller of a request that carries an `Authorization` header;
/// `Ok(None)` when it carries none.
pub(crate) async fn authenticate(parts: &Parts, service: &Service) -> Result<Option<Caller>, ApiError> {
    let Some(header) = parts.headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let fail = |e: ApiError| service.limits.failure(client(parts), e);
    let header = header.to_str().map_err(|_| fail(ApiError::unauthorized("expected `Authorization: Bearer wk_…`")))?;
    let presented = parse_bearer(header).map_err(|e| fail(ApiError::unauthorized(e.to_string())))?;
    let hash = TokenHash::hash(&service.pepper, presented);
    let record = service.store.token_by_hash(&hash.to_hex()).await?;
    let record =
        record.ok_or_else(|| fail(ApiError::unauthorized("the token is not valid (revoked, or never was)")))?;
    let scope = Scope::parse(&record.scope).map_err(ApiError::internal)?;
    let tenant = record.tenant.as_deref().map(TenantId::parse).transpose().map_err(ApiError::internal)?;
    let suspended = match &tenant {
        Some(t) => service.store.tenant(t.as_str()).await?.is_some_and(|r| r.suspended),
        None => false,
    };
    Ok(Some(Caller { tenant, scope, token_id: record.id, suspended }))
}

impl FromRequestParts<Arc<Service>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, service: &Arc<Service>) -> Result<Self, ApiError> {
        match authenticate(parts, service).await? {
            Some(caller) => Ok(caller),
            None => Err(service
                .limits
                .failure(client(parts), ApiError::unauthorized("this needs `Authorization: Bearer wk_…`"))),
        }
    }
}
