//! The receiving end of a hop (DESIGN §8: "a signed hop from another node
//! enters at step 4 on the owner"). Every request on the cluster port must
//! be signed by a node of the cluster: its signature is checked (form,
//! window, coverage, MAC, spent once), its head read into an envelope
//! (`head::from_head`: the app must be one of this node's, the caller of
//! the same tenant, the deadline no later than this node's call limit),
//! and the event run here, never sent on: an actor another node owns is
//! answered "elsewhere" for the sender to follow.
//!
//! The answer is the actor's response, the range stripped from it, or the
//! host's error in `x-wasmkeep-error` (`core::hop_answer`), beside the
//! status a client would have had.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use wasmkeep_actors::{Node, Request};
use wasmkeep_core::head::{self, ERROR, UPGRADE, is_reserved};
use wasmkeep_core::{EventError, hop_answer};

use crate::membership::unix_ms;
use crate::signing::{Verifier, body_sha256};

/// Answers other nodes' hops with this node's actors.
#[derive(Clone)]
pub struct HopServer {
    node: Node,
    verifier: Arc<Verifier>,
}

fn plain(status: StatusCode, text: &str) -> http::Response<Full<Bytes>> {
    let mut response = http::Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *response.status_mut() = status;
    response
}

impl HopServer {
    pub fn new(node: Node, verifier: Arc<Verifier>) -> Self {
        Self { node, verifier }
    }

    /// One hop, answered.
    pub async fn answer(&self, request: http::Request<Incoming>) -> http::Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let limit = self.node.limits().body_bytes;
        let body = match Limited::new(body, limit as usize).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the hop's body is over the limit"),
        };
        let root = http::uri::PathAndQuery::from_static("/");
        let path = parts.uri.path_and_query().unwrap_or(&root);
        if let Err(why) = self.verifier.verify(&parts.method, path, &body_sha256(&body), &parts.headers, unix_ms()) {
            tracing::warn!("a hop was refused: {why}");
            return plain(StatusCode::FORBIDDEN, "the hop's signature was refused");
        }
        // A signed request with the upgrade mark is a relay, only ever an
        // upgrade: never a call (seed 0027).
        if parts.headers.contains_key(UPGRADE) {
            return plain(StatusCode::FORBIDDEN, "a signed request with the upgrade mark is not an upgrade");
        }
        let apps =
            |tenant: &wasmkeep_core::TenantId, app: &wasmkeep_core::AppName| self.node.app_named(tenant, app).ok();
        let envelope = match head::from_head(&parts.headers, Instant::now(), self.node.limits().call_limit(), apps) {
            Ok(envelope) => envelope,
            Err(head::HeadError::UnknownApp(_)) => return plain(StatusCode::NOT_FOUND, "no such app"),
            Err(e) => {
                tracing::warn!("a signed hop's head cannot be read: {e}");
                return plain(StatusCode::BAD_REQUEST, "the hop's head cannot be read");
            }
        };
        let headers = parts
            .headers
            .iter()
            .filter(|(name, _)| !is_reserved(name.as_str()))
            .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
            .collect();
        let request =
            Request { method: parts.method.to_string(), path: path.to_string(), headers, body: body.to_vec() };
        match self.node.request_forwarded(envelope, request).await {
            Ok(answer) => {
                let mut response = http::Response::new(Full::new(Bytes::from(answer.body)));
                *response.status_mut() =
                    StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                for (name, value) in answer.headers {
                    if is_reserved(&name) {
                        continue;
                    }
                    if let (Ok(name), Ok(value)) =
                        (http::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value))
                    {
                        response.headers_mut().append(name, value);
                    }
                }
                response
            }
            Err(error) => error_answer(&error),
        }
    }
}

/// The host's error on a hop's answer.
fn error_answer(error: &EventError) -> http::Response<Full<Bytes>> {
    let mut response = plain(hop_answer::status(error), &error.to_string());
    let value = HeaderValue::try_from(hop_answer::encode(error)).expect("an encoded error is visible ASCII");
    response.headers_mut().insert(ERROR, value);
    response
}
