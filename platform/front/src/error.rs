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
    /// The actor's answer cannot be sent as HTTP (a bad status or header).
    InvalidResponse,
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
        let (status, retry_after, text): (StatusCode, Option<u32>, String) = match self {
            Self::Event(EventError::Refused(r)) => match r {
                Refusal::NoSuchApp => (S::NOT_FOUND, None, "no such app".into()),
                Refusal::NoSuchClass => (S::NOT_FOUND, None, "no such actor class".into()),
                Refusal::InvalidName(e) => (S::BAD_REQUEST, None, e.to_string()),
                Refusal::Internal => (S::FORBIDDEN, None, "actor class is internal".into()),
                Refusal::ValueMissing(name) => {
                    (S::SERVICE_UNAVAILABLE, Some(10), format!("app value {name} is not set"))
                }
                Refusal::NoSuchActor => (S::NOT_FOUND, None, "no such actor".into()),
                Refusal::Overloaded => (S::SERVICE_UNAVAILABLE, Some(1), "callee overloaded".into()),
                Refusal::Capacity => (S::SERVICE_UNAVAILABLE, Some(1), "no capacity for this actor now".into()),
                Refusal::StoreUnavailable(detail) => {
                    tracing::warn!("store unavailable: {detail}");
                    (S::SERVICE_UNAVAILABLE, Some(1), "store unavailable".into())
                }
            },
            Self::Event(EventError::Trapped) => (S::INTERNAL_SERVER_ERROR, None, "the actor failed".into()),
            Self::Event(EventError::Wall) => (S::GATEWAY_TIMEOUT, None, "the actor's event ran past its wall".into()),
            Self::Event(EventError::ShuttingDown) => {
                (S::SERVICE_UNAVAILABLE, Some(1), "the node is shutting down".into())
            }
            Self::BodyTooLarge(limit) => (S::PAYLOAD_TOO_LARGE, None, format!("request body is over {limit} bytes")),
            Self::BodyUnreadable => (S::BAD_REQUEST, None, "request body could not be read".into()),
            Self::NoFront => (S::NOT_FOUND, None, "this app has no front; actors are at /actor/<class>/<name>/".into()),
            Self::InvalidResponse => (S::INTERNAL_SERVER_ERROR, None, "the actor answered an invalid response".into()),
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
