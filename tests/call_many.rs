//! `calls.call-many` from an actor (docs/spec/calls.md §7–§11): batch
//! bounds, bodies each way, order, concurrency, duplicates, per-entry
//! errors, one deadline, chains and sibling cycles.

use std::time::Duration;

use serde_json::Value;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, enc, probe_classes, test_limits};

async fn node(limits: Limits) -> TestNode {
    TestNode::start(limits, VersionSpec { front: None, classes: probe_classes(), ..Default::default() }).await
}

/// The results of one batch made by `from`.
async fn many(n: &TestNode, from: &str, to: &[&str], paths: &[&str], mb: usize) -> Vec<Value> {
    let url = format!("/actor/{from}/many?to={}&paths={}&mb={mb}", to.join(","), enc(&paths.join("|")));
    let a = n.get(&url).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.json().as_array().unwrap().clone()
}

async fn count(n: &TestNode, actor: &str) -> u64 {
    n.get(&format!("/actor/{actor}/peek")).await.json()["count"].as_u64().unwrap()
}

#[tokio::test]
async fn an_empty_batch_answers_an_empty_list() {
    let n = node(test_limits()).await;
    assert!(many(&n, "open/a", &[], &[], 0).await.is_empty());
}

#[tokio::test]
async fn more_than_16_entries_start_none_and_fail_every_entry() {
    let n = node(test_limits()).await;
    let to = vec!["open/b"; 17];
    let r = many(&n, "open/a", &to, &vec!["/count"; 17], 0).await;
    assert_eq!(r.len(), 17);
    for e in &r {
        assert_eq!(e["reason"], "too many calls: at most 16 in one call-many");
    }
    assert_eq!(count(&n, "open/b").await, 0, "no call was started");
    // 16 is allowed: duplicates are 16 events on the one callee.
    let r = many(&n, "open/a", &vec!["open/b"; 16], &vec!["/count"; 16], 0).await;
    assert!(r.iter().all(|e| e["status"] == 200));
    assert_eq!(count(&n, "open/b").await, 16);
}

#[tokio::test]
async fn requests_over_16_mib_together_start_none() {
    let n = node(test_limits()).await;
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/count", "/count"], 9).await;
    assert_eq!(r.iter().map(|e| e["error"].clone()).collect::<Vec<_>>(), vec!["TooLarge", "TooLarge"]);
    assert_eq!(count(&n, "open/b").await + count(&n, "open/c").await, 0);
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/count", "/count"], 7).await;
    assert!(r.iter().all(|e| e["status"] == 200));
}

#[tokio::test]
async fn answers_over_16_mib_together_fail_the_entry_that_overflows() {
    let n = node(test_limits()).await;
    let r = many(&n, "open/a", &["open/b", "open/c", "open/d"], &["/blob?mb=7"; 3], 0).await;
    let too_large = r.iter().filter(|e| e["error"] == "TooLarge").count();
    let whole = r.iter().filter(|e| e["len"] == 7 << 20).count();
    assert_eq!((too_large, whole), (1, 2), "{r:?}");
}

