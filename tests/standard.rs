//! Components written for other hosts: `wasi:config/store` at the three
//! versions in use, `wasi:keyvalue` at the two (an actor's storage,
//! refused to a front) and environment variables from `[env]`. The guests
//! (`std-front`, `std-kv`, `kv-front`) import the standard interfaces
//! only; the actor uses the SDK for nothing but its events' export.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use wasmkeep_actors::{DeployFailure, VersionSpec};
use wasmkeep_core::Access;
use wasmkeep_tests::{TestNode, class, guests, test_limits};

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn spec(env: BTreeMap<String, String>) -> VersionSpec {
    VersionSpec {
        front: Some(guests().std_front.clone()),
        classes: vec![class("kv", Access::Open, &guests().std_kv)],
        env,
        ..Default::default()
    }
}

async fn node() -> TestNode {
    TestNode::start(test_limits(), spec(env(&[("LOG_LEVEL", "debug"), ("GREETING", "hi there=1")]))).await
}

/// `path` on actor `kv/a`, its status and body.
async fn kv(n: &TestNode, path: &str) -> (u16, String) {
    let a = n.get(&format!("/actor/kv/a{path}")).await;
    (a.status, a.body)
}

#[tokio::test]
async fn fronts_and_actors_see_exactly_the_manifests_environment() {
    let n = node().await;
    // Nothing of the host's own environment, only `[env]`.
    let want = "GREETING=hi there=1\nLOG_LEVEL=debug\n";
    let a = n.get("/env").await;
    assert_eq!((a.status, a.body.as_str()), (200, want));
    assert_eq!(kv(&n, "/env").await, (200, want.to_owned()));

    // A new version with another environment: new instances see it.
    let d = n.node.deploy("t", "app", spec(env(&[("LOG_LEVEL", "warn")]))).await.unwrap();
    assert!(d.new, "an environment of its own makes a new version");
    assert_eq!(n.get("/env").await.body, "LOG_LEVEL=warn\n");
    assert_eq!(kv(&n, "/env").await.1, "LOG_LEVEL=warn\n");
    // The same spec again is the same version.
    let again = n.node.deploy("t", "app", spec(env(&[("LOG_LEVEL", "warn")]))).await.unwrap();
    assert_eq!((again.new, again.version), (false, d.version));

    // The first version, read back from the store, has its own again.
    let app = n.node.app_ref(n.app).unwrap();
    n.node.activate(&app, d.version - 1).await.unwrap();
    assert_eq!(n.get("/env").await.body, want);
    assert_eq!(kv(&n, "/env").await.1, want);
}

#[tokio::test]
async fn wasi_config_reads_the_apps_values_at_every_version() {
    let n = node().await;
    n.node.set_value(n.app, "A", "1").await.unwrap();
    n.node.set_value(n.app, "B", "two words").await.unwrap();
    for version in ["rc1", "draft", "spin"] {
        let a = n.get(&format!("/config/{version}?key=A")).await;
        assert_eq!((a.status, a.body.as_str()), (200, "1"), "{version}");
        let a = n.get(&format!("/config/{version}?key=NOPE")).await;
        assert_eq!((a.status, a.body.as_str()), (404, "unset"), "{version}");
        let a = n.get(&format!("/config-all/{version}")).await;
        assert_eq!((a.status, a.body.as_str()), (200, "A=1\nB=two words\n"), "{version}");
    }
    // An actor reads them too, and a change is seen by the next request.
    assert_eq!(kv(&n, "/config?key=B").await, (200, "two words".into()));
    n.node.set_value(n.app, "B", "three").await.unwrap();
    assert_eq!(n.get("/config/rc1?key=B").await.body, "three");
    assert_eq!(kv(&n, "/config?key=B").await, (200, "three".into()));
    n.node.delete_value(n.app, "B").await.unwrap();
    assert_eq!(n.get("/config-all/draft").await.body, "A=1\n");
}

