//! Durable storage: commits survive restarts, hibernation keeps state,
//! deletion is a state, listing pages with a cursor, limits are enforced.

use std::time::Duration;

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::{Access, Limits};
use wasmkeep_tests::{TestNode, class, eventually, guests, test_limits};

fn spec() -> VersionSpec {
    let probe = &guests().probe;
    VersionSpec {
        front: None,
        classes: vec![class("open", Access::Open, probe), class("existing", Access::Existing, probe)],
        ..Default::default()
    }
}

#[tokio::test]
async fn counts_survive_a_restart_of_the_node() {
    let n = TestNode::start(test_limits(), spec()).await;
    for _ in 0..3 {
        n.get("/actor/open/a/count").await;
    }
    let n = n.restart(spec()).await;
    let a = n.get("/actor/open/a/count").await;
    assert_eq!(a.json()["count"], 4);
    // The same deploy again is the same version, not a new one.
    let v = n.node.app(n.app).unwrap().active().unwrap().number;
    assert_eq!(v, 1);
}

#[tokio::test]
async fn an_idle_actor_hibernates_and_wakes_with_its_state() {
    let n = TestNode::start(Limits { idle_secs: 0.3, ..test_limits() }, spec()).await;
    n.get("/actor/open/a/count").await;
    let a = n.get("/actor/open/a/count").await.json();
    assert_eq!((a["count"].as_u64(), a["events"].as_u64()), (Some(2), Some(2)));
    assert_eq!(n.node.resident_actors(), 1);
    // Idle: its instance goes back to the pool.
    assert!(eventually(Duration::from_secs(3), || n.node.resident_actors() == 0).await);
    assert!(eventually(Duration::from_secs(1), || n.node.awake_actors() == 0).await);
    // Woken: storage kept, memory new.
    let a = n.get("/actor/open/a/count").await.json();
    assert_eq!((a["count"].as_u64(), a["events"].as_u64()), (Some(3), Some(1)));
}

#[tokio::test]
async fn an_actor_busy_within_its_idle_time_stays_resident() {
    let n = TestNode::start(Limits { idle_secs: 1.0, ..test_limits() }, spec()).await;
    for _ in 0..6 {
        n.get("/actor/open/a/count").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Six events on one instance: it never hibernated between them.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["events"], 7);
}

#[tokio::test]
async fn delete_self_deletes_storage_and_existence() {
    let n = TestNode::start(test_limits(), spec()).await;
    n.get("/actor/open/a/count").await;
    n.get("/actor/open/a/count").await;
    let d = n.send(n.client.delete(format!("{}/actor/open/a/", n.url))).await;
    assert_eq!(d.status, 204);
    // `open` creates it again, empty.
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 0);

    // An `existing` actor, once deleted, is missing to outside callers.
    // An inside caller (here, as the front would) creates it first.
    let inside = wasmkeep_core::Origin::Inside { caller: wasmkeep_core::Caller::Front, chain: Default::default() };
    let get = wasmkeep_actors::Request { method: "GET".into(), path: "/count".into(), headers: vec![], body: vec![] };
    let e = wasmkeep_core::RawAddress::split("existing/e").unwrap();
    assert_eq!(n.node.request_to(n.app, e, inside, get).await.unwrap().status, 200);
    assert_eq!(n.get("/actor/existing/e/count").await.status, 200);
    assert_eq!(n.send(n.client.delete(format!("{}/actor/existing/e/", n.url))).await.status, 204);
    let a = n.get("/actor/existing/e/peek").await;
    assert_eq!((a.status, a.body.as_str()), (404, "no such actor\n"));
}

#[tokio::test]
async fn reads_see_the_events_own_writes_and_keys_page_with_a_cursor() {
    let n = TestNode::start(test_limits(), spec()).await;
    assert_eq!(n.send(n.client.post(format!("{}/actor/open/a/fill?n=25", n.url))).await.status, 204);
    let mut keys = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let q = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let page = n.get(&format!("/actor/open/a/list?prefix=k/&limit=10{q}")).await.json();
        let got: Vec<String> =
            page["keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_owned()).collect();
        assert!(got.len() <= 10);
        keys.extend(got);
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.replace('/', "%2F")),
            None => break,
        }
    }
    let want: Vec<String> = (0..25).map(|i| format!("k/{i:04}")).collect();
    assert_eq!(keys, want);
    // Other prefixes are not listed.
    n.send(n.client.put(format!("{}/actor/open/a/kv?key=other", n.url)).body("x")).await;
    let page = n.get("/actor/open/a/list?prefix=k/0000").await.json();
    assert_eq!(page["keys"], serde_json::json!(["k/0000"]));
    assert_eq!(page["cursor"], serde_json::Value::Null);
}

