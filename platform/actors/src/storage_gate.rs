//! The storage gate: an event's writes are buffered here, visible to its
//! own reads, and committed in one transaction before anything leaves the
//! actor. A trap or a cut event drops them.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use std::time::Instant;

use wasmkeep_core::deadline::actor_call_deadline;
use wasmkeep_core::{ActorKey, AppId, Caller, Chain};
use wasmkeep_runtime::{
    ActorHost, CallError, GuestHost, Page, Request, Response, SocketError, SocketSend, StorageError,
};
use wasmkeep_storage::{Epoch, Store, StoreError, WriteBatch};

use crate::NodeInner;
use crate::calls::CallSide;

/// Most entries one `list` answers.
pub const LIST_LIMIT_MAX: u32 = 1000;

/// The host of one resident actor, reset at the start of each event.
pub struct EventHost {
    pub(crate) node: Arc<NodeInner>,
    pub(crate) key: ActorKey,
    address: String,
    epoch: Epoch,
    values: Arc<BTreeMap<String, String>>,
    batch: WriteBatch,
    deleted: bool,
    /// When the current event started: its calls' deadline counts from it.
    pub(crate) started: Instant,
    /// The actors waiting on the current event.
    pub(crate) chain: Chain,
}

impl EventHost {
    pub(crate) fn new(node: Arc<NodeInner>, key: ActorKey, epoch: Epoch) -> Self {
        Self {
            address: key.address.to_string(),
            node,
            key,
            epoch,
            values: Arc::default(),
            batch: WriteBatch::default(),
            deleted: false,
            started: Instant::now(),
            chain: Chain::new(),
        }
    }

    fn store(&self) -> &dyn Store {
        &*self.node.store
    }

    /// Readies the host for an event: the owner epoch it commits under,
    /// the app's values, when it started and who waits on it.
    pub(crate) fn begin(
        &mut self,
        epoch: Epoch,
        values: Arc<BTreeMap<String, String>>,
        started: Instant,
        chain: Chain,
    ) {
        self.epoch = epoch;
        self.values = values;
        self.batch = WriteBatch::default();
        self.deleted = false;
        self.started = started;
        self.chain = chain;
    }

