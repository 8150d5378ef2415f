//! A store that fails on demand, for tests of what the platform does when
//! its store misbehaves.
//!
//! [`FaultyStore`] wraps any store (SQLite, PostgreSQL, or an
//! `Arc<dyn Store>`) and delegates every call to it, unless a fault set
//! through its [`Faults`] handle says otherwise. Faults are per [`Op`]:
//! fail the next N calls, fail every call until cleared, or delay each call.
//! Every call is counted, so a test can assert that a commit was (or was
//! not) attempted.
//!
//! Compiled with the `testing` feature only (and in this crate's own tests).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use wasmkeep_core::{ActorKey, AppId};

use crate::{
    ActorRecord, ActorStore, AppRecord, AppStore, ClusterStore, Create, Epoch, Revoked, StorageBudget, StoreError,
    Stored, StoredVersion, Take, TenantRecord, TenantStore, TokenRecord, UsageCounts, Wake, WriteBatch, WriteMark,
};

/// One method of [`ActorStore`] or [`AppStore`] ([`TenantStore`]'s and
/// [`ClusterStore`]'s calls pass straight through): what a fault targets and
/// what a call count counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Wake,
    Get,
    List,
    Commit,
    DeleteActor,
    EnsureApp,
    PutComponent,
    Component,
    AddVersion,
    Activate,
    ActiveVersion,
    Version,
    Versions,
    SetValue,
    DeleteValue,
    Values,
    Apps,
    AllApps,
    FindApp,
    DeleteApp,
    /// Waiting for commits to be durable ([`ActorStore::durable`]).
    Durable,
}

impl Op {
    /// Every op, so a test can fault or check them all at once.
    pub const ALL: [Op; 21] = [
        Op::Wake,
        Op::Get,
        Op::List,
        Op::Commit,
        Op::DeleteActor,
        Op::EnsureApp,
        Op::PutComponent,
        Op::Component,
        Op::AddVersion,
        Op::Activate,
        Op::ActiveVersion,
        Op::Version,
        Op::Versions,
        Op::SetValue,
        Op::DeleteValue,
        Op::Values,
        Op::Apps,
        Op::AllApps,
        Op::FindApp,
        Op::DeleteApp,
        Op::Durable,
    ];
}

/// The handle through which a test sets faults and reads counts while the
/// store is in use elsewhere. Clones share the same faults.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<[Rules; Op::ALL.len()]>>);

/// What is set for one op.
#[derive(Debug, Clone, Default)]
struct Rules {
    calls: u64,
    delay: Option<Duration>,
    failure: Option<Failure>,
}

#[derive(Debug, Clone)]
struct Failure {
    error: StoreError,
    /// Calls left to fail; `None` fails every call until cleared.
    remaining: Option<u64>,
}

impl Faults {
    /// Fails the next `n` calls of `op` with `error`, then lets calls through
    /// again. Replaces any failure set before for `op`.
    pub fn fail_next(&self, op: Op, n: u64, error: StoreError) {
        self.rules(op, |r| r.failure = (n > 0).then_some(Failure { error, remaining: Some(n) }));
    }

    /// Fails every call of `op` with `error` until [`Faults::clear`].
    /// Replaces any failure set before for `op`.
    pub fn fail_always(&self, op: Op, error: StoreError) {
        self.rules(op, |r| r.failure = Some(Failure { error, remaining: None }));
    }

    /// Waits `delay` at the start of every call of `op` (failing or not)
    /// until [`Faults::clear`]: a slow store. The wait is a tokio timer, so
    /// the call must run on a tokio runtime with time enabled.
    pub fn delay(&self, op: Op, delay: Duration) {
        self.rules(op, |r| r.delay = Some(delay));
    }

    /// Removes `op`'s failure and delay: its calls go through again. Its
    /// count is kept.
    pub fn clear(&self, op: Op) {
        self.rules(op, |r| {
            r.failure = None;
            r.delay = None;
        });
    }

    /// How many times `op` was called, whether it failed or not.
    pub fn calls(&self, op: Op) -> u64 {
        self.rules(op, |r| r.calls)
    }

