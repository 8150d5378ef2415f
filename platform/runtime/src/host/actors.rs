//! `wasmkeep:actor/actors`.
//!
//! Every actor imports this interface for its `request` and `response`
//! types, so it is linked; calls between actors are not routed by this
//! host yet, and `call` says so to the guest.

use super::{ActorHost, ActorState, CallError, Request, Response};
use crate::bindings::wasmkeep::actor::actors::Host;

impl<H: ActorHost> Host for ActorState<H> {
    async fn call(&mut self, _address: String, _request: Request) -> wasmtime::Result<Result<Response, CallError>> {
        Ok(Err(CallError::Failed("calls between actors are not supported by this host yet".into())))
    }
}
