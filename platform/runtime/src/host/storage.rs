//! `wasmkeep:actor/storage`.

use super::{ActorHost, GuestState, Page, StorageError};
use crate::bindings::wasmkeep::actor::storage::Host;

impl<H: ActorHost> Host for GuestState<H> {
    async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, StorageError>> {
        Ok(self.host.storage_get(key).await)
    }

    async fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), StorageError>> {
        Ok(self.host.storage_set(key, value).await)
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<Result<(), StorageError>> {
        Ok(self.host.storage_delete(key).await)
    }

    async fn list(
        &mut self,
        prefix: String,
        cursor: Option<String>,
        limit: u32,
    ) -> wasmtime::Result<Result<Page, StorageError>> {
        Ok(self.host.storage_list(prefix, cursor, limit).await)
    }

    async fn delete_all(&mut self) -> wasmtime::Result<Result<(), StorageError>> {
        Ok(self.host.storage_delete_all())
    }
}