#[tokio::test]
async fn keyvalue_is_the_actors_own_storage_at_both_versions() {
    let n = node().await;
    for v in ["draft", "draft2"] {
        let key = format!("k-{v}");
        assert_eq!(kv(&n, &format!("/set?v={v}&key={key}&value=hello")).await, (200, "set".into()));
        assert_eq!(kv(&n, &format!("/get?v={v}&key={key}")).await, (200, "hello".into()));
        assert_eq!(kv(&n, &format!("/exists?v={v}&key={key}")).await, (200, "true".into()));
        // What it wrote is the actor's storage, key for key.
        assert_eq!(kv(&n, &format!("/storage?key={key}")).await, (200, "hello".into()));
        assert_eq!(kv(&n, &format!("/delete?v={v}&key={key}")).await, (200, "deleted".into()));
        assert_eq!(kv(&n, &format!("/get?v={v}&key={key}")).await, (404, "absent".into()));
        assert_eq!(kv(&n, &format!("/exists?v={v}&key={key}")).await, (200, "false".into()));
        assert_eq!(kv(&n, &format!("/storage?key={key}")).await.0, 404);

        // `""` and `default` are the actor's storage; there is no other.
        assert_eq!(kv(&n, &format!("/open?v={v}&store=")).await, (200, "ok".into()));
        assert_eq!(kv(&n, &format!("/open?v={v}&store=default")).await, (200, "ok".into()));
        assert_eq!(kv(&n, &format!("/open?v={v}&store=shared")).await, (500, "Error::NoSuchStore".into()));

        let (status, body) = kv(&n, &format!("/batch?v={v}")).await;
        assert_eq!(status, 200, "{body}");
        let batch: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(batch, json!({"got": [["a", "1"], null, ["b", "2"]], "a": false, "b": true}), "{v}");
    }
    // Each actor has its own.
    assert_eq!(n.get("/actor/kv/b/get?v=draft&key=b").await.status, 404);
    assert_eq!(kv(&n, "/get?v=draft2&key=b").await, (200, "2".into()));
}

#[tokio::test]
async fn counters_are_decimal_and_checked() {
    let n = node().await;
    assert_eq!(kv(&n, "/incr?v=draft&key=c&by=5").await, (200, "5".into()));
    assert_eq!(kv(&n, "/incr?v=draft&key=c&by=5").await, (200, "10".into()));
    // Storage and the other version read the same counter.
    assert_eq!(kv(&n, "/storage?key=c").await, (200, "10".into()));
    assert_eq!(kv(&n, "/incr?v=draft2&key=c&by=-13").await, (200, "-3".into()));
    // Below zero is no unsigned counter.
    let (status, body) = kv(&n, "/incr?v=draft&key=c&by=1").await;
    assert_eq!(status, 500);
    assert!(body.contains("`c` does not hold a decimal integer"), "{body}");
    // Overflow is an error, and the value stays.
    kv(&n, &format!("/set?v=draft&key=m&value={}", u64::MAX)).await;
    let (status, body) = kv(&n, "/incr?v=draft&key=m&by=1").await;
    assert_eq!((status, body.contains("incrementing `m` overflows")), (500, true), "{body}");
    assert_eq!(kv(&n, "/storage?key=m").await.1, u64::MAX.to_string());
    kv(&n, "/set?v=draft2&key=t&value=text").await;
    assert!(kv(&n, "/incr?v=draft2&key=t&by=1").await.1.contains("does not hold a decimal integer"));
}

#[tokio::test]
async fn compare_and_swap_holds_and_fails_as_it_should() {
    let n = node().await;
    let (status, body) = kv(&n, "/cas?v=draft2&key=x").await;
    assert_eq!(status, 200, "{body}");
    let steps: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(steps, json!({"seen": "1", "first": true, "failed_saw": "3", "second": true, "last": "5"}));
}

#[tokio::test]
async fn listing_follows_cursors_of_either_kind_to_the_end() {
    let n = node().await;
    assert_eq!(kv(&n, "/fill?v=draft2&n=2500").await, (200, "2500".into()));
    for v in ["draft", "draft2"] {
        let (status, body) = kv(&n, &format!("/keys?v={v}")).await;
        assert_eq!(status, 200, "{body}");
        let keys: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            keys,
            json!({"pages": [1000, 1000, 500], "count": 2500, "first": "k00000", "last": "k02499"}),
            "{v}"
        );
    }
    // Offsets cut pages where they fall, and one past the end is an empty
    // last page, not an error.
    for (start, pages, count, first) in [
        (1500, json!([500, 500]), 1000, json!("k01500")),
        (999, json!([1, 1000, 500]), 1501, json!("k00999")),
        (3000, json!([0]), 0, Value::Null),
    ] {
        let (status, body) = kv(&n, &format!("/keys?v=draft&start={start}")).await;
        assert_eq!(status, 200, "{body}");
        let keys: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((&keys["pages"], &keys["count"], &keys["first"]), (&pages, &json!(count), &first), "from {start}");
    }
}

