//! Nodes of a cluster in this process (`wasmkeep_tests::cluster`). A
//! counter is incremented through both; hops that are not signed, are
//! replayed, or carry a forged head are refused on the cluster port;
//! sockets opened on any node live on their actor's owner, relayed
//! (docs/spec/sockets.md §15), and forged relays are refused or served as
//! outside upgrades.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmkeep_actors::{Remote as _, Request};
use wasmkeep_cluster::membership::unix_ms;
use wasmkeep_cluster::signing::{Signer, body_sha256};
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::signature::CALL_NAMES;
use wasmkeep_core::{AppId, MailboxKey, Origin, RawAddress};
use wasmkeep_tests::cluster::{Member, actor_get, cluster, cluster_of, forwarded, next_text, ws, ws_with};

async fn count(m: &Member, app: AppId, actor: &str) -> i64 {
    let get = Request { method: "GET".into(), path: "/count".into(), headers: vec![], body: vec![] };
    let target = RawAddress::split(&format!("probe/{actor}")).unwrap();
    let r = m.node.request_to(app, target, Origin::Outside, get).await.unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["count"].as_i64().unwrap()
}

fn forwards(m: &Member) -> String {
    wasmkeep_telemetry::render(&[&**m.node.metrics()])
        .lines()
        .filter(|l| l.starts_with("wasmkeep_forwards_total{kind=\"request\"}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_through_two_nodes_over_quic_counts_in_order_on_one_owner() {
    let (_dir, m, app) = cluster(&["a", "b"]).await;
    for i in 1..=10 {
        assert_eq!(count(&m[(i % 2) as usize], app, "c").await, i);
    }
    assert_eq!(forwards(&m[0]), "wasmkeep_forwards_total{kind=\"request\"} 5");
    assert_eq!(forwards(&m[1]), "wasmkeep_forwards_total{kind=\"request\"} 0");
    // The owner's failure crosses the hop as what it is: the event trapped
    // there (its write rolled back), not an answer of the actor's.
    let trap = Request { method: "GET".into(), path: "/trap-after-write".into(), headers: vec![], body: vec![] };
    let target = RawAddress::split("probe/c").unwrap();
    let e = m[0].node.request_to(app, target, Origin::Outside, trap).await.unwrap_err();
    // Its text is the tenant's, as the owner logged it: the panic's.
    let wasmkeep_core::EventError::Trapped(why) = &e else { panic!("{e:?}") };
    assert!(why.starts_with("trapped: panicked at ") && why.contains("the probe traps on purpose"), "{why}");
    assert_eq!(count(&m[0], app, "c").await, 11);
}

/// A raw hop from `from` to node `to`'s cluster port; its status and body.
async fn hop(from: &Member, to: &Member, to_id: &str, head: http::HeaderMap, path: &str) -> (u16, String) {
    let mut req = http::Request::get(path).body(Full::new(Bytes::new())).unwrap();
    *req.headers_mut() = head;
    let res = from.transport.request(to_id, to.transport.local_addr(), req).await.unwrap();
    let status = res.status().as_u16();
    (status, String::from_utf8_lossy(&res.into_body().collect().await.unwrap().to_bytes()).into_owned())
}

fn call_head(app: &str) -> http::HeaderMap {
    let mut head = http::HeaderMap::new();
    head.insert("x-wasmkeep-app", app.parse().unwrap());
    head.insert("x-wasmkeep-target", "probe/z".parse().unwrap());
    head.insert("x-wasmkeep-deadline", "5000".parse().unwrap());
    head
}

fn signed(secret: &[u8; 32], mut head: http::HeaderMap, path: &'static str, at: u64) -> http::HeaderMap {
    let pq = http::uri::PathAndQuery::from_static(path);
    Signer::new("a", secret).sign(&http::Method::GET, &pq, &body_sha256(b""), &mut head, &CALL_NAMES, at).unwrap();
    head
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_port_believes_only_signed_fresh_unspent_hops() {
    let (_dir, m, _app) = cluster(&["a", "b"]).await;
    let (a, b) = (&m[0], &m[1]);
    let secret = a.dir.secret;
    // Signed: runs.
    let good = signed(&secret, call_head("t/app"), "/count", unix_ms());
    let (status, body) = hop(a, b, "b", good.clone(), "/count").await;
    assert_eq!(status, 200, "{body}");
    // The same signature again: refused.
    assert_eq!(hop(a, b, "b", good, "/count").await.0, 403);
    // No signature: refused.
    assert_eq!(hop(a, b, "b", call_head("t/app"), "/count").await.0, 403);
    // Another secret, a changed head, a stale time: refused.
    assert_eq!(hop(a, b, "b", signed(&[9; 32], call_head("t/app"), "/count", unix_ms()), "/count").await.0, 403);
    let mut forged = signed(&secret, call_head("t/app"), "/count", unix_ms());
    forged.insert("x-wasmkeep-target", "probe/other".parse().unwrap());
    assert_eq!(hop(a, b, "b", forged, "/count").await.0, 403);
    assert_eq!(
        hop(a, b, "b", signed(&secret, call_head("t/app"), "/count", unix_ms() - 31_000), "/count").await.0,
        403
    );
    // Signed for another path than it asks: refused.
    assert_eq!(hop(a, b, "b", signed(&secret, call_head("t/app"), "/count", unix_ms()), "/peek").await.0, 403);
    // A signed call with the upgrade mark added: refused.
    let mut marked = signed(&secret, call_head("t/app"), "/count", unix_ms());
    marked.insert("x-wasmkeep-upgrade", "websocket".parse().unwrap());
    assert_eq!(hop(a, b, "b", marked, "/count").await.0, 403);
    // A relay's signature (the mark signed) on a request that is not an
    // upgrade: never read as a call (docs/spec/sockets.md §15).
    let mut relay = call_head("t/app");
    relay.insert("x-wasmkeep-upgrade", "websocket".parse().unwrap());
    let pq = http::uri::PathAndQuery::from_static("/count");
    let names = wasmkeep_core::signature::RELAY_NAMES;
    Signer::new("a", &secret).sign(&http::Method::GET, &pq, &body_sha256(b""), &mut relay, &names, unix_ms()).unwrap();
    assert_eq!(hop(a, b, "b", relay, "/count").await.0, 403);
    // Signed, for an app this cluster does not have: 404, as for a client.
    assert_eq!(hop(a, b, "b", signed(&secret, call_head("t/none"), "/count", unix_ms()), "/count").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_opened_on_any_node_live_on_their_actors_owner() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let (_dir, m, app) = cluster(&["a", "b"]).await;
    let (a, b) = (&m[0], &m[1]);
    let mut on_b = ws(b, "/actor/open/room/ws?greet").await;
    assert_eq!(next_text(&mut on_b).await, "welcome");
    // Node a does not own the room: the open is relayed to b, the socket
    // lives there, and a copies bytes.
    let mut via_a = ws(a, "/actor/open/room/ws?greet").await;
    assert_eq!(next_text(&mut via_a).await, "welcome");
    via_a.send(Message::text("all:hello")).await.unwrap();
    assert_eq!(next_text(&mut on_b).await, "hello");
    assert_eq!(next_text(&mut via_a).await, "hello");
    via_a.send(Message::binary(vec![0u8, 1, 255])).await.unwrap();
    assert_eq!(next_text(&mut via_a).await, "binary b\"\\0\\x01\\xff\"");
    assert_eq!((a.node.open_sockets(), b.node.open_sockets()), (0, 2));
    assert_eq!((forwarded(a, HopKind::Upgrade), forwarded(b, HopKind::Upgrade)), (1, 0));
    // The owner's refusal crosses as it is: a 101, then 1008 and the reason.
    let mut refused = ws(a, "/actor/open/room/refuse").await;
    assert_eq!(next_text(&mut refused).await, "close 1008 refused by the probe at /refuse");
    // The relayed client's close reaches the actor on its owner.
    let bye = tokio_tungstenite::tungstenite::protocol::CloseFrame { code: 1000.into(), reason: "bye".into() };
    via_a.close(Some(bye)).await.unwrap();
    let closed = || async { actor_get(b, app, "open/room", "/closes").await.to_string().contains(" 1000 bye") };
    let mut heard = false;
    for _ in 0..50 {
        if closed().await {
            heard = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(heard, "the owner's actor heard the relayed socket close");
    assert!(b.node.open_sockets() == 1, "one socket left on the owner");
    // A room no node owns yet, opened through a: a takes it, the socket is a's.
    let mut fresh = ws(a, "/actor/open/other/ws?greet").await;
    assert_eq!(next_text(&mut fresh).await, "welcome");
    assert_eq!((a.node.open_sockets(), forwarded(a, HopKind::Upgrade)), (1, 2));
}

/// Node `m`'s metrics listener, as `serve` runs it: its `/metrics` URL.
async fn metrics_url(m: &Member) -> String {
    format!("{}/metrics", wasmkeep_tests::metrics_listener(&m.node).await)
}

/// A relayed open that reaches a node which no longer owns the actor
/// (the relaying node's hint gone stale) is answered "elsewhere", sent on
/// to the owner named, and counted on the relaying node's `/metrics` as a
/// reroute of its kind: `upgrade` for an `/actor/` socket, `handoff` for
/// a front's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_open_sent_to_a_former_owner_follows_it_and_is_counted() {
    let (_dir, m, app) = cluster(&["a", "b", "c"]).await;
    let (a, b, c) = (&m[0], &m[1], &m[2]);
    let url = metrics_url(a).await;
    let enc = wasmkeep_tests::enc;
    let mut room_on_c = ws(c, "/actor/open/room/ws?greet").await;
    assert_eq!(next_text(&mut room_on_c).await, "welcome");
    let mut hall_on_c = ws(c, &format!("/ws/internal/hall?path={}", enc("/chat?greet"))).await;
    assert_eq!(next_text(&mut hall_on_c).await, "welcome");
    // c owns both rooms; a believes b does, once a has read b alive (a
    // hint naming a node not yet seen alive is not followed).
    for address in ["open/room", "internal/hall"] {
        let key = MailboxKey { app, address: RawAddress::split(address).unwrap() };
        let t = std::time::Instant::now();
        while {
            a.peers.note(&key, Some("b"));
            a.peers.hint(&key).as_deref() != Some("b")
        } {
            assert!(t.elapsed() < Duration::from_secs(10), "a never read b alive");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut room_via_a = ws(a, "/actor/open/room/ws?greet").await;
    assert_eq!(next_text(&mut room_via_a).await, "welcome");
    let mut hall_via_a = ws(a, &format!("/ws/internal/hall?path={}", enc("/chat2?greet"))).await;
    assert_eq!(next_text(&mut hall_via_a).await, "welcome");
    assert_eq!((a.node.open_sockets(), b.node.open_sockets(), c.node.open_sockets()), (0, 0, 4));
    let page = reqwest::get(&url).await.unwrap().text().await.unwrap();
    for line in [
        "wasmkeep_reroutes_total{kind=\"upgrade\"} 1",
        "wasmkeep_reroutes_total{kind=\"handoff\"} 1",
        // Each open went to b, then to c.
        "wasmkeep_forwards_total{kind=\"upgrade\"} 2",
        "wasmkeep_forwards_total{kind=\"handoff\"} 2",
    ] {
        assert!(page.lines().any(|l| l == line), "{line} in\n{page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_hands_a_socket_to_an_internal_room_owned_by_another_node() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let (_dir, m, _app) = cluster_of(&["a", "b", "c"], &["c"]).await;
    let (a, b, c) = (&m[0], &m[1], &m[2]);
    let enc = wasmkeep_tests::enc;
    let mut on_b = ws(b, &format!("/ws/internal/lobby?path={}", enc("/chat?greet"))).await;
    assert_eq!(next_text(&mut on_b).await, "welcome");
    // Through a's front: relayed to b, signed, and believed there as the
    // front's (an internal room takes no outside socket).
    let mut via_a = ws(a, &format!("/ws/internal/lobby?path={}", enc("/chat2?greet"))).await;
    assert_eq!(next_text(&mut via_a).await, "welcome");
    via_a.send(Message::text("all:hi")).await.unwrap();
    assert_eq!(next_text(&mut on_b).await, "hi");
    assert_eq!(next_text(&mut via_a).await, "hi");
    assert_eq!((a.node.open_sockets(), b.node.open_sockets()), (0, 2));
    assert_eq!(forwarded(a, HopKind::Handoff), 1);
    // The owner's refusal of a hand-off is the client's 403, with the reason.
    let (status, _, body) = ws_with(a, "/ws/internal/lobby?path=/refuse", &http::HeaderMap::new()).await.unwrap_err();
    assert_eq!((status, body.as_str()), (403, "refused by the probe at /refuse"), "as on one node");
    assert_eq!(forwarded(a, HopKind::Handoff), 2);
    // An owner that does not announce `handoff` is sent nothing: 503, retry.
    let mut on_c = ws(c, "/ws/internal/hall?path=/x").await;
    on_c.send(Message::text("echo:c")).await.unwrap();
    assert_eq!(next_text(&mut on_c).await, "c");
    let (status, head, _) = ws_with(a, "/ws/internal/hall?path=/y", &http::HeaderMap::new()).await.unwrap_err();
    assert_eq!((status, head.get("retry-after").map(|v| v.to_str().unwrap())), (503, Some("1")));
    assert_eq!((forwarded(a, HopKind::Handoff), c.node.open_sockets()), (2, 1));
}

/// A relayed open's head: the client's WebSocket headers and the app, with
/// the front's caller and the upgrade mark when asked.
fn relay_head(app: &str, caller: Option<&str>, mark: bool) -> http::HeaderMap {
    let mut head = http::HeaderMap::new();
    head.insert("upgrade", "websocket".parse().unwrap());
    head.insert("connection", "upgrade".parse().unwrap());
    head.insert("sec-websocket-version", "13".parse().unwrap());
    head.insert("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==".parse().unwrap());
    head.insert("x-wasmkeep-app", app.parse().unwrap());
    if let Some(caller) = caller {
        head.insert("x-wasmkeep-caller", caller.parse().unwrap());
    }
    if mark {
        head.insert("x-wasmkeep-upgrade", "websocket".parse().unwrap());
    }
    head
}

fn sign_relay(secret: &[u8; 32], mut head: http::HeaderMap, path: &'static str, at: u64) -> http::HeaderMap {
    let pq = http::uri::PathAndQuery::from_static(path);
    let names: &[&str] = if head.contains_key("x-wasmkeep-upgrade") { &["x-wasmkeep-upgrade"] } else { &[] };
    Signer::new("a", secret).sign(&http::Method::GET, &pq, &body_sha256(b""), &mut head, names, at).unwrap();
    head
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_relays_are_refused_or_are_outside_upgrades() {
    let (_dir, m, _app) = cluster(&["a", "b"]).await;
    let (a, b) = (&m[0], &m[1]);
    let secret = a.dir.secret;
    const ROOM: &str = "/actor/internal/lobby/x";
    let front = || relay_head("t/app", Some("t/_front/main"), true);
    let open = |head| hop(a, b, "b", head, ROOM);
    // On the cluster port. The front's hand-off, signed: believed, opened.
    let good = sign_relay(&secret, front(), ROOM, unix_ms());
    assert_eq!(open(good.clone()).await.0, 101);
    // Replayed: not believed, so an outside upgrade, which an internal
    // room refuses; so are one with no signature, another secret's, and
    // one signed 31 s ago.
    let internal = (403, "actor class is internal\n".to_owned());
    assert_eq!(open(good).await, internal);
    assert_eq!(open(front()).await, internal);
    assert_eq!(open(sign_relay(&[9; 32], front(), ROOM, unix_ms())).await, internal);
    assert_eq!(open(sign_relay(&secret, front(), ROOM, unix_ms() - 31_000)).await, internal);
    // A valid signature without the mark, without the caller, or with
    // another caller (an actor's, another tenant's front): refused.
    let not_front = "a signed upgrade is the front's hand-off only, with its caller and the upgrade mark\n";
    for head in [
        relay_head("t/app", Some("t/_front/main"), false),
        relay_head("t/app", None, true),
        relay_head("t/app", None, false),
        relay_head("t/app", Some("t/open/x"), true),
        relay_head("t/app", Some("u/_front/main"), true),
    ] {
        let (status, body) = open(sign_relay(&secret, head.clone(), ROOM, unix_ms())).await;
        assert_eq!((status, body.as_str()), (403, not_front), "{head:?}");
    }
    // The front's, signed, for an app this node does not have: 404.
    let elsewhere = sign_relay(&secret, relay_head("t/none", Some("t/_front/main"), true), ROOM, unix_ms());
    assert_eq!(open(elsewhere).await.0, 404);
    // An outside upgrade a peer relays, unsigned, to an open room: opened.
    let outside = relay_head("t/app", Some("t/_front/main"), true);
    assert_eq!(hop(a, b, "b", outside.clone(), "/actor/open/lobby/x").await.0, 101);
    // A relay is never sent on: for a room another node owns, the answer
    // is "elsewhere", for the relaying node to follow.
    let _on_a = ws(a, "/actor/open/mine/x").await;
    let (status, body) = hop(a, b, "b", outside, "/actor/open/mine/x").await;
    assert_eq!((status, body.as_str()), (503, "the actor is moving between nodes; retry\n"));

    // On the public port, reading signed hops: the front's signed relay is
    // believed; replayed or unsigned, it is a client's upgrade (its range
    // removed), refused by the internal room.
    let good = sign_relay(&secret, front(), ROOM, unix_ms());
    let mut believed = ws_with(b, ROOM, &good).await.expect("a believed relay opens");
    {
        use futures_util::SinkExt;
        believed.send(tokio_tungstenite::tungstenite::Message::text("echo:inside")).await.unwrap();
    }
    assert_eq!(next_text(&mut believed).await, "inside");
    for head in [good, front()] {
        let (status, _, body) = ws_with(b, ROOM, &head).await.unwrap_err();
        assert_eq!((status, body.as_str()), (403, "actor class is internal\n"));
    }
    let (status, _, body) =
        ws_with(b, ROOM, &sign_relay(&secret, relay_head("t/app", None, true), ROOM, unix_ms())).await.unwrap_err();
    assert_eq!((status, body.as_str()), (403, not_front));
    // A relay whose Upgrade was removed on the way: never a call.
    let mut stripped = sign_relay(&secret, front(), ROOM, unix_ms());
    stripped.remove("upgrade");
    let client = reqwest::Client::new();
    let mut request = client.get(format!("http://{}{ROOM}", b.addr));
    for (name, value) in &stripped {
        request = request.header(name, value);
    }
    assert_eq!(request.send().await.unwrap().status().as_u16(), 403);
}
