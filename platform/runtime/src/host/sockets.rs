//! `wasmkeep:actor/sockets`.
//!
//! The host accepts no WebSocket upgrades yet, so no actor has a socket:
//! the list is empty and every operation names a socket that does not
//! exist. Both are true, not stand-ins.

use super::{ActorHost, GuestState};
use crate::bindings::wasmkeep::actor::sockets::{Conn, Host, SocketError};

impl<H: ActorHost> Host for GuestState<H> {
    async fn send_text(&mut self, _conn: Conn, _text: String) -> wasmtime::Result<Result<(), SocketError>> {
        Ok(Err(SocketError::NoSuchSocket))
    }

    async fn send_binary(&mut self, _conn: Conn, _data: Vec<u8>) -> wasmtime::Result<Result<(), SocketError>> {
        Ok(Err(SocketError::NoSuchSocket))
    }

    async fn close(&mut self, _conn: Conn, _code: u16, _reason: String) -> wasmtime::Result<Result<(), SocketError>> {
        Ok(Err(SocketError::NoSuchSocket))
    }

    async fn list(&mut self) -> wasmtime::Result<Vec<Conn>> {
        Ok(Vec::new())
    }
}
