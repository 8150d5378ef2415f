//! `wasmkeep:actor/self`.

use super::{ActorHost, GuestState};
use crate::bindings::wasmkeep::actor::self_::Host;

impl<H: ActorHost> Host for GuestState<H> {
    async fn address(&mut self) -> wasmtime::Result<String> {
        Ok(self.host.address())
    }

    async fn delete_self(&mut self) -> wasmtime::Result<()> {
        self.host.delete_self();
        Ok(())
    }
}
