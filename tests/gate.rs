//! The output gate: an answer leaves only after its event's writes are
//! durable. A store that refuses the commit gets no answer out.

use std::sync::Arc;

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Access;
use wasmkeep_storage::testing::{FaultyStore, Op};
use wasmkeep_storage::{Durability, SqliteStore, StoreError};
use wasmkeep_tests::{TestNode, class, guests, test_limits};

#[tokio::test]
async fn no_answer_leaves_before_its_writes_are_durable() {
    // A real SQLite store whose commits can be made to fail.
    let (n, faults, _) = probe_node(Durability::Process, test_limits()).await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);

    faults.fail_always(Op::Commit, StoreError::Backend("disk full".into()));
    let a = n.get("/actor/open/a/count").await;
    // The guest answered 200 with count 2; the client never sees it.
    assert_eq!((a.status, a.body.as_str()), (503, "store unavailable\n"));
    assert!(a.header("retry-after").is_some());
    // An event that writes nothing has nothing to wait for.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 1);

    faults.clear(Op::Commit);
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 2);
}

/// A node with the probe as class `open`, on a real SQLite store of
/// `durability` whose calls are counted and can be faulted.
async fn probe_node(
    durability: Durability,
    limits: wasmkeep_core::Limits,
) -> (TestNode, wasmkeep_storage::testing::Faults, Arc<SqliteStore>) {
    let data = Arc::new(tempfile::tempdir().unwrap());
    let sqlite = Arc::new(SqliteStore::open_with(&data.path().join("store.db"), durability).unwrap());
    let store = FaultyStore::new(sqlite.clone());
    let faults = store.faults();
    let spec =
        VersionSpec { front: None, classes: vec![class("open", Access::Open, &guests().probe)], ..Default::default() };
    (TestNode::start_with(data, Arc::new(store), limits, spec).await, faults, sqlite)
}

/// Actors that hibernate 0.1 s after their last event.
async fn counted_node() -> (TestNode, wasmkeep_storage::testing::Faults, Arc<SqliteStore>) {
    probe_node(Durability::Process, wasmkeep_core::Limits { idle_secs: 0.1, ..test_limits() }).await
}

async fn hibernated(n: &TestNode) -> bool {
    wasmkeep_tests::eventually(std::time::Duration::from_secs(5), || n.node.awake_actors() == 0).await
}

#[tokio::test]
async fn an_actor_woken_again_takes_no_new_owner_epoch() {
    let (n, faults, _) = counted_node().await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    assert!(hibernated(&n).await);
    for round in 2..5 {
        assert_eq!(n.get("/actor/open/a/count").await.json()["count"], round);
        assert!(hibernated(&n).await);
    }
    // One wake in the store, the first; the others kept its epoch.
    assert_eq!(faults.calls(Op::Wake), 1);
    // A deleted actor keeps nothing: it is woken (and created) afresh.
    assert_eq!(n.send(n.client.delete(format!("{}/actor/open/a/", n.url))).await.status, 204);
    assert!(hibernated(&n).await);
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    assert_eq!(faults.calls(Op::Wake), 2);
}

#[tokio::test]
async fn an_epoch_taken_elsewhere_while_asleep_fences_the_next_commit_then_wakes_afresh() {
    let (n, faults, sqlite) = counted_node().await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    assert!(hibernated(&n).await);
    // Another owner takes the actor while it sleeps here.
    let key = wasmkeep_core::ActorKey { app: n.app, address: wasmkeep_core::Address::parse("open/a").unwrap() };
    use wasmkeep_storage::ActorStore;
    sqlite.wake(&key, wasmkeep_storage::Create::No, "another-node").await.unwrap();
    // This node's kept epoch is stale: the write is refused, nothing of it
    // is kept, and the client is told to retry.
    let a = n.get("/actor/open/a/count").await;
    assert_eq!((a.status, a.body.as_str()), (503, "store unavailable\n"));
    // The retry wakes the actor afresh and succeeds.
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 2);
    assert_eq!(faults.calls(Op::Wake), 2);
}

#[tokio::test]
async fn a_commit_that_fails_before_a_call_fails_the_event_and_forgets_the_epoch() {
    let (n, faults, _) = counted_node().await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    // The commit before the call is refused, as for an epoch another node
    // took: the guest sees its call fail and answers anyway, but nothing
    // of the event may stand without those writes.
    faults.fail_next(Op::Commit, 1, StoreError::Fenced);
    let a = n.get("/actor/open/a/call?to=open/b&path=/peek").await;
    assert_eq!((a.status, a.body.as_str()), (503, "store unavailable\n"));
    // The epoch went with it: the next event wakes the actor afresh, and
    // the lost event's write is not there.
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 2);
    assert_eq!(faults.calls(Op::Wake), 2);
}

/// A store synced by group commit (as `serve` runs), whose waits for
/// durability can be held.
async fn synced_node() -> (TestNode, wasmkeep_storage::testing::Faults, Arc<SqliteStore>) {
    probe_node(Durability::PowerLoss, test_limits()).await
}

#[tokio::test]
async fn an_answer_waits_for_the_sync_while_the_actors_next_event_runs() {
    use futures_util::FutureExt;
    let (n, faults, sqlite) = synced_node().await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    let key = wasmkeep_core::ActorKey { app: n.app, address: wasmkeep_core::Address::parse("open/a").unwrap() };
    let stored = || async {
        use wasmkeep_storage::ActorStore;
        sqlite.get(&key, "count").await.unwrap().map(|v| String::from_utf8(v).unwrap())
    };
    // The disk takes its time: every wait for durability lasts 3 s.
    faults.delay(Op::Durable, std::time::Duration::from_secs(3));
    let url = n.url.clone();
    let first = tokio::spawn({
        let client = n.client.clone();
        let url = url.clone();
        async move { client.get(format!("{url}/actor/open/a/count")).send().await.unwrap().text().await.unwrap() }
    });
    assert!(
        wasmkeep_tests::eventually(std::time::Duration::from_secs(2), || {
            stored().now_or_never().flatten().as_deref() == Some("2")
        })
        .await
    );
    // Committed, not yet answered; the actor takes its next event already.
    let second = tokio::spawn({
        let client = n.client.clone();
        async move { client.get(format!("{url}/actor/open/a/count")).send().await.unwrap().text().await.unwrap() }
    });
    assert!(
        wasmkeep_tests::eventually(std::time::Duration::from_secs(2), || {
            stored().now_or_never().flatten().as_deref() == Some("3")
        })
        .await
    );
    assert!(!first.is_finished() && !second.is_finished());
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert!(first.contains("\"count\":2") && second.contains("\"count\":3"), "{first} {second}");
}

#[tokio::test]
async fn an_answer_whose_writes_cannot_be_made_durable_does_not_leave() {
    let (n, faults, _) = synced_node().await;
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    faults.fail_always(Op::Durable, StoreError::Backend("syncing the WAL failed: EIO".into()));
    let a = n.get("/actor/open/a/count").await;
    assert_eq!((a.status, a.body.as_str()), (503, "store unavailable\n"));
    // Nor does a call after a write: the guest sees it fail.
    let a = n.get("/actor/open/a/call?to=open/b&path=/peek").await;
    assert_eq!(a.status, 503);
    faults.clear(Op::Durable);
    assert_eq!(n.get("/actor/open/a/peek").await.status, 200);
}
