//! The one place where the API's failures become answers: a status and
//! `{"error": "<one line>"}`. A failure of the host itself is logged and
//! answered without its text.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// A failure of an API request.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), retry_after: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn too_many(message: impl Into<String>, retry_after: u64) -> Self {
        Self { retry_after: Some(retry_after.max(1)), ..Self::new(StatusCode::TOO_MANY_REQUESTS, message) }
    }

    /// A bound of the node's that is full now: `503` with `Retry-After`.
    pub fn busy(message: impl Into<String>) -> Self {
        Self { retry_after: Some(1), ..Self::new(StatusCode::SERVICE_UNAVAILABLE, message) }
    }

    /// A failure of the host (the store, a bug): the client learns only
    /// that it happened.
    pub fn internal(what: impl std::fmt::Display) -> Self {
        tracing::error!(error = %what, "provisioning API");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error; the operator's log has the details")
    }

    /// The answer for an app the caller's tenant does not have: the same
    /// whether another tenant has one by that name or nobody does.
    pub fn no_such_app() -> Self {
        Self::not_found("no such app")
    }
}

impl From<wasmkeep_storage::StoreError> for ApiError {
    fn from(e: wasmkeep_storage::StoreError) -> Self {
        Self::internal(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(serde_json::json!({ "error": self.message }))).into_response();
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(http::header::RETRY_AFTER, secs.into());
        }
        response
    }
}

pub(crate) async fn no_route() -> ApiError {
    ApiError::not_found("no such route; the API is described at /v1/openapi.yaml")
}

pub(crate) async fn no_method() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this route")
}

/// Parses a JSON body of at most `JSON_BYTES_MAX` bytes, read for
/// `tenant` when the caller is known.
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    service: &super::Service,
    tenant: Option<&wasmkeep_core::TenantId>,
    body: axum::body::Body,
) -> Result<T, ApiError> {
    let bytes = read_body(service, tenant, body, super::JSON_BYTES_MAX, "the request body").await?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}

/// Reads a body of at most `limit` bytes that is not an upload (`413`
/// past it), paced and within the API's budgets (`bodies`).
pub(crate) async fn read_body(
    service: &super::Service,
    tenant: Option<&wasmkeep_core::TenantId>,
    body: axum::body::Body,
    limit: usize,
    what: &str,
) -> Result<bytes::Bytes, ApiError> {
    let reading = super::bodies::Reading { tenant, upload: false, limit, what };
    Ok(service.bodies.read(body, reading).await?.0)
}
