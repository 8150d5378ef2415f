//! `/actor/<class>/<name>/<rest>`: an HTTP event for an actor, from an
//! outside caller, delivered through the router with its envelope.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderName, HeaderValue, StatusCode};
use wasmkeep_actors::{Node, Request, Response};
use wasmkeep_core::{Envelope, Failure, head};

use crate::{HttpResponse, full};

pub(crate) async fn handle(
    node: &Node,
    envelope: Envelope,
    rest: String,
    parts: &Parts,
    body: Bytes,
) -> Result<HttpResponse, Failure> {
    let request = Request {
        method: parts.method.as_str().to_owned(),
        path: rest,
        headers: parts.headers.iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect(),
        body: body.to_vec(),
    };
    let response = node.request(envelope, request).await?;
    Ok(to_http(response))
}

/// Headers that frame a message on the wire: the body is whole, so this
/// port sets them, never the actor.
const FRAMING: [http::HeaderName; 3] =
    [http::header::CONTENT_LENGTH, http::header::TRANSFER_ENCODING, http::header::CONNECTION];

/// The actor's answer as HTTP. The actor runtime has checked that HTTP can
/// carry it; the host's header range and the framing headers are dropped.
fn to_http(response: Response) -> HttpResponse {
    let mut out = http::Response::new(full(response.body));
    *out.status_mut() = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    for (name, value) in response.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value))
            && !FRAMING.contains(&name)
        {
            headers.append(name, value);
        }
    }
    head::strip(headers);
    out
}
