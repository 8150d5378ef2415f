//! The host of one resident actor: its values, its calls, its sockets,
//! deleting itself, and its storage behind the [`StorageGate`], reset at
//! the start of each event.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use wasmkeep_core::deadline::actor_call_deadline;
use wasmkeep_core::listing::Listing;
use wasmkeep_core::{ActorKey, AppRef, Caller, Chain, Limits, TraceContext};
use wasmkeep_runtime::{
    ActorHost, CallError, GuestHost, Page, Request, Response, SocketError, SocketSend, StorageError,
};
use wasmkeep_storage::{Epoch, Store, StoreError, WriteBatch};

use crate::NodeInner;
use crate::calls::CallSide;

/// The storage gate: an event's writes are buffered here, visible to its
/// own reads, and committed in one transaction before anything leaves the
/// actor. A trap or a cut event drops them.
pub(crate) struct StorageGate {
    store: Arc<dyn Store>,
    key: ActorKey,
    epoch: Epoch,
    batch: WriteBatch,
    deleted: bool,
    /// A commit of this event's writes failed (before a call or a socket
    /// send): the event cannot end well, whatever the guest does next.
    broken: Option<StoreError>,
}

/// What an event left of its actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Kept,
    Deleted,
}

impl StorageGate {
    /// Readies the gate for an event committing under `epoch`.
    fn begin(&mut self, epoch: Epoch) {
        self.epoch = epoch;
        self.batch = WriteBatch::default();
        self.deleted = false;
        self.broken = None;
    }

    /// Whether a commit of the current event failed.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Commits the writes made so far, before an effect leaves the actor
    /// (a call, a socket send). The event's later writes commit at its end.
    pub(crate) async fn flush(&mut self) -> Result<(), StoreError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let committed = self.store.commit(&self.key, self.epoch, &batch).await;
        if let Err(e) = &committed {
            self.broken = Some(e.clone());
        }
        committed
    }

    /// Commits the event's writes, or deletes the actor if it asked to be.
    /// Answers whether the actor still exists.
    async fn finish(&mut self) -> Result<Outcome, StoreError> {
        let batch = std::mem::take(&mut self.batch);
        // Writes before an effect were lost: the rest must not commit
        // without them, and the answer must not leave.
        if let Some(e) = self.broken.take() {
            return Err(e);
        }
        if std::mem::take(&mut self.deleted) {
            self.store.delete_actor(&self.key, self.epoch).await?;
            return Ok(Outcome::Deleted);
        }
        if !batch.is_empty() {
            self.store.commit(&self.key, self.epoch, &batch).await?;
        }
        Ok(Outcome::Kept)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(pending) = self.batch.writes.get(key) {
            return Ok(pending.clone());
        }
        if self.batch.clear {
            return Ok(None);
        }
        self.store.get(&self.key, key).await
    }

    fn set(&mut self, key: String, value: Option<Vec<u8>>) {
        self.batch.writes.insert(key, value);
    }

    fn clear(&mut self) {
        self.batch.clear = true;
        self.batch.writes.clear();
    }

    async fn list(&self, prefix: &str, cursor: Option<&str>, limit: u32) -> Result<Page, StoreError> {
        let listing = Listing::new(prefix, cursor, limit);
        let pending = listing.pending(&self.batch.writes);
        let rows = if self.batch.clear {
            Vec::new()
        } else {
            self.store.list(&self.key, prefix, cursor, listing.rows_wanted(pending.len())).await?
        };
        let (entries, cursor) = listing.merge(rows, &pending);
        Ok(Page { entries, cursor })
    }
}

/// What one event runs with, given to the host as it starts.
pub(crate) struct EventContext {
    /// The owner epoch its writes commit under.
    pub epoch: Epoch,
    pub values: Arc<BTreeMap<String, String>>,
    /// When it started: its calls' deadline counts from it.
    pub started: Instant,
    /// The actors waiting on it.
    pub chain: Chain,
    pub limits: Arc<Limits>,
    /// The trace it is part of.
    pub trace: TraceContext,
}

/// The host of one resident actor, reset at the start of each event.
pub struct ActorEventHost {
    pub(crate) node: Arc<NodeInner>,
    pub(crate) key: ActorKey,
    app: Arc<AppRef>,
    address: String,
    pub(crate) gate: StorageGate,
    event: EventContext,
}

impl ActorEventHost {
    pub(crate) fn new(node: Arc<NodeInner>, app: Arc<AppRef>, key: ActorKey, event: EventContext) -> Self {
        Self {
            address: key.address.to_string(),
            gate: StorageGate {
                store: node.store.clone(),
                key: key.clone(),
                epoch: event.epoch,
                batch: WriteBatch::default(),
                deleted: false,
                broken: None,
            },
            node,
            app,
            key,
            event,
        }
    }

    /// Readies the host for an event.
    pub(crate) fn begin(&mut self, event: EventContext) {
        self.gate.begin(event.epoch);
        self.event = event;
    }

    /// Commits the event's writes (or deletes the actor).
    pub(crate) async fn finish(&mut self) -> Result<Outcome, StoreError> {
        self.gate.finish().await
    }

    fn check_key(&self, key: &str) -> Result<(), StorageError> {
        let limit = self.event.limits.storage_key_bytes as usize;
        if key.len() > limit {
            return Err(StorageError::TooLarge(format!("key is {} bytes; the limit is {limit}", key.len())));
        }
        Ok(())
    }
}

