//! The front (docs/spec/actors-and-admission.md §8,
//! docs/spec/calls.md §12–§13): every path outside `/actor/`, one instance
//! per request in a slot, the request's wall, the header range both ways,
//! its calls as `_front/main` under the front's deadline and bounds, and
//! the metrics that count them.

use std::time::{Duration, Instant};

use serde_json::Value;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_core::metric_labels::{FrontCallOutcome, FrontRequestOutcome};
use wasmkeep_tests::{TestNode, enc, guests, probe_classes, test_limits};

fn spec() -> VersionSpec {
    VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() }
}

async fn node(limits: Limits) -> TestNode {
    TestNode::start(limits, spec()).await
}

/// The results of one batch made by the front.
async fn many(n: &TestNode, to: &[&str], paths: &[&str]) -> Vec<Value> {
    let a = n.get(&format!("/many?to={}&paths={}", to.join(","), enc(&paths.join("|")))).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.json().as_array().unwrap().clone()
}

fn front_calls(n: &TestNode, outcome: FrontCallOutcome) -> u64 {
    n.node.metrics().front_calls.get(outcome)
}

fn front_requests(n: &TestNode, outcome: FrontRequestOutcome) -> u64 {
    n.node.metrics().front_requests.get(outcome)
}

#[tokio::test]
async fn the_front_answers_every_path_outside_actor() {
    let n = node(test_limits()).await;
    let a = n.get("/").await;
    assert_eq!((a.status, a.body.as_str()), (200, "front"));
    assert_eq!(n.get("/hello").await.body, "hello");
    assert_eq!(n.get("/nothing/here").await.status, 404, "the front's own 404");
    let a = n.get("/echo?x=1").await.json();
    assert_eq!((a["method"].as_str(), a["uri"].as_str()), (Some("GET"), Some("/echo?x=1")));
    let a = n.send(n.client.post(format!("{}/echo", n.url)).body("posted")).await.json();
    assert_eq!(a["body"], "posted");
    // `/actor/` still reaches actors.
    assert_eq!(n.get("/actor/open/a/count").await.json()["count"], 1);
    assert_eq!(front_requests(&n, FrontRequestOutcome::Ok), 5);
}

#[tokio::test]
async fn an_app_without_a_front_answers_404_outside_actor() {
    let n = TestNode::start(test_limits(), VersionSpec { front: None, ..spec() }).await;
    let a = n.get("/").await;
    assert_eq!(a.status, 404);
    assert_eq!(a.body, "this app has no front; actors are at /actor/<class>/<name>/\n");
    assert_eq!(front_requests(&n, FrontRequestOutcome::NoFront), 1);
}

#[tokio::test]
async fn a_clients_header_range_never_reaches_the_front() {
    let n = node(test_limits()).await;
    let request = n
        .client
        .get(format!("{}/echo", n.url))
        .header("x-wasmkeep-caller", "t/_front/main")
        .header("X-Wasmkeep-Chain", "open/a")
        .header("x-wasmkeep-app", "t/app")
        .header("x-wasmkeepish", "kept")
        .header("x-other", "kept");
    let a = n.send(request).await.json();
    let names: Vec<&str> = a["headers"].as_array().unwrap().iter().map(|h| h[0].as_str().unwrap()).collect();
    assert!(!names.iter().any(|h| h.to_ascii_lowercase().starts_with("x-wasmkeep-")), "{names:?}");
    assert!(names.contains(&"x-other") && names.contains(&"x-wasmkeepish"), "{names:?}");
}

#[tokio::test]
async fn a_fronts_header_range_never_reaches_the_client() {
    let n = node(test_limits()).await;
    let a = n.get("/leak").await;
    assert_eq!((a.status, a.body.as_str()), (200, "leaky"));
    assert!(a.headers.keys().all(|h| !h.as_str().starts_with("x-wasmkeep-")), "{:?}", a.headers);
    assert_eq!(a.header("x-kept"), Some("1"));
}