#[tokio::test]
async fn keyvalue_writes_are_the_events_commit_and_under_its_limits() {
    let n = node().await;
    kv(&n, "/set?v=draft&key=t&value=before").await;
    // A trap after a write: nothing of the event is stored.
    assert_eq!(kv(&n, "/trap?v=draft2&key=t").await.0, 500);
    assert_eq!(kv(&n, "/get?v=draft&key=t").await, (200, "before".into()));
    assert_eq!(kv(&n, "/trap?v=draft&key=u").await.0, 500);
    assert_eq!(kv(&n, "/get?v=draft2&key=u").await.0, 404);
    // A value over the limit is the guest's error, with the reason.
    let (status, body) = kv(&n, "/big?v=draft&mb=2").await;
    assert_eq!(status, 500);
    assert!(body.starts_with("Error::Other(\"too large: "), "{body}");
    let key = "k".repeat(3000);
    let (status, body) = kv(&n, &format!("/set?v=draft2&key={key}&value=x")).await;
    assert_eq!(status, 500);
    assert!(body.contains("too large"), "{body}");

    // What was written survives the node.
    kv(&n, "/set?v=draft2&key=kept&value=yes").await;
    let n = n.restart(spec(BTreeMap::new())).await;
    assert_eq!(kv(&n, "/get?v=draft&key=kept").await, (200, "yes".into()));
}

#[tokio::test]
async fn a_guest_holds_so_many_handles_and_compare_and_swaps_at_most() {
    let n = node().await;
    // Each handle is host memory: 4,096 at most, past them the call traps
    // and the next event runs on a fresh instance.
    assert_eq!(kv(&n, "/hold?v=draft&n=4000").await, (200, "4000".into()));
    assert_eq!(kv(&n, "/hold?v=draft&n=4097").await.0, 500);
    assert_eq!(kv(&n, "/set?v=draft&key=after&value=ok").await, (200, "set".into()));
    // A compare-and-swap handle keeps a value: 16 at once.
    assert_eq!(
        kv(&n, "/cas-hold?v=draft2&n=20").await,
        (200, "16 then Error::Other(\"at most 16 compare-and-swap handles may be open at once\")".into())
    );
    assert_eq!(kv(&n, "/cas-hold?v=draft2&n=16").await, (200, "16 then again true".into()));
    // A batch names 1,000 keys at most, and answers 16 MiB at most: a key
    // named again is copied again.
    kv(&n, "/big?v=draft&mb=1").await;
    assert_eq!(kv(&n, "/get-many?v=draft&key=big&n=15").await, (200, "15".into()));
    let (status, body) = kv(&n, "/get-many?v=draft2&key=big&n=17").await;
    assert_eq!(status, 500);
    assert!(body.contains("get-many: the values are over 16777216 bytes together"), "{body}");
    let (status, body) = kv(&n, "/get-many?v=draft&key=nothing&n=1001").await;
    assert_eq!((status, body.contains("get-many: 1001 keys, over the limit of 1000")), (500, true), "{body}");
}

#[tokio::test]
async fn a_front_importing_keyvalue_is_refused_with_the_reason() {
    let n = node().await;
    let front = VersionSpec { front: Some(guests().kv_front.clone()), ..Default::default() };
    let Err(e) = n.node.deploy("t", "app", front).await else { panic!("a front importing wasi:keyvalue deployed") };
    assert!(matches!(e, DeployFailure::Front(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "front: component imports `wasi:keyvalue/store@0.2.0-draft`, which a front cannot have: \
         a front has no storage (an actor has its own)"
    );
    // The refused version changed nothing.
    assert_eq!(n.get("/env").await.status, 200);
}