    /// The output gate: commits the writes made so far, before an effect
    /// leaves the actor (a call). The event's later writes commit at its end.
    pub(crate) async fn flush(&mut self) -> Result<(), StoreError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        self.node.store.commit(&self.key, self.epoch, &batch).await
    }

    /// Commits the event's writes, or deletes the actor if it asked to be.
    /// Answers whether the actor still exists.
    pub(crate) async fn finish(&mut self) -> Result<Outcome, StoreError> {
        let batch = std::mem::take(&mut self.batch);
        if std::mem::take(&mut self.deleted) {
            self.store().delete_actor(&self.key, self.epoch).await?;
            return Ok(Outcome::Deleted);
        }
        if !batch.is_empty() {
            self.store().commit(&self.key, self.epoch, &batch).await?;
        }
        Ok(Outcome::Kept)
    }

    fn check_key(&self, key: &str) -> Result<(), StorageError> {
        let limit = self.node.limits.storage_key_bytes as usize;
        if key.len() > limit {
            return Err(StorageError::TooLarge(format!("key is {} bytes; the limit is {limit}", key.len())));
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

impl GuestHost for EventHost {
    fn value(&self, name: &str) -> Option<String> {
        self.values.get(name).cloned()
    }

    async fn call(&mut self, address: String, request: Request) -> Result<Response, CallError> {
        crate::calls::call(self, address, request).await
    }

    async fn call_many(&mut self, calls: Vec<(String, Request)>) -> Vec<Result<Response, CallError>> {
        crate::calls::call_many(self, calls).await
    }
}

/// An actor calls with its address and chain, under the deadline its
/// event's start sets, and through the output gate.
impl CallSide for EventHost {
    fn node(&self) -> &Arc<NodeInner> {
        &self.node
    }

    fn app(&self) -> AppId {
        self.key.app
    }

    fn caller(&self) -> Caller {
        Caller::Actor(self.key.address.clone())
    }

    fn chain(&self) -> &Chain {
        &self.chain
    }

    fn deadline(&self, now: Instant) -> Instant {
        let limits = &self.node.limits;
        actor_call_deadline(self.started, limits.wall_per_event(), now, limits.call_limit())
    }

    async fn gate(&mut self) -> Result<(), CallError> {
        self.flush().await.map_err(|e| {
            tracing::warn!(actor = %self.key, "commit before a call failed: {e}");
            CallError::Failed("store unavailable".into())
        })
    }
}

impl ActorHost for EventHost {
    fn address(&self) -> String {
        self.address.clone()
    }

    async fn storage_get(&mut self, key: String) -> Result<Option<Vec<u8>>, StorageError> {
        self.check_key(&key)?;
        if let Some(pending) = self.batch.writes.get(&key) {
            return Ok(pending.clone());
        }
        if self.batch.clear {
            return Ok(None);
        }
        self.store().get(&self.key, &key).await.map_err(unavailable)
    }

    fn storage_set(&mut self, key: String, value: Vec<u8>) -> Result<(), StorageError> {
        self.check_key(&key)?;
        let limit = self.node.limits.storage_value_bytes as usize;
        if value.len() > limit {
            return Err(StorageError::TooLarge(format!("value is {} bytes; the limit is {limit}", value.len())));
        }
        self.batch.writes.insert(key, Some(value));
        Ok(())
    }

    fn storage_delete(&mut self, key: String) -> Result<(), StorageError> {
        self.check_key(&key)?;
        self.batch.writes.insert(key, None);
        Ok(())
    }

    async fn storage_list(&mut self, prefix: String, cursor: Option<String>, limit: u32) -> Result<Page, StorageError> {
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
            let rows = self.store().list(&self.key, &prefix, after, want + 1).await.map_err(unavailable)?;
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

    async fn socket_send(&mut self, conn: u64, message: SocketSend) -> Result<Result<(), SocketError>, String> {
        self.send_on_socket(conn, message).await
    }

    fn socket_list(&self) -> Vec<u64> {
        self.sockets_of_actor()
    }
}

#[cfg(test)]
mod tests {
    use wasmkeep_core::{Address, AppId};
    use wasmkeep_storage::{SqliteStore, Wake};

    use super::*;

    async fn host_with(stored: &[&str]) -> (tempfile::TempDir, EventHost) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
        let limits = wasmkeep_core::Limits { pool_instances: 4, front_slots: 1, ..Default::default() };
        let node =
            crate::Node::new(crate::NodeConfig { id: "n".into(), limits, cache_dir: None }, store.clone()).unwrap();
        let key = ActorKey { app: AppId(1), address: Address::parse("c/a").unwrap() };
        let Wake::Owned { epoch, .. } = store.wake(&key, true, "n").await.unwrap() else { panic!() };
        let batch = WriteBatch {
            clear: false,
            writes: stored.iter().map(|k| (k.to_string(), Some(k.as_bytes().to_vec()))).collect(),
        };
        store.commit(&key, epoch, &batch).await.unwrap();
        let mut host = EventHost::new(node.0.clone(), key, epoch);
        host.begin(epoch, Arc::default(), Instant::now(), Chain::new());
        (dir, host)
    }

    async fn pages(host: &mut EventHost, prefix: &str, limit: u32) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut cursor = None;
        for _ in 0..100 {
            let page = host.storage_list(prefix.into(), cursor, limit).await.unwrap();
            out.push(page.entries.into_iter().map(|(k, _)| k).collect());
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
        panic!("listing did not end")
    }

    #[tokio::test]
    async fn reads_see_pending_writes_deletes_and_clears() {
        let (_d, mut h) = host_with(&["a", "b"]).await;
        assert_eq!(h.storage_get("a".into()).await.unwrap(), Some(b"a".to_vec()));
        h.storage_set("a".into(), b"new".to_vec()).unwrap();
        h.storage_delete("b".into()).unwrap();
        assert_eq!(h.storage_get("a".into()).await.unwrap(), Some(b"new".to_vec()));
        assert_eq!(h.storage_get("b".into()).await.unwrap(), None);
        h.storage_delete_all().unwrap();
        assert_eq!(h.storage_get("a".into()).await.unwrap(), None);
        h.storage_set("c".into(), b"c".to_vec()).unwrap();
        assert_eq!(pages(&mut h, "", 0).await, vec![vec!["c"]]);
    }

    #[tokio::test]
    async fn listing_merges_pending_writes_page_by_page() {
        let (_d, mut h) = host_with(&["a/1", "a/2", "a/3", "a/4", "a/5", "b/1"]).await;
        h.storage_set("a/3".into(), b"x".to_vec()).unwrap();
        h.storage_set("a/6".into(), b"x".to_vec()).unwrap();
        h.storage_set("a/0".into(), b"x".to_vec()).unwrap();
        h.storage_delete("a/2".into()).unwrap();
        h.storage_delete("a/4".into()).unwrap();
        assert_eq!(pages(&mut h, "a/", 2).await, vec![vec!["a/0", "a/1"], vec!["a/3", "a/5"], vec!["a/6"]]);
        assert_eq!(pages(&mut h, "a/", 0).await, vec![vec!["a/0", "a/1", "a/3", "a/5", "a/6"]]);
        assert_eq!(pages(&mut h, "b/", 1).await, vec![vec!["b/1"]]);
        // A cursor below the prefix starts at the prefix.
        let page = h.storage_list("b/".into(), Some("a".into()), 10).await.unwrap();
        assert_eq!(page.entries.len(), 1);
        // Deletes that hide a full page still leave the rest reachable.
        for k in ["a/0", "a/1", "a/3", "a/5"] {
            h.storage_delete(k.into()).unwrap();
        }
        let all: Vec<String> = pages(&mut h, "a/", 1).await.into_iter().flatten().collect();
        assert_eq!(all, ["a/6"]);
    }

    #[tokio::test]
    async fn listing_caps_its_page() {
        let keys: Vec<String> = (0..1005).map(|i| format!("k{i:05}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (_d, mut h) = host_with(&refs).await;
        let page = h.storage_list("".into(), None, 5000).await.unwrap();
        assert_eq!(page.entries.len(), LIST_LIMIT_MAX as usize);
        assert_eq!(page.cursor.as_deref(), Some("k00999"));
        let page = h.storage_list("".into(), page.cursor, 0).await.unwrap();
        assert_eq!((page.entries.len(), page.cursor), (5, None));
    }

    #[tokio::test]
    async fn finish_commits_or_deletes() {
        let (_d, mut h) = host_with(&["a"]).await;
        h.storage_set("b".into(), b"b".to_vec()).unwrap();
        assert_eq!(h.finish().await.unwrap(), Outcome::Kept);
        let epoch = h.epoch;
        h.begin(epoch, Arc::default(), Instant::now(), Chain::new());
        assert_eq!(pages(&mut h, "", 0).await, vec![vec!["a", "b"]]);
        h.storage_set("c".into(), b"c".to_vec()).unwrap();
        h.delete_self();
        assert_eq!(h.finish().await.unwrap(), Outcome::Deleted);
        h.begin(epoch, Arc::default(), Instant::now(), Chain::new());
        assert_eq!(pages(&mut h, "", 0).await, vec![Vec::<String>::new()]);
    }
}
