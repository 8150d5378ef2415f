//! Admission (docs/spec/actors-and-admission.md §5): every rule with its
//! exact status, and its order.

use wasmkeep_actors::{EventError, Request, VersionSpec};
use wasmkeep_core::{Access, Caller, Chain, NameError, Origin, RawAddress, Refusal};
use wasmkeep_tests::{TestNode, class, eventually, guests, probe_classes, test_limits};

async fn node_with_values(required: &[&str]) -> TestNode {
    let spec = VersionSpec {
        front: None,
        classes: probe_classes(),
        required_values: required.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    TestNode::start(test_limits(), spec).await
}

#[tokio::test]
async fn an_open_actor_answers_and_counts() {
    let n = node_with_values(&[]).await;
    let a = n.get("/actor/open/a/count").await;
    assert_eq!((a.status, a.json()["count"].as_u64()), (200, Some(1)));
    let a = n.get("/actor/open/a/count").await;
    assert_eq!(a.json()["count"], 2);
    // Another name is another actor.
    assert_eq!(n.get("/actor/open/b/count").await.json()["count"], 1);
}

#[tokio::test]
async fn an_unknown_class_is_404() {
    let n = node_with_values(&[]).await;
    for path in ["/actor/nope/a/", "/actor/Open/a/", "/actor/_front/main/", "/actor/", "/actor/open%20x/a/"] {
        let a = n.get(path).await;
        assert_eq!((a.status, a.body.as_str()), (404, "no such actor class\n"), "{path}");
    }
}

#[tokio::test]
async fn an_invalid_name_is_400_with_the_reason() {
    let n = node_with_values(&[]).await;
    let long = "x".repeat(513);
    let cases = [
        ("/actor/open//count".to_string(), "actor name is empty"),
        ("/actor/open".to_string(), "actor name is empty"),
        ("/actor/open/a%0Ab/count".to_string(), "actor name holds a control character"),
        ("/actor/open/a%7Fb/".to_string(), "actor name holds a control character"),
        (format!("/actor/open/{long}/count"), "actor name is longer than 512 bytes"),
        ("/actor/open/%FF%FE/".to_string(), "actor name is not valid UTF-8"),
    ];
    for (path, reason) in cases {
        let a = n.get(&path).await;
        assert_eq!(a.status, 400, "{path}");
        assert_eq!(a.body.trim_end(), reason, "{path}");
    }
    // 512 bytes is still a name.
    assert_eq!(n.get(&format!("/actor/open/{}/count", "x".repeat(512))).await.status, 200);
}

#[tokio::test]
async fn names_may_hold_slashes_and_any_utf8() {
    let n = node_with_values(&[]).await;
    let a = n.get("/actor/open/a%2Fb%20%C3%A9/address").await;
    assert_eq!((a.status, a.body.as_str()), (200, "open/a/b é"));
    // `a/b` and `a` are different actors.
    n.get("/actor/open/a%2Fb/count").await;
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 0);
}

#[tokio::test]
async fn an_existing_class_does_not_create_for_outside_callers() {
    let n = node_with_values(&[]).await;
    let a = n.get("/actor/existing/a/count").await;
    assert_eq!((a.status, a.body.as_str()), (404, "no such actor\n"));
    // Still missing: the refusal created nothing.
    assert_eq!(n.get("/actor/existing/a/peek").await.status, 404);
}

#[tokio::test]
async fn an_internal_class_is_403_from_outside() {
    let n = node_with_values(&[]).await;
    let a = n.get("/actor/internal/a/count").await;
    assert_eq!((a.status, a.body.as_str()), (403, "actor class is internal\n"));
}

#[tokio::test]
async fn a_missing_required_value_is_503_with_retry_after() {
    let n = node_with_values(&["GREETING"]).await;
    let a = n.get("/actor/open/a/count").await;
    assert_eq!(a.status, 503);
    assert_eq!(a.body, "app value GREETING is not set\n");
    assert!(a.header("retry-after").is_some_and(|s| s.parse::<u32>().is_ok()));
    // Nothing ran: once set, the first event counts 1.
    n.node.set_value(n.app, "GREETING", "hello").await.unwrap();
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    let v = n.get("/actor/open/a/value?name=GREETING").await;
    assert_eq!((v.status, v.body.as_str()), (200, "hello"));
}

