//! One socket's connection: reads the client's frames into the actor's
//! events and writes what the actor queued. The host answers pings (the
//! WebSocket layer does, as it reads); a message over the limit closes the
//! socket with 1009; a lost connection is a close with 1006.

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error, Message};
use wasmkeep_actors::{Node, Outgoing, SocketMessage, SocketQueue};

/// A socket's read buffer: small, as most sockets of a node are idle.
const READ_BUFFER: usize = 4 * 1024;

async fn accept(
    on_upgrade: OnUpgrade,
    message_bytes: usize,
) -> Option<WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>> {
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

/// Runs an open socket until it closes.
pub(crate) async fn run(node: Node, on_upgrade: OnUpgrade, mut queue: SocketQueue) {
    let conn = queue.conn;
    let message_bytes = node.limits().socket_message_bytes as usize;
    let Some(mut ws) = accept(on_upgrade, message_bytes).await else {
        node.socket_closed(conn, 1006, String::new());
        return;
    };
    loop {
        tokio::select! {
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Text(text))) => node.socket_message(conn, SocketMessage::Text(text.to_string())),
                Some(Ok(Message::Binary(data))) => node.socket_message(conn, SocketMessage::Binary(data.to_vec())),
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame.map_or((1005, String::new()), |f| (u16::from(f.code), f.reason.to_string()));
                    node.socket_closed(conn, code, reason);
                    // The WebSocket layer answers the close; let it finish.
                    let _ = ws.close(None).await;
                    return;
                }
                Some(Ok(_ping_pong_or_frame)) => {}
                Some(Err(Error::Capacity(_))) => {
                    let reason = format!("a message is over {message_bytes} bytes");
                    let _ = ws.close(Some(close_frame(1009, &reason))).await;
                    node.socket_closed(conn, 1009, reason);
                    return;
                }
                Some(Err(_)) | None => {
                    node.socket_closed(conn, 1006, String::new());
                    return;
                }
            },
            outgoing = queue.rx.recv() => {
                let Some(message) = outgoing else {
                    // The registry forgot the socket after its close was sent.
                    let _ = ws.close(None).await;
                    return;
                };
                queue.written(&message);
                let sent = match message {
                    Outgoing::Text(text) => ws.send(Message::text(text)).await,
                    Outgoing::Binary(data) => ws.send(Message::binary(data)).await,
                    Outgoing::Close { code, reason } => {
                        let _ = ws.close(Some(close_frame(code, &reason))).await;
                        node.socket_gone(conn);
                        return;
                    }
                };
                if sent.is_err() {
                    node.socket_closed(conn, 1006, String::new());
                    return;
                }
            }
        }
    }
}

/// A socket the actor refused at `/actor/`: opened, then closed with 1008
/// and the actor's reason.
pub(crate) async fn refuse(on_upgrade: OnUpgrade, reason: String) {
    if let Some(mut ws) = accept(on_upgrade, 1024).await {
        let _ = ws.close(Some(close_frame(1008, &reason))).await;
    }
}
