//! The host of one resident actor: its values, its calls, its sockets,
//! deleting itself, and its storage behind the [`StorageGate`], reset at
//! the start of each event.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use wasmkeep_core::deadline::actor_call_deadline;
use wasmkeep_core::listing::Listing;
use wasmkeep_core::quota::Quota;
use wasmkeep_core::{ActorKey, AppRef, Caller, Chain, Limits, TraceContext};
use wasmkeep_runtime::{
    ActorHost, CallError, GuestHost, Page, Request, Response, SocketError, SocketSend, StorageError,
};
use wasmkeep_storage::{
    BudgetScope, Epoch, OverBudget, StorageBudget, Store, StoreError, Stored, WriteBatch, WriteMark,
};

use crate::NodeInner;
use crate::calls::CallSide;

/// The storage gate: an event's writes are buffered here, visible to its
/// own reads, and committed in one transaction before anything leaves the
/// actor. A trap or a cut event drops them.
pub(crate) struct StorageGate {
    store: Arc<dyn Store>,
    /// The actor's app (its spans name it).
    app: Arc<AppRef>,
    /// Each commit's time, for the node's metrics.
    commit_seconds: prometheus_client::metrics::histogram::Histogram,
    /// What the app stores: a commit marks it changed.
    stored: Arc<crate::usage::StoredBytes>,
    key: ActorKey,
    epoch: Epoch,
    batch: WriteBatch,
    deleted: bool,
    /// A commit of this event's writes failed (before a call or a socket
    /// send): the event cannot end well, whatever the guest does next.
    broken: Option<StoreError>,
    /// What the actor's plan lets it store.
    budget: StorageBudget,
    /// What the actor and its tenant would store with the batch so far, as
    /// the store last said, and the bytes written since: their sum bounds
    /// what a commit would leave, so a write within the budget by it needs
    /// no store read. `None` until the store is asked (after a wake).
    known: Option<Stored>,
    written_bytes: u64,
    /// A write of this event went over the budget: its writes are dropped
    /// and every later one is refused; the guest was told.
    over: Option<OverBudget>,
    /// The store's mark after the actor's last commit (this event's or an
    /// earlier one's): what an effect waits to be durable.
    pub(crate) last_commit: WriteMark,
}

/// What an event left of its actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Kept,
    Deleted,
}

impl StorageGate {
    fn new(
        store: Arc<dyn Store>,
        app: Arc<AppRef>,
        commit_seconds: prometheus_client::metrics::histogram::Histogram,
        stored: Arc<crate::usage::StoredBytes>,
        key: ActorKey,
        event: &EventContext,
    ) -> Self {
        let (epoch, limits) = (event.epoch, &event.limits);
        Self {
            store,
            app,
            commit_seconds,
            stored,
            key,
            epoch,
            batch: WriteBatch::default(),
            deleted: false,
            broken: None,
            budget: budget(limits),
            known: None,
            written_bytes: 0,
            over: None,
            last_commit: event.last_commit,
        }
    }

    /// Readies the gate for an event committing under `epoch`, the actor's
    /// last commit marked `last_commit`.
    fn begin(&mut self, epoch: Epoch, limits: &Limits, last_commit: WriteMark) {
        self.last_commit = last_commit;
        if epoch != self.epoch {
            // Woken afresh: what was stored may have changed meanwhile.
            self.known = None;
        }
        self.epoch = epoch;
        self.batch = WriteBatch::default();
        self.deleted = false;
        self.broken = None;
        self.budget = budget(limits);
        self.written_bytes = 0;
        self.over = None;
    }

