//! The metrics listener, scraped over HTTP as Prometheus would: the
//! families named in DESIGN §3.5 and seed 0025, and the queue depth per
//! actor class.

use std::sync::Arc;
use std::time::Duration;

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, guests, probe_classes, test_limits};

async fn scrape_url(n: &TestNode) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let sources: Vec<Arc<dyn wasmkeep_telemetry::Source>> = vec![Arc::new(n.node.clone())];
    tokio::spawn(wasmkeep_telemetry::serve(
        listener,
        sources,
        wasmkeep_telemetry::always_ready(),
        std::future::pending(),
    ));
    url
}

async fn scrape(n: &TestNode, url: &str) -> String {
    let a = n.send(n.client.get(format!("{url}/metrics"))).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    a.body
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[tokio::test]
async fn the_families_are_named_and_counted() {
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), required_values: vec![] };
    let n = TestNode::start(test_limits(), spec).await;
    let url = scrape_url(&n).await;
    let text = scrape(&n, &url).await;
    for line in [
        "# TYPE wasmkeep_front_requests_total counter",
        "wasmkeep_front_requests_total{outcome=\"ok\"} 0",
        "# TYPE wasmkeep_front_calls_total counter",
        "wasmkeep_front_calls_total{outcome=\"busy\"} 0",
        "# TYPE wasmkeep_forwards_total counter",
        "wasmkeep_forwards_total{kind=\"call\"} 0",
        "# TYPE wasmkeep_actor_queue_depth gauge",
    ] {
        assert!(has(&text, line), "{line:?} missing from\n{text}");
    }
    n.get("/hello").await;
    n.get("/many?to=open/a,open/b,bad&path=/peek").await;
    n.get("/trap").await;
    let text = scrape(&n, &url).await;
    assert!(has(&text, "wasmkeep_front_requests_total{outcome=\"ok\"} 2"), "{text}");
    assert!(has(&text, "wasmkeep_front_requests_total{outcome=\"guest_error\"} 1"), "{text}");
    assert!(has(&text, "wasmkeep_front_calls_total{outcome=\"ok\"} 2"), "{text}");
    assert!(has(&text, "wasmkeep_front_calls_total{outcome=\"invalid_address\"} 1"), "{text}");

    let a = n.send(n.client.get(format!("{url}/healthz"))).await;
    assert_eq!((a.status, a.body.as_str()), (200, "ok\n"));
    assert_eq!(n.send(n.client.get(format!("{url}/other"))).await.status, 404);
}

#[tokio::test]
async fn the_queue_depth_is_per_class_and_only_for_classes_that_exist() {
    let n = TestNode::start(
        Limits { ..test_limits() },
        VersionSpec { front: None, classes: probe_classes(), required_values: vec![] },
    )
    .await;
    let url = scrape_url(&n).await;
    // One event runs for a while; three wait behind it.
    let mut waiting = Vec::new();
    for path in ["/sleep?ms=1500", "/peek", "/peek", "/peek"] {
        let (c, u) = (n.client.clone(), n.url.clone());
        waiting
            .push(tokio::spawn(async move { c.get(format!("{u}/actor/open/a{path}")).send().await.unwrap().status() }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let junk = tokio::spawn({
        let (c, u) = (n.client.clone(), n.url.clone());
        async move { c.get(format!("{u}/actor/nosuch/a/")).send().await.unwrap().status() }
    });
    let text = scrape(&n, &url).await;
    assert!(has(&text, "wasmkeep_actor_queue_depth{tenant=\"t\",app=\"app\",class=\"open\"} 3"), "{text}");
    assert!(!text.contains("nosuch"), "{text}");
    for w in waiting {
        assert_eq!(w.await.unwrap(), 200);
    }
    assert_eq!(junk.await.unwrap(), 404);
    let text = scrape(&n, &url).await;
    assert!(!text.contains("class=\"open\"} 3"), "{text}");
}
