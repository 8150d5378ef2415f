//! Traces through the real binary: `wasmkeep serve` exporting OTLP to a
//! receiver of the test's (`wasmkeep_tests::otlp`), the shop example's
//! page as the request.

mod common;

use common::{Serve, cli, repo, signup};
use wasmkeep_tests::otlp::{Collector, Span};

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn example(name: &str) -> String {
    repo().join("docs/examples").join(name).display().to_string()
}

fn one<'a>(spans: &'a [Span], what: &str, test: impl Fn(&Span) -> bool) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| test(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:#?}\nof {spans:#?}");
    found[0]
}

/// The shop's page: the edge's span (a child of the client's), the
/// front's, one call-many span with three call spans under it, and the
/// three actors' event spans under their calls; all in the client's
/// trace, with their attributes.
#[tokio::test]
async fn the_shops_page_is_one_trace_from_the_edge_to_each_actor() {
    let collector = Collector::start().await;
    let data = tempfile::tempdir().unwrap();
    let endpoint = collector.endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let s = Serve::start_with(data.path(), &[], &env);
    let token = signup(&s, "alpha").await;
    let login = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(&s, login.path(), &["deploy", &example("shop"), "--token", &token], None);
    assert!(ok, "{err}");
    let client = reqwest::Client::new();
    let page = client
        .get(format!("http://{}/page/ann", s.public))
        .header("host", "shop.alpha.localhost")
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let spans =
        collector.trace(CLIENT_TRACE, |spans| spans.iter().filter(|s| s.name == "actor.event").count() >= 3).await;

    let edge = one(&spans, "the edge's span", |s| s.name == "GET" && s.kind == 2);
    assert_eq!(edge.parent, CLIENT_SPAN, "the client's traceparent is honoured");
    assert_eq!(edge.kind, 2, "server");
    assert_eq!(edge.attr("http.request.method"), Some("GET"));
    assert_eq!(edge.attr("url.path"), Some("/page/ann"));
    assert_eq!(edge.attr("server.address"), Some("shop.alpha.localhost"));
    assert_eq!(edge.attr("http.response.status_code"), Some("200"));
    assert_eq!((edge.attr("wasmkeep.tenant"), edge.attr("wasmkeep.app")), (Some("alpha"), Some("shop")));
    assert_eq!(edge.service, "wasmkeep");

    let front = one(&spans, "the front's span", |s| s.name == "front");
    assert_eq!(front.parent, edge.span_id);
    assert_eq!(front.attr("wasmkeep.front.outcome"), Some("ok"));

    let batch = one(&spans, "the call-many span", |s| s.name == "actors.call-many");
    assert_eq!(batch.parent, front.span_id);
    assert_eq!((batch.kind, batch.attr("wasmkeep.calls")), (3, Some("3")));

    for class in ["cart", "profile", "recommendations"] {
        let call = one(&spans, class, |s| s.name == "actors.call" && s.attr("wasmkeep.actor.class") == Some(class));
        assert_eq!(call.parent, batch.span_id, "{class}'s call is an entry of the batch");
        assert_eq!(call.kind, 3, "client");
        assert_eq!(call.attr("wasmkeep.actor.name"), Some("ann"));
        assert_eq!(call.attr("http.response.status_code"), Some("200"));
        let event = one(&spans, class, |s| s.name == "actor.event" && s.attr("wasmkeep.actor.class") == Some(class));
        assert_eq!(event.parent, call.span_id, "{class}'s event is its call's child");
        assert_eq!(event.kind, 2, "server");
        assert_eq!((event.attr("wasmkeep.tenant"), event.attr("wasmkeep.app")), (Some("alpha"), Some("shop")));
        assert_eq!(event.attr("wasmkeep.actor.name"), Some("ann"));
        assert_eq!(event.attr("wasmkeep.actor.woke"), Some("true"), "the first event wakes its actor");
        assert!(event.attr("wasmkeep.admission.wait_ms").is_some());
        assert_eq!(event.attr("http.response.status_code"), Some("200"));
        assert_eq!(event.status.0, 0, "{event:?}");
    }
    // A refused request: its spans fail with the refusal's name, nothing
    // of the request in it. The shop's classes are internal: a client
    // never reaches them.
    let refused_trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let refused = client
        .get(format!("http://{}/actor/cart/ann/secret-path", s.public))
        .header("host", "shop.alpha.localhost")
        .header("traceparent", format!("00-{refused_trace}-{CLIENT_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let failed = collector.trace(refused_trace, |s| s.iter().any(|s| s.name == "GET")).await;
    let edge_failed = one(&failed, "the refused request's span", |s| s.name == "GET");
    assert_eq!(edge_failed.status, (2, "internal".to_owned()), "{failed:#?}");
    assert_eq!(edge_failed.attr("http.response.status_code"), Some("403"));
    for span in &failed {
        assert!(!span.status.1.contains("secret"), "{span:?}");
    }

    // A commit is a child span of its event, with what it wrote.
    let commits: Vec<&Span> = spans.iter().filter(|s| s.name == "storage.commit").collect();
    for commit in &commits {
        let event = spans.iter().find(|s| s.span_id == commit.parent).expect("the commit's parent");
        assert_eq!(event.name, "actor.event");
        let keys: u64 = commit.attr("wasmkeep.storage.keys_written").unwrap().parse().unwrap();
        let bytes: u64 = commit.attr("wasmkeep.storage.bytes_written").unwrap().parse().unwrap();
        assert!(keys >= 1 && bytes >= 1, "{commit:?}");
    }
    // Every span of the request is in the client's trace: nothing else.
    assert_eq!(spans.len(), 9 + commits.len(), "{spans:#?}");
}

/// With `trust_traceparent = false`, a client's context is not taken: the
/// request starts a trace of its own, and the client's trace gets nothing.
#[tokio::test]
async fn a_node_that_does_not_trust_traceparent_starts_its_own_trace() {
    let collector = Collector::start().await;
    let data = tempfile::tempdir().unwrap();
    let endpoint = collector.endpoint();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("WASMKEEP_TELEMETRY__TRUST_TRACEPARENT", "false"),
    ];
    let s = Serve::start_with(data.path(), &[], &env);
    let token = signup(&s, "alpha").await;
    let login = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(&s, login.path(), &["deploy", &example("shop"), "--token", &token], None);
    assert!(ok, "{err}");
    let page = reqwest::Client::new()
        .get(format!("http://{}/page/bob", s.public))
        .header("host", "shop.alpha.localhost")
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let mut edge = None;
    for _ in 0..200 {
        let spans = collector.spans();
        if let Some(found) = spans.iter().find(|s| s.name == "GET" && s.attr("url.path") == Some("/page/bob")) {
            edge = Some(found.clone());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let edge = edge.expect("the page's edge span");
    assert_eq!(edge.parent, "", "a root: {edge:?}");
    assert_ne!(edge.trace_id, CLIENT_TRACE);
    let own =
        collector.trace(&edge.trace_id, |spans| spans.iter().filter(|s| s.name == "actor.event").count() >= 3).await;
    let events = own.iter().filter(|s| s.name == "actor.event").count();
    assert_eq!(events, 3, "the page's own trace holds its spans: {own:#?}");
    assert!(collector.spans().iter().all(|s| s.trace_id != CLIENT_TRACE));
}

/// A guest's outbound request is a client span under its event's, failed
/// by name when the egress policy refuses it (`serve` lets apps reach
/// public addresses only).
#[tokio::test]
async fn an_outbound_request_is_a_client_span_of_its_event() {
    use serde_json::json;
    let collector = Collector::start().await;
    let data = tempfile::tempdir().unwrap();
    let endpoint = collector.endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")];
    let s = Serve::start_with(data.path(), &[], &env);
    let token = signup(&s, "alpha").await;
    let bundle = json!({
        "manifest": {"classes": {"web": {"access": "open", "component": "web"}}},
        "components": {"web": common::b64(&wasmkeep_tests::guests().uses_http)},
    });
    assert_eq!(s.api("PUT", "/v1/apps/out", Some(&token), None).await.0, 201);
    let (status, text) =
        s.api_raw("POST", "/v1/apps/out/versions", Some(&token), Some(bundle.to_string().into_bytes())).await;
    assert_eq!(status, 201, "{text}");
    assert_eq!(s.api("POST", "/v1/apps/out/versions/1/activate", Some(&token), None).await.0, 200);
    let trace = "6bf92f3577b34da6a3ce929d0e0e4738";
    let answer = reqwest::Client::new()
        .get(format!("http://{}/actor/web/a/?url=http%3A%2F%2F127.0.0.1%3A9%2Fsecret", s.public))
        .header("host", "out.alpha.localhost")
        .header("traceparent", format!("00-{trace}-{CLIENT_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let spans = collector.trace(trace, |s| s.iter().any(|s| s.kind == 3)).await;
    // Named by its method, as the HTTP conventions name a client's span.
    let outbound = one(&spans, "the outbound request's span", |s| s.kind == 3 && s.name == "GET");
    let event = one(&spans, "its event", |s| s.name == "actor.event");
    assert_eq!(outbound.parent, event.span_id);
    assert_eq!(outbound.kind, 3, "client");
    assert_eq!(outbound.attr("server.address"), Some("127.0.0.1"));
    assert_eq!(outbound.attr("http.request.method"), Some("GET"));
    assert_eq!(outbound.status, (2, "denied".to_owned()));
}
