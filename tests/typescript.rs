//! The TypeScript SDK through the real node: every rule of `callMany`
//! (docs/spec/calls.md §7–§12) that the Rust SDK's tests check, made from a
//! TypeScript actor and from a TypeScript front, calling Rust actors (a
//! mixed app) and TypeScript ones; the head, storage, values and WebSockets
//! handed from a TypeScript front to a TypeScript actor.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::{Access, Limits};
use wasmkeep_tests::{TestNode, class, enc, guests, test_limits, ts_guests};

#[test]
fn the_sdks_own_tests_pass() {
    let sdk = wasmkeep_tests::typescript::sdk();
    let run = std::process::Command::new("npm").args(["test", "--silent"]).current_dir(&sdk).output().expect("npm");
    let output = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "npm test in platform/sdk/ts:\n{output}");
    assert!(output.contains("# fail 0") && !output.contains("# pass 0"), "{output}");
}

/// Who makes the batch: the TypeScript actor `ts/a`, or the front.
#[derive(Clone, Copy, Debug)]
enum From {
    Actor,
    Front,
}

const BOTH: [From; 2] = [From::Actor, From::Front];

impl From {
    fn prefix(self) -> &'static str {
        match self {
            From::Actor => "/actor/ts/a",
            From::Front => "",
        }
    }
}

/// The TypeScript front and actor (class `ts`) beside the Rust probe as
/// `open`, `existing` and `internal`.
async fn node(limits: Limits) -> TestNode {
    let probe = &guests().probe;
    let spec = VersionSpec {
        front: Some(ts_guests().front.clone()),
        classes: vec![
            class("ts", Access::Open, &ts_guests().probe),
            class("open", Access::Open, probe),
            class("existing", Access::Existing, probe),
            class("internal", Access::Internal, probe),
        ],
        ..Default::default()
    };
    TestNode::start(limits, spec).await
}

async fn many_query(n: &TestNode, from: From, query: &str) -> Vec<Value> {
    let a = n.get(&format!("{}/many?{query}", from.prefix())).await;
    assert_eq!(a.status, 200, "{from:?}: {}", a.body);
    a.json().as_array().unwrap().clone()
}

/// The results of one batch made by `from`.
async fn many(n: &TestNode, from: From, to: &[&str], paths: &[&str], mb: usize) -> Vec<Value> {
    many_query(n, from, &format!("to={}&paths={}&mb={mb}", to.join(","), enc(&paths.join("|")))).await
}

async fn count(n: &TestNode, actor: &str) -> u64 {
    n.get(&format!("/actor/{actor}/peek")).await.json()["count"].as_u64().unwrap()
}

fn errors(r: &[Value]) -> Vec<&str> {
    r.iter().map(|e| e["error"].as_str().unwrap_or("-")).collect()
}

#[tokio::test]
async fn an_empty_batch_answers_an_empty_list() {
    let n = node(test_limits()).await;
    for from in BOTH {
        assert!(many(&n, from, &[], &[], 0).await.is_empty(), "{from:?}");
    }
}

#[tokio::test]
async fn more_than_16_entries_start_none_and_fail_every_entry() {
    // A front's waits on one actor are a quarter of its slots at most.
    let n = node(Limits { front_slots: 64, pool_instances: 100, ..test_limits() }).await;
    for (from, callee) in [(From::Actor, "open/b"), (From::Front, "open/f")] {
        let r = many(&n, from, &[callee; 17], &["/count"; 17], 0).await;
        assert_eq!(r.len(), 17);
        for e in &r {
            assert_eq!(e["error"], "failed", "{from:?}");
            assert_eq!(e["reason"], "too many calls: at most 16 in one call-many", "{from:?}");
        }
        assert_eq!(count(&n, callee).await, 0, "{from:?}: no call was started");
        let r = many(&n, from, &[callee; 16], &["/count"; 16], 0).await;
        assert!(r.iter().all(|e| e["status"] == 200), "{from:?}: {r:?}");
        assert_eq!(count(&n, callee).await, 16, "{from:?}: duplicates are 16 events");
    }
}

#[tokio::test]
async fn requests_over_16_mib_together_start_none() {
    let n = node(test_limits()).await;
    for from in BOTH {
        let r = many(&n, from, &["open/b", "open/c"], &["/count", "/count"], 9).await;
        assert_eq!(errors(&r), ["too-large", "too-large"], "{from:?}");
        let r = many(&n, from, &["open/b", "open/c"], &["/count", "/count"], 7).await;
        assert!(r.iter().all(|e| e["status"] == 200), "{from:?}: {r:?}");
    }
    assert_eq!(count(&n, "open/b").await + count(&n, "open/c").await, 4, "only the batches within the limit ran");
}

