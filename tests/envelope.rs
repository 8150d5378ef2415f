//! What the envelope carries, end to end (issue 9): the deadline travels
//! with an event, so an event whose caller stopped waiting never starts;
//! and a refusal is answered once, the same through the public port as
//! through a front's call.

use std::time::{Duration, Instant};

use serde_json::Value;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, guests, probe_classes, test_limits};

fn spec(required_values: Vec<String>) -> VersionSpec {
    VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), required_values, ..Default::default() }
}

/// Starts a 2 s event on `open/busy` (it adds 100 to its count first) and
/// waits until it runs.
async fn keep_busy(n: &TestNode) -> tokio::task::JoinHandle<u16> {
    let (client, url) = (n.client.clone(), n.url.clone());
    let busy = tokio::spawn(async move {
        let r = client.get(format!("{url}/actor/open/busy/sleep?ms=2000")).send().await.unwrap();
        r.status().as_u16()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    busy
}

fn deadline_refusals(n: &TestNode) -> u64 {
    n.node.metrics().refusals.get(wasmkeep_core::RefusalReason::DeadlinePassed)
}

#[tokio::test]
async fn a_call_queued_past_its_deadline_times_out_and_never_runs() {
    // Every caller here waits at most 1 s (the call limit); the callee's
    // event runs 2 s.
    let n = TestNode::start(Limits { call_limit_secs: 1.0, ..test_limits() }, spec(vec![])).await;
    let busy = keep_busy(&n).await;
    // The front calls the busy actor: the call is queued behind the 2 s event.
    let started = Instant::now();
    let a = n.get("/call?to=open/busy&path=/count").await;
    let waited = started.elapsed();
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["error"], "Timeout", "{}", a.body);
    assert!(waited < Duration::from_millis(1600), "the caller gave up at its deadline, not after {waited:?}");
    assert_eq!(busy.await.unwrap(), 200);
    // The queued event reached the actor after its caller had gone: it was
    // refused, counted, and never ran (`/count` would have added one).
    assert!(wasmkeep_tests::eventually(Duration::from_secs(5), || deadline_refusals(&n) == 1).await);
    let peek = n.get("/actor/open/busy/peek").await.json();
    assert_eq!(peek["count"], 100, "{peek}");
    assert_eq!(peek["events"], 2, "the sleep and this peek, nothing between: {peek}");
}

#[tokio::test]
async fn an_outside_request_queued_past_its_deadline_is_504_and_never_runs() {
    let n = TestNode::start(Limits { call_limit_secs: 1.0, ..test_limits() }, spec(vec![])).await;
    let busy = keep_busy(&n).await;
    let a = n.get("/actor/open/busy/count").await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (504, "the actor could not take the request before its deadline\n"),
        "an event not started by its deadline is the edge's timeout"
    );
    assert_eq!(busy.await.unwrap(), 200);
    assert_eq!(deadline_refusals(&n), 1);
    let peek = n.get("/actor/open/busy/peek").await.json();
    assert_eq!((peek["count"].clone(), peek["events"].clone()), (Value::from(100), Value::from(2)), "{peek}");
}

#[tokio::test]
async fn an_event_that_starts_before_its_deadline_runs_to_its_end() {
    // The deadline bounds the wait, not the event: a 1.5 s event that
    // starts at once, with 1 s to start, answers.
    let n = TestNode::start(Limits { call_limit_secs: 1.0, ..test_limits() }, spec(vec![])).await;
    let a = n.get("/actor/open/long/sleep?ms=1500").await;
    assert_eq!((a.status, a.body.as_str()), (200, "slept"));
    assert_eq!(deadline_refusals(&n), 0);
}

/// What the front got from calling `to` at `path`: the status, the body,
/// and the answer's header names.
async fn through_a_front(n: &TestNode, to: &str, path: &str) -> (u16, String, Vec<String>) {
    let a = n.get(&format!("/call?to={to}&path={path}")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let r = a.json();
    let headers = r["headers"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_owned()).collect();
    (r["status"].as_u64().unwrap() as u16, r["body"].as_str().unwrap().to_owned(), headers)
}

#[tokio::test]
async fn a_refusal_has_the_same_answer_through_the_port_and_through_a_call() {
    let n = TestNode::start(test_limits(), spec(vec![])).await;
    let direct = n.get("/actor/nope/x/").await;
    let (status, body, headers) = through_a_front(&n, "nope/x", "/").await;
    assert_eq!((status, body.as_bytes()), (direct.status, direct.body.as_bytes()));
    assert_eq!((status, body.as_str()), (404, "no such actor class\n"));
    assert!(headers.contains(&"content-type".to_owned()));
    assert_eq!(direct.headers["content-type"], "text/plain; charset=utf-8");

    // A refusal with a Retry-After: with a required value unset, neither
    // the app's actors nor its front run, and both answer it alike.
    let n = TestNode::start(test_limits(), spec(vec!["GREETING".into()])).await;
    let direct = n.get("/actor/open/a/").await;
    let front = n.get("/call?to=open/a&path=/").await;
    for a in [&direct, &front] {
        assert_eq!((a.status, a.body.as_str()), (503, "app value GREETING is not set\n"));
        assert_eq!(a.headers["retry-after"], "10");
    }
}
