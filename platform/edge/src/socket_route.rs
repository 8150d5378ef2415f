//! WebSocket opens (docs/spec/sockets.md §3, §8 and §15): an upgrade at
//! `/actor/<class>/<name>/<rest>` (an outside caller's socket) and a
//! socket the front handed off (the front's, an inside caller). The
//! actor's `on-websocket-open(conn, rest)` runs before the `101`, on this
//! node or, relayed, on the actor's owner; then this node either drives
//! the socket or copies bytes between its client and the owner.
//!
//! An outside socket the actor refuses still answers `101`, then closes
//! with 1008 and the actor's reason; a hand-off's every failure is an HTTP
//! answer (a refusal a `403` with the actor's reason).

use std::sync::Arc;

use http::{HeaderName, HeaderValue, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use wasmkeep_actors::{Node, Opened, Relayed, SocketOpenError, SocketRequest};
use wasmkeep_core::handoff::{HandOff, upgrade_headers};
use wasmkeep_core::{AppRef, Caller, Chain, Envelope, Failure, Origin, PortError, TraceContext, head};

use crate::{HttpResponse, full, socket_conn};

/// Where an open may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Here, or relayed to the actor's owner.
    Anywhere,
    /// Here only: the open was relayed to this node (never sent on).
    HereOnly,
}

/// An upgrade at `/actor/`: the client's socket, as an outside caller's.
pub(crate) async fn upgrade(
    node: &Node,
    envelope: Envelope,
    path: String,
    mut request: http::Request<hyper::body::Incoming>,
    route: Route,
) -> Result<HttpResponse, Failure> {
    let socket = SocketRequest { path, headers: upgrade_headers(request.headers()) };
    let on_upgrade = hyper::upgrade::on(&mut request);
    open(node, envelope, socket, on_upgrade, route).await
}

/// A socket's open relayed from another node (docs/spec/sockets.md §15),
/// its envelope read from the relay's head: opened here, never sent on; a
/// failure of the event is the caller's to encode for the relaying node.
pub async fn open_relayed(
    node: &Node,
    envelope: Envelope,
    path: String,
    request: http::Request<hyper::body::Incoming>,
) -> Result<HttpResponse, Failure> {
    upgrade(node, envelope, path, request, Route::HereOnly).await
}

/// A socket the front handed off (docs/spec/sockets.md §8): opened on the
/// actor as the front, an inside caller.
pub(crate) async fn hand_off(
    node: &Node,
    app: &Arc<AppRef>,
    trace: TraceContext,
    handoff: HandOff,
    on_upgrade: OnUpgrade,
    client_headers: Vec<(String, Vec<u8>)>,
) -> Result<HttpResponse, Failure> {
    let front = Origin::Inside { caller: Caller::Front, chain: Chain::new() };
    let envelope = node.envelope(app, handoff.actor, front, trace);
    let socket = SocketRequest { path: handoff.path, headers: client_headers };
    open(node, envelope, socket, on_upgrade, Route::Anywhere).await
}

async fn open(
    node: &Node,
    envelope: Envelope,
    socket: SocketRequest,
    on_upgrade: OnUpgrade,
    route: Route,
) -> Result<HttpResponse, Failure> {
    let key = socket.headers.iter().find(|(name, _)| name == "sec-websocket-key");
    let accept = key.map(|(_, k)| derive_accept_key(k)).ok_or(Failure::Port(PortError::BodyUnreadable))?;
    let outside = matches!(envelope.origin, Origin::Outside);
    let span = socket_conn::socket_span(&envelope, &socket.path);
    let opened = match route {
        Route::Anywhere => node.open_socket(envelope, socket).await,
        Route::HereOnly => node.open_socket_relayed(envelope, socket.path).await.map(Opened::Here),
    };
    match opened {
        Ok(Opened::Here(queue)) => {
            tokio::spawn(socket_conn::run(node.clone(), on_upgrade, queue, span));
            Ok(switching_protocols(&accept))
        }
        Ok(Opened::There(relayed)) => Ok(relay(relayed, on_upgrade)),
        Err(SocketOpenError::Refused(reason)) if outside => {
            tokio::spawn(socket_conn::refuse(on_upgrade, reason));
            Ok(switching_protocols(&accept))
        }
        Err(SocketOpenError::Refused(reason)) => Err(Failure::Port(PortError::SocketRefused(reason))),
        Err(SocketOpenError::Full(_)) => Err(Failure::Port(PortError::SocketsFull)),
        Err(SocketOpenError::Event(e)) => Err(e.into()),
    }
}

/// The owner's answer, to the client; after a `101`, the bytes of both
/// ends copied until either closes.
fn relay(relayed: Relayed, on_upgrade: OnUpgrade) -> HttpResponse {
    let mut response = http::Response::new(full(relayed.body));
    *response.status_mut() = StatusCode::from_u16(relayed.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let framing = [header::CONTENT_LENGTH, header::TRANSFER_ENCODING];
    for (name, value) in relayed.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value))
            && !framing.contains(&name)
        {
            response.headers_mut().append(name, value);
        }
    }
    head::strip(response.headers_mut());
    if let Some(mut owner) = relayed.io {
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else { return };
            let mut client = TokioIo::new(upgraded);
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut owner).await {
                tracing::debug!("a relayed socket ended: {e}");
            }
        });
    }
    response
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
