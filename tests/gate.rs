//! The output gate: an answer leaves only after its event's writes are
//! durable. A store that refuses the commit gets no answer out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::{Access, ActorKey, AppId};
use wasmkeep_storage::{ActorStore, AppStore, Epoch, SqliteStore, StoreError, StoredVersion, Wake, WriteBatch};
use wasmkeep_tests::{TestNode, class, guests, test_limits};

/// A real SQLite store whose commits can be made to fail.
struct FailingCommits {
    inner: SqliteStore,
    fail: AtomicBool,
}

#[async_trait]
impl ActorStore for FailingCommits {
    async fn wake(&self, actor: &ActorKey, create: bool, node: &str) -> Result<Wake, StoreError> {
        self.inner.wake(actor, create, node).await
    }
    async fn get(&self, actor: &ActorKey, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(actor, key).await
    }
    async fn list(
        &self,
        actor: &ActorKey,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.list(actor, prefix, after, limit).await
    }
    async fn commit(&self, actor: &ActorKey, epoch: Epoch, batch: &WriteBatch) -> Result<(), StoreError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreError::Backend("disk full".into()));
        }
        self.inner.commit(actor, epoch, batch).await
    }
    async fn delete_actor(&self, actor: &ActorKey, epoch: Epoch) -> Result<(), StoreError> {
        self.inner.delete_actor(actor, epoch).await
    }
}

#[async_trait]
impl AppStore for FailingCommits {
    async fn ensure_app(&self, tenant: &str, name: &str) -> Result<AppId, StoreError> {
        self.inner.ensure_app(tenant, name).await
    }
    async fn put_component(&self, hash: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.put_component(hash, bytes).await
    }
    async fn component(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.component(hash).await
    }
    async fn add_version(&self, app: AppId, m: &str, c: &BTreeMap<String, String>) -> Result<i64, StoreError> {
        self.inner.add_version(app, m, c).await
    }
    async fn activate(&self, app: AppId, version: i64) -> Result<(), StoreError> {
        self.inner.activate(app, version).await
    }
    async fn active_version(&self, app: AppId) -> Result<Option<StoredVersion>, StoreError> {
        self.inner.active_version(app).await
    }
    async fn set_value(&self, app: AppId, name: &str, value: &str) -> Result<(), StoreError> {
        self.inner.set_value(app, name, value).await
    }
    async fn values(&self, app: AppId) -> Result<BTreeMap<String, String>, StoreError> {
        self.inner.values(app).await
    }
}

#[tokio::test]
async fn no_answer_leaves_before_its_writes_are_durable() {
    let data = Arc::new(tempfile::tempdir().unwrap());
    let store = Arc::new(FailingCommits {
        inner: SqliteStore::open(&data.path().join("store.db")).unwrap(),
        fail: AtomicBool::new(false),
    });
    let spec = VersionSpec {
        front: None,
        classes: vec![class("open", Access::Open, &guests().probe)],
        required_values: vec![],
    };
    let n = TestNode::start_with(data, store.clone(), test_limits(), spec).await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);

    store.fail.store(true, Ordering::SeqCst);
    let a = n.get("/actor/open/a/count").await;
    // The guest answered 200 with count 2; the client never sees it.
    assert_eq!((a.status, a.body.as_str()), (503, "store unavailable\n"));
    assert!(a.header("retry-after").is_some());
    // An event that writes nothing has nothing to wait for.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 1);

    store.fail.store(false, Ordering::SeqCst);
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 2);
}
