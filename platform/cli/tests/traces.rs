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

/// `wasmkeep serve` exporting its traces to a receiver of the test's
/// (`env` added to the export's variables), on data of its own.
async fn traced(extra: &[&str], env: &[(&str, &str)]) -> (Collector, tempfile::TempDir, Serve) {
    let collector = Collector::start().await;
    let data = tempfile::tempdir().unwrap();
    let endpoint = collector.endpoint();
    let mut all = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_BLRP_SCHEDULE_DELAY", "100"),
    ];
    all.extend_from_slice(env);
    let s = Serve::start_with(data.path(), extra, &all);
    (collector, data, s)
}

/// A `GET` of `path` at `host` on `s`'s port, in the client's trace `trace`
/// (sampled): its status.
async fn get_traced(s: &Serve, host: &str, path: &str, trace: &str) -> u16 {
    get_with_parent(s, host, path, &format!("00-{trace}-{CLIENT_SPAN}-01")).await
}

/// A `GET` with `traceparent` as given: its status.
async fn get_with_parent(s: &Serve, host: &str, path: &str, traceparent: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("http://{}{path}", s.public))
        .header("host", host)
        .header("traceparent", traceparent)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
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
    let (collector, _data, s) = traced(&[], &[]).await;
    let token = signup(&s, "alpha").await;
    let login = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(&s, login.path(), &["deploy", &example("shop"), "--token", &token], None);
    assert!(ok, "{err}");
    assert_eq!(get_traced(&s, "shop.alpha.localhost", "/page/ann", CLIENT_TRACE).await, 200);
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
    assert_eq!(get_traced(&s, "shop.alpha.localhost", "/actor/cart/ann/secret-path", refused_trace).await, 403);
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

    // A client's trace that is not sampled: no span of it is sent (nor
    // made past the edge's, which took the decision).
    let unsampled = "6cf92f3577b34da6a3ce929d0e0e4735";
    let unsampled_parent = format!("00-{unsampled}-{CLIENT_SPAN}-00");
    assert_eq!(get_with_parent(&s, "shop.alpha.localhost", "/page/cy", &unsampled_parent).await, 200);
    let after = "7cf92f3577b34da6a3ce929d0e0e4736";
    assert_eq!(get_traced(&s, "shop.alpha.localhost", "/page/cy", after).await, 200);
    collector.trace(after, |spans| spans.iter().filter(|s| s.name == "actor.event").count() >= 3).await;
    assert!(collector.spans().iter().all(|s| s.trace_id != unsampled), "an unsampled trace's spans were sent");
}