#[tokio::test]
async fn the_front_calls_as_front_main_and_is_never_in_a_chain() {
    let n = node(test_limits()).await;
    let a = n.get("/call?to=internal/a&path=/whoami").await.json();
    assert_eq!(a["status"], 200, "an internal actor is created for an inside caller: {a}");
    let who: Value = serde_json::from_str(a["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["caller"], "t/_front/main", "the host's caller, not the guest's forgery");
    assert_eq!(who["chain"], "", "the front is never in a chain");
    assert_eq!(who["app"], "t/app");
    // One level down, the chain lists the actor the front called, not the front.
    let a = n.get(&format!("/call?to=existing/b&path={}", enc("/call?to=internal/c&path=/whoami"))).await.json();
    let inner: Value = serde_json::from_str(a["body"].as_str().unwrap()).unwrap();
    let who: Value = serde_json::from_str(inner["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["caller"], "t/existing/b");
    assert_eq!(who["chain"], "existing/b");
    // The callee's range is stripped from its answer.
    let a = n.get("/call?to=open/a&path=/framing").await.json();
    assert!(a["headers"].as_array().unwrap().iter().all(|h| !h.as_str().unwrap().starts_with("x-wasmkeep-")), "{a}");
    // An outside caller reaching an internal actor is still refused.
    assert_eq!(n.get("/actor/internal/a/whoami").await.status, 403);
}

#[tokio::test]
async fn a_fronts_call_errors_are_the_call_errors() {
    let limits = Limits { body_bytes: 1 << 20, ..test_limits() };
    let n = node(limits).await;
    assert_eq!(n.get("/call?to=no-slash").await.json()["error"], "InvalidAddress");
    assert_eq!(n.get("/call?to=open/a&mb=2").await.json()["error"], "TooLarge");
    let a = n.get("/call?to=open/a&path=/trap-after-write").await.json();
    assert_eq!(a["error"], "failed");
    let reason = a["reason"].as_str().unwrap();
    assert!(reason.starts_with("the callee failed: trapped: ") && reason.contains("traps on purpose"), "{reason}");
    // A refusal of admission is the answer HTTP would give.
    let a = n.get("/call?to=nosuch/a").await.json();
    assert_eq!(a["status"], 404);
    assert_eq!(front_calls(&n, FrontCallOutcome::InvalidAddress), 1);
    assert_eq!(front_calls(&n, FrontCallOutcome::TooLarge), 1);
    assert_eq!(front_calls(&n, FrontCallOutcome::Failed), 1);
    assert_eq!(front_calls(&n, FrontCallOutcome::Ok), 1);
}

#[tokio::test]
async fn a_full_mailbox_fails_a_fronts_call_as_callee_overloaded() {
    let limits = Limits { queue_per_actor: 1, ..test_limits() };
    let n = node(limits).await;
    // One event runs, one waits in the queue; the front's call finds it full.
    let busy = tokio::spawn({
        let (c, u) = (n.client.clone(), n.url.clone());
        async move { c.get(format!("{u}/actor/open/a/sleep?ms=1500")).send().await.unwrap().status() }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued = tokio::spawn({
        let (c, u) = (n.client.clone(), n.url.clone());
        async move { c.get(format!("{u}/actor/open/a/peek")).send().await.unwrap().status() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let a = n.get("/call?to=open/a&path=/peek").await.json();
    assert_eq!((a["error"].as_str(), a["reason"].as_str()), (Some("failed"), Some("callee overloaded")), "{a}");
    assert_eq!(busy.await.unwrap(), 200);
    assert_eq!(queued.await.unwrap(), 200);
}

#[tokio::test]
async fn a_fronts_call_waits_until_5_s_before_the_wall() {
    // A 5.8 s wall: calls may wait until 0.8 s after the request started.
    let limits = Limits { front_wall_secs: 5.8, ..test_limits() };
    let n = node(limits).await;
    let t = Instant::now();
    let a = n.get("/call?to=open/a&path=/sleep%3Fms%3D3000").await.json();
    assert_eq!(a["error"], "Timeout", "{a}");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(750) && took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(front_calls(&n, FrontCallOutcome::Timeout), 1);
    // The callee finishes its event and serves again.
    assert!(n.get("/actor/open/a/peek").await.status == 200);
}

#[tokio::test]
async fn a_fronts_call_waits_at_most_the_call_limit() {
    let limits = Limits { call_limit_secs: 0.5, ..test_limits() };
    let n = node(limits).await;
    let t = Instant::now();
    assert_eq!(n.get("/call?to=open/a&path=/sleep%3Fms%3D2000").await.json()["error"], "Timeout");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(450) && took < Duration::from_millis(1800), "{took:?}");
}

#[tokio::test]
async fn with_less_than_5_s_left_a_batch_times_out_at_once_but_for_invalid_addresses() {
    let limits = Limits { front_wall_secs: 5.0, ..test_limits() };
    let n = node(limits).await;
    let t = Instant::now();
    let r = many(&n, &["open/a", "bad", "open/b"], &["/count"]).await;
    assert_eq!(r[0]["error"], "Timeout");
    assert_eq!(r[1]["error"], "InvalidAddress");
    assert_eq!(r[2]["error"], "Timeout");
    assert!(t.elapsed() < Duration::from_millis(900), "at once: {:?}", t.elapsed());
    assert_eq!(n.get("/call?to=open/a&path=/count").await.json()["error"], "Timeout");
    assert_eq!(n.get("/actor/open/a/peek").await.json()["count"], 0, "nothing was started");
}

#[tokio::test]
async fn a_fronts_batch_keeps_the_answers_that_came_in_time() {
    let limits = Limits { front_wall_secs: 5.8, ..test_limits() };
    let n = node(limits).await;
    let r = many(&n, &["open/a", "open/b"], &["/peek", "/sleep?ms=3000"]).await;
    assert_eq!(r[0]["status"], 200);
    assert_eq!(r[1]["error"], "Timeout");
}

#[tokio::test]
async fn a_fronts_batch_calls_every_entry_at_once_in_input_order() {
    let n = node(test_limits()).await;
    let t = Instant::now();
    let r = many(&n, &["open/a", "open/b", "open/c"], &["/sleep?ms=600", "/sleep?ms=600", "/whoami"]).await;
    assert!(t.elapsed() < Duration::from_millis(1100), "concurrent: {:?}", t.elapsed());
    assert_eq!((r[0]["body"].as_str(), r[1]["body"].as_str()), (Some("slept"), Some("slept")));
    let who: Value = serde_json::from_str(r[2]["body"].as_str().unwrap()).unwrap();
    assert_eq!((who["caller"].as_str(), who["chain"].as_str()), (Some("t/_front/main"), Some("")));
    assert_eq!(front_calls(&n, FrontCallOutcome::Ok), 3, "each entry counts as a call");
}

#[tokio::test]
async fn a_fronts_batch_refused_as_a_whole_counts_once() {
    let n = node(test_limits()).await;
    let r = many(&n, &vec!["open/b"; 17], &["/count"]).await;
    assert_eq!(r.len(), 17);
    assert!(r.iter().all(|e| e["reason"] == "too many calls: at most 16 in one call-many"));
    assert_eq!(front_calls(&n, FrontCallOutcome::Failed), 1, "the batch counts once");
    assert_eq!(n.get("/actor/open/b/peek").await.json()["count"], 0);
    assert!(many(&n, &[], &[]).await.is_empty());
}

#[tokio::test]
async fn entries_to_one_actor_count_twice_against_the_per_actor_bound() {
    // 8 slots: at most 2 front calls wait on one actor.
    let limits = Limits { front_slots: 8, ..test_limits() };
    let n = node(limits).await;
    let r = many(&n, &["open/a", "open/a", "open/a", "open/b"], &["/sleep?ms=300"; 4]).await;
    let busy: Vec<_> = r.iter().filter(|e| e["error"] == "failed").collect();
    assert_eq!(busy.len(), 1, "{r:?}");
    assert_eq!(busy[0]["reason"], "front busy: too many front calls waiting on this actor");
    assert_eq!(r.iter().filter(|e| e["status"] == 200).count(), 3, "the others run: {r:?}");
    assert_eq!(front_calls(&n, FrontCallOutcome::Busy), 1);
    // Waits end with their calls.
    assert_eq!(n.node.front_calls_waiting(), 0);
    assert_eq!(many(&n, &["open/a", "open/a"], &["/peek"]).await.iter().filter(|e| e["status"] == 200).count(), 2);
}

#[tokio::test]
async fn the_fronts_calls_waiting_on_the_node_are_at_most_the_slots() {
    // 4 slots: at most 4 front calls wait on the node, 1 on one actor.
    let n = node(test_limits()).await;
    let to = ["open/a", "open/b", "open/c", "open/d", "open/e", "open/f"];
    let r = many(&n, &to, &["/sleep?ms=400"; 6]).await;
    let busy: Vec<_> = r.iter().filter(|e| e["error"] == "failed").collect();
    assert_eq!(busy.len(), 2, "{r:?}");
    assert!(busy.iter().all(|e| e["reason"] == "front busy: too many front calls waiting on this node"));
    assert_eq!(r.iter().filter(|e| e["body"] == "slept").count(), 4);
    assert_eq!(front_calls(&n, FrontCallOutcome::Busy), 2);
    assert_eq!(front_calls(&n, FrontCallOutcome::Ok), 4);

    // Single calls of other requests count against the same bound.
    let hold = tokio::spawn({
        let (c, u) = (n.client.clone(), n.url.clone());
        let url = format!("{u}/many?to=open/a,open/b,open/c,open/d&path=/sleep%3Fms%3D1000");
        async move { c.get(url).send().await.unwrap().text().await.unwrap() }
    });
    assert!(wasmkeep_tests::eventually(Duration::from_secs(5), || n.node.front_calls_waiting() == 4).await);
    let a = n.get("/call?to=open/z&path=/peek").await.json();
    assert_eq!(a["reason"], "front busy: too many front calls waiting on this node");
    let held: Value = serde_json::from_str(&hold.await.unwrap()).unwrap();
    assert!(held.as_array().unwrap().iter().all(|e| e["body"] == "slept"), "{held}");
    assert_eq!(n.get("/call?to=open/z&path=/peek").await.json()["status"], 200, "free again");
}

#[tokio::test]
async fn a_batch_runs_in_its_requests_own_slot() {
    let limits = Limits { front_slots: 2, front_slot_wait_secs: 0.1, ..test_limits() };
    let n = node(limits).await;
    let batch = tokio::spawn({
        let (c, u) = (n.client.clone(), n.url.clone());
        let url = format!("{u}/many?to=open/a,open/b,open/c&path=/sleep%3Fms%3D1000");
        async move { c.get(url).send().await.unwrap().text().await.unwrap() }
    });
    assert!(wasmkeep_tests::eventually(Duration::from_secs(5), || n.node.front_calls_waiting() == 2).await);
    assert_eq!(n.node.front_slots_in_use(), 1, "the batch's entries take no slot");
    assert_eq!(n.get("/hello").await.status, 200, "the other slot is free");
    let r: Value = serde_json::from_str(&batch.await.unwrap()).unwrap();
    // Two slots: at most two front calls wait on the node.
    assert_eq!(r.as_array().unwrap().iter().filter(|e| e["body"] == "slept").count(), 2, "{r}");
}

#[tokio::test]
async fn a_request_finding_no_free_slot_waits_then_gets_503() {
    let limits = Limits { front_slots: 2, front_slot_wait_secs: 0.3, ..test_limits() };
    let n = node(limits).await;
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let (c, u) = (n.client.clone(), n.url.clone());
            tokio::spawn(async move { c.get(format!("{u}/sleep?ms=1500")).send().await.unwrap().status() })
        })
        .collect();
    assert!(wasmkeep_tests::eventually(Duration::from_secs(5), || n.node.front_slots_in_use() == 2).await);
    let t = Instant::now();
    let a = n.get("/hello").await;
    assert_eq!(a.status, 503);
    assert_eq!(a.header("retry-after"), Some("1"));
    assert!(t.elapsed() >= Duration::from_millis(280), "it waited: {:?}", t.elapsed());
    assert_eq!(front_requests(&n, FrontRequestOutcome::Busy), 1);
    // A request that finds a slot freed within its wait is served.
    let waiter = tokio::spawn({
        let (c, u) = (n.client.clone(), n.url.clone());
        async move { c.get(format!("{u}/hello")).send().await.unwrap().status() }
    });
    for s in sleepers {
        assert_eq!(s.await.unwrap(), 200);
    }
    let _ = waiter.await.unwrap();
    assert!(wasmkeep_tests::eventually(Duration::from_secs(5), || n.node.front_slots_in_use() == 0).await);
    assert_eq!(n.get("/hello").await.status, 200);
}

#[tokio::test]
async fn a_front_past_its_wall_is_cut_and_a_trap_is_a_500() {
    let limits = Limits { front_wall_secs: 0.5, ..test_limits() };
    let n = node(limits).await;
    let t = Instant::now();
    let a = n.get("/loop").await;
    assert_eq!(a.status, 504);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let a = n.get("/sleep?ms=5000").await;
    assert_eq!(a.status, 504, "a front blocked in a host call is cut too");
    let a = n.get("/trap").await;
    assert_eq!(a.status, 500);
    assert!(!a.body.contains("panicked"), "no guest detail: {}", a.body);
    assert_eq!(front_requests(&n, FrontRequestOutcome::Timeout), 2);
    assert_eq!(front_requests(&n, FrontRequestOutcome::GuestError), 1);
    // Every slot came back.
    assert!(wasmkeep_tests::eventually(Duration::from_secs(5), || n.node.front_slots_in_use() == 0).await);
    assert_eq!(n.get("/hello").await.status, 200);
}

#[tokio::test]
async fn the_front_reads_the_apps_values() {
    let n = node(test_limits()).await;
    assert_eq!(n.get("/value?name=K").await.status, 404);
    n.node.set_value(n.app, "K", "v1").await.unwrap();
    assert_eq!(n.get("/value?name=K").await.body, "v1");
}

/// A node whose front streams its answers slowly, cut at a 1 s wall.
async fn dripping_node() -> TestNode {
    let spec = VersionSpec { front: Some(guests().raw_front.clone()), classes: vec![], ..Default::default() };
    TestNode::start(Limits { front_wall_secs: 1.0, ..test_limits() }, spec).await
}

#[tokio::test]
async fn an_answer_cut_at_the_wall_is_a_failure_the_client_sees_on_http1() {
    let n = dripping_node().await;
    for path in ["/drip?ms=50", "/drip?ms=50&len=1"] {
        let r = n.client.get(format!("{}{path}", n.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "the head went out before the wall");
        let read = r.bytes().await;
        assert!(read.is_err(), "{path}: a truncated answer must not end cleanly: {} bytes", read.unwrap().len());
    }
    // Chunked, by hand: no last chunk, and the connection closed.
    let addr = n.url.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(format!("GET /drip?ms=50 HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("transfer-encoding: chunked"), "{}", &text[..200]);
    assert!(!text.ends_with("0\r\n\r\n"), "no last chunk after a cut");
}

#[tokio::test]
async fn an_answer_cut_at_the_wall_is_a_reset_stream_on_http2() {
    let n = dripping_node().await;
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let r = h2.get(format!("{}/drip?ms=50", n.url)).send().await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.is_err(), "a truncated answer must not end cleanly");
    // The connection serves on.
    let r = h2.get(format!("{}/upload", n.url)).send().await.unwrap();
    assert_eq!((r.status(), r.text().await.unwrap()), (reqwest::StatusCode::OK, "0".to_owned()));
}
