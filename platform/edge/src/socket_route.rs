//! A WebSocket upgrade at `/actor/<class>/<name>/<rest>` (DESIGN §3.2): an
//! outside caller's socket. The actor's `on-websocket-open(conn, rest)`
//! runs before the `101`; a refusal still answers `101`, then closes with
//! 1008 and the actor's reason.

use std::sync::Arc;

use http::{HeaderValue, StatusCode, header};
use hyper::body::Incoming;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use wasmkeep_actors::{Node, SocketOpenError};
use wasmkeep_core::handoff::HandOff;
use wasmkeep_core::{AppRef, Caller, Chain, Envelope, Failure, Origin, PortError, TraceContext};

use crate::{HttpResponse, full, socket_conn};

pub(crate) async fn upgrade(
    node: &Node,
    envelope: Envelope,
    path: String,
    mut request: http::Request<Incoming>,
) -> Result<HttpResponse, Failure> {
    let accept = match request.headers().get(header::SEC_WEBSOCKET_KEY) {
        Some(key) => derive_accept_key(key.as_bytes()),
        None => return Err(Failure::Port(PortError::BodyUnreadable)),
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    match node.open_socket(envelope, path).await {
        Ok(queue) => {
            tokio::spawn(socket_conn::run(node.clone(), on_upgrade, queue));
        }
        Err(SocketOpenError::Refused(reason)) => {
            tokio::spawn(socket_conn::refuse(on_upgrade, reason));
        }
        Err(SocketOpenError::Full(_)) => return Err(Failure::Port(PortError::SocketsFull)),
        Err(SocketOpenError::Event(e)) => return Err(e.into()),
    }
    Ok(switching_protocols(&accept))
}

/// A socket the front handed off (seed 0027): opened on the actor as the
/// front, an inside caller; every failure is an HTTP answer, a refusal a
/// `403` with the actor's reason, never a socket that opens and closes.
pub(crate) async fn hand_off(
    node: &Node,
    app: &Arc<AppRef>,
    trace: TraceContext,
    handoff: HandOff,
    on_upgrade: hyper::upgrade::OnUpgrade,
    key: Option<HeaderValue>,
) -> Result<HttpResponse, Failure> {
    let accept = key.map(|k| derive_accept_key(k.as_bytes())).ok_or(Failure::Port(PortError::BodyUnreadable))?;
    let front = Origin::Inside { caller: Caller::Front, chain: Chain::new() };
    let envelope = node.envelope(app, handoff.actor, front, trace);
    match node.open_socket(envelope, handoff.path).await {
        Ok(queue) => {
            tokio::spawn(socket_conn::run(node.clone(), on_upgrade, queue));
            Ok(switching_protocols(&accept))
        }
        Err(SocketOpenError::Refused(reason)) => Err(Failure::Port(PortError::SocketRefused(reason))),
        Err(SocketOpenError::Full(_)) => Err(Failure::Port(PortError::SocketsFull)),
        Err(SocketOpenError::Event(e)) => Err(e.into()),
    }
}

/// The `101` that completes a WebSocket handshake.
pub(crate) fn switching_protocols(accept: &str) -> HttpResponse {
    let mut response = http::Response::new(full(bytes::Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}
