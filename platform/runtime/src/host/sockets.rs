//! `wasmkeep:actor/sockets`: the actor's side of the host's sockets.

use super::{ActorHost, GuestState, SocketSend};
use crate::bindings::wasmkeep::actor::sockets::{Conn, Host, SocketError};

impl<H: ActorHost> Host for GuestState<H> {
    async fn send_text(&mut self, conn: Conn, text: String) -> wasmtime::Result<Result<(), SocketError>> {
        self.host.socket_send(conn, SocketSend::Text(text)).await.map_err(trap)
    }

    async fn send_binary(&mut self, conn: Conn, data: Vec<u8>) -> wasmtime::Result<Result<(), SocketError>> {
        self.host.socket_send(conn, SocketSend::Binary(data)).await.map_err(trap)
    }

    async fn close(&mut self, conn: Conn, code: u16, reason: String) -> wasmtime::Result<Result<(), SocketError>> {
        self.host.socket_send(conn, SocketSend::Close { code, reason }).await.map_err(trap)
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<Conn>> {
        Ok(self.host.socket_list())
    }
}

fn trap(reason: String) -> wasmtime::Error {
    wasmtime::format_err!("{reason}")
}