/// With `trust_traceparent = false`, a client's context is not taken: the
/// request starts a trace of its own, and the client's trace gets nothing.
#[tokio::test]
async fn a_node_that_does_not_trust_traceparent_starts_its_own_trace() {
    let (collector, _data, s) = traced(&[], &[("WASMKEEP_TELEMETRY__TRUST_TRACEPARENT", "false")]).await;
    let token = signup(&s, "alpha").await;
    let login = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(&s, login.path(), &["deploy", &example("shop"), "--token", &token], None);
    assert!(ok, "{err}");
    assert_eq!(get_traced(&s, "shop.alpha.localhost", "/page/bob", CLIENT_TRACE).await, 200);
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
    let (collector, _data, s) = traced(&[], &[]).await;
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
    assert_eq!(
        get_traced(&s, "out.alpha.localhost", "/actor/web/a/?url=http%3A%2F%2F127.0.0.1%3A9%2Fsecret", trace).await,
        200
    );
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

/// A socket is one span from its open to its close, in the trace of the
/// front that handed it off, with what crossed it counted and its close
/// code; its messages are no spans of their own.
#[tokio::test]
async fn a_socket_is_one_span_with_its_messages_counted() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let (collector, _data, s) = traced(&[], &[]).await;
    let token = signup(&s, "alpha").await;
    let login = tempfile::tempdir().unwrap();
    let (ok, _, err) = cli(&s, login.path(), &["deploy", &example("chat"), "--token", &token], None);
    assert!(ok, "{err}");
    let (ok, _, err) =
        cli(&s, login.path(), &["values", "set", "chat", "TOKEN_SECRET", "--token", &token], Some("a long secret\n"));
    assert!(ok, "{err}");
    let signed_in = reqwest::Client::new()
        .post(format!("http://{}/login", s.public))
        .header("host", "chat.alpha.localhost")
        .form(&[("user", "ann")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status().as_u16(), 200);
    let body: serde_json::Value = serde_json::from_str(&signed_in.text().await.unwrap()).unwrap();
    let user_token = body["token"].as_str().unwrap();
    let trace = "7bf92f3577b34da6a3ce929d0e0e4739";
    let mut request = format!("ws://{}/rooms/lobby/ws?token={user_token}", s.public).into_client_request().unwrap();
    request.headers_mut().insert("host", "chat.alpha.localhost".parse().unwrap());
    request.headers_mut().insert("traceparent", format!("00-{trace}-{CLIENT_SPAN}-01").parse().unwrap());
    let mut ws = tokio_tungstenite::connect_async(request).await.expect("the chat opens").0;
    let said = [r#"{"text":"one"}"#, r#"{"text":"two!"}"#];
    for text in said {
        ws.send(Message::text(text)).await.unwrap();
    }
    // The room sends each message back to its sender too.
    let mut out_bytes = 0;
    for _ in said {
        match tokio::time::timeout(std::time::Duration::from_secs(10), ws.next()).await.unwrap() {
            Some(Ok(Message::Text(t))) => out_bytes += t.len(),
            other => panic!("{other:?}"),
        }
    }
    ws.close(Some(CloseFrame { code: 4000.into(), reason: "bye".into() })).await.unwrap();
    while ws.next().await.is_some() {}

    let spans = collector.trace(trace, |s| s.iter().any(|s| s.name == "websocket")).await;
    let socket = one(&spans, "the socket's span", |s| s.name == "websocket");
    let front = one(&spans, "the front's span", |s| s.name == "front");
    assert_eq!(front.attr("wasmkeep.front.outcome"), Some("handoff"));
    assert_eq!(socket.parent, front.span_id, "the hand-off's socket is the front's child");
    assert_eq!(socket.kind, 2, "server");
    assert_eq!(socket.attr("wasmkeep.actor.class"), Some("room"));
    assert_eq!(socket.attr("wasmkeep.actor.name"), Some("lobby"));
    assert_eq!(socket.attr("wasmkeep.socket.messages_in"), Some("2"));
    let in_bytes: usize = said.iter().map(|t| t.len()).sum();
    assert_eq!(socket.attr("wasmkeep.socket.bytes_in"), Some(in_bytes.to_string().as_str()));
    assert_eq!(socket.attr("wasmkeep.socket.messages_out"), Some("2"));
    assert_eq!(socket.attr("wasmkeep.socket.bytes_out"), Some(out_bytes.to_string().as_str()));
    assert_eq!(socket.attr("wasmkeep.socket.close_code"), Some("4000"));
    // Nothing per message: the edge's request, the front, the socket,
    // and the room's open event at most.
    assert!(spans.iter().all(|s| s.name != "actor.event" || s.attr("url.path").is_some()), "{spans:#?}");
    assert!(spans.len() <= 4, "{spans:#?}");
}

/// Reads records from a tail's answer until `enough` holds of them.
async fn records_until(
    tail: &mut reqwest::Response,
    got: &mut Vec<serde_json::Value>,
    enough: impl Fn(&[serde_json::Value]) -> bool,
) {
    let mut pending = Vec::new();
    while !enough(got) {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(20), tail.chunk())
            .await
            .unwrap_or_else(|_| panic!("records in time; got {got:#?}"))
            .unwrap()
            .expect("the tail goes on");
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            got.push(serde_json::from_slice(&line[..at]).unwrap());
        }
    }
}

