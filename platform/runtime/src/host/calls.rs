//! `wasmkeep:actor/calls`.

use super::{ActorHost, ActorState, CallError, Request, Response};
use crate::bindings::wasmkeep::actor::calls::Host;

impl<H: ActorHost> Host for ActorState<H> {
    async fn call_many(&mut self, calls: Vec<(String, Request)>) -> wasmtime::Result<Vec<Result<Response, CallError>>> {
        Ok(self.host.call_many(calls).await)
    }
}