    /// Counts a call of `op` and decides its fate there and then: the delay
    /// to wait, and the error to answer instead of calling the inner store.
    fn enter(&self, op: Op) -> (Option<Duration>, Option<StoreError>) {
        self.rules(op, |r| {
            r.calls += 1;
            let error = match &mut r.failure {
                None => None,
                Some(Failure { error, remaining: None }) => Some(error.clone()),
                Some(Failure { error, remaining: Some(n) }) => {
                    let error = error.clone();
                    *n -= 1;
                    if *n == 0 {
                        r.failure = None;
                    }
                    Some(error)
                }
            };
            (r.delay, error)
        })
    }

    fn rules<T>(&self, op: Op, f: impl FnOnce(&mut Rules) -> T) -> T {
        // A test that panicked while holding the lock left nothing half-done.
        let mut all: MutexGuard<'_, _> = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut all[op as usize])
    }
}

/// A store that delegates every call to `inner` unless its [`Faults`] say
/// otherwise. `S` may be a concrete store or `dyn Store`.
pub struct FaultyStore<S: ?Sized> {
    inner: Arc<S>,
    faults: Faults,
}

impl<S: ?Sized> FaultyStore<S> {
    /// Wraps `inner` with no faults set.
    pub fn new(inner: Arc<S>) -> Self {
        Self { inner, faults: Faults::default() }
    }

    /// The handle to set faults and read counts, kept by the test while the
    /// store itself goes to the code under test.
    pub fn faults(&self) -> Faults {
        self.faults.clone()
    }

    /// The wrapped store, to look behind the faults (e.g. at what was
    /// really committed).
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    async fn enter(&self, op: Op) -> Result<(), StoreError> {
        let (delay, error) = self.faults.enter(op);
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        error.map_or(Ok(()), Err)
    }
}

#[async_trait]
impl<S: ?Sized + ActorStore> ActorStore for FaultyStore<S> {
    async fn wake(&self, actor: &ActorKey, create: Create, node: &str) -> Result<Wake, StoreError> {
        self.enter(Op::Wake).await?;
        self.inner.wake(actor, create, node).await
    }

    async fn get(&self, actor: &ActorKey, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.enter(Op::Get).await?;
        self.inner.get(actor, key).await
    }

    async fn list(
        &self,
        actor: &ActorKey,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.enter(Op::List).await?;
        self.inner.list(actor, prefix, after, limit).await
    }

    async fn commit(
        &self,
        actor: &ActorKey,
        epoch: Epoch,
        batch: &WriteBatch,
        budget: StorageBudget,
    ) -> Result<Stored, StoreError> {
        self.enter(Op::Commit).await?;
        self.inner.commit(actor, epoch, batch, budget).await
    }

    fn mark(&self) -> WriteMark {
        self.inner.mark()
    }

    async fn durable(&self, mark: WriteMark) -> Result<(), StoreError> {
        self.enter(Op::Durable).await?;
        self.inner.durable(mark).await
    }

    // A projection reads like a get.
    async fn stored(&self, actor: &ActorKey, batch: &WriteBatch) -> Result<(Stored, i64), StoreError> {
        self.enter(Op::Get).await?;
        self.inner.stored(actor, batch).await
    }

