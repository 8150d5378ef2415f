//! The store: actors' ownership and storage, and the apps they belong to.
//!
//! Two traits, one per concern: [`ActorStore`] for the data plane (waking
//! and fencing actors, their keys and values) and [`AppStore`] for the
//! control plane (tenants, apps, versions, components, values). The embedded
//! default is [`SqliteStore`], a file in the node's data directory; the
//! cluster adds PostgreSQL behind the same traits.
//!
//! Every commit of an actor's writes names the owner epoch it was granted
//! at wake; a commit under any other epoch is refused ([`StoreError::Fenced`]),
//! so two owners never both write one actor.

mod sqlite;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::collections::BTreeMap;

use async_trait::async_trait;
use wasmkeep_core::{ActorKey, AppId};

pub use sqlite::SqliteStore;

/// The owner epoch granted to the node that woke an actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Epoch(pub i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The commit's epoch is not the actor's current one: another wake took
    /// the actor since.
    #[error("stale owner epoch")]
    Fenced,
    #[error("store: {0}")]
    Backend(String),
}

/// What waking an actor found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The actor exists (or was created): this node owns it under `epoch`.
    Owned { epoch: Epoch, created: bool },
    /// The actor does not exist (never created, or deleted) and was not
    /// to be created.
    Missing,
}

/// An event's writes, applied in one transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// Delete every key before applying `writes`.
    pub clear: bool,
    /// Key to new value; `None` deletes the key.
    pub writes: BTreeMap<String, Option<Vec<u8>>>,
}

impl WriteBatch {
    pub fn is_empty(&self) -> bool {
        !self.clear && self.writes.is_empty()
    }
}

/// The data plane's store.
#[async_trait]
pub trait ActorStore: Send + Sync + 'static {
    /// Takes ownership of the actor for `node` under a new epoch, creating
    /// it (or bringing a deleted one back) when `create`. A missing actor
    /// that is not created answers [`Wake::Missing`].
    async fn wake(&self, actor: &ActorKey, create: bool, node: &str) -> Result<Wake, StoreError>;

    async fn get(&self, actor: &ActorKey, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Up to `limit` entries with keys starting with `prefix`, after `after`
    /// when given, in ascending key order.
    async fn list(
        &self,
        actor: &ActorKey,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Applies `batch` atomically if `epoch` is still the actor's.
    async fn commit(&self, actor: &ActorKey, epoch: Epoch, batch: &WriteBatch) -> Result<(), StoreError>;

    /// Deletes the actor's storage and marks it deleted (a state, not an
    /// absence: its record stays), if `epoch` is still the actor's.
    async fn delete_actor(&self, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError>;
}

/// A version as stored: its manifest (JSON, the app's own format) and the
/// component of each role (a class name, or `_front`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVersion {
    pub number: i64,
    pub manifest: String,
    pub components: BTreeMap<String, String>,
}

/// The control plane's store.
#[async_trait]
pub trait AppStore: Send + Sync + 'static {
    /// The app `name` of `tenant`, created (with the tenant) if missing.
    async fn ensure_app(&self, tenant: &str, name: &str) -> Result<AppId, StoreError>;
    /// Stores component bytes under their SHA-256 (hex), once.
    async fn put_component(&self, hash: &str, bytes: &[u8]) -> Result<(), StoreError>;
    async fn component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Adds an immutable version; answers its number.
    async fn add_version(
        &self,
        app: AppId,
        manifest: &str,
        components: &BTreeMap<String, String>,
    ) -> Result<i64, StoreError>;
    async fn activate(&self, app: AppId, version: i64) -> Result<(), StoreError>;
    async fn active_version(&self, app: AppId) -> Result<Option<StoredVersion>, StoreError>;
    async fn set_value(&self, app: AppId, name: &str, value: &str) -> Result<(), StoreError>;
    async fn values(&self, app: AppId) -> Result<BTreeMap<String, String>, StoreError>;
}

/// Both halves of a store, as one node uses them.
pub trait Store: ActorStore + AppStore {}

impl<T: ActorStore + AppStore> Store for T {}
