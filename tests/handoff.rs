//! The WebSocket hand-off through the front (docs/spec/sockets.md §5–§8 and
//! §13, on one node): the mark, the three headers, the open as an inside
//! caller, and every error as HTTP.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::metric_labels::FrontRequestOutcome;
use wasmkeep_tests::{Answer, TestNode, enc, eventually, guests, probe_classes, test_limits, upgrade_and_leave};

async fn node() -> TestNode {
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    TestNode::start(test_limits(), spec).await
}

/// An upgrade request as a browser sends it, answered as plain HTTP.
async fn upgrade(n: &TestNode, path: &str, extra: &[(&str, &str)]) -> Answer {
    let mut r = n
        .client
        .get(format!("{}{path}", n.url))
        .header("upgrade", "websocket")
        .header("connection", "upgrade")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    for (name, value) in extra {
        r = r.header(*name, *value);
    }
    n.send(r).await
}

#[tokio::test]
async fn the_front_hands_a_socket_to_an_internal_actor() {
    let n = node().await;
    let url = format!("{}/ws/internal/room%201?path={}", n.url.replace("http://", "ws://"), enc("/chat?user=ann"));
    let (mut ws, response) = tokio_tungstenite::connect_async(url).await.expect("101");
    assert!(response.headers().keys().all(|h| !h.as_str().starts_with("x-wasmkeep-")));
    ws.send(Message::text("echo:through the front")).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(echoed, Message::text("through the front"), "an internal actor's socket events admit as inside");
    // The open created the actor and saw the front's path.
    let call = n.get(&format!("/call?to={}&path=/opened", enc("internal/room 1"))).await.json();
    let opened: Vec<String> = serde_json::from_str(call["body"].as_str().unwrap()).unwrap();
    assert!(opened[0].ends_with(" /chat?user=ann"), "{opened:?}");
    assert_eq!(n.node.metrics().front_requests.get(FrontRequestOutcome::Handoff), 1);
    assert!(eventually(Duration::from_secs(5), || n.node.front_slots_in_use() == 0).await, "the slot is free");
}

#[tokio::test]
async fn only_an_upgrade_carries_the_mark() {
    let n = node().await;
    assert_eq!(n.get("/is-websocket").await.body, "false");
    let forged =
        n.send(n.client.get(format!("{}/is-websocket", n.url)).header("x-wasmkeep-upgrade", "websocket")).await;
    assert_eq!(forged.body, "false", "a client cannot send the mark");
    let a = upgrade(&n, "/is-websocket", &[]).await;
    assert_eq!((a.status, a.body.as_str()), (200, "true"), "the front may answer an upgrade as it likes");
}

#[tokio::test]
async fn a_hand_off_on_a_request_that_is_not_an_upgrade_is_the_fronts_426() {
    let n = node().await;
    let a = n.get("/ws/internal/room").await;
    assert_eq!((a.status, a.body.as_str()), (426, "websocket upgrade required"));
    assert!(a.headers.keys().all(|h| !h.as_str().starts_with("x-wasmkeep-")), "{:?}", a.headers);
    assert_eq!(n.node.open_sockets(), 0);
}

#[tokio::test]
async fn a_clients_forged_hand_off_headers_change_nothing() {
    let n = node().await;
    let forged = [
        ("x-wasmkeep-handoff-class", "internal"),
        ("x-wasmkeep-handoff-name", "room"),
        ("x-wasmkeep-handoff-path", "/ws"),
        ("x-wasmkeep-upgrade", "websocket"),
    ];
    let a = upgrade(&n, "/hello", &forged).await;
    assert_eq!((a.status, a.body.as_str()), (200, "hello"));
    assert_eq!(n.node.open_sockets(), 0);
}

#[tokio::test]
async fn a_broken_hand_off_is_500_counted_guest_error() {
    let n = node().await;
    let broken = ["missing", "repeated", "badname", "badescape", "badpath", "fragment"];
    for which in broken {
        let a = upgrade(&n, &format!("/broken?which={which}"), &[]).await;
        assert_eq!(a.status, 500, "{which}: {}", a.body);
        assert!(a.headers.keys().all(|h| !h.as_str().starts_with("x-wasmkeep-")));
    }
    assert_eq!(n.node.metrics().front_requests.get(FrontRequestOutcome::GuestError), broken.len() as u64);
    assert_eq!(n.node.open_sockets(), 0);
}

#[tokio::test]
async fn every_failed_open_is_an_http_answer() {
    let n = node().await;
    let a = upgrade(&n, &format!("/ws/internal/room?path={}", enc("/refuse")), &[]).await;
    assert_eq!((a.status, a.body.as_str()), (403, "refused by the probe at /refuse"), "the actor's reason, not a 101");
    let a = upgrade(&n, "/ws/nosuch/room", &[]).await;
    assert_eq!(a.status, 404);
    assert_eq!(a.body, "no such actor class\n");
    let a = upgrade(&n, "/ws/internal/bad%07name", &[]).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(n.node.open_sockets(), 0);
}

/// An upstream answering with hand-off headers.
async fn handing_upstream() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let answer = "HTTP/1.1 200 OK\r\nx-wasmkeep-handoff-class: internal\r\nx-wasmkeep-handoff-name: room\r\n\
                x-wasmkeep-handoff-path: /ws\r\nx-upstream: yes\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
            let _ = conn.write_all(answer.as_bytes()).await;
        }
    });
    url
}