    async fn delete_actor(&self, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError> {
        self.enter(Op::DeleteActor).await?;
        self.inner.delete_actor(actor, epoch).await
    }

    // The control plane's reads pass straight through.
    async fn actors(
        &self,
        app: AppId,
        class: Option<&str>,
        prefix: &str,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<ActorRecord>, StoreError> {
        self.inner.actors(app, class, prefix, after, limit).await
    }

    async fn actor(&self, actor: &ActorKey) -> Result<Option<ActorRecord>, StoreError> {
        self.inner.actor(actor).await
    }

    async fn app_bytes(&self, app: AppId) -> Result<u64, StoreError> {
        self.inner.app_bytes(app).await
    }

    async fn app_actors(&self, app: AppId) -> Result<u64, StoreError> {
        self.inner.app_actors(app).await
    }
}

#[async_trait]
impl<S: ?Sized + AppStore> AppStore for FaultyStore<S> {
    async fn ensure_app(&self, tenant: &str, name: &str) -> Result<AppId, StoreError> {
        self.enter(Op::EnsureApp).await?;
        self.inner.ensure_app(tenant, name).await
    }

    async fn put_component(&self, hash: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.enter(Op::PutComponent).await?;
        self.inner.put_component(hash, bytes).await
    }

    async fn component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.enter(Op::Component).await?;
        self.inner.component(hash).await
    }

    async fn add_version(
        &self,
        app: AppId,
        manifest: &str,
        components: &BTreeMap<String, String>,
    ) -> Result<i64, StoreError> {
        self.enter(Op::AddVersion).await?;
        self.inner.add_version(app, manifest, components).await
    }

    async fn activate(&self, app: AppId, version: i64) -> Result<(), StoreError> {
        self.enter(Op::Activate).await?;
        self.inner.activate(app, version).await
    }

    async fn active_version(&self, app: AppId) -> Result<Option<StoredVersion>, StoreError> {
        self.enter(Op::ActiveVersion).await?;
        self.inner.active_version(app).await
    }

    async fn version(&self, app: AppId, number: i64) -> Result<Option<StoredVersion>, StoreError> {
        self.enter(Op::Version).await?;
        self.inner.version(app, number).await
    }

    async fn versions(&self, app: AppId) -> Result<Vec<StoredVersion>, StoreError> {
        self.enter(Op::Versions).await?;
        self.inner.versions(app).await
    }

    async fn delete_version(&self, app: AppId, number: i64) -> Result<bool, StoreError> {
        self.inner.delete_version(app, number).await
    }

    async fn set_value(&self, app: AppId, name: &str, sealed: &[u8]) -> Result<(), StoreError> {
        self.enter(Op::SetValue).await?;
        self.inner.set_value(app, name, sealed).await
    }

    async fn delete_value(&self, app: AppId, name: &str) -> Result<bool, StoreError> {
        self.enter(Op::DeleteValue).await?;
        self.inner.delete_value(app, name).await
    }

    async fn values(&self, app: AppId) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        self.enter(Op::Values).await?;
        self.inner.values(app).await
    }

    async fn apps(&self, tenant: &str) -> Result<Vec<AppRecord>, StoreError> {
        self.enter(Op::Apps).await?;
        self.inner.apps(tenant).await
    }

    async fn all_apps(&self) -> Result<Vec<AppRecord>, StoreError> {
        self.enter(Op::AllApps).await?;
        self.inner.all_apps().await
    }

    async fn find_app(&self, tenant: &str, name: &str) -> Result<Option<AppRecord>, StoreError> {
        self.enter(Op::FindApp).await?;
        self.inner.find_app(tenant, name).await
    }

    async fn delete_app(&self, app: AppId) -> Result<(), StoreError> {
        self.enter(Op::DeleteApp).await?;
        self.inner.delete_app(app).await
    }

    // Usage passes straight through, as the control plane's reads do.
    async fn add_usage(&self, app: AppId, period: &str, used: &UsageCounts) -> Result<(), StoreError> {
        self.inner.add_usage(app, period, used).await
    }

    async fn usage(&self, app: AppId, period: &str) -> Result<UsageCounts, StoreError> {
        self.inner.usage(app, period).await
    }
}

#[async_trait]
impl<S: ?Sized + TenantStore> TenantStore for FaultyStore<S> {
    async fn create_tenant(&self, tenant: &TenantRecord, first: &TokenRecord) -> Result<bool, StoreError> {
        self.inner.create_tenant(tenant, first).await
    }

    async fn tenant(&self, id: &str) -> Result<Option<TenantRecord>, StoreError> {
        self.inner.tenant(id).await
    }

    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        self.inner.tenants().await
    }

    async fn set_plan(&self, id: &str, plan: &str) -> Result<bool, StoreError> {
        self.inner.set_plan(id, plan).await
    }

    async fn set_suspended(&self, id: &str, suspended: bool) -> Result<bool, StoreError> {
        self.inner.set_suspended(id, suspended).await
    }

    async fn set_telemetry(&self, id: &str, sealed: Option<&[u8]>) -> Result<bool, StoreError> {
        self.inner.set_telemetry(id, sealed).await
    }

    async fn telemetry(&self) -> Result<std::collections::BTreeMap<String, Vec<u8>>, StoreError> {
        self.inner.telemetry().await
    }

    async fn telemetry_of(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.telemetry_of(id).await
    }

    async fn add_token(&self, token: &TokenRecord) -> Result<(), StoreError> {
        self.inner.add_token(token).await
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.inner.token_by_hash(hash).await
    }

    async fn tokens(&self, tenant: Option<&str>) -> Result<Vec<TokenRecord>, StoreError> {
        self.inner.tokens(tenant).await
    }

    async fn revoke_token(&self, tenant: Option<&str>, id: &str) -> Result<Revoked, StoreError> {
        self.inner.revoke_token(tenant, id).await
    }
}