/// A guest's `println!` and `eprintln!` are records with its tenant, app,
/// actor and the trace and span of the event that wrote them: on the
/// node's output (JSON), in a tenant's live tail (the API and `wasmkeep
/// tail`), never in another tenant's; lines are cut at 16 KiB, and a
/// guest over its rate loses lines, counted.
#[tokio::test]
async fn a_guests_lines_reach_its_tenants_tail_with_their_trace() {
    let limits = tempfile::tempdir().unwrap();
    let file = limits.path().join("limits.toml");
    std::fs::write(&file, "log_lines_per_actor_per_second = 8\n").unwrap();
    let extra = ["--limits", file.to_str().unwrap(), "--metrics-listen", "127.0.0.1:0"];
    let (collector, _data, s) = traced(&extra, &[]).await;
    let (alpha, beta) = (signup(&s, "alpha").await, signup(&s, "beta").await);
    common::deploy(&s, &alpha, "p").await;
    common::deploy(&s, &beta, "p").await;
    let client = reqwest::Client::new();
    let follow = |token: &str, query: &str| {
        client.get(format!("{}/v1/apps/p/logs?follow=true{query}", s.api)).bearer_auth(token).send()
    };
    let mut alpha_tail = follow(&alpha, "").await.unwrap();
    assert_eq!(alpha_tail.status().as_u16(), 200);
    assert_eq!(alpha_tail.headers()["content-type"], "application/x-ndjson");
    let mut beta_tail = follow(&beta, "").await.unwrap();
    let mut only_b = follow(&alpha, "&class=probe&name=b").await.unwrap();

    let trace = "8bf92f3577b34da6a3ce929d0e0e4730";
    assert_eq!(
        get_traced(&s, "p.alpha.localhost", "/actor/probe/a/print?text=hello&err=oops&tail=unfinished", trace).await,
        200
    );
    let mut got = Vec::new();
    records_until(&mut alpha_tail, &mut got, |r| r.len() >= 3).await;
    let lines: Vec<(&str, &str)> =
        got.iter().map(|r| (r["stream"].as_str().unwrap(), r["line"].as_str().unwrap())).collect();
    assert_eq!(lines, [("stdout", "hello 0"), ("stderr", "oops"), ("stdout", "unfinished")]);
    let spans = collector.trace(trace, |s| s.iter().any(|s| s.name == "actor.event")).await;
    let event = one(&spans, "the event", |s| s.name == "actor.event");
    for r in &got {
        assert_eq!((r["tenant"].as_str(), r["app"].as_str()), (Some("alpha"), Some("p")));
        assert_eq!((r["class"].as_str(), r["name"].as_str()), (Some("probe"), Some("a")));
        assert_eq!(r["trace_id"].as_str(), Some(trace), "{r}");
        assert_eq!(r["span_id"].as_str(), Some(event.span_id.as_str()), "the line's span is its event's");
    }

    // The operator's collector gets them as OTLP log records, each in
    // its event's trace, stderr as an error.
    let records = collector.records_until(|r| r.iter().filter(|r| r.trace_id == trace).count() >= 3).await;
    let mut in_trace: Vec<_> = records.iter().filter(|r| r.trace_id == trace).collect();
    in_trace.sort_by_key(|r| r.body.clone());
    let bodies: Vec<(&str, i32, Option<&str>)> =
        in_trace.iter().map(|r| (r.body.as_str(), r.severity, r.attr("log.iostream"))).collect();
    assert_eq!(
        bodies,
        [("hello 0", 9, Some("stdout")), ("oops", 17, Some("stderr")), ("unfinished", 9, Some("stdout"))]
    );
    for r in in_trace {
        assert_eq!(r.span_id, event.span_id, "{r:?}");
        assert_eq!((r.attr("wasmkeep.tenant"), r.attr("wasmkeep.app")), (Some("alpha"), Some("p")), "{r:?}");
        assert_eq!((r.attr("wasmkeep.actor.class"), r.attr("wasmkeep.actor.name")), (Some("probe"), Some("a")));
        assert_eq!(r.service, "wasmkeep");
    }

    // Beta's app of the same name prints too: each tail has its own.
    let (status, _) = s.public("p.beta.localhost", "/actor/probe/a/print?text=beta-only").await;
    assert_eq!(status, 200);
    let mut beta_got = Vec::new();
    records_until(&mut beta_tail, &mut beta_got, |r| !r.is_empty()).await;
    assert_eq!(beta_got[0]["line"], "beta-only 0");
    assert_eq!(beta_got[0]["tenant"], "beta");
    // The filter: actor b's line only, though a's came first.
    assert_eq!(s.public("p.alpha.localhost", "/actor/probe/a/print?text=from-a").await.0, 200);
    assert_eq!(s.public("p.alpha.localhost", "/actor/probe/b/print?text=from-b").await.0, 200);
    let mut b_got = Vec::new();
    records_until(&mut only_b, &mut b_got, |r| !r.is_empty()).await;
    assert_eq!((b_got[0]["name"].as_str(), b_got[0]["line"].as_str()), (Some("b"), Some("from-b 0")));

    // A long line is its first 16 KiB, marked; over the rate, lines go,
    // are counted, and the next record says how many.
    assert_eq!(s.public("p.alpha.localhost", "/actor/probe/c/print?text=t&times=0&long=20000").await.0, 200);
    assert_eq!(s.public("p.alpha.localhost", "/actor/probe/d/print?text=burst&times=20").await.0, 200);
    let mut later = Vec::new();
    records_until(&mut alpha_tail, &mut later, |r| r.iter().filter(|r| r["name"] == "d").count() >= 8).await;
    let long = later.iter().find(|r| r["name"] == "c").unwrap();
    assert_eq!((long["line"].as_str().unwrap().len(), long["truncated"].as_bool()), (16 * 1024, Some(true)));
    assert_eq!(later.iter().filter(|r| r["name"] == "d").count(), 8);
    let dropped = s.metric("wasmkeep_guest_log_lines_dropped_total{tenant=\"alpha\"} ").await;
    assert_eq!(dropped, 12.0);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(s.public("p.alpha.localhost", "/actor/probe/d/print?text=after").await.0, 200);
    let mut after = Vec::new();
    records_until(&mut alpha_tail, &mut after, |r| r.iter().any(|r| r["name"] == "d")).await;
    let next = after.iter().find(|r| r["name"] == "d").unwrap();
    assert_eq!((next["line"].as_str(), next["dropped_before"].as_u64()), (Some("after 0"), Some(12)));
    let records = collector.records_until(|r| r.iter().any(|r| r.body == "after 0")).await;
    let after = records.iter().find(|r| r.body == "after 0").expect("the record after the drops");
    assert_eq!(after.attr("wasmkeep.log.dropped_before"), Some("12"), "{after:?}");
    let long = records.iter().find(|r| r.attr("wasmkeep.actor.name") == Some("c")).expect("the long line's record");
    assert_eq!((long.body.len(), long.attr("wasmkeep.log.truncated")), (16 * 1024, Some("true")));
    assert!(!records.iter().any(|r| r.body.contains("trapped")), "the node's own lines are not guests' records");

    // Refusals: another tenant's app is no app; a bad filter is one line.
    let (status, _) = s.api_raw("GET", "/v1/apps/q/logs", Some(&beta), None).await;
    assert_eq!(status, 404);
    let (status, text) = s.api_raw("GET", "/v1/apps/p/logs?name=a", Some(&alpha), None).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("class"), "{text}");
    assert_eq!(s.api_raw("GET", "/v1/apps/p/logs", None, None).await.0, 401);

    // The kept records, through the CLI: a person's lines with the trace.
    let login = tempfile::tempdir().unwrap();
    let (ok, out, err) = cli(&s, login.path(), &["tail", "p", "--no-follow", "--token", &alpha], None);
    assert!(ok, "{err}");
    let hello = out.lines().find(|l| l.contains("hello 0")).unwrap_or_else(|| panic!("{out}"));
    assert!(hello.contains("probe/a  stdout  hello 0") && hello.contains(&format!("trace={trace}")), "{hello}");
    assert!(!out.contains("beta-only"), "{out}");
    let (ok, out, _) = cli(&s, login.path(), &["tail", "p", "--no-follow", "--json", "--token", &beta], None);
    assert!(ok && out.contains("beta-only") && !out.contains("hello"), "{out}");

    // The node's own output: a JSON object per line, the record's fields.
    let log = s.log.lock().unwrap().clone();
    let record = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == "hello 0")
        .unwrap_or_else(|| panic!("the node's output: {log}"));
    assert_eq!(record["target"], "wasmkeep::guest");
    assert_eq!((record["tenant"].as_str(), record["app"].as_str()), (Some("alpha"), Some("p")));
    assert_eq!((record["class"].as_str(), record["name"].as_str()), (Some("probe"), Some("a")));
    assert_eq!(record["trace_id"].as_str(), Some(trace));
}