#[tokio::test]
async fn answers_over_16_mib_together_fail_the_entry_that_overflows() {
    let n = node(test_limits()).await;
    for from in BOTH {
        let r = many(&n, from, &["open/b", "open/c", "open/d"], &["/blob?mb=7"; 3], 0).await;
        let too_large = r.iter().filter(|e| e["error"] == "too-large").count();
        let whole = r.iter().filter(|e| e["len"] == 7 << 20).count();
        assert_eq!((too_large, whole), (1, 2), "{from:?}: {r:?}");
    }
}

#[tokio::test]
async fn answers_come_in_input_order_one_per_entry() {
    let n = node(test_limits()).await;
    for from in BOTH {
        let to = ["open/d", "ts/b", "existing/new", "open/c"];
        let r = many(&n, from, &to, &["/address"; 4], 0).await;
        let bodies: Vec<&str> = r.iter().map(|e| e["body"].as_str().unwrap()).collect();
        assert_eq!(bodies, to, "{from:?}: an `existing` callee is created for an inside caller");
    }
}

#[tokio::test]
async fn entries_run_concurrently() {
    let n = node(test_limits()).await;
    for (from, to) in [
        (From::Actor, ["open/b", "open/c", "open/d", "open/e"]),
        (From::Front, ["open/f", "open/g", "open/h", "open/i"]),
    ] {
        let r = many(&n, from, &to, &["/interval?ms=200"; 4], 0).await;
        assert!(r.iter().all(|e| e["status"] == 200), "{from:?}: {r:?}");
        if let Err(e) = wasmkeep_tests::intervals_overlap(&n, &to).await {
            panic!("{from:?}: {e}");
        }
    }
}

#[tokio::test]
async fn errors_are_per_entry_and_never_thrown() {
    let n = node(test_limits()).await;
    let r = many(
        &n,
        From::Actor,
        &["nonsense", "ts/a", "open/b", "open/c"],
        &["/peek", "/peek", "/trap-after-write", "/count"],
        0,
    )
    .await;
    assert_eq!(errors(&r[..3]), ["invalid-address", "reentrant", "failed"]);
    let reason = r[2]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the callee failed: trapped: ") && reason.contains("traps on purpose"), "{reason}");
    assert_eq!(r[3]["status"], 200);
    // From the front: an internal class is reachable, a missing one is not,
    // and a TypeScript callee that throws fails its entry alone.
    let r = many(
        &n,
        From::Front,
        &["nonsense", "internal/x", "ts/b", "open/c"],
        &["/peek", "/peek", "/trap-after-write", "/count"],
        0,
    )
    .await;
    assert_eq!(r[0]["error"], "invalid-address");
    assert_eq!(r[1]["status"], 200);
    assert_eq!(r[2]["error"], "failed");
    let reason = r[2]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the callee failed: trapped: "), "{reason}");
    assert_eq!(r[3]["status"], 200);
    assert_eq!(count(&n, "ts/b").await, 0, "the throwing event stored nothing");
}

#[tokio::test]
async fn an_answer_declaring_more_than_is_left_fails_before_taking_anything() {
    let n = node(Limits { body_bytes: 1 << 20, ..test_limits() }).await;
    for from in BOTH {
        let r = many(&n, from, &["open/b", "open/c"], &["/answer?cl=2000000", "/answer?kb=1024"], 0).await;
        assert_eq!(r[0]["error"], "too-large", "{from:?}: {r:?}");
        assert_eq!((r[1]["status"].as_u64(), r[1]["len"].as_u64()), (Some(200), Some(1 << 20)), "{from:?}");
    }
}

#[tokio::test]
async fn a_head_204_or_304_is_judged_on_what_arrives() {
    let n = node(Limits { body_bytes: 1 << 20, ..test_limits() }).await;
    let paths =
        ["/answer?cl=2000000", "/answer?status=204&cl=2000000", "/answer?status=304&cl=2000000", "/answer?kb=1024"];
    let query =
        format!("to=open/b,open/c,open/d,open/e&paths={}&methods={}", enc(&paths.join("|")), enc("HEAD|GET|GET|GET"));
    for from in BOTH {
        let r = many_query(&n, from, &query).await;
        assert_eq!(r[0]["status"], 200, "{from:?}: a HEAD's answer has no body: {r:?}");
        assert_eq!(r[1]["status"], 204, "{from:?}");
        assert_eq!(r[2]["status"], 304, "{from:?}");
        assert_eq!(r[3]["len"], 1 << 20, "{from:?}: they took nothing");
    }
}