    /// Commits `batch` under the event's epoch and budget.
    async fn commit(&mut self, batch: &WriteBatch) -> Result<(), StoreError> {
        // A child of the event's span: what the commit wrote, never a value.
        // A socket's events have no span (ADR 0020), nor their commits.
        let span = if tracing::Span::current().is_none() {
            tracing::Span::none()
        } else {
            let bytes: usize = batch.writes.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len)).sum();
            tracing::info_span!(
                target: wasmkeep_telemetry::traces::TARGET,
                "storage.commit",
                wasmkeep.tenant = self.app.tenant.as_str(),
                wasmkeep.app = self.app.name.as_str(),
                wasmkeep.storage.keys_written = batch.writes.len(),
                wasmkeep.storage.bytes_written = bytes,
                wasmkeep.storage.cleared = batch.clear,
            )
        };
        let started = std::time::Instant::now();
        let committed = {
            use tracing::Instrument;
            self.store.commit(&self.key, self.epoch, batch, self.budget).instrument(span.clone()).await
        };
        self.commit_seconds.observe(started.elapsed().as_secs_f64());
        if let Err(e) = &committed {
            wasmkeep_telemetry::traces::failed(&span, e.label());
        }
        let stored = committed?;
        self.stored.changed();
        self.last_commit = self.store.mark();
        self.known = Some(stored);
        self.written_bytes = 0;
        Ok(())
    }

    /// Whether a commit of the current event failed.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Commits the writes made so far and waits until every commit before
    /// them is durable, before an effect leaves the actor (a call, a socket
    /// send). The event's later writes commit at its end.
    pub(crate) async fn flush(&mut self) -> Result<(), StoreError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let batch = std::mem::take(&mut self.batch);
        let committed = if batch.is_empty() { Ok(()) } else { self.commit(&batch).await };
        // What earlier events wrote, and this one read, goes first too.
        let durable = match committed {
            Ok(()) => self.store.durable(self.last_commit).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &durable {
            self.broken = Some(e.clone());
        }
        durable
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
            self.stored.changed();
            return Ok(Outcome::Deleted);
        }
        if !batch.is_empty() {
            self.commit(&batch).await?;
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

    /// Buffers a write, refusing it (and dropping the event's writes) when
    /// a commit with it would go over the budget.
    async fn set(&mut self, key: String, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        if let Some(over) = self.over {
            return Err(StoreError::OverBudget(over));
        }
        let adds = value.as_ref().map_or(0, |v| (key.len() + v.len()) as u64);
        self.batch.writes.insert(key, value);
        if adds == 0 || self.budget.is_unbounded() {
            return Ok(());
        }
        self.written_bytes += adds;
        let bound = self.known.map(|known| known.grown(self.written_bytes.min(i64::MAX as u64) as i64));
        if bound.is_some_and(|bound| self.budget.check(bound, 1).is_ok()) {
            return Ok(());
        }
        // Near the budget: ask the store exactly.
        let (now, growth) = self.store.stored(&self.key, &self.batch).await?;
        if let Err(over) = self.budget.check(now.grown(growth), growth) {
            self.over = Some(over);
            self.batch = WriteBatch::default();
            return Err(StoreError::OverBudget(over));
        }
        self.known = Some(now.grown(growth));
        self.written_bytes = 0;
        Ok(())
    }

    fn clear(&mut self) -> Result<(), StoreError> {
        if let Some(over) = self.over {
            return Err(StoreError::OverBudget(over));
        }
        self.batch.clear = true;
        self.batch.writes.clear();
        Ok(())
    }

    /// Whether a write of this event went over the budget.
    fn is_over(&self) -> bool {
        self.over.is_some()
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
    /// The store's mark after the actor's last commit.
    pub last_commit: WriteMark,
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
    /// The host of actor `key` of `app`, whose commits mark `stored`
    /// (what the app stores, [`crate::usage::StoredBytes`]).
    pub(crate) fn new(
        node: Arc<NodeInner>,
        app: Arc<AppRef>,
        stored: Arc<crate::usage::StoredBytes>,
        key: ActorKey,
        event: EventContext,
    ) -> Self {
        Self {
            address: key.address.to_string(),
            gate: StorageGate::new(
                node.store.clone(),
                app.clone(),
                node.metrics.store_commit_seconds.clone(),
                stored,
                key.clone(),
                &event,
            ),
            node,
            app,
            key,
            event,
        }
    }

    /// Readies the host for an event.
    pub(crate) fn begin(&mut self, event: EventContext) {
        self.gate.begin(event.epoch, &event.limits, event.last_commit);
        self.event = event;
    }

    /// Commits the event's writes (or deletes the actor).
    pub(crate) async fn finish(&mut self) -> Result<Outcome, StoreError> {
        self.gate.finish().await
    }

    /// A write's answer to the guest; the first write of an event over its
    /// storage budget is counted as a quota refusal.
    fn write_refused(&self, write: Result<(), StoreError>, first: bool) -> Result<(), StorageError> {
        match write {
            Ok(()) => Ok(()),
            Err(StoreError::OverBudget(over)) => {
                if first {
                    self.node.over_quota(&self.app.tenant, over_quota(&over), std::time::Duration::ZERO);
                }
                Err(StorageError::TooLarge(format!("{over}; nothing of this event is stored")))
            }
            Err(e) => Err(unavailable(e)),
        }
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

/// What a plan's limits let one actor store (0: no bound).
fn budget(limits: &Limits) -> StorageBudget {
    let bound = |n: u64| if n == 0 { u64::MAX } else { n };
    StorageBudget { actor: bound(limits.storage_actor_bytes), tenant: bound(limits.storage_tenant_bytes) }
}

/// The quota a refused commit or write went over.
pub(crate) fn over_quota(over: &OverBudget) -> Quota {
    match over.scope {
        BudgetScope::Actor => Quota::ActorStorage,
        BudgetScope::Tenant => Quota::TenantStorage,
    }
}

impl GuestHost for ActorEventHost {
    fn trace(&self) -> &TraceContext {
        &self.event.trace
    }

    fn values(&self) -> &BTreeMap<String, String> {
        &self.event.values
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

    async fn storage_set(&mut self, key: String, value: Vec<u8>) -> Result<(), StorageError> {
        self.check_key(&key)?;
        let limit = self.event.limits.storage_value_bytes as usize;
        if value.len() > limit {
            return Err(StorageError::TooLarge(format!("value is {} bytes; the limit is {limit}", value.len())));
        }
        let first = !self.gate.is_over();
        let set = self.gate.set(key, Some(value)).await;
        self.write_refused(set, first)
    }

    async fn storage_delete(&mut self, key: String) -> Result<(), StorageError> {
        self.check_key(&key)?;
        let set = self.gate.set(key, None).await;
        self.write_refused(set, false)
    }

    async fn storage_list(&mut self, prefix: String, cursor: Option<String>, limit: u32) -> Result<Page, StorageError> {
        self.gate.list(&prefix, cursor.as_deref(), limit).await.map_err(unavailable)
    }

    fn storage_delete_all(&mut self) -> Result<(), StorageError> {
        let clear = self.gate.clear();
        self.write_refused(clear, false)
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
    use wasmkeep_storage::{Create, SqliteStore, Wake};

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
        let Wake::Owned { epoch, .. } = store.wake(&key, Create::ANY, "n").await.unwrap() else { panic!() };
        let batch = WriteBatch {
            clear: false,
            writes: stored.iter().map(|k| (k.to_string(), Some(k.as_bytes().to_vec()))).collect(),
        };
        store.commit(&key, epoch, &batch, wasmkeep_storage::StorageBudget::UNBOUNDED).await.unwrap();
        let app = Arc::new(AppRef {
            id: AppId(1),
            tenant: wasmkeep_core::TenantId::parse("t").unwrap(),
            name: wasmkeep_core::AppName::parse("a").unwrap(),
        });
        let host = ActorEventHost::new(node.0.clone(), app, Default::default(), key, context(epoch));
        (dir, host)
    }

    fn context(epoch: Epoch) -> EventContext {
        context_with(epoch, wasmkeep_core::Limits::default())
    }

    fn context_with(epoch: Epoch, limits: wasmkeep_core::Limits) -> EventContext {
        EventContext {
            epoch,
            values: Arc::default(),
            started: Instant::now(),
            chain: Chain::new(),
            limits: Arc::new(limits),
            trace: TraceContext::default(),
            last_commit: WriteMark::default(),
        }
    }

    #[tokio::test]
    async fn a_write_over_the_actors_budget_is_refused_and_nothing_of_its_event_is_stored() {
        // "a" and "b" stored: 4 bytes.
        let (_d, mut h) = host_with(&["a", "b"]).await;
        let epoch = h.event.epoch;
        let limits = wasmkeep_core::Limits { storage_actor_bytes: 20, ..Default::default() };
        h.begin(context_with(epoch, limits.clone()));
        h.storage_set("c".into(), vec![b'x'; 9]).await.unwrap();
        h.storage_delete("a".into()).await.unwrap();
        // 4 - 2 + 10 + 7 = 19 fits; one more byte does not.
        h.storage_set("d".into(), vec![b'x'; 6]).await.unwrap();
        let refused = h.storage_set("e".into(), vec![b'x'; 1]).await.unwrap_err();
        let StorageError::TooLarge(text) = refused else { panic!("{refused:?}") };
        assert_eq!(
            text,
            "storage quota: this actor would store 21 bytes; the plan allows 20; nothing of this event is stored"
        );
        // Every later write of the event is refused; its earlier ones are gone.
        assert!(h.storage_set("f".into(), Vec::new()).await.is_err());
        assert!(h.storage_delete("b".into()).await.is_err());
        assert!(h.storage_delete_all().is_err());
        assert_eq!(h.storage_get("a".into()).await.unwrap(), Some(b"a".to_vec()));
        assert_eq!(h.finish().await, Ok(Outcome::Kept));
        assert_eq!(pages(&mut h, "", 10).await, [["a", "b"]]);
        // The next event starts afresh; an overwrite counts what it replaces.
        h.begin(context_with(epoch, limits));
        h.storage_set("a".into(), vec![b'x'; 17]).await.unwrap();
        h.storage_set("a".into(), vec![b'x'; 1]).await.unwrap();
        h.storage_set("c".into(), vec![b'x'; 14]).await.unwrap();
        assert_eq!(h.finish().await, Ok(Outcome::Kept));
        assert_eq!(pages(&mut h, "", 10).await, [["a", "b", "c"]]);
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
        h.storage_set("a".into(), b"new".to_vec()).await.unwrap();
        h.storage_delete("b".into()).await.unwrap();
        assert_eq!(h.storage_get("a".into()).await.unwrap(), Some(b"new".to_vec()));
        assert_eq!(h.storage_get("b".into()).await.unwrap(), None);
        h.storage_delete_all().unwrap();
        assert_eq!(h.storage_get("a".into()).await.unwrap(), None);
        h.storage_set("c".into(), b"c".to_vec()).await.unwrap();
        assert_eq!(pages(&mut h, "", 0).await, vec![vec!["c"]]);
    }

    #[tokio::test]
    async fn listing_merges_pending_writes_page_by_page() {
        let (_d, mut h) = host_with(&["a/1", "a/2", "a/3", "a/4", "a/5", "b/1"]).await;
        h.storage_set("a/3".into(), b"x".to_vec()).await.unwrap();
        h.storage_set("a/6".into(), b"x".to_vec()).await.unwrap();
        h.storage_set("a/0".into(), b"x".to_vec()).await.unwrap();
        h.storage_delete("a/2".into()).await.unwrap();
        h.storage_delete("a/4".into()).await.unwrap();
        assert_eq!(pages(&mut h, "a/", 2).await, vec![vec!["a/0", "a/1"], vec!["a/3", "a/5"], vec!["a/6"]]);
        assert_eq!(pages(&mut h, "a/", 0).await, vec![vec!["a/0", "a/1", "a/3", "a/5", "a/6"]]);
        assert_eq!(pages(&mut h, "b/", 1).await, vec![vec!["b/1"]]);
        // A cursor below the prefix starts at the prefix.
        let page = h.storage_list("b/".into(), Some("a".into()), 10).await.unwrap();
        assert_eq!(page.entries.len(), 1);
        // Deletes that hide a full page still leave the rest reachable.
        for k in ["a/0", "a/1", "a/3", "a/5"] {
            h.storage_delete(k.into()).await.unwrap();
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
        h.storage_set("b".into(), b"b".to_vec()).await.unwrap();
        assert_eq!(h.finish().await.unwrap(), Outcome::Kept);
        let epoch = h.gate.epoch;
        h.begin(context(epoch));
        assert_eq!(pages(&mut h, "", 0).await, vec![vec!["a", "b"]]);
        h.storage_set("c".into(), b"c".to_vec()).await.unwrap();
        h.delete_self();
        assert_eq!(h.finish().await.unwrap(), Outcome::Deleted);
        h.begin(context(epoch));
        assert_eq!(pages(&mut h, "", 0).await, vec![Vec::<String>::new()]);
    }
}