#[tokio::test]
async fn delete_all_empties_the_actor() {
    let n = TestNode::start(test_limits(), spec()).await;
    n.send(n.client.post(format!("{}/actor/open/a/fill?n=5", n.url))).await;
    n.send(n.client.post(format!("{}/actor/open/a/clear", n.url))).await;
    assert_eq!(n.get("/actor/open/a/list?prefix=").await.json()["keys"], serde_json::json!([]));
}

#[tokio::test]
async fn keys_and_values_over_their_limits_are_refused() {
    let limits = Limits { storage_key_bytes: 16, storage_value_bytes: 100, ..test_limits() };
    let n = TestNode::start(limits, spec()).await;
    let long_key = "k".repeat(17);
    let a = n.send(n.client.put(format!("{}/actor/open/a/kv?key={long_key}", n.url)).body("v")).await;
    assert_eq!((a.status, a.body.as_str()), (400, "too large: key is 17 bytes; the limit is 16"));
    let a = n.send(n.client.put(format!("{}/actor/open/a/kv?key=k", n.url)).body(vec![b'x'; 101])).await;
    assert_eq!((a.status, a.body.as_str()), (400, "too large: value is 101 bytes; the limit is 100"));
    let a = n.send(n.client.put(format!("{}/actor/open/a/kv?key=k", n.url)).body(vec![b'x'; 100])).await;
    assert_eq!(a.status, 204);
    assert_eq!(n.get("/actor/open/a/kv?key=k").await.body.len(), 100);
}

#[tokio::test]
async fn a_commit_over_the_tenants_storage_is_refused_whole_and_its_answer_held() {
    let limits = Limits { storage_tenant_bytes: 100, ..test_limits() };
    let n = TestNode::start(limits, spec()).await;
    let put = |actor: &str, path: &str, bytes: usize| {
        n.send(n.client.put(format!("{}/actor/open/{actor}/{path}", n.url)).body(vec![b'x'; bytes]))
    };
    // 1 + 10 bytes, then a write that fits by what the event last knew
    // (11 + 61) but not once another actor took 51 bytes meanwhile.
    assert_eq!(put("a", "kv?key=k", 10).await.status, 204);
    let late = put("a", "kv-then-wait?key=j&ms=400", 60);
    let other = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        put("b", "kv?key=k", 50).await
    };
    let (late, other) = tokio::join!(late, other);
    assert_eq!(other.status, 204);
    assert_eq!(
        (late.status, late.body.as_str()),
        (507, "over the plan's storage_bytes quota; something stored must be deleted first\n")
    );
    assert_eq!(n.get("/actor/open/a/kv?key=j").await.status, 404);
    // A write the store's figures refuse is told to the guest at once.
    let told = put("a", "kv?key=j", 60).await;
    assert_eq!(
        (told.status, told.body.as_str()),
        (
            400,
            "too large: storage quota: this account's actors would store 123 bytes; the plan allows 100; nothing of this event is stored"
        )
    );
    // Freeing room lets it in.
    assert_eq!(n.send(n.client.delete(format!("{}/actor/open/b/kv?key=k", n.url))).await.status, 204);
    assert_eq!(put("a", "kv?key=j", 60).await.status, 204);
}

#[tokio::test]
async fn actors_storage_is_private() {
    let n = TestNode::start(test_limits(), spec()).await;
    n.send(n.client.put(format!("{}/actor/open/a/kv?key=secret", n.url)).body("a's")).await;
    assert_eq!(n.get("/actor/open/b/kv?key=secret").await.status, 404);
    assert_eq!(n.get("/actor/open/a/kv?key=secret").await.body, "a's");
}

#[tokio::test]
async fn apps_on_one_node_are_isolated() {
    let n = TestNode::start(test_limits(), spec()).await;
    // A second app of another tenant, with the same class and actor names.
    let other = n.node.deploy("other-tenant", "app", spec()).await.unwrap().app;
    assert_ne!(other, n.app);
    let peek =
        || wasmkeep_actors::Request { method: "GET".into(), path: "/count".into(), headers: vec![], body: vec![] };
    let target = wasmkeep_core::RawAddress::split("open/a").unwrap();
    for _ in 0..3 {
        n.node.request_to(other, target.clone(), wasmkeep_core::Origin::Outside, peek()).await.unwrap();
    }
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    let r = n.node.request_to(other, target, wasmkeep_core::Origin::Outside, peek()).await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["count"], 4);
}
