//! The output gate: an answer leaves only after its event's writes are
//! durable. A store that refuses the commit gets no answer out.

use std::sync::Arc;

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Access;
use wasmkeep_storage::testing::{FaultyStore, Op};
use wasmkeep_storage::{SqliteStore, StoreError};
use wasmkeep_tests::{TestNode, class, guests, test_limits};

#[tokio::test]
async fn no_answer_leaves_before_its_writes_are_durable() {
    let data = Arc::new(tempfile::tempdir().unwrap());
    // A real SQLite store whose commits can be made to fail.
    let store = FaultyStore::new(Arc::new(SqliteStore::open(&data.path().join("store.db")).unwrap()));
    let faults = store.faults();
    let spec = VersionSpec {
        front: None,
        classes: vec![class("open", Access::Open, &guests().probe)],
        required_values: vec![],
    };
    let n = TestNode::start_with(data, Arc::new(store), test_limits(), spec).await;
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