/// Each tenant's own export: a tenant's endpoint receives its apps' spans
/// with its headers, never another tenant's; the operator's export still
/// gets everything; the endpoint is checked against the egress policy
/// (a private or metadata address, a name resolving to loopback, are
/// refused); the headers' values are never shown; removing it stops it.
#[tokio::test]
async fn a_tenants_own_endpoint_gets_its_spans_and_no_one_elses() {
    use serde_json::json;
    let (alpha_collector, beta_collector) = (Collector::start().await, Collector::start().await);
    let env = [
        ("WASMKEEP_TELEMETRY__TENANT_EXPORT", "true"),
        // The test's collectors are on loopback: the operator lets tenants
        // name that address (and only that one).
        ("WASMKEEP_TELEMETRY__TENANT_EXPORT_HOSTS", "[\"127.0.0.1\"]"),
    ];
    let (operator, _data, s) = traced(&["--metrics-listen", "127.0.0.1:0"], &env).await;
    let (alpha, beta) = (signup(&s, "alpha").await, signup(&s, "beta").await);
    common::deploy(&s, &alpha, "p").await;
    common::deploy(&s, &beta, "p").await;

    // Refused endpoints, each with one line saying why.
    for (body, why) in [
        (json!({"endpoint": "http://169.254.169.254/"}), "not a public address"),
        (json!({"endpoint": "http://10.1.2.3:4318"}), "not a public address"),
        (json!({"endpoint": "http://localhost:4318"}), "resolves to no public address"),
        (json!({"endpoint": "ftp://127.0.0.1"}), "scheme"),
        (json!({"endpoint": alpha_collector.endpoint(), "headers": {"host": "x"}}), "own"),
        (json!({"endpoint": alpha_collector.endpoint(), "extra": 1}), "unknown field"),
    ] {
        let (status, answer) = s.api("PUT", "/v1/telemetry", Some(&alpha), Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(why) && !error.contains('\n'), "{body}: {error}");
    }
    assert_eq!(s.api("GET", "/v1/telemetry", Some(&alpha), None).await.0, 404);

    let set = |token: String, collector: String, secret: &'static str| {
        let s = &s;
        async move {
            let body = json!({"endpoint": collector, "headers": {"authorization": format!("Bearer {secret}")}});
            s.api("PUT", "/v1/telemetry", Some(&token), Some(body)).await
        }
    };
    let (status, shown) = set(alpha.clone(), alpha_collector.endpoint(), "alpha-secret").await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["headers"], json!(["authorization"]));
    assert!(!shown.to_string().contains("alpha-secret"), "{shown}");
    // beta sets its own through the CLI, as the docs show.
    let beta_cli = tempfile::tempdir().unwrap();
    let endpoint = beta_collector.endpoint();
    let beta_args = |args: &[&'static str]| -> Vec<String> {
        args.iter().map(|a| a.to_string()).chain(["--token".into(), beta.clone()]).collect()
    };
    let mut args = beta_args(&["telemetry", "set"]);
    args.extend([endpoint.clone(), "--header".into(), "authorization=Bearer beta-secret".into()]);
    let (ok, out, err) = cli(&s, beta_cli.path(), &strs(&args), None);
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("{endpoint}\theaders authorization\tspans exported 0")), "{out}");
    assert!(!out.contains("beta-secret"), "{out}");
    let (status, shown) = s.api("GET", "/v1/telemetry", Some(&alpha), None).await;
    assert_eq!((status, shown["endpoint"].as_str()), (200, Some(alpha_collector.endpoint().as_str())));
    assert!(!shown.to_string().contains("alpha-secret"));

    let (alpha_trace, beta_trace) = ("9af92f3577b34da6a3ce929d0e0e4731", "9bf92f3577b34da6a3ce929d0e0e4732");
    for (host, trace) in [("p.alpha.localhost", alpha_trace), ("p.beta.localhost", beta_trace)] {
        assert_eq!(get_traced(&s, host, "/actor/probe/a/count", trace).await, 200);
    }
    let has_event = |s: &[Span]| s.iter().any(|s| s.name == "actor.event");
    let alphas = alpha_collector.trace(alpha_trace, has_event).await;
    assert!(has_event(&alphas), "alpha's endpoint got its event: {alphas:#?}");
    assert!(alphas.iter().any(|s| s.name == "storage.commit"), "and its commit: {alphas:#?}");
    let betas = beta_collector.trace(beta_trace, has_event).await;
    assert!(has_event(&betas), "{betas:#?}");
    // The operator's export gets both; each tenant's gets its own only.
    assert!(has_event(&operator.trace(alpha_trace, has_event).await));
    assert!(has_event(&operator.trace(beta_trace, has_event).await));
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    for span in alpha_collector.spans() {
        assert_eq!(span.attr("wasmkeep.tenant"), Some("alpha"), "{span:?}");
    }
    for span in beta_collector.spans() {
        assert_eq!(span.attr("wasmkeep.tenant"), Some("beta"), "{span:?}");
    }
    assert!(alpha_collector.authorizations.lock().unwrap().iter().all(|a| a == "Bearer alpha-secret"));
    assert!(!alpha_collector.authorizations.lock().unwrap().is_empty());
    assert!(beta_collector.authorizations.lock().unwrap().iter().all(|a| a == "Bearer beta-secret"));
    let (_, shown) = s.api("GET", "/v1/telemetry", Some(&alpha), None).await;
    assert!(shown["spans"]["exported"].as_u64().unwrap() >= 2, "{shown}");
    assert!(s.metric("wasmkeep_tenant_spans_exported_total{tenant=\"alpha\"} ").await >= 2.0);

    // Removed: alpha's next spans go only to the operator's export.
    assert_eq!(s.api("DELETE", "/v1/telemetry", Some(&alpha), None).await.0, 204);
    assert_eq!(s.api("DELETE", "/v1/telemetry", Some(&alpha), None).await.0, 404);
    let before = alpha_collector.spans().len();
    let later = "9cf92f3577b34da6a3ce929d0e0e4733";
    assert_eq!(get_traced(&s, "p.alpha.localhost", "/actor/probe/a/count", later).await, 200);
    assert!(has_event(&operator.trace(later, has_event).await));
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(alpha_collector.spans().len(), before, "nothing after the removal");
    // beta's shown, then removed, through the CLI.
    let (ok, out, _) = cli(&s, beta_cli.path(), &strs(&beta_args(&["telemetry", "show", "--json"])), None);
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(ok && shown["endpoint"] == endpoint.as_str() && shown["spans"]["exported"].as_u64() >= Some(1), "{out}");
    let (ok, _, err) = cli(&s, beta_cli.path(), &strs(&beta_args(&["telemetry", "rm"])), None);
    assert!(ok && err.contains("no longer sent"), "{err}");
    let (ok, _, err) = cli(&s, beta_cli.path(), &strs(&beta_args(&["telemetry", "show"])), None);
    assert!(!ok && err.contains("no trace export is set"), "{err}");
    // A read token cannot set one.
    let (status, token) = s.api("POST", "/v1/tokens", Some(&beta), Some(json!({"scope": "read"}))).await;
    assert_eq!(status, 201, "{token}");
    let read = token["token"].as_str().unwrap().to_owned();
    assert_eq!(set(read, beta_collector.endpoint(), "x").await.0, 403);
}

