//! Failures as HTTP answers: the one place that decides statuses, bodies
//! and `Retry-After`. No host detail reaches the client.

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use wasmkeep_actors::{EventError, FrontError};
use wasmkeep_core::Refusal;

use crate::{HttpResponse, full};

/// Every way this port can fail a request.
#[derive(Debug)]
pub(crate) enum HttpError {
    Event(EventError),
    Front(FrontError),
    BodyTooLarge(u64),
    BodyUnreadable,
    /// The body came slower than the minimum rate.
    BodyTooSlow,
    /// The node holds its budget of request bodies.
    BodiesFull,
    NoHost,
    /// Too many sockets on the actor or the node.
    SocketsFull,
    /// The actor's `on-websocket-open` refused a handed-off socket.
    SocketRefused(String),
}

impl From<FrontError> for HttpError {
    fn from(e: FrontError) -> Self {
        Self::Front(e)
    }
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
            Self::BodyTooSlow => {
                let mut response =
                    text_response(S::REQUEST_TIMEOUT, None, "the request body arrived too slowly\n".into());
                // The rest of the body is not worth waiting for.
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
                return response;
            }
            Self::BodiesFull => {
                (S::SERVICE_UNAVAILABLE, Some(1), "the node holds too many request bodies; retry shortly".into())
            }
            Self::Front(e) => {
                let (status, retry_after) = match e {
                    FrontError::NoSuchApp | FrontError::NoFront => (S::NOT_FOUND, None),
                    FrontError::Busy => (S::SERVICE_UNAVAILABLE, Some(1)),
                    FrontError::Trapped => (S::INTERNAL_SERVER_ERROR, None),
                    FrontError::Wall => (S::GATEWAY_TIMEOUT, None),
                };
                (status, retry_after, e.to_string())
            }
            Self::NoHost => (S::BAD_REQUEST, None, "request has no Host header, or more than one".into()),
            Self::SocketsFull => (S::SERVICE_UNAVAILABLE, Some(5), "too many sockets; retry later".into()),
            // The actor's own words, as its close reason would have been.
            Self::SocketRefused(reason) => return text_response(S::FORBIDDEN, None, reason),
        };
        text_response(status, retry_after, text + "\n")
    }
}

fn text_response(status: StatusCode, retry_after: Option<u32>, text: String) -> HttpResponse {
    let mut response = http::Response::new(full(Bytes::from(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    if let Some(secs) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
