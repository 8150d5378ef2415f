//! `wasmkeep:actor/actors`.

use super::{CallError, GuestHost, GuestState, Request, Response};
use crate::bindings::wasmkeep::actor::actors::Host;

impl<H: GuestHost> Host for GuestState<H> {
    async fn call(&mut self, address: String, request: Request) -> wasmtime::Result<Result<Response, CallError>> {
        Ok(self.host.call(address, request).await)
    }
}
