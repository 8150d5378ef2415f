//! `wasmkeep:actor/values`.

use super::{GuestHost, GuestState};
use crate::bindings::wasmkeep::actor::values::Host;

impl<H: GuestHost> Host for GuestState<H> {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        Ok(self.host.values().get(&name).cloned())
    }
}