#[async_trait]
impl<S: ?Sized + ClusterStore> ClusterStore for FaultyStore<S> {
    async fn beat(&self, node: &str, record: &str, sent_ms: u64) -> Result<(), StoreError> {
        self.inner.beat(node, record, sent_ms).await
    }

    async fn heartbeats(&self) -> Result<Vec<(String, String, u64)>, StoreError> {
        self.inner.heartbeats().await
    }

    async fn forget_nodes(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.inner.forget_nodes(before_ms).await
    }

    async fn take(
        &self,
        actor: &ActorKey,
        create: Create,
        node: &str,
        dead_before_ms: u64,
    ) -> Result<Take, StoreError> {
        self.inner.take(actor, create, node, dead_before_ms).await
    }

    async fn owner(&self, actor: &ActorKey) -> Result<Option<String>, StoreError> {
        self.inner.owner(actor).await
    }

    async fn release(&self, actor: &ActorKey, epoch: Epoch) -> Result<bool, StoreError> {
        self.inner.release(actor, epoch).await
    }

    async fn owned_by(&self, node: &str, after: Option<&ActorKey>, limit: usize) -> Result<Vec<ActorKey>, StoreError> {
        self.inner.owned_by(node, after, limit).await
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;
    use wasmkeep_core::Address;

    use super::*;
    use crate::{SqliteStore, Store};

    fn store() -> (tempfile::TempDir, FaultyStore<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        (dir, FaultyStore::new(Arc::new(s)))
    }

    fn key(name: &str) -> ActorKey {
        ActorKey { app: AppId(1), address: Address::parse(&format!("counter/{name}")).unwrap() }
    }

    fn put(k: &str, v: &[u8]) -> WriteBatch {
        WriteBatch { clear: false, writes: BTreeMap::from([(k.to_string(), Some(v.to_vec()))]) }
    }

    async fn owned(s: &impl ActorStore, a: &ActorKey) -> Epoch {
        let Wake::Owned { epoch, .. } = s.wake(a, Create::ANY, "n1").await.unwrap() else { panic!("not owned") };
        epoch
    }

    fn disk_full() -> StoreError {
        StoreError::Backend("disk full".into())
    }

    #[tokio::test]
    async fn every_call_reaches_the_inner_store_and_is_counted_once() {
        let (_d, s) = store();
        let f = s.faults();
        let a = key("x");
        let epoch = owned(&s, &a).await;
        s.commit(&a, epoch, &put("k", b"1"), StorageBudget::UNBOUNDED).await.unwrap();
        assert_eq!(s.get(&a, "k").await.unwrap(), Some(b"1".to_vec()));
        assert_eq!(s.list(&a, "", None, 10).await.unwrap(), vec![("k".to_string(), b"1".to_vec())]);
        // The inner store saw the commit itself, not a copy.
        assert_eq!(s.inner().get(&a, "k").await.unwrap(), Some(b"1".to_vec()));
        s.delete_actor(&a, epoch).await.unwrap();
        assert_eq!(s.wake(&a, Create::No, "n1").await.unwrap(), Wake::Missing);

        let app = s.ensure_app("dev", "counter").await.unwrap();
        s.put_component("h1", b"wasm").await.unwrap();
        assert_eq!(s.component("h1").await.unwrap(), Some(b"wasm".to_vec()));
        let comps = BTreeMap::from([("counter".to_string(), "h1".to_string())]);
        let v = s.add_version(app, "{}", &comps).await.unwrap();
        s.activate(app, v).await.unwrap();
        assert_eq!(s.active_version(app).await.unwrap().unwrap().components, comps);
        assert_eq!(s.version(app, v).await.unwrap().unwrap().number, v);
        assert_eq!(s.versions(app).await.unwrap().len(), 1);
        s.set_value(app, "A", b"1").await.unwrap();
        assert_eq!(s.values(app).await.unwrap()["A"], b"1");
        assert!(s.delete_value(app, "A").await.unwrap());
        assert_eq!(s.apps("dev").await.unwrap()[0].id, app);
        assert_eq!(s.all_apps().await.unwrap().len(), 1);
        assert_eq!(s.find_app("dev", "counter").await.unwrap().unwrap().active, Some(v));
        s.delete_app(app).await.unwrap();
        s.durable(s.mark()).await.unwrap();

        for op in Op::ALL {
            assert_eq!(f.calls(op), if op == Op::Wake { 2 } else { 1 }, "{op:?}");
        }
    }

    #[tokio::test]
    async fn fail_next_fails_that_many_calls_then_recovers() {
        let (_d, s) = store();
        let f = s.faults();
        let a = key("x");
        let epoch = owned(&s, &a).await;
        f.fail_next(Op::Commit, 2, disk_full());
        assert_eq!(s.commit(&a, epoch, &put("k", b"1"), StorageBudget::UNBOUNDED).await, Err(disk_full()));
        assert_eq!(s.commit(&a, epoch, &put("k", b"2"), StorageBudget::UNBOUNDED).await, Err(disk_full()));
        // The failed commits never reached the store.
        assert_eq!(s.get(&a, "k").await.unwrap(), None);
        s.commit(&a, epoch, &put("k", b"3"), StorageBudget::UNBOUNDED).await.unwrap();
        assert_eq!(s.get(&a, "k").await.unwrap(), Some(b"3".to_vec()));
        assert_eq!(f.calls(Op::Commit), 3);
        // Other ops were never touched.
        assert_eq!(f.calls(Op::Get), 2);
    }

    #[tokio::test]
    async fn fail_always_fails_until_cleared() {
        let (_d, s) = store();
        let f = s.faults();
        let a = key("x");
        f.fail_always(Op::Wake, disk_full());
        for _ in 0..5 {
            assert_eq!(s.wake(&a, Create::ANY, "n1").await, Err(disk_full()));
        }
        f.clear(Op::Wake);
        assert_eq!(s.wake(&a, Create::ANY, "n1").await.unwrap(), Wake::Owned { epoch: Epoch(1), created: true });
        assert_eq!(f.calls(Op::Wake), 6);
    }

    #[tokio::test]
    async fn fenced_and_backend_errors_are_answered_as_set() {
        let (_d, s) = store();
        let f = s.faults();
        let a = key("x");
        let epoch = owned(&s, &a).await;
        f.fail_next(Op::Commit, 1, StoreError::Fenced);
        f.fail_next(Op::DeleteActor, 1, StoreError::Backend("gone".into()));
        assert_eq!(s.commit(&a, epoch, &put("k", b"1"), StorageBudget::UNBOUNDED).await, Err(StoreError::Fenced));
        assert_eq!(s.delete_actor(&a, epoch).await, Err(StoreError::Backend("gone".into())));
        // A later setting replaces the earlier one.
        f.fail_always(Op::Commit, disk_full());
        f.fail_always(Op::Commit, StoreError::Fenced);
        assert_eq!(s.commit(&a, epoch, &put("k", b"1"), StorageBudget::UNBOUNDED).await, Err(StoreError::Fenced));
        f.fail_next(Op::Commit, 0, disk_full());
        s.commit(&a, epoch, &put("k", b"1"), StorageBudget::UNBOUNDED).await.unwrap();
    }

    // Paused time: the clock moves only by the store's own sleeps.
    #[tokio::test(start_paused = true)]
    async fn a_delay_holds_every_call_back_until_cleared() {
        let (_d, s) = store();
        let f = s.faults();
        let a = key("x");
        f.delay(Op::Wake, Duration::from_secs(5));
        f.fail_next(Op::Wake, 1, disk_full());
        let start = Instant::now();
        // A failing call waits too: a slow store that then gives up.
        assert_eq!(s.wake(&a, Create::ANY, "n1").await, Err(disk_full()));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        owned(&s, &a).await;
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        // Other ops are not delayed.
        s.get(&a, "k").await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        f.clear(Op::Wake);
        owned(&s, &a).await;
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(f.calls(Op::Wake), 3);
    }

    #[tokio::test]
    async fn wraps_a_shared_dyn_store() {
        let dir = tempfile::tempdir().unwrap();
        let inner: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("store.db")).unwrap());
        let s: Arc<dyn Store> = Arc::new(FaultyStore::new(inner.clone()));
        let faulty = FaultyStore::new(inner);
        let f = faulty.faults();
        f.fail_always(Op::EnsureApp, StoreError::Fenced);
        assert_eq!(faulty.ensure_app("dev", "a").await, Err(StoreError::Fenced));
        // Faults belong to one wrapper; another over the same store is unaffected.
        s.ensure_app("dev", "a").await.unwrap();
    }
}