#[tokio::test]
async fn a_batch_entered_after_the_deadline_times_out_at_once_but_for_invalid_addresses() {
    // An actor's calls wait until 0.8 s into a 1 s event; a front's until
    // 5 s before its 6 s wall ends.
    let n = node(Limits { wall_per_event_secs: 1.0, front_wall_secs: 6.0, ..test_limits() }).await;
    for (from, after) in [(From::Actor, 850), (From::Front, 1100)] {
        let r = many_query(&n, from, &format!("to=open/b,bad,open/c&path=/count&after={after}")).await;
        assert_eq!(errors(&r), ["timeout", "invalid-address", "timeout"], "{from:?}");
    }
    assert_eq!(count(&n, "open/b").await + count(&n, "open/c").await, 0, "none was started");
}

#[tokio::test]
async fn one_deadline_for_the_batch_keeps_the_answers_that_came() {
    let n = node(Limits { wall_per_event_secs: 2.0, front_wall_secs: 7.0, ..test_limits() }).await;
    for from in BOTH {
        let started = std::time::Instant::now();
        let r = many(&n, from, &["open/b", "open/c"], &["/sleep?ms=1800", "/count"], 0).await;
        assert_eq!(r[0]["error"], "timeout", "{from:?}: {r:?}");
        assert_eq!(r[1]["status"], 200, "{from:?}");
        assert!(started.elapsed() < Duration::from_millis(2500), "{from:?}");
    }
}

