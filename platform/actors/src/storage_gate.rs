//! The storage gate: an event's writes are buffered here, visible to its
//! own reads, and committed in one transaction before anything leaves the
//! actor. A trap or a cut event drops them.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use wasmkeep_core::{ActorKey, Limits};
use wasmkeep_runtime::{ActorHost, Page, StorageError};
use wasmkeep_storage::{Epoch, Store, StoreError, WriteBatch};

/// Most entries one `list` answers.
pub const LIST_LIMIT_MAX: u32 = 1000;

/// The host of one resident actor, reset at the start of each event.
pub struct EventHost {
    store: Arc<dyn Store>,
    key: ActorKey,
    address: String,
    epoch: Epoch,
    values: Arc<BTreeMap<String, String>>,
    batch: WriteBatch,
    deleted: bool,
    key_bytes: usize,
    value_bytes: usize,
}

impl EventHost {
    pub(crate) fn new(store: Arc<dyn Store>, key: ActorKey, epoch: Epoch, limits: &Limits) -> Self {
        Self {
            address: key.address.to_string(),
            store,
            key,
            epoch,
            values: Arc::default(),
            batch: WriteBatch::default(),
            deleted: false,
            key_bytes: limits.storage_key_bytes as usize,
            value_bytes: limits.storage_value_bytes as usize,
        }
    }

    /// Readies the host for an event: the owner epoch it commits under and
    /// the app's values as the event starts.
    pub(crate) fn begin(&mut self, epoch: Epoch, values: Arc<BTreeMap<String, String>>) {
        self.epoch = epoch;
        self.values = values;
        self.batch = WriteBatch::default();
        self.deleted = false;
    }

    /// Commits the event's writes, or deletes the actor if it asked to be.
    /// Answers whether the actor still exists.
    pub(crate) async fn finish(&mut self) -> Result<Outcome, StoreError> {
        let batch = std::mem::take(&mut self.batch);
        if std::mem::take(&mut self.deleted) {
            self.store.delete_actor(&self.key, self.epoch).await?;
            return Ok(Outcome::Deleted);
        }
        if !batch.is_empty() {
            self.store.commit(&self.key, self.epoch, &batch).await?;
        }
        Ok(Outcome::Kept)
    }

    fn check_key(&self, key: &str) -> Result<(), StorageError> {
        if key.len() > self.key_bytes {
            return Err(StorageError::TooLarge(format!(
                "key is {} bytes; the limit is {}",
                key.len(),
                self.key_bytes
            )));
        }
        Ok(())
    }
}

/// What an event left of its actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Kept,
    Deleted,
}

fn unavailable(e: StoreError) -> StorageError {
    tracing::warn!("storage read failed: {e}");
    StorageError::Unavailable("the store is unavailable".into())
}

impl ActorHost for EventHost {
    fn address(&self) -> String {
        self.address.clone()
    }

    fn value(&self, name: &str) -> Option<String> {
        self.values.get(name).cloned()
    }

    async fn storage_get(&mut self, key: String) -> Result<Option<Vec<u8>>, StorageError> {
        self.check_key(&key)?;
        if let Some(pending) = self.batch.writes.get(&key) {
            return Ok(pending.clone());
        }
        if self.batch.clear {
            return Ok(None);
        }
        self.store.get(&self.key, &key).await.map_err(unavailable)
    }

    fn storage_set(&mut self, key: String, value: Vec<u8>) -> Result<(), StorageError> {
        self.check_key(&key)?;
        if value.len() > self.value_bytes {
            return Err(StorageError::TooLarge(format!(
                "value is {} bytes; the limit is {}",
                value.len(),
                self.value_bytes
            )));
        }
        self.batch.writes.insert(key, Some(value));
        Ok(())
    }

    fn storage_delete(&mut self, key: String) -> Result<(), StorageError> {
        self.check_key(&key)?;
        self.batch.writes.insert(key, None);
        Ok(())
    }

    async fn storage_list(
        &mut self,
        prefix: String,
        cursor: Option<String>,
        limit: u32,
    ) -> Result<Page, StorageError> {
        let limit = if limit == 0 { LIST_LIMIT_MAX } else { limit.min(LIST_LIMIT_MAX) } as usize;
        let after = cursor.as_deref();
        let in_range = |k: &str| k.starts_with(prefix.as_str()) && after.is_none_or(|c| k > c);

        // Pending writes in the range, each able to hide one stored entry.
        let lower = match after {
            Some(c) if c >= prefix.as_str() => Bound::Excluded(c.to_owned()),
            _ => Bound::Included(prefix.clone()),
        };
        let pending: Vec<(&String, &Option<Vec<u8>>)> = self
            .batch
            .writes
            .range((lower, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix.as_str()))
            .filter(|(k, _)| in_range(k))
            .collect();

        let (stored, complete) = if self.batch.clear {
            (Vec::new(), true)
        } else {
            let want = limit + pending.len();
            let rows = self.store.list(&self.key, &prefix, after, want + 1).await.map_err(unavailable)?;
            let complete = rows.len() <= want;
            (rows.into_iter().take(want).collect::<Vec<_>>(), complete)
        };
        // When the store had more, the merged view is exact only up to the
        // last stored key fetched.
        let horizon = if complete { None } else { stored.last().map(|(k, _)| k.clone()) };

        let mut merged: BTreeMap<String, Vec<u8>> = stored.into_iter().collect();
        for (k, v) in pending {
            match v {
                Some(v) => merged.insert(k.clone(), v.clone()),
                None => merged.remove(k),
            };
        }
        let mut visible = merged.into_iter().filter(|(k, _)| horizon.as_ref().is_none_or(|h| k <= h));
        let entries: Vec<(String, Vec<u8>)> = visible.by_ref().take(limit).collect();
        let more = visible.next().is_some() || horizon.is_some();
        let cursor = if more { entries.last().map(|(k, _)| k.clone()) } else { None };
        Ok(Page { entries, cursor })
    }

    fn storage_delete_all(&mut self) -> Result<(), StorageError> {
        self.batch.clear = true;
        self.batch.writes.clear();
        Ok(())
    }

    fn delete_self(&mut self) {
        self.deleted = true;
    }
}