#[tokio::test]
async fn answers_come_in_input_order_one_per_entry() {
    let n = node(test_limits()).await;
    let to = ["open/d", "open/b", "existing/new", "open/c"];
    let r = many(&n, "open/a", &to, &["/address"; 4], 0).await;
    let bodies: Vec<&str> = r.iter().map(|e| e["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, to, "an `existing` callee is created for an inside caller");
}

#[tokio::test]
async fn entries_run_concurrently() {
    let n = node(test_limits()).await;
    let to = ["open/b", "open/c", "open/d", "open/e"];
    let r = many(&n, "open/a", &to, &["/interval?ms=200"; 4], 0).await;
    assert!(r.iter().all(|e| e["status"] == 200));
    // Each callee recorded when it ran: the four intervals overlap.
    wasmkeep_tests::intervals_overlap(&n, &to).await.unwrap();
}

#[tokio::test]
async fn errors_are_per_entry() {
    let n = node(test_limits()).await;
    let r = many(
        &n,
        "open/a",
        &["nonsense", "open/a", "open/b", "open/c"],
        &["/peek", "/peek", "/trap-after-write", "/count"],
        0,
    )
    .await;
    assert_eq!(r[0]["error"], "InvalidAddress");
    assert_eq!(r[1]["error"], "Reentrant");
    assert_eq!(r[2]["error"], "failed");
    let reason = r[2]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the callee failed: trapped: ") && reason.contains("traps on purpose"), "{reason}");
    assert_eq!(r[3]["status"], 200);
}

/// The results of one batch made by `from`, with a method per entry.
async fn many_with(n: &TestNode, from: &str, to: &[&str], paths: &[&str], methods: &[&str]) -> Vec<Value> {
    let url = format!(
        "/actor/{from}/many?to={}&paths={}&methods={}",
        to.join(","),
        enc(&paths.join("|")),
        enc(&methods.join("|"))
    );
    let a = n.get(&url).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.json().as_array().unwrap().clone()
}

#[tokio::test]
async fn an_answer_declaring_more_than_is_left_fails_before_taking_anything() {
    // A 1 MiB budget: the whole of it goes to one sibling only if the
    // answer that declared too much took nothing.
    let n = node(Limits { body_bytes: 1 << 20, ..test_limits() }).await;
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/answer?cl=2000000", "/answer?kb=1024"], 0).await;
    assert_eq!(r[0]["error"], "TooLarge", "judged on its Content-Length, not its empty body: {r:?}");
    assert_eq!((r[1]["status"].as_u64(), r[1]["len"].as_u64()), (Some(200), Some(1 << 20)));
    // A failed entry gives back what it would have taken.
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/trap-after-write", "/answer?kb=1024"], 0).await;
    assert!(r[0]["reason"].as_str().unwrap().starts_with("the callee failed: trapped: "), "{r:?}");
    assert_eq!(r[1]["len"], 1 << 20);
}

#[tokio::test]
async fn a_head_204_or_304_is_judged_on_what_arrives() {
    let n = node(Limits { body_bytes: 1 << 20, ..test_limits() }).await;
    let to = ["open/b", "open/c", "open/d", "open/e"];
    let paths =
        ["/answer?cl=2000000", "/answer?status=204&cl=2000000", "/answer?status=304&cl=2000000", "/answer?kb=1024"];
    let r = many_with(&n, "open/a", &to, &paths, &["HEAD", "GET", "GET", "GET"]).await;
    assert_eq!(r[0]["status"], 200, "a HEAD's answer has no body: {r:?}");
    assert_eq!(r[1]["status"], 204);
    assert_eq!(r[2]["status"], 304);
    assert_eq!(r[3]["len"], 1 << 20, "they took nothing");
    // The same 2 MB declared on a GET's 200 is too large.
    let r = many_with(&n, "open/a", &to[..1], &paths[..1], &["GET"]).await;
    assert_eq!(r[0]["error"], "TooLarge");
}

#[tokio::test]
async fn a_batch_entered_after_the_deadline_times_out_at_once_but_for_invalid_addresses() {
    // A 1 s wall: calls may wait until 0.8 s into the event.
    let n = node(Limits { wall_per_event_secs: 1.0, ..test_limits() }).await;
    let a = n.get("/actor/open/a/many?to=open/b,bad,open/c&path=/count&after=850").await;
    assert_eq!(a.status, 200, "{}", a.body);
    let r = a.json();
    assert_eq!(r[0]["error"], "Timeout");
    assert_eq!(r[1]["error"], "InvalidAddress");
    assert_eq!(r[2]["error"], "Timeout");
    assert_eq!(count(&n, "open/b").await + count(&n, "open/c").await, 0, "none was started");
}

#[tokio::test]
async fn one_deadline_for_the_batch_keeps_the_answers_that_came() {
    let n = node(Limits { wall_per_event_secs: 2.0, ..test_limits() }).await;
    let started = std::time::Instant::now();
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/sleep?ms=1800", "/count"], 0).await;
    assert_eq!(r[0]["error"], "Timeout");
    assert_eq!(r[1]["status"], 200);
    assert!(started.elapsed() < Duration::from_millis(2000));
}

#[tokio::test]
async fn entries_carry_the_single_calls_chain_and_siblings_are_not_in_it() {
    let n = node(test_limits()).await;
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/whoami", "/call?to=open/b&path=/whoami"], 0).await;
    let who: Value = serde_json::from_str(r[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["chain"], "open/a");
    // c calling its sibling b is legitimate: it waits, then runs.
    assert_eq!(r[1]["status"], 200, "{r:?}");
}

#[tokio::test]
async fn a_cycle_between_siblings_ends_in_timeout_and_all_serve_again() {
    let n = node(Limits { wall_per_event_secs: 2.0, ..test_limits() }).await;
    let r = many(&n, "open/a", &["open/b", "open/c"], &["/call?to=open/c&path=/peek", "/call?to=open/b&path=/peek"], 0)
        .await;
    assert_eq!((r[0]["error"].as_str(), r[1]["error"].as_str()), (Some("Timeout"), Some("Timeout")), "{r:?}");
    for a in ["open/a", "open/b", "open/c"] {
        assert_eq!(n.get(&format!("/actor/{a}/peek")).await.status, 200);
    }
}
