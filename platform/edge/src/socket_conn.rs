//! One socket's connection: reads the client's frames into the actor's
//! events and writes what the actor queued. The host answers pings (the
//! WebSocket layer does, as it reads); a message over the limit closes the
//! socket with 1009, a text message that is not UTF-8 with 1007, any other
//! breach of the protocol with 1002 (RFC 6455 §7.4.1); a lost connection
//! is a close with 1006. Every close the host sends is followed by reading
//! what the client still sends, so that the close is not lost to a reset.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error, Message};
use tracing::field::Empty;
use wasmkeep_actors::{Node, Outgoing, SocketMessage, SocketQueue};
use wasmkeep_core::close;
use wasmkeep_telemetry::traces::{self, TARGET};

/// A socket's read buffer: small, as most sockets of a node are idle (a
/// larger message takes more reads, not more memory per idle socket).
const READ_BUFFER: usize = 2 * 1024;
/// After its close, how long the host reads what a client still sends.
const DRAIN_AT_MOST: Duration = Duration::from_secs(2);
/// A pause this long in what the client sends ends the reading early (a
/// client waits for the host to close the connection after its reply).
const DRAIN_PAUSE: Duration = Duration::from_millis(200);
/// A client that takes nothing the node sends for this long is gone: the
/// socket ends as lost (1006), and its connection with it.
const SEND_STALL: Duration = Duration::from_secs(30);

type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

async fn accept(on_upgrade: OnUpgrade, message_bytes: usize) -> Option<Socket> {
    let upgraded = on_upgrade.await.ok()?;
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_message_size(Some(message_bytes))
        .max_frame_size(Some(message_bytes));
    Some(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await)
}

fn close_frame(code: u16, reason: &str) -> CloseFrame {
    CloseFrame { code: CloseCode::from(code), reason: reason.into() }
}

/// Sends the host's close, then reads and discards what the client still
/// sends (the rest of a message too large, its close) until it pauses,
/// closes, or a short time passes; only then is the connection dropped. A
/// connection dropped with unread bytes is reset, and a reset can take
/// the close frame with it.
async fn close_and_drain(mut ws: Socket, code: u16, reason: &str) {
    let ends = tokio::time::Instant::now() + DRAIN_AT_MOST;
    let _ = tokio::time::timeout_at(ends, ws.close(Some(close_frame(code, reason)))).await;
    let io = ws.get_mut();
    let mut sink = vec![0u8; 16 * 1024];
    loop {
        let pause = (tokio::time::Instant::now() + DRAIN_PAUSE).min(ends);
        match tokio::time::timeout_at(pause, io.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => break,
        }
    }
    let _ = tokio::time::timeout(DRAIN_PAUSE, io.shutdown()).await;
}