#[tokio::test]
async fn entries_carry_the_single_calls_chain_and_siblings_are_not_in_it() {
    let n = node(test_limits()).await;
    for (from, chain) in [(From::Actor, "ts/a"), (From::Front, "")] {
        let r = many(&n, from, &["open/b", "open/c"], &["/whoami", "/call?to=open/b&path=/whoami"], 0).await;
        let who: Value = serde_json::from_str(r[0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(who["chain"], chain, "{from:?}");
        assert_eq!(r[1]["status"], 200, "{from:?}: {r:?}");
    }
}

#[tokio::test]
async fn a_cycle_between_siblings_ends_in_timeout_and_all_serve_again() {
    // The batch's deadline comes before its callees' own: 1.6 s into an
    // actor's 2 s event, 1.5 s into the front's 6.5 s wall.
    let n = node(Limits { wall_per_event_secs: 2.0, front_wall_secs: 6.5, ..test_limits() }).await;
    for from in BOTH {
        let r = many(&n, from, &["open/b", "open/c"], &["/call?to=open/c&path=/peek", "/call?to=open/b&path=/peek"], 0)
            .await;
        assert_eq!(errors(&r), ["timeout", "timeout"], "{from:?}: {r:?}");
        for a in ["ts/a", "open/b", "open/c"] {
            assert_eq!(n.get(&format!("/actor/{a}/peek")).await.status, 200, "{from:?}");
        }
    }
}

#[tokio::test]
async fn a_typescript_actor_keeps_storage_reads_the_head_and_values() {
    let n = node(test_limits()).await;
    for i in 1..=3 {
        assert_eq!(n.get("/actor/ts/a/count").await.json()["count"], i);
    }
    // Storage outlives the instance: a new node on the same data.
    let n = n
        .restart(VersionSpec {
            front: Some(ts_guests().front.clone()),
            classes: vec![class("ts", Access::Open, &ts_guests().probe)],
            ..Default::default()
        })
        .await;
    assert_eq!(n.get("/actor/ts/a/peek").await.json(), json!({"count": 3, "events": 1}));

    // A client is no caller; the front is, whatever header it forges.
    assert_eq!(n.get("/actor/ts/a/whoami").await.json()["caller"], Value::Null);
    let a = n.get(&format!("/call?to=ts/b&path={}", enc("/whoami"))).await.json();
    let who: Value = serde_json::from_str(a["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["caller"], json!({"tenant": "t", "front": true}));
    assert_eq!(who["chain"], json!([]));
    // An actor calling another: the caller and the chain name it.
    let a = n.get(&format!("/actor/ts/a/call?to=ts/b&path={}&mb=1", enc("/whoami"))).await.json();
    let who: Value = serde_json::from_str(a["body"].as_str().unwrap()).unwrap();
    assert_eq!(who["caller"], json!({"tenant": "t", "front": false, "actor": {"class": "ts", "name": "a"}}));
    assert_eq!(who["chain"], json!([{"class": "ts", "name": "a"}]));
    assert_eq!((who["method"].as_str(), who["body"].as_u64()), (Some("POST"), Some(1 << 20)));

    assert_eq!(n.get("/actor/ts/a/value?name=GREETING").await.body, "unset");
}

#[tokio::test]
async fn the_typescript_front_answers_echoes_and_fails_cleanly() {
    let n = node(test_limits()).await;
    let a = n.get("/somewhere").await;
    assert_eq!((a.status, a.body.as_str()), (200, "hello from the TypeScript front at /somewhere\n"));
    let a = n.send(n.client.put(format!("{}/echo", n.url)).body("a body")).await;
    assert_eq!((a.status, a.body.as_str(), a.header("x-method")), (200, "a body", Some("PUT")));
    let a = n.get("/throw").await;
    assert_eq!((a.status, a.body.as_str()), (500, "internal error\n"));
    n.node.set_value(n.app, "GREETING", "hi").await.unwrap();
    assert_eq!(n.get("/value?name=GREETING").await.body, "hi");
    assert_eq!(n.get("/actor/ts/a/value?name=GREETING").await.body, "hi");
}

#[tokio::test]
async fn typescript_guests_fetch_through_the_hosts_egress() {
    let n = node(test_limits()).await;
    let target = format!("{}/fetched", n.url);
    for from in ["/actor/ts/a", ""] {
        let a = n.get(&format!("{from}/fetch?url={}", enc(&target))).await;
        assert_eq!(a.status, 200, "{from}: {}", a.body);
        assert_eq!(a.json(), json!({"status": 200, "body": "hello from the TypeScript front at /fetched\n"}), "{from}");
    }
    // A public-only policy refuses loopback before connecting: the guest
    // sees fetch fail, and nothing reaches the listener.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let target = format!("http://{}/", listener.local_addr().unwrap());
    let n = TestNode::start_with_egress(
        test_limits(),
        VersionSpec { classes: vec![class("ts", Access::Open, &ts_guests().probe)], ..Default::default() },
        wasmkeep_core::egress::EgressPolicy::Public { allowed_hosts: None },
    )
    .await;
    let a = n.get(&format!("/actor/ts/a/fetch?url={}", enc(&target))).await.json();
    assert_eq!(a, json!({"error": "NetworkError when attempting to fetch resource"}));
    assert!(listener.accept().is_err(), "no connection was made");
}

/// `wasm` with a custom section holding `payload` appended: the same
/// component under another hash, so no compiled cache has it.
fn renamed(wasm: &[u8], payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let name = b"wasmkeep-test";
    let mut section = Vec::new();
    leb(name.len(), &mut section);
    section.extend_from_slice(name);
    section.extend_from_slice(payload);
    let mut out = wasm.to_vec();
    out.push(0);
    leb(section.len(), &mut out);
    out.extend(section);
    out
}

#[tokio::test]
async fn compiling_a_large_component_holds_up_no_request() {
    let n = node(test_limits()).await;
    assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    // A JavaScript component nobody compiled yet: seconds of compiling.
    let stamp = format!("{:?}", std::time::SystemTime::now());
    let wasm = renamed(&ts_guests().probe, stamp.as_bytes());
    let node = n.node.clone();
    let deploy = tokio::spawn(async move {
        let spec = VersionSpec { classes: vec![class("big", Access::Open, &wasm)], ..Default::default() };
        node.deploy("t", "other", spec).await.map(|d| d.version)
    });
    // This test's runtime has one thread: requests are answered while the
    // compile runs only if it runs elsewhere.
    for _ in 0..5 {
        assert_eq!(n.get("/actor/open/a/count").await.status, 200);
    }
    assert!(!deploy.is_finished(), "five requests were answered while the component compiled");
    assert_eq!(deploy.await.unwrap().unwrap(), 1);
}

#[tokio::test]
async fn a_typescript_front_hands_a_socket_to_a_typescript_actor() {
    let n = node(test_limits()).await;
    let url = format!("{}/chat?name=room%201&class=ts", n.url.replace("http://", "ws://"));
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.expect("101");
    let next = async |ws: &mut tokio_tungstenite::WebSocketStream<_>| {
        tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap().unwrap().unwrap()
    };
    assert_eq!(next(&mut ws).await, Message::text("open /chat?name=room%201&class=ts"));
    ws.send(Message::text("hi")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("echo hi"));
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::binary(vec![1u8, 2, 3]));
    let sockets = n.get(&format!("/actor/ts/{}/sockets", enc("room 1"))).await.json();
    assert_eq!(sockets.as_array().unwrap().len(), 1);
    ws.close(None).await.unwrap();

    // An actor refusing the open: the client is told no.
    let url = format!("{}/refuse?name=b&class=ts", n.url.replace("http://", "ws://"));
    assert!(tokio_tungstenite::connect_async(url).await.is_err(), "a refused open is no socket");
}
