//! `wasmkeep:actor/values`.

use super::{ActorHost, ActorState};
use crate::bindings::wasmkeep::actor::values::Host;

impl<H: ActorHost> Host for ActorState<H> {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        Ok(self.host.value(&name))
    }
}
