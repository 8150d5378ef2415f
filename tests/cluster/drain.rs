//! Draining a node of a cluster (docs/spec/cluster.md §9, issue 11 item 8):
//! it takes no new actors, its sockets close with 1012, its actors
//! hibernate and are released so another node takes them at once, relays to
//! it are answered 503, and under a stream of requests nothing acknowledged
//! is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use wasmkeep_actors::Request;
use wasmkeep_cluster::membership::unix_ms;
use wasmkeep_core::{AppId, EventError, Origin, RawAddress, Refusal};
use wasmkeep_tests::cluster::{Member, actor_get, cluster, ws};

fn inc() -> Request {
    Request { method: "GET".into(), path: "/count".into(), headers: vec![], body: vec![] }
}

/// One increment through node `m`: its count, or the refusal a client
/// would retry on (`503`).
async fn increment(m: &Member, app: AppId) -> Result<i64, EventError> {
    let r = m.node.request_to(app, RawAddress::split("probe/c").unwrap(), Origin::Outside, inc()).await?;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    Ok(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["count"].as_i64().unwrap())
}

fn retried(e: &EventError) -> bool {
    matches!(
        e,
        EventError::ShuttingDown
            | EventError::Refused(Refusal::Elsewhere { .. } | Refusal::Capacity | Refusal::StoreUnavailable(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_node_hands_its_actors_and_sockets_to_the_others_losing_nothing() {
    let (_dir, m, app) = cluster(&["a", "b"]).await;
    let (a, b) = (&m[0], &m[1]);
    // Node a owns the counter and a room with a socket.
    assert_eq!(increment(a, app).await.unwrap(), 1);
    let mut socket = ws(a, "/actor/open/room/ws").await;
    // A stream of increments through both nodes while a drains.
    let (acked, stop) = (Arc::new(AtomicI64::new(1)), Arc::new(AtomicBool::new(false)));
    let mut streams = Vec::new();
    for member in &m {
        let (node, acked, stop) = (member.node.clone(), acked.clone(), stop.clone());
        streams.push(tokio::spawn(async move {
            let target = || RawAddress::split("probe/c").unwrap();
            let (mut last, mut refused) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                match node.request_to(app, target(), Origin::Outside, inc()).await {
                    Ok(r) => {
                        let n =
                            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["count"].as_i64().unwrap();
                        assert!(n > last, "counts go up on one writer");
                        last = n;
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if retried(&e) => {
                        refused += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(e) => panic!("an increment failed: {e}"),
                }
            }
            refused
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.membership.start_draining();
    a.membership.beat(unix_ms()).await.unwrap();
    let started = Instant::now();
    a.node.drain(Duration::from_secs(10)).await;
    let drained = started.elapsed();
    // Its socket closed with 1012, and the room heard it.
    match tokio::time::timeout(Duration::from_secs(5), socket.next()).await.unwrap() {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), 1012),
        other => panic!("{other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut refused = 0;
    for s in streams {
        refused += s.await.unwrap();
    }
    // Nothing acknowledged was lost: the count is every acknowledged one.
    let count = actor_get(b, app, "probe/c", "/peek").await["count"].as_i64().unwrap();
    assert_eq!(count, acked.load(Ordering::Relaxed), "{refused} refused and retried");
    // Released, not failed over: b owns the counter well before the
    // failover wait, and a has nothing awake.
    assert!(drained < Duration::from_secs(10), "{drained:?}");
    assert_eq!((a.node.awake_actors(), a.node.open_sockets()), (0, 0));
    let closes = actor_get(b, app, "open/room", "/closes").await.to_string();
    assert!(closes.contains(" 1012 the node is draining; reconnect"), "{closes}");
    // The draining node takes nothing new: a new actor through a runs on b.
    let before = b.node.awake_actors();
    let r = a.node.request_to(app, RawAddress::split("probe/new").unwrap(), Origin::Outside, inc()).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!((a.node.awake_actors(), b.node.awake_actors()), (0, before + 1));
    // A socket through a opens on b; a relay to a is answered 503.
    let _moved = ws(a, "/actor/open/room/again").await;
    assert_eq!((a.node.open_sockets(), b.node.open_sockets()), (0, 1));
    let mut relay = http::HeaderMap::new();
    for (n, v) in [
        ("upgrade", "websocket"),
        ("connection", "upgrade"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("x-wasmkeep-app", "t/app"),
    ] {
        relay.insert(n, v.parse().unwrap());
    }
    let mut req =
        http::Request::get("/actor/open/other/x").body(http_body_util::Full::new(bytes::Bytes::new())).unwrap();
    *req.headers_mut() = relay;
    let answer = b.transport.request("a", a.transport.local_addr(), req).await.unwrap();
    let head = |name: &str| answer.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(answer.status().as_u16(), 503);
    assert_eq!(head("retry-after").as_deref(), Some("1"));
    assert_eq!(head("x-wasmkeep-error").as_deref(), Some("shutting_down"), "the node says it is leaving");
}
