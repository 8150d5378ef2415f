//! `wasmkeep:actor/calls`.

use super::{CallError, GuestHost, GuestState, Request, Response};
use crate::bindings::wasmkeep::actor::calls::Host;

impl<H: GuestHost> Host for GuestState<H> {
    async fn call_many(&mut self, calls: Vec<(String, Request)>) -> wasmtime::Result<Vec<Result<Response, CallError>>> {
        Ok(self.host.call_many(calls).await)
    }
}
