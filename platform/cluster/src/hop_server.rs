//! The receiving end of a hop (docs/spec/request-path.md §9: "a signed hop
//! from another node starts on the owner, at its mailbox and admission"),
//! on the cluster port and, under `--cluster-plaintext allow`, on the
//! public port.
//!
//! A call or request event must be signed by a node of the cluster: its
//! signature is checked (form, window, coverage, MAC, spent once), its
//! head read into an envelope (`head::from_head`: the app must be one of
//! this node's, the caller of the same tenant, the deadline no later than
//! this node's call limit), and the event run here, never sent on: an
//! actor another node owns is answered "elsewhere" for the sender to
//! follow. A signed request with the upgrade mark that is not an upgrade
//! is refused.
//!
//! A relayed socket's open (docs/spec/sockets.md §15) is believed to be the
//! front's hand-off only when its signature is valid over the empty body,
//! spent for the first time, for an app of this node, with the front's
//! exact caller and the upgrade mark; a valid signature without them is
//! refused. Unsigned, or signed in vain, it is an outside upgrade: on the
//! cluster port, of the app its relaying node names (a peer the cluster's
//! CA vouches for, relaying a client's upgrade); on the public port, a
//! client's, served as any. Either way it opens here or not at all.
//!
//! The answer is the actor's response, the range stripped from it, or the
//! host's error in `x-wasmkeep-error` (`core::hop_answer`), beside the
//! status a client would have had.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use wasmkeep_actors::{Answering, Node, Request};
use wasmkeep_core::handoff::is_websocket_upgrade;
use wasmkeep_core::head::{self, ERROR, INTERNAL, TAIL, TARGET, UPGRADE, is_reserved};
use wasmkeep_core::path::parse_actor_path;
use wasmkeep_core::signature::EMPTY_BODY_SHA256;
use wasmkeep_core::{EventError, Failure, Refusal, hop_answer};
use wasmkeep_edge::{HttpResponse, SignedHops, full};

use crate::membership::unix_ms;
use crate::signing::{Verifier, body_sha256};
use crate::tail::TailHop;
use crate::transport::Hops;

/// Answers other nodes' hops with this node's actors.
#[derive(Clone)]
pub struct HopServer {
    node: Node,
    verifier: Arc<Verifier>,
}

fn plain(status: StatusCode, text: &str) -> HttpResponse {
    whole(status, text).map(full)
}

fn whole(status: StatusCode, text: &str) -> http::Response<Bytes> {
    let mut response = http::Response::new(Bytes::from(format!("{text}\n")));
    *response.status_mut() = status;
    response
}

/// What a relayed open's signature makes of it.
enum Opener {
    /// Believed: the front's hand-off, if its head says so.
    Signed,
    /// None, or not believed: an outside upgrade.
    Outside,
}

/// Which port a hop came in on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    Cluster,
    Public,
}

impl HopServer {
    pub fn new(node: Node, verifier: Arc<Verifier>) -> Self {
        Self { node, verifier }
    }

