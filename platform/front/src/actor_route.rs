//! `/actor/<class>/<name>/<rest>`: an HTTP event for an actor, from an
//! outside caller.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::Full;
use wasmkeep_actors::{Node, Request, Response};
use wasmkeep_core::AppId;
use wasmkeep_core::path::ActorPath;

use crate::HttpResponse;
use crate::error::HttpError;

pub(crate) async fn handle(
    node: &Node,
    app: AppId,
    target: ActorPath,
    parts: &Parts,
    body: Bytes,
) -> Result<HttpResponse, HttpError> {
    let request = Request {
        method: parts.method.as_str().to_owned(),
        path: target.rest,
        headers: parts.headers.iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect(),
        body: body.to_vec(),
    };
    let response = node.request(app, target.address, true, request).await?;
    to_http(response)
}

/// The actor's answer as HTTP; a status or header HTTP cannot carry is the
/// actor's error.
fn to_http(response: Response) -> Result<HttpResponse, HttpError> {
    let status = StatusCode::from_u16(response.status).map_err(|_| HttpError::InvalidResponse)?;
    let mut out = http::Response::new(Full::new(Bytes::from(response.body)));
    *out.status_mut() = status;
    let headers = out.headers_mut();
    for (name, value) in response.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| HttpError::InvalidResponse)?;
        let value = HeaderValue::from_bytes(&value).map_err(|_| HttpError::InvalidResponse)?;
        headers.append(name, value);
    }
    Ok(out)
}