/// Over gRPC (`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, the collector's base URL):
/// the same spans and records reach a gRPC receiver, headers included.
#[tokio::test]
async fn spans_and_records_go_over_grpc_when_asked() {
    let collector = Collector::start_grpc().await;
    let data = tempfile::tempdir().unwrap();
    let endpoint = collector.endpoint();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer grpc-secret"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_BLRP_SCHEDULE_DELAY", "100"),
    ];
    let s = Serve::start_with(data.path(), &[], &env);
    let alpha = signup(&s, "alpha").await;
    common::deploy(&s, &alpha, "p").await;
    let trace = "9bf92f3577b34da6a3ce929d0e0e4731";
    assert_eq!(get_traced(&s, "p.alpha.localhost", "/actor/probe/a/print?text=over-grpc", trace).await, 200);
    let spans = collector.trace(trace, |s| s.iter().any(|s| s.name == "actor.event")).await;
    let event = one(&spans, "the event", |s| s.name == "actor.event");
    assert_eq!(event.attr("wasmkeep.tenant"), Some("alpha"));
    let records = collector.records_until(|r| r.iter().any(|r| r.body == "over-grpc 0")).await;
    let record = records.iter().find(|r| r.body == "over-grpc 0").expect("the guest's line over gRPC");
    assert_eq!((record.trace_id.as_str(), record.span_id.as_str()), (trace, event.span_id.as_str()));
    assert!(collector.authorizations.lock().unwrap().iter().all(|a| a == "Bearer grpc-secret"));
    assert!(!collector.authorizations.lock().unwrap().is_empty(), "the headers' variable is read");
}

/// A protocol that is not built in stops `serve` with one line.
#[tokio::test]
async fn an_unknown_otlp_protocol_is_one_line() {
    let data = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmkeep"))
        .args(["serve", "--data"])
        .arg(data.path())
        .args(["--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().count() == 1 && err.contains("http/protobuf or grpc"), "{err}");
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