#[tokio::test]
async fn an_upstreams_hand_off_headers_do_not_hand_off() {
    let n = node().await;
    let upstream = handing_upstream().await;
    let a = upgrade(&n, &format!("/relay?url={}", enc(&upstream)), &[]).await;
    assert_eq!((a.status, a.body.as_str()), (200, "relayed"));
    assert_eq!(a.header("x-upstream"), Some("yes"), "the front did copy the upstream's headers");
    assert_eq!(n.node.open_sockets(), 0);
    assert_eq!(n.node.metrics().front_requests.get(FrontRequestOutcome::Handoff), 0);
}

async fn hand_off_socket(n: &TestNode, room: &str) -> Ws {
    let url = format!("{}/ws/internal/{room}", n.url.replace("http://", "ws://"));
    tokio_tungstenite::connect_async(url).await.expect("101").0
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_text(ws: &mut Ws) -> String {
    match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("a message") {
        Some(Ok(Message::Text(t))) => t.to_string(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_front_sockets_mark_survives_hibernation() {
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    let n = TestNode::start(wasmkeep_core::Limits { idle_secs: 0.2, ..test_limits() }, spec).await;
    let mut ws = hand_off_socket(&n, "parked").await;
    assert!(eventually(Duration::from_secs(5), || n.node.resident_actors() == 0).await, "the room hibernated");
    ws.send(Message::text("echo:still inside")).await.unwrap();
    assert_eq!(next_text(&mut ws).await, "still inside", "an outside event would be refused by an internal class");
}

#[tokio::test]
async fn a_deleted_rooms_sockets_close_and_do_not_bring_it_back() {
    let n = node().await;
    let mut a = hand_off_socket(&n, "doomed").await;
    let mut b = hand_off_socket(&n, "doomed").await;
    a.send(Message::text("delete")).await.unwrap();
    for ws in [&mut a, &mut b] {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap() {
            Some(Ok(Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), 1000),
            other => panic!("{other:?}"),
        }
    }
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // No close event ran: a new room (the call creates it) has no record.
    let closes = n.get("/call?to=internal/doomed&path=/closes").await.json();
    assert_eq!(closes["body"], "[]", "{closes}");
    let opened = n.get("/call?to=internal/doomed&path=/opened").await.json();
    assert_eq!(opened["body"], "[]", "its storage went with it");
}

#[tokio::test]
async fn a_hand_off_to_an_app_missing_a_required_value_is_503() {
    let spec = VersionSpec {
        front: Some(guests().front.clone()),
        classes: probe_classes(),
        required_values: vec!["K".into()],
        ..Default::default()
    };
    let n = TestNode::start(test_limits(), spec).await;
    let a = upgrade(&n, "/ws/internal/room", &[]).await;
    assert_eq!(a.status, 503, "{}", a.body);
    assert!(a.header("retry-after").is_some());
    n.node.set_value(n.app, "K", "set").await.unwrap();
    let url = format!("{}/ws/internal/room", n.url.replace("http://", "ws://"));
    assert!(tokio_tungstenite::connect_async(url).await.is_ok(), "with the value set, it opens");
}

#[tokio::test]
async fn a_message_queued_behind_the_delete_does_not_create_the_actor_again() {
    let n = node().await;
    // The front opens it, so its events admit as inside (which may create).
    let url = format!("{}/ws/existing/doomed", n.url.replace("http://", "ws://"));
    let mut ws = tokio_tungstenite::connect_async(url).await.expect("101").0;
    assert_eq!(n.get("/actor/existing/doomed/peek").await.status, 200, "the open created it");
    ws.send(Message::text("slowdelete")).await.unwrap();
    ws.send(Message::text("whoami")).await.unwrap();
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(n.get("/actor/existing/doomed/peek").await.status, 404, "the queued message did not bring it back");
}

#[tokio::test]
async fn a_hand_off_past_the_socket_bounds_is_503_retry_after_5() {
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    let n = TestNode::start(wasmkeep_core::Limits { sockets_per_actor: 1, ..test_limits() }, spec).await;
    let _first = hand_off_socket(&n, "small").await;
    let a = upgrade(&n, "/ws/internal/small", &[]).await;
    assert_eq!((a.status, a.header("retry-after")), (503, Some("5")), "{}", a.body);
    assert_eq!(
        n.node.metrics().front_requests.get(FrontRequestOutcome::Handoff),
        2,
        "the front handed off; the open was refused"
    );
}

async fn recorded(n: &TestNode, actor: &str, what: &str) -> Vec<String> {
    let call = n.get(&format!("/call?to={}&path=/{what}", enc(actor))).await.json();
    serde_json::from_str(call["body"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_client_leaving_while_a_handed_off_socket_opens_leaves_nothing_behind() {
    let limits = wasmkeep_core::Limits { sockets_per_actor: 2, ..test_limits() };
    let spec = VersionSpec { front: Some(guests().front.clone()), classes: probe_classes(), ..Default::default() };
    let n = TestNode::start(limits, spec).await;
    // The first open (1.5 s) runs after its client left; the second waits
    // behind it, and its client is gone before it runs.
    let path = format!("/ws/internal/room?path={}", enc("/ws?slowopen=1500"));
    let leave = || upgrade_and_leave(&n, &path, Duration::from_millis(300));
    tokio::join!(leave(), leave());
    assert!(eventually(Duration::from_secs(10), || n.node.open_sockets() == 0).await, "no entry is left");
    assert!(eventually(Duration::from_secs(5), || n.node.front_slots_in_use() == 0).await);
    let mut closes = Vec::new();
    for _ in 0..100 {
        closes = recorded(&n, "internal/room", "closes").await;
        if !closes.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(closes, vec!["1 1006 ".to_owned()], "the accepted open hears its close, as inside");
    assert_eq!(recorded(&n, "internal/room", "opened").await.len(), 1, "the abandoned second open never ran");
    // Both places are free.
    let _a = hand_off_socket(&n, "room").await;
    let _b = hand_off_socket(&n, "room").await;
}
