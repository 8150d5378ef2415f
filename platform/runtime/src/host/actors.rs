//! `wasmkeep:actor/actors`.

use super::{ActorHost, ActorState, CallError, Request, Response};
use crate::bindings::wasmkeep::actor::actors::Host;

impl<H: ActorHost> Host for ActorState<H> {
    async fn call(&mut self, address: String, request: Request) -> wasmtime::Result<Result<Response, CallError>> {
        Ok(self.host.call(address, request).await)
    }
}