    /// A call on the public port: its body read within the limit first.
    async fn call_streamed(&self, request: http::Request<Incoming>) -> HttpResponse {
        let (parts, body) = request.into_parts();
        let limit = self.node.limits().body_bytes;
        let body = match Limited::new(body, limit as usize).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the hop's body is over the limit"),
        };
        self.call(parts, body).await.map(full)
    }

    /// Whether a relayed open's signature is believed: valid over the
    /// empty body, within the window, spent here for the first time.
    fn believe(&self, request: &http::Request<Incoming>) -> Opener {
        if !request.headers().contains_key(INTERNAL) {
            return Opener::Outside;
        }
        let root = http::uri::PathAndQuery::from_static("/");
        let path = request.uri().path_and_query().unwrap_or(&root);
        match self.verifier.verify(request.method(), path, &EMPTY_BODY_SHA256, request.headers(), unix_ms()) {
            Ok(_) => Opener::Signed,
            Err(why) => {
                tracing::warn!("a relayed open's signature was not believed: {why}");
                Opener::Outside
            }
        }
    }

    /// A relayed socket's open: here, never sent on.
    async fn open(&self, request: http::Request<Incoming>, opener: Opener, port: Port) -> HttpResponse {
        let head = request.headers();
        let (tenant, app, origin) = match head::relayed_opener(head, matches!(opener, Opener::Signed)) {
            Ok(found) => found,
            Err(e @ head::RelayRefusal::NoApp) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
            Err(e @ head::RelayRefusal::NotTheFront) => return plain(StatusCode::FORBIDDEN, &e.to_string()),
        };
        debug_assert!(port == Port::Cluster || matches!(opener, Opener::Signed), "the public port serves its own");
        let app = match self.node.app_named(&tenant, &app) {
            Ok(app) => app,
            Err(refusal) => return failure_answer(refusal.into()),
        };
        let target = match parse_actor_path(request.uri().path(), request.uri().query()) {
            Some(Ok(target)) => target,
            Some(Err(e)) => return failure_answer(Refusal::InvalidName(e).into()),
            None => return plain(StatusCode::BAD_REQUEST, "a relayed open is for a path under /actor/"),
        };
        let envelope = self.node.envelope(&app, target.address, origin, head::read_trace(head));
        match wasmkeep_edge::open_relayed(&self.node, envelope, target.rest, request).await {
            Ok(answer) => answer,
            Err(failure) => failure_answer(failure),
        }
    }

    /// A tail from another node: believed only when signed by a node of
    /// the cluster with the mark among the signed names (the signature
    /// covers the filter in its path), a GET with no call's or relay's
    /// head; answered with this node's records of the app, streamed.
    async fn tail(&self, request: http::Request<Incoming>) -> HttpResponse {
        let root = http::uri::PathAndQuery::from_static("/");
        let path = request.uri().path_and_query().unwrap_or(&root);
        let headers = request.headers();
        match self.verifier.verify(request.method(), path, &EMPTY_BODY_SHA256, headers, unix_ms()) {
            Ok(stamp) if stamp.names.iter().any(|n| n == TAIL) => {}
            Ok(_) => return plain(StatusCode::FORBIDDEN, "a tail's mark must be signed"),
            Err(why) => {
                tracing::warn!("a tail was refused: {why}");
                return plain(StatusCode::FORBIDDEN, "the tail's signature was refused");
            }
        }
        if request.method() != http::Method::GET || headers.contains_key(TARGET) || headers.contains_key(UPGRADE) {
            return plain(StatusCode::BAD_REQUEST, "a tail is a GET with no call's or relay's head");
        }
        let hop = match TailHop::parse(request.uri().path(), request.uri().query()) {
            Ok(hop) => hop,
            Err(why) => return plain(StatusCode::BAD_REQUEST, &format!("a tail's path: {why}")),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(wasmkeep_telemetry::logs::TAIL_LINES_BUFFERED);
        // It ends when the asking node drops the stream (the body, and its
        // receiver, go with it), or at once without `follow`.
        match self.node.guest_logs().tail(hop.filter, hop.follow, tx, std::future::pending()) {
            Ok(tail) => {
                tokio::spawn(tail);
            }
            Err(refused) => return plain(StatusCode::SERVICE_UNAVAILABLE, &refused.to_string()),
        }
        let body = wasmkeep_telemetry::logs::TailBody(rx);
        let mut answer = http::Response::new(body.map_err(|never| match never {}).boxed_unsync());
        answer.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
        answer
    }

    /// A call or request event from another node, its body read whole.
    async fn call(&self, parts: http::request::Parts, body: Bytes) -> http::Response<Bytes> {
        let root = http::uri::PathAndQuery::from_static("/");
        let path = parts.uri.path_and_query().unwrap_or(&root);
        if let Err(why) = self.verifier.verify(&parts.method, path, &body_sha256(&body), &parts.headers, unix_ms()) {
            tracing::warn!("a hop was refused: {why}");
            return whole(StatusCode::FORBIDDEN, "the hop's signature was refused");
        }
        // A signed request with the upgrade mark is a relay, only ever an
        // upgrade: never a call (docs/spec/sockets.md §15).
        if parts.headers.contains_key(UPGRADE) {
            return whole(StatusCode::FORBIDDEN, "a signed request with the upgrade mark is not an upgrade");
        }
        let apps =
            |tenant: &wasmkeep_core::TenantId, app: &wasmkeep_core::AppName| self.node.app_named(tenant, app).ok();
        let envelope = match head::from_head(&parts.headers, Instant::now(), self.node.limits().call_limit(), apps) {
            Ok(envelope) => envelope,
            Err(head::HeadError::UnknownApp(_)) => return whole(StatusCode::NOT_FOUND, "no such app"),
            Err(e) => {
                tracing::warn!("a signed hop's head cannot be read: {e}");
                return whole(StatusCode::BAD_REQUEST, "the hop's head cannot be read");
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
                let mut response = http::Response::new(Bytes::from(answer.body));
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

impl SignedHops for HopServer {
    /// On the public port: a signed call is answered as on the cluster
    /// port; a relayed open only when its signature is believed, else it is
    /// the client's, served as any.
    fn answer(&self, request: http::Request<Incoming>) -> Result<Answering<'_, HttpResponse>, http::Request<Incoming>> {
        if !is_websocket_upgrade(request.method(), request.headers()) {
            return Ok(Box::pin(self.call_streamed(request)));
        }
        match self.believe(&request) {
            Opener::Outside => Err(request),
            Opener::Signed => Ok(Box::pin(self.open(request, Opener::Signed, Port::Public))),
        }
    }
}

/// A failure to open, answered: the event's error in the hop's head (the
/// relaying node reads it), any other (a refusal by the actor, no room for
/// a socket) as a client would have it.
fn failure_answer(failure: Failure) -> HttpResponse {
    match failure {
        Failure::Event(error) => error_answer(&error).map(full),
        other => wasmkeep_edge::render(other),
    }
}

/// The host's error on a hop's answer: as a client would have it (its
/// status, `Retry-After`, text), with the error itself for the sender.
fn error_answer(error: &EventError) -> http::Response<Bytes> {
    let mut response = wasmkeep_edge::render_whole(Failure::Event(error.clone()));
    let value = HeaderValue::try_from(hop_answer::encode(error)).expect("an encoded error is visible ASCII");
    response.headers_mut().insert(ERROR, value);
    response
}

impl Hops for HopServer {
    type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, wasmkeep_edge::BoxError>;

    fn body_limit(&self) -> usize {
        usize::try_from(self.node.limits().body_bytes).unwrap_or(usize::MAX)
    }

    fn call(&self, request: http::Request<Bytes>) -> impl Future<Output = http::Response<Bytes>> + Send {
        let (parts, body) = request.into_parts();
        HopServer::call(self, parts, body)
    }

    /// A relay's open on the cluster port: a WebSocket upgrade, signed or
    /// not ([`HopServer::believe`]).
    fn open(&self, request: http::Request<Incoming>) -> impl Future<Output = HttpResponse> + Send {
        let opener = self.believe(&request);
        HopServer::open(self, request, opener, Port::Cluster)
    }

    fn tail(&self, request: http::Request<Incoming>) -> impl Future<Output = HttpResponse> + Send {
        HopServer::tail(self, request)
    }
}