/// Sends one message, unless the client takes nothing for `SEND_STALL`.
async fn send(ws: &mut Socket, message: Message) -> Result<(), ()> {
    match tokio::time::timeout(SEND_STALL, ws.send(message)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}

/// A socket's span (ADR 0020), from its open to its close: a child of the
/// upgrade's request or the front's hand-off. Its messages are counted
/// on it, never spans of their own.
pub(crate) fn socket_span(envelope: &wasmkeep_core::Envelope, path: &str) -> tracing::Span {
    traces::child(&envelope.trace, || {
        tracing::info_span!(
        target: TARGET,
        parent: None,
        "websocket",
        otel.kind = "server",
        wasmkeep.tenant = envelope.app.tenant.as_str(),
        wasmkeep.app = envelope.app.name.as_str(),
        wasmkeep.actor.class = envelope.target.class.as_str(),
        wasmkeep.actor.name = %String::from_utf8_lossy(&envelope.target.name),
        url.path = path.split('?').next().unwrap_or(""),
        wasmkeep.socket.messages_in = Empty,
        wasmkeep.socket.bytes_in = Empty,
        wasmkeep.socket.messages_out = Empty,
        wasmkeep.socket.bytes_out = Empty,
        wasmkeep.socket.close_code = Empty,
        )
    })
}

/// What crossed a socket, each way.
#[derive(Default)]
struct Counts {
    messages_in: u64,
    bytes_in: u64,
    messages_out: u64,
    bytes_out: u64,
}

/// Runs an open socket until it closes; its span then holds its counts
/// and its close code.
pub(crate) async fn run(node: Node, on_upgrade: OnUpgrade, queue: SocketQueue, span: tracing::Span) {
    let mut counts = Counts::default();
    let code = serve(node, on_upgrade, queue, &mut counts).await;
    span.record("wasmkeep.socket.messages_in", counts.messages_in);
    span.record("wasmkeep.socket.bytes_in", counts.bytes_in);
    span.record("wasmkeep.socket.messages_out", counts.messages_out);
    span.record("wasmkeep.socket.bytes_out", counts.bytes_out);
    span.record("wasmkeep.socket.close_code", code);
}

/// The socket's life; answers the code it closed with.
async fn serve(node: Node, on_upgrade: OnUpgrade, mut queue: SocketQueue, counts: &mut Counts) -> u16 {
    let conn = queue.conn;
    let message_bytes = node.limits().socket_message_bytes as usize;
    let Some(mut ws) = accept(on_upgrade, message_bytes).await else {
        node.socket_closed(conn, close::LOST, String::new()).await;
        return close::LOST;
    };
    loop {
        tokio::select! {
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    counts.messages_in += 1;
                    counts.bytes_in += text.len() as u64;
                    node.socket_message(conn, SocketMessage::Text(text.to_string())).await
                }
                Some(Ok(Message::Binary(data))) => {
                    counts.messages_in += 1;
                    counts.bytes_in += data.len() as u64;
                    node.socket_message(conn, SocketMessage::Binary(data.to_vec())).await
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame.map_or((close::NO_CODE, String::new()), |f| (u16::from(f.code), f.reason.to_string()));
                    node.socket_closed(conn, code, reason).await;
                    // The WebSocket layer answers the close; let it finish.
                    let _ = tokio::time::timeout(DRAIN_AT_MOST, ws.close(None)).await;
                    return code;
                }
                Some(Ok(_ping_pong_or_frame)) => {}
                Some(Err(e)) => {
                    let (code, reason) = match e {
                        Error::Capacity(_) => (close::TOO_BIG, format!("a message is over {message_bytes} bytes")),
                        Error::Utf8(_) => (close::NOT_UTF8, "a text message is not valid UTF-8".to_owned()),
                        // A connection cut without a close frame is lost, not broken.
                        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                            node.socket_closed(conn, close::LOST, String::new()).await;
                            return close::LOST;
                        }
                        Error::Protocol(_) => (close::PROTOCOL_ERROR, "the client broke the WebSocket protocol".to_owned()),
                        _ => {
                            node.socket_closed(conn, close::LOST, String::new()).await;
                            return close::LOST;
                        }
                    };
                    node.socket_closed(conn, code, reason.clone()).await;
                    close_and_drain(ws, code, &reason).await;
                    return code;
                }
                None => {
                    node.socket_closed(conn, close::LOST, String::new()).await;
                    return close::LOST;
                }
            },
            outgoing = queue.rx.recv() => {
                let Some(message) = outgoing else {
                    // The registry forgot the socket after its close was sent.
                    let _ = tokio::time::timeout(DRAIN_AT_MOST, ws.close(None)).await;
                    return close::NO_CODE;
                };
                queue.written(&message);
                let sent = match message {
                    Outgoing::Text(text) => {
                        counts.messages_out += 1;
                        counts.bytes_out += text.len() as u64;
                        send(&mut ws, Message::text(text)).await
                    }
                    Outgoing::Binary(data) => {
                        counts.messages_out += 1;
                        counts.bytes_out += data.len() as u64;
                        send(&mut ws, Message::binary(data)).await
                    }
                    Outgoing::Close { code, reason } => {
                        node.socket_gone(conn);
                        close_and_drain(ws, code, &reason).await;
                        return code;
                    }
                };
                if sent.is_err() {
                    node.socket_closed(conn, close::LOST, String::new()).await;
                    return close::LOST;
                }
            }
        }
    }
}

/// A socket the actor refused at `/actor/`: opened, then closed with 1008
/// and the actor's reason.
pub(crate) async fn refuse(on_upgrade: OnUpgrade, reason: String) {
    if let Some(ws) = accept(on_upgrade, 1024).await {
        close_and_drain(ws, close::REFUSED, &reason).await;
    }
}