fn unavailable(e: StoreError) -> StorageError {
    tracing::warn!("storage read failed: {e}");
    StorageError::Unavailable("the store is unavailable".into())
}

impl GuestHost for ActorEventHost {
    fn value(&self, name: &str) -> Option<String> {
        self.event.values.get(name).cloned()
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
impl CallSide for ActorEventHost {
    fn node(&self) -> &Arc<NodeInner> {
        &self.node
    }

    fn app(&self) -> &Arc<AppRef> {
        &self.app
    }

    fn caller(&self) -> Caller {
        Caller::Actor(self.key.address.clone())
    }

    fn chain(&self) -> &Chain {
        &self.event.chain
    }

    fn limits(&self) -> &Limits {
        &self.event.limits
    }

    fn trace(&self) -> &TraceContext {
        &self.event.trace
    }

    fn deadline(&self, now: Instant) -> Instant {
        let limits = &self.event.limits;
        actor_call_deadline(self.event.started, limits.wall_per_event(), now, limits.call_limit())
    }

    async fn gate(&mut self) -> Result<(), CallError> {
        self.gate.flush().await.map_err(|e| {
            tracing::warn!(actor = %self.key, "commit before a call failed: {e}");
            CallError::Failed("store unavailable".into())
        })
    }
}

impl ActorHost for ActorEventHost {
    fn address(&self) -> String {
        self.address.clone()
    }

    async fn storage_get(&mut self, key: String) -> Result<Option<Vec<u8>>, StorageError> {
        self.check_key(&key)?;
        self.gate.get(&key).await.map_err(unavailable)
    }

    fn storage_set(&mut self, key: String, value: Vec<u8>) -> Result<(), StorageError> {
        self.check_key(&key)?;
        let limit = self.event.limits.storage_value_bytes as usize;
        if value.len() > limit {
            return Err(StorageError::TooLarge(format!("value is {} bytes; the limit is {limit}", value.len())));
        }
        self.gate.set(key, Some(value));
        Ok(())
    }

    fn storage_delete(&mut self, key: String) -> Result<(), StorageError> {
        self.check_key(&key)?;
        self.gate.set(key, None);
        Ok(())
    }

    async fn storage_list(&mut self, prefix: String, cursor: Option<String>, limit: u32) -> Result<Page, StorageError> {
        self.gate.list(&prefix, cursor.as_deref(), limit).await.map_err(unavailable)
    }

    fn storage_delete_all(&mut self) -> Result<(), StorageError> {
        self.gate.clear();
        Ok(())
    }

    fn delete_self(&mut self) {
        self.gate.deleted = true;
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

    async fn host_with(stored: &[&str]) -> (tempfile::TempDir, ActorEventHost) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
        let limits = wasmkeep_core::Limits { pool_instances: 4, front_slots: 1, ..Default::default() };
        let node = crate::Node::new(
            crate::NodeConfig {
                id: "n".into(),
                limits,
                cache_dir: None,
                values: Arc::new(wasmkeep_storage::ValueKey::generate()),
                egress_roots: Vec::new(),
                egress: wasmkeep_core::egress::EgressPolicy::Open,
            },
            store.clone(),
        )
        .unwrap();
        let key = ActorKey { app: AppId(1), address: Address::parse("c/a").unwrap() };
        let Wake::Owned { epoch, .. } = store.wake(&key, true, "n").await.unwrap() else { panic!() };
        let batch = WriteBatch {
            clear: false,
            writes: stored.iter().map(|k| (k.to_string(), Some(k.as_bytes().to_vec()))).collect(),
        };
        store.commit(&key, epoch, &batch).await.unwrap();
        let app = Arc::new(AppRef {
            id: AppId(1),
            tenant: wasmkeep_core::TenantId::parse("t").unwrap(),
            name: wasmkeep_core::AppName::parse("a").unwrap(),
        });
        let host = ActorEventHost::new(node.0.clone(), app, key, context(epoch));
        (dir, host)
    }

    fn context(epoch: Epoch) -> EventContext {
        EventContext {
            epoch,
            values: Arc::default(),
            started: Instant::now(),
            chain: Chain::new(),
            limits: Arc::new(wasmkeep_core::Limits::default()),
            trace: TraceContext::default(),
        }
    }

    async fn pages(host: &mut ActorEventHost, prefix: &str, limit: u32) -> Vec<Vec<String>> {
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
        assert_eq!(page.entries.len(), wasmkeep_core::listing::LIST_LIMIT_MAX as usize);
        assert_eq!(page.cursor.as_deref(), Some("k00999"));
        let page = h.storage_list("".into(), page.cursor, 0).await.unwrap();
        assert_eq!((page.entries.len(), page.cursor), (5, None));
    }

    #[tokio::test]
    async fn finish_commits_or_deletes() {
        let (_d, mut h) = host_with(&["a"]).await;
        h.storage_set("b".into(), b"b".to_vec()).unwrap();
        assert_eq!(h.finish().await.unwrap(), Outcome::Kept);
        let epoch = h.gate.epoch;
        h.begin(context(epoch));
        assert_eq!(pages(&mut h, "", 0).await, vec![vec!["a", "b"]]);
        h.storage_set("c".into(), b"c".to_vec()).unwrap();
        h.delete_self();
        assert_eq!(h.finish().await.unwrap(), Outcome::Deleted);
        h.begin(context(epoch));
        assert_eq!(pages(&mut h, "", 0).await, vec![Vec::<String>::new()]);
    }
}
