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

/// Reads a body of at most `limit` bytes: past it, `413` (at once when
/// the declared length says so).
pub(crate) async fn read_body(body: axum::body::Body, limit: usize, what: &str) -> Result<bytes::Bytes, ApiError> {
    use http_body_util::BodyExt;
    let too_large = || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("{what} is over {limit} bytes"));
    if http_body::Body::size_hint(&body).lower() > limit as u64 {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(_) => Err(ApiError::bad_request(format!("{what} could not be read"))),
    }
}

/// Parses a JSON body of at most `JSON_BYTES_MAX` bytes.
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(body: axum::body::Body) -> Result<T, ApiError> {
    let bytes = read_body(body, super::JSON_BYTES_MAX, "the request body").await?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}
