//! The actor's WebSockets. The host owns them: a socket outlives the
//! instance, keeps its id across hibernation, and its messages and close
//! arrive as the actor's events ([`crate::Actor::on_websocket_message`],
//! [`crate::Actor::on_websocket_close`]). Nothing is sent before the
//! writes the event made before the send are durable.

pub use crate::wit::sockets::SocketError;

use crate::Conn;
use crate::wit::sockets as w;

/// Sends a text message on one of this actor's sockets.
pub fn send_text(conn: Conn, text: &str) -> Result<(), SocketError> {
    w::send_text(conn, text)
}

/// Sends a binary message on one of this actor's sockets.
pub fn send_binary(conn: Conn, data: &[u8]) -> Result<(), SocketError> {
    w::send_binary(conn, data)
}

/// Closes one of this actor's sockets (`code` 1000–1003, 1007–1014 or
/// 3000–4999; `reason` at most 123 bytes). No close event follows.
pub fn close(conn: Conn, code: u16, reason: &str) -> Result<(), SocketError> {
    w::close(conn, code, reason)
}

/// This actor's open sockets, oldest first.
pub fn list() -> Vec<Conn> {
    w::list()
}
