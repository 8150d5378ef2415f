//! The metrics listener, scraped over HTTP as Prometheus would: the
//! families named in docs/spec/actors-and-admission.md §8 and
//! docs/spec/calls.md §13, and the queue depth per actor class.

use std::time::Duration;

use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, guests, probe_classes, test_limits};

async fn scrape_url(n: &TestNode) -> String {
    wasmkeep_tests::metrics_listener(&n.node).await
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
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
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
        VersionSpec { front: None, classes: probe_classes(), ..Default::default() },
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

/// The page parses as the Prometheus text format, as a Prometheus parser
/// reads it: the families the spec names
/// (docs/spec/actors-and-admission.md §8, docs/spec/calls.md §13,
/// docs/spec/cluster.md §4) by their names and labels, and an app's own
/// series (its events by outcome, their durations, its wakes, its resident
/// actors, its guests' CPU) under its tenant and app only.
#[tokio::test]
async fn the_page_parses_as_prometheus_reads_it_with_each_apps_series() {
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    let n = TestNode::start(test_limits(), spec).await;
    let url = scrape_url(&n).await;
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    assert_eq!(n.get("/actor/open/b/trap-after-write").await.status, 500);
    assert_eq!(n.get("/hello").await.status, 200);
    let text = scrape(&n, &url).await;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("the page parses");
    let value = |metric: &str, labels: &[(&str, &str)]| -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
                prometheus_parse::Value::Summary(_) => f64::NAN,
            })
    };
    // The spec's names, exactly, with their labels.
    assert_eq!(value("wasmkeep_front_requests_total", &[("outcome", "ok")]), Some(1.0));
    assert_eq!(value("wasmkeep_front_calls_total", &[("outcome", "busy")]), Some(0.0));
    assert_eq!(value("wasmkeep_forwards_total", &[("kind", "handoff")]), Some(0.0));
    assert!(matches!(
        scrape.samples.iter().find(|s| s.metric == "wasmkeep_front_requests_total").map(|s| &s.value),
        Some(prometheus_parse::Value::Counter(_))
    ));
    let app = [("tenant", "t"), ("app", "app")];
    let with = |extra: (&'static str, &'static str)| [app[0], app[1], extra];
    assert_eq!(value("wasmkeep_events_total", &with(("outcome", "ok"))), Some(2.0));
    assert_eq!(value("wasmkeep_events_total", &with(("outcome", "trapped"))), Some(1.0));
    assert_eq!(value("wasmkeep_event_duration_seconds_count", &app), Some(3.0), "three events timed");
    assert_eq!(value("wasmkeep_actor_wakes_total", &app), Some(2.0), "a woke, then b");
    assert_eq!(value("wasmkeep_app_requests_total", &app), Some(4.0));
    assert!(value("wasmkeep_resident_actors", &app).unwrap() >= 1.0);
    assert!(value("wasmkeep_guest_cpu_seconds_total", &app).unwrap() > 0.0);
    assert_eq!(value("wasmkeep_pool_instances", &[("state", "size")]), Some(n.node.limits().actor_instances() as f64));
    assert!(value("wasmkeep_store_commit_seconds_count", &[]).unwrap() >= 2.0, "the counts' commits");
    // No actor's name is a label anywhere.
    assert!(scrape.samples.iter().all(|s| s.labels.values().all(|v| v.as_str() != "a" && v.as_str() != "b")), "{text}");
}

/// Every family `ops/` (the dashboard, the alert rules) names is one a node
/// exposes: on a node after some traffic, or, for those only a cluster or a
/// refusal makes, in the metrics table of docs/observability.md.
#[tokio::test]
async fn the_dashboard_and_the_alerts_name_only_families_that_exist() {
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    let n = TestNode::start(test_limits(), spec).await;
    let url = scrape_url(&n).await;
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    assert_eq!(n.get("/actor/open/b/trap-after-write").await.status, 500);
    assert_eq!(n.get("/hello").await.status, 200);
    // As `serve` does every few seconds.
    n.node.measure_storage().await;
    let page = scrape(&n, &url).await;
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let documented = std::fs::read_to_string(repo.join("docs/observability.md")).unwrap();
    let mut named = 0;
    for file in ["ops/grafana/wasmkeep.json", "ops/prometheus/alerts.yml"] {
        let text = std::fs::read_to_string(repo.join(file)).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("wasmkeep_") {
            rest = &rest[at..];
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            let name = &rest[..end];
            rest = &rest[end..];
            let family = ["_bucket", "_count", "_sum"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
            named += 1;
            let exposed = page.contains(&format!("# TYPE {family} "));
            // Families written once there is something to count: a peer,
            // a refusal, a dropped line, an open socket.
            let later = [
                "wasmkeep_peer_heartbeat_age_seconds",
                "wasmkeep_cluster_call_seconds",
                "wasmkeep_peer_rtt_seconds",
                "wasmkeep_quota_refusals_total",
                "wasmkeep_guest_log_lines_dropped_total",
                "wasmkeep_open_sockets",
            ]
            .contains(&family);
            assert!(
                exposed || (later && documented.contains(&format!("`{family}`"))),
                "{file} names {family}, which the node does not expose:\n{page}"
            );
        }
    }
    assert!(named > 20, "the files name the families: {named}");
}

/// What an app stores and its guests' outbound traffic, per tenant and
/// app: the storage as the store counts it once a commit marked the app
/// (the node asks off the request path), the egress as its guests send.
#[tokio::test]
async fn storage_and_egress_are_per_app() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    let n = TestNode::start(test_limits(), spec).await;
    let url = scrape_url(&n).await;
    let sample = |text: &str, name: &str| -> Option<f64> {
        let prefix = format!("{name}{{tenant=\"t\",app=\"app\"}} ");
        text.lines().find_map(|l| l.strip_prefix(prefix.as_str())?.parse().ok())
    };
    n.node.measure_storage().await;
    let before = scrape(&n, &url).await;
    assert_eq!(sample(&before, "wasmkeep_storage_bytes"), Some(0.0), "{before}");
    assert_eq!(sample(&before, "wasmkeep_egress_requests_total"), Some(0.0));
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    assert_eq!(
        sample(&scrape(&n, &url).await, "wasmkeep_storage_bytes"),
        Some(0.0),
        "measured off the request path, not at the commit"
    );
    n.node.measure_storage().await;
    let stored = sample(&scrape(&n, &url).await, "wasmkeep_storage_bytes").unwrap();
    assert!(stored > 0.0, "the counter's key and value: {stored}");

    // An upstream of the test's: two fetches of five bytes each.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let Ok(k) = conn.read(&mut buf).await else { return };
                    if k == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..k]);
                }
                let answer = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello";
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    for _ in 0..2 {
        let a = n.get(&format!("/fetch?url={}", wasmkeep_tests::enc(&upstream))).await;
        assert_eq!(a.status, 200, "{}", a.body);
    }
    let text = scrape(&n, &url).await;
    assert_eq!(sample(&text, "wasmkeep_egress_requests_total"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "wasmkeep_egress_bytes_total"), Some(10.0), "{text}");
}
