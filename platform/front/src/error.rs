//! Failures as HTTP answers: the one place that decides statuses, bodies
//! and `Retry-After`. No host detail reaches the client.

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::Full;
use wasmkeep_actors::EventError;
use wasmkeep_core::Refusal;

use crate::HttpResponse;

/// Every way this port can fail a request.
#[derive(Debug)]
pub(crate) enum HttpError {
    Event(EventError),
    BodyTooLarge(u64),
    BodyUnreadable,
    NoFront,
}

impl From<EventError> for HttpError {
    fn from(e: EventError) -> Self {
        Self::Event(e)
    }
}

impl From<Refusal> for HttpError {
    fn from(r: Refusal) -> Self {
        Self::Event(EventError::Refused(r))
    }
}

impl HttpError {
    pub(crate) fn into_response(self) -> HttpResponse {
        use StatusCode as S;
        // An event's failure is answered as `EventError::answer` says, for
        // HTTP as for calls; the port's own failures are decided here.
        let (status, retry_after, text): (StatusCode, Option<u32>, String) = match self {
            Self::Event(e) => {
                if let EventError::Refused(Refusal::StoreUnavailable(detail)) = &e {
                    tracing::warn!("store unavailable: {detail}");
                }
                let a = e.answer();
                (StatusCode::from_u16(a.status).unwrap_or(S::INTERNAL_SERVER_ERROR), a.retry_after, a.text)
            }
            Self::BodyTooLarge(limit) => (S::PAYLOAD_TOO_LARGE, None, format!("request body is over {limit} bytes")),
            Self::BodyUnreadable => (S::BAD_REQUEST, None, "request body could not be read".into()),
            Self::NoFront => (S::NOT_FOUND, None, "this app has no front; actors are at /actor/<class>/<name>/".into()),
        };
        let mut response = http::Response::new(Full::new(Bytes::from(text + "\n")));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        if let Some(secs) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
