//! `actors.call` between actors of one node (docs/spec/calls.md §1–§6): the
//! checks and their errors, the host's headers, inside admission,
//! deadlines, bounds, and the output gate.

use std::time::{Duration, Instant};

use serde_json::Value;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, probe_classes, test_limits};

async fn node(limits: Limits) -> TestNode {
    TestNode::start(limits, VersionSpec { front: None, classes: probe_classes(), ..Default::default() }).await
}

/// What actor `from` got when it called `to` at `path`.
async fn call(n: &TestNode, from: &str, to: &str, path: &str) -> Value {
    let path = path.replace('?', "%3F").replace('&', "%26").replace('=', "%3D");
    let a = n.get(&format!("/actor/{from}/call?to={to}&path={path}")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()
}

#[tokio::test]
async fn the_callee_sees_the_hosts_headers_and_never_the_callers() {
    let n = node(test_limits()).await;
    let r = call(&n, "open/a%2Fx", "open/b", "/whoami").await;
    assert_eq!(r["status"], 200);
    let who: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["caller"], "t/open/a%2Fx");
    assert_eq!(who["chain"], "open/a%2Fx");
    assert_eq!(who["app"], "t/app");
    // The caller's forged `x-wasmkeep-caller` was dropped.
    assert_eq!(who["callers"], 1);
    // An outside request carries none of them.
    let who = n.get("/actor/open/b/whoami").await.json();
    assert_eq!(
        (who["caller"].clone(), who["chain"].clone(), who["app"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
}

#[tokio::test]
async fn the_chain_grows_by_each_waiting_actor() {
    let n = node(test_limits()).await;
    let r = call(&n, "open/a", "open/b", "/call?to=open/c&path=/whoami").await;
    let inner: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    let who: Value = serde_json::from_str(inner["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["caller"], "t/open/b");
    assert_eq!(who["chain"], "open/a,open/b");
}

#[tokio::test]
async fn a_bad_address_is_invalid_address_at_once() {
    let n = node(test_limits()).await;
    for to in ["nonsense", "Open/x", "open/", "/x", "open/a%00"] {
        let r = call(&n, "open/a", to, "/").await;
        assert_eq!(r["error"], "InvalidAddress", "{to}");
    }
    // A valid address of no class is the callee's admission: 404.
    let r = call(&n, "open/a", "nope/x", "/").await;
    assert_eq!((r["status"].as_u64(), r["body"].as_str()), (Some(404), Some("no such actor class\n")));
}

#[tokio::test]
async fn a_body_over_the_limit_is_too_large() {
    let n = node(test_limits()).await;
    let a = n.get("/actor/open/a/call?to=open/b&path=/echo&mb=17").await.json();
    assert_eq!(a["error"], "TooLarge");
    let a = n.get("/actor/open/a/call?to=open/b&path=/echo&mb=15").await.json();
    assert_eq!(a["status"], 200);
}

#[tokio::test]
async fn calling_oneself_or_a_waiting_actor_is_reentrant() {
    let n = node(test_limits()).await;
    assert_eq!(call(&n, "open/a", "open/a", "/peek").await["error"], "Reentrant");
    // a → b → a: b's call names a, waiting in the chain.
    let r = call(&n, "open/a", "open/b", "/call?to=open/a&path=/peek").await;
    let inner: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(inner["error"], "Reentrant");
    // a → b → c is fine.
    let r = call(&n, "open/a", "open/b", "/call?to=open/c&path=/peek").await;
    let inner: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
    assert_eq!(inner["status"], 200);
}

#[tokio::test]
async fn a_call_is_inside_it_creates_existing_actors_and_reaches_internal_ones() {
    let n = node(test_limits()).await;
    assert_eq!(n.get("/actor/existing/x/peek").await.status, 404);
    assert_eq!(call(&n, "open/a", "existing/x", "/count").await["status"], 200);
    assert_eq!(n.get("/actor/existing/x/peek").await.json()["count"], 1);
    assert_eq!(call(&n, "open/a", "internal/y", "/count").await["status"], 200);
}

#[tokio::test]
async fn a_trap_in_the_callee_is_failed() {
    let n = node(test_limits()).await;
    let r = call(&n, "open/a", "open/b", "/trap-after-write").await;
    // The reason is what the callee's tenant reads in its tail: the panic.
    let reason = r["reason"].as_str().unwrap();
    assert_eq!(r["error"], "failed");
    assert!(reason.starts_with("the callee failed: trapped: panicked at probe/src/lib.rs:"), "{reason}");
    assert!(reason.contains("the probe traps on purpose"), "{reason}");
    assert_eq!(n.get("/actor/open/b/peek").await.json()["count"], 0);
}

#[tokio::test]
async fn a_call_times_out_at_the_callers_deadline_and_the_caller_answers() {
    // Wall 2 s: the call deadline is 1.6 s after the event's start.
    let n = node(Limits { wall_per_event_secs: 2.0, ..test_limits() }).await;
    let started = Instant::now();
    let r = call(&n, "open/a", "open/b", "/sleep?ms=1800").await;
    let took = started.elapsed();
    assert_eq!(r["error"], "Timeout");
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_millis(2000), "{took:?}");
    // The callee finished its own event within its wall and serves on.
    assert_eq!(n.get("/actor/open/b/peek").await.status, 200);
}

#[tokio::test]
async fn a_cycle_across_two_chains_ends_in_timeout_and_both_serve_again() {
    let n = node(Limits { wall_per_event_secs: 2.0, ..test_limits() }).await;
    let started = Instant::now();
    // Each event pauses 0.3 s before its call, so both are running when
    // they call: each waits on an actor busy waiting on the other. The
    // call whose event started first gives up at its deadline; its actor,
    // free again, may still answer the other before that one's deadline.
    let cross = |from: &'static str, to: &'static str| {
        let n = &n;
        async move {
            let a = n.get(&format!("/actor/{from}/call?to={to}&path=/peek&pause=300")).await;
            assert_eq!(a.status, 200, "{}", a.body);
            a.json()
        }
    };
    let (x, y) = tokio::join!(cross("open/a", "open/b"), cross("open/b", "open/a"));
    let outcomes = [&x, &y].map(|r| r["error"].as_str().map(str::to_owned).unwrap_or_else(|| r["status"].to_string()));
    assert!(outcomes.contains(&"Timeout".to_string()), "{outcomes:?}");
    assert!(outcomes.iter().all(|o| o == "Timeout" || o == "200"), "{outcomes:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "nothing stays stuck: {:?}", started.elapsed());
    assert_eq!(n.get("/actor/open/a/peek").await.status, 200);
    assert_eq!(n.get("/actor/open/b/peek").await.status, 200);
}

#[tokio::test]
async fn a_full_callee_is_failed_callee_overloaded() {
    let n = node(Limits { queue_per_actor: 1, ..test_limits() }).await;
    let busy = {
        let (c, u) = (n.client.clone(), n.url.clone());
        tokio::spawn(async move { c.get(format!("{u}/actor/open/b/sleep?ms=800")).send().await.unwrap().status() })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let queued = {
        let (c, u) = (n.client.clone(), n.url.clone());
        tokio::spawn(async move { c.get(format!("{u}/actor/open/b/peek")).send().await.unwrap().status() })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let r = call(&n, "open/a", "open/b", "/peek").await;
    assert_eq!((r["error"].as_str(), r["reason"].as_str()), (Some("failed"), Some("callee overloaded")));
    assert_eq!(busy.await.unwrap(), 200);
    assert_eq!(queued.await.unwrap(), 200);
}

#[tokio::test]
async fn no_capacity_for_the_callee_is_a_503_response() {
    let limits = Limits { pool_instances: 2, front_slots: 1, admission_wait_secs: 0.2, ..test_limits() };
    let n = node(limits).await;
    let r = call(&n, "open/a", "open/b", "/peek").await;
    assert_eq!((r["status"].as_u64(), r["body"].as_str()), (Some(503), Some("no capacity for this actor now\n")));
    assert!(r["headers"].as_array().unwrap().iter().any(|h| h == "retry-after"));
}

#[tokio::test]
async fn writes_before_a_call_are_durable_before_it_leaves() {
    let n = node(test_limits()).await;
    // The probe writes, calls, then traps: the write before the call stands.
    let a = n.get("/actor/open/a/call?to=open/b&then=trap").await;
    assert_eq!(a.status, 500);
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 1);
}

#[tokio::test]
async fn the_callees_answer_loses_the_hosts_range() {
    let n = node(test_limits()).await;
    let r = call(&n, "open/a", "open/b", "/framing").await;
    let headers: Vec<&str> = r["headers"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    assert!(headers.contains(&"content-type"), "{headers:?}");
    assert!(!headers.iter().any(|h| h.starts_with("x-wasmkeep-")), "{headers:?}");
}

#[tokio::test]
async fn an_answer_over_the_body_limit_is_too_large() {
    let n = node(Limits { body_bytes: 1 << 20, ..test_limits() }).await;
    // Through a call: `too-large`, as in a batch.
    let r = call(&n, "open/a", "open/b", "/blob?mb=2").await;
    assert_eq!(r["error"], "TooLarge", "{r}");
    // At `/actor/`: a failure the client sees, never 2 MiB.
    let a = n.get("/actor/open/b/blob?mb=2").await;
    assert_eq!((a.status, a.body.as_str()), (500, "the actor's answer is over 1048576 bytes\n"));
    // One byte under is whole.
    let a = n.get("/actor/open/b/answer?kb=1023").await;
    assert_eq!((a.status, a.body.len()), (200, 1023 * 1024));
}
