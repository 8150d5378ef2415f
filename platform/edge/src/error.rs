//! Failures as HTTP answers: a thin renderer of `core::refusal`'s one
//! mapping (status, `Retry-After`, the text, whether the connection
//! closes). No host detail reaches the client.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use wasmkeep_core::{EventError, Failure, Refusal};

use crate::{HttpResponse, full};

/// The answer to a request that failed.
pub fn render(failure: Failure) -> HttpResponse {
    render_whole(failure).map(full)
}

/// The answer to a request that failed, its body whole (a hop's answer).
pub fn render_whole(failure: Failure) -> http::Response<Bytes> {
    if let Failure::Event(EventError::Refused(Refusal::StoreUnavailable(detail))) = &failure {
        tracing::warn!("store unavailable: {detail}");
    }
    let answer = failure.answer();
    let head = answer.headers();
    let mut response = http::Response::new(Bytes::from(answer.text));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    for (name, value) in head {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    response
}