#[tokio::test]
async fn the_rules_apply_in_their_order() {
    let n = node_with_values(&["GREETING"]).await;
    // class before name
    assert_eq!(n.get("/actor/nope//").await.status, 404);
    // name before the early rule
    assert_eq!(n.get("/actor/internal//").await.status, 400);
    // the early rule before values
    assert_eq!(n.get("/actor/internal/a/").await.status, 403);
    // values before existence
    assert_eq!(n.get("/actor/existing/a/").await.status, 503);
    n.node.set_value(n.app, "GREETING", "x").await.unwrap();
    assert_eq!(n.get("/actor/existing/a/").await.status, 404);
}

#[tokio::test]
async fn capacity_waits_for_an_instance_then_refuses_with_503() {
    // One instance for actors: a second actor waits the admission wait,
    // then is refused; after the first hibernates, it gets the instance.
    let limits = wasmkeep_core::Limits {
        pool_instances: 2,
        front_slots: 1,
        admission_wait_secs: 0.3,
        idle_secs: 1.0,
        ..test_limits()
    };
    let spec =
        VersionSpec { front: None, classes: vec![class("open", Access::Open, &guests().probe)], ..Default::default() };
    let n = TestNode::start(limits, spec).await;
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    let started = std::time::Instant::now();
    let b = n.get("/actor/open/b/count").await;
    assert_eq!(b.status, 503);
    assert!(b.header("retry-after").is_some());
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    // `a` hibernates after its idle second, freeing the instance.
    assert!(eventually(std::time::Duration::from_secs(5), || n.node.resident_actors() == 0).await);
    assert_eq!(n.get("/actor/open/b/count").await.status, 200);
}

#[tokio::test]
async fn existence_is_judged_before_capacity() {
    let limits = wasmkeep_core::Limits { pool_instances: 2, front_slots: 1, admission_wait_secs: 0.2, ..test_limits() };
    let n = TestNode::start(limits, VersionSpec { front: None, classes: probe_classes(), ..Default::default() }).await;
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    // The pool is full, but a missing `existing` actor is 404, not 503.
    assert_eq!(n.get("/actor/existing/nobody/").await.status, 404);
    assert_eq!(n.get("/actor/open/b/").await.status, 503);
}

/// The origin of a call from the app's front.
fn front() -> Origin {
    Origin::Inside { caller: Caller::Front, chain: Chain::new() }
}

fn request(path: &str) -> Request {
    Request { method: "GET".into(), path: path.into(), headers: vec![], body: vec![] }
}

#[tokio::test]
async fn inside_callers_create_existing_actors_and_reach_internal_ones() {
    let n = node_with_values(&[]).await;
    let at = |a: &str| RawAddress::split(a).unwrap();
    // Outside: refused. Inside: created and served.
    assert_eq!(n.get("/actor/existing/e/count").await.status, 404);
    let r = n.node.request_to(n.app, at("existing/e"), front(), request("/count")).await.unwrap();
    assert_eq!(r.status, 200);
    // Created, it now exists for outside callers too.
    assert_eq!(n.get("/actor/existing/e/count").await.json()["count"], 2);
    let r = n.node.request_to(n.app, at("internal/i"), front(), request("/count")).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(n.get("/actor/internal/i/peek").await.status, 403);
    // Inside callers meet the other rules as outside ones do.
    let e = n.node.request_to(n.app, at("nope/x"), front(), request("/")).await.unwrap_err();
    assert_eq!(e, EventError::Refused(Refusal::NoSuchClass));
    let e = n.node.request_to(n.app, at("internal/a\u{1}"), front(), request("/")).await.unwrap_err();
    assert_eq!(e, EventError::Refused(Refusal::InvalidName(NameError::NameControl)));
}
