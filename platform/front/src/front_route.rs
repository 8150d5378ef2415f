//! Every path outside `/actor/`: the app's front (DESIGN §3.5). The
//! request reaches the front as the client sent it, less the host's header
//! range (removed at the edge); the front's answer loses the range too,
//! from its headers and its trailers, on its way out.

use http_body_util::BodyExt;
use hyper::body::Incoming;
use wasmkeep_actors::{FrontError, Node};
use wasmkeep_core::{AppId, header_range};

use crate::error::HttpError;
use crate::{HttpResponse, boxed_error};

pub(crate) async fn handle(
    node: &Node,
    app: AppId,
    request: http::Request<Incoming>,
) -> Result<HttpResponse, HttpError> {
    // A request in origin form names its host only in `Host`; the front
    // reads its authority from there.
    if request.uri().authority().is_none() && !request.headers().contains_key(http::header::HOST) {
        return Err(HttpError::NoHost);
    }
    let served = node.serve_front(app, request).await;
    node.metrics().front_requests.inc(outcome(&served));
    let (mut parts, body) = served?.into_parts();
    header_range::strip(&mut parts.headers);
    let body = body.map_err(boxed_error).map_frame(header_range::strip_trailers).boxed_unsync();
    Ok(http::Response::from_parts(parts, body))
}

/// How a front request is counted in `wasmkeep_front_requests_total`.
fn outcome<T>(served: &Result<T, FrontError>) -> &'static str {
    match served {
        Ok(_) => "ok",
        Err(FrontError::Trapped) => "guest_error",
        Err(FrontError::Busy) => "busy",
        Err(FrontError::Wall) => "timeout",
        Err(FrontError::NoFront | FrontError::NoSuchApp) => "no_front",
    }
}
