//! Host-owned WebSockets at `/actor/` (docs/spec/sockets.md §1–§4): the
//! open before the `101`, events through the mailbox, the `sockets`
//! interface, parking, and the limits. Real clients (tokio-tungstenite) on
//! a real port.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Limits;
use wasmkeep_tests::{TestNode, envelope, eventually, probe_classes, test_limits, upgrade_and_leave};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn node(limits: Limits) -> TestNode {
    TestNode::start(limits, VersionSpec { front: None, classes: probe_classes(), ..Default::default() }).await
}

async fn connect(n: &TestNode, path: &str) -> Ws {
    let url = format!("{}{path}", n.url.replace("http://", "ws://"));
    tokio_tungstenite::connect_async(url).await.expect("the upgrade succeeds").0
}

/// The next text message, within a few seconds.
async fn text(ws: &mut Ws) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("a message comes") {
            Some(Ok(Message::Text(t))) => return t.to_string(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            other => panic!("expected text, got {other:?}"),
        }
    }
}

/// The close frame the host sends.
async fn closed(ws: &mut Ws) -> (u16, String) {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("the socket closes") {
            Some(Ok(Message::Close(Some(f)))) => return (u16::from(f.code), f.reason.to_string()),
            Some(Ok(Message::Close(None))) | None => return (1005, String::new()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("{e}"),
        }
    }
}

async fn json_list(n: &TestNode, path: &str) -> Vec<String> {
    serde_json::from_str(&n.get(path).await.body).unwrap()
}

/// The close events `actor` recorded, once there is one.
async fn closes(n: &TestNode, actor: &str) -> Vec<String> {
    for _ in 0..250 {
        let c = json_list(n, &format!("/actor/{actor}/closes")).await;
        if !c.is_empty() {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{actor} recorded no close");
}

#[tokio::test]
async fn a_socket_opens_at_actor_and_carries_messages_both_ways() {
    let n = node(test_limits()).await;
    let mut ws = connect(&n, "/actor/open/a/ws?greet=1").await;
    assert_eq!(text(&mut ws).await, "welcome", "the open ran before the 101, and could send");
    ws.send(Message::text("echo:hello")).await.unwrap();
    assert_eq!(text(&mut ws).await, "hello");
    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
    let echoed = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(echoed, Message::binary(vec![1u8, 2, 3]));
    let opened = json_list(&n, "/actor/open/a/opened").await;
    assert_eq!(opened.len(), 1);
    assert!(opened[0].ends_with(" /ws?greet=1"), "the actor sees the rest of the path: {opened:?}");
    let conn: u64 = opened[0].split(' ').next().unwrap().parse().unwrap();
    assert_eq!(n.get("/actor/open/a/sockets").await.json(), serde_json::json!([conn]));
}

#[tokio::test]
async fn a_refused_open_at_actor_is_101_then_1008_with_the_actors_reason() {
    let n = node(test_limits()).await;
    let mut ws = connect(&n, "/actor/open/a/refuse").await;
    assert_eq!(closed(&mut ws).await, (1008, "refused by the probe at /refuse".into()));
    assert_eq!(n.get("/actor/open/a/sockets").await.body, "[]");
}

#[tokio::test]
async fn an_outside_upgrade_to_an_internal_class_is_refused_as_http() {
    let n = node(test_limits()).await;
    let url = format!("{}/actor/internal/a/ws", n.url.replace("http://", "ws://"));
    let err = tokio_tungstenite::connect_async(url).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test]
async fn the_client_closing_is_the_actors_close_event() {
    let n = node(test_limits()).await;
    let mut ws = connect(&n, "/actor/open/a/ws").await;
    ws.close(Some(CloseFrame { code: CloseCode::from(4001), reason: "leaving".into() })).await.unwrap();
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
    let closes = closes(&n, "open/a").await;
    assert!(closes[0].ends_with(" 4001 leaving"), "{closes:?}");
}

#[tokio::test]
async fn a_lost_connection_is_a_close_with_1006() {
    let n = node(test_limits()).await;
    let ws = connect(&n, "/actor/open/a/ws").await;
    drop(ws);
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
    let closes = closes(&n, "open/a").await;
    assert!(closes[0].ends_with(" 1006 "), "{closes:?}");
}

#[tokio::test]
async fn the_actor_sends_to_all_its_sockets_and_closes_one() {
    let n = node(test_limits()).await;
    let mut a = connect(&n, "/actor/open/room/ws").await;
    let mut b = connect(&n, "/actor/open/room/ws").await;
    a.send(Message::text("all:hi both")).await.unwrap();
    assert_eq!(text(&mut a).await, "hi both");
    assert_eq!(text(&mut b).await, "hi both");
    b.send(Message::text("close:bye")).await.unwrap();
    assert_eq!(closed(&mut b).await, (4000, "bye".into()));
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 1).await);
    a.send(Message::text("all:only you")).await.unwrap();
    assert_eq!(text(&mut a).await, "only you");
    assert!(json_list(&n, "/actor/open/room/closes").await.is_empty(), "a close the actor made is not an event");
}

#[tokio::test]
async fn a_parked_actor_wakes_with_its_sockets_and_their_ids() {
    let n = node(Limits { idle_secs: 0.2, ..test_limits() }).await;
    let mut ws = connect(&n, "/actor/open/a/ws").await;
    ws.send(Message::text("whoami")).await.unwrap();
    let first = text(&mut ws).await;
    assert!(eventually(Duration::from_secs(5), || n.node.resident_actors() == 0).await, "it hibernated");
    assert_eq!(n.node.open_sockets(), 1, "its socket stayed open: it is parked");
    ws.send(Message::text("whoami")).await.unwrap();
    let second = text(&mut ws).await;
    let conn = |s: &str| s.split(' ').next().unwrap().to_owned();
    assert_eq!(conn(&first), conn(&second), "the same conn id");
    assert!(second.ends_with("events=0"), "a new instance woke: {second}");
}

#[tokio::test]
async fn the_host_answers_pings() {
    let n = node(test_limits()).await;
    let mut ws = connect(&n, "/actor/open/a/ws").await;
    ws.send(Message::Ping(b"are you there".to_vec().into())).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(pong, Message::Pong(b"are you there".to_vec().into()));
}

#[tokio::test]
async fn sockets_per_actor_and_per_node_are_bounded_at_the_upgrade() {
    let limits = Limits { sockets_per_actor: 2, sockets_per_node: 3, ..test_limits() };
    let n = node(limits).await;
    let _a1 = connect(&n, "/actor/open/a/ws").await;
    let _a2 = connect(&n, "/actor/open/a/ws").await;
    let upgrade = |path: &str| {
        n.client
            .get(format!("{}{path}", n.url))
            .header("upgrade", "websocket")
            .header("connection", "upgrade")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
    };
    let a = n.send(upgrade("/actor/open/a/ws")).await;
    assert_eq!((a.status, a.header("retry-after")), (503, Some("5")));
    let _b1 = connect(&n, "/actor/open/b/ws").await;
    let a = n.send(upgrade("/actor/open/c/ws")).await;
    assert_eq!((a.status, a.header("retry-after")), (503, Some("5")), "the node's bound");
}

#[tokio::test]
async fn a_message_over_the_limit_closes_with_1009_and_sends_over_it_fail() {
    let n = node(Limits { socket_message_bytes: 1024, ..test_limits() }).await;
    let mut ws = connect(&n, "/actor/open/a/ws").await;
    ws.send(Message::text("big:2000")).await.unwrap();
    assert_eq!(text(&mut ws).await, "Err(SocketError::TooLarge)");
    ws.send(Message::text("x".repeat(2000))).await.unwrap();
    assert_eq!(closed(&mut ws).await.0, 1009);
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
}

#[tokio::test]
async fn a_full_send_queue_fails_the_send_and_closes_the_socket() {
    let n = node(Limits { socket_queue_bytes: 10_000, ..test_limits() }).await;
    let mut ws = connect(&n, "/actor/open/a/ws?flood").await;
    // What fitted arrives, then the host's close.
    let mut received = 0;
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("the socket closes") {
            Some(Ok(Message::Text(t))) => {
                assert_eq!(t.len(), 1000);
                received += 1;
            }
            Some(Ok(Message::Close(Some(f)))) => break (u16::from(f.code), f.reason.to_string()),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(received, 10, "10,000 bytes fitted");
    assert_eq!(close, (1008, "the send queue is full".into()));
    assert_eq!(n.get("/actor/open/a/flood-error").await.body, "\"SocketError::QueueFull\"");
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
}

/// A raw frame, as a client that breaks the protocol sends it.
fn raw_frame(opcode: tokio_tungstenite::tungstenite::protocol::frame::coding::OpCode, payload: &[u8]) -> Message {
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    Message::Frame(Frame::message(payload.to_vec(), opcode, true))
}

#[tokio::test]
async fn a_text_message_that_is_not_utf8_closes_with_1007() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let n = node(test_limits()).await;
    let mut ws = connect(&n, "/actor/open/a/ws").await;
    ws.send(raw_frame(OpCode::Data(Data::Text), b"caf\xc3")).await.unwrap();
    assert_eq!(closed(&mut ws).await, (1007, "a text message is not valid UTF-8".into()));
    assert_eq!(closes(&n, "open/a").await.last().unwrap(), "1 1007 a text message is not valid UTF-8");
}

#[tokio::test]
async fn a_protocol_error_closes_with_1002() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let n = node(test_limits()).await;
    let mut ws = connect(&n, "/actor/open/a/ws").await;
    // A reserved opcode: no extension was agreed, so no frame may use it.
    ws.send(raw_frame(OpCode::Data(Data::Reserved(3)), b"?")).await.unwrap();
    assert_eq!(closed(&mut ws).await.0, 1002);
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
}

#[tokio::test]
async fn a_message_over_the_limit_always_reaches_the_client_as_1009_not_a_reset() {
    // The default limit: 1 MiB and one byte is more than the kernel's
    // buffers hold, so the node closes with the rest of it still coming.
    let n = node(test_limits()).await;
    for round in 0..8 {
        let mut ws = connect(&n, &format!("/actor/open/r{round}/ws")).await;
        let _ = ws.send(Message::binary(vec![7u8; (1 << 20) + 1])).await;
        let close = loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("an answer comes") {
                Some(Ok(Message::Close(Some(f)))) => break u16::from(f.code),
                Some(Ok(_)) => continue,
                other => panic!("round {round}: the close frame was lost: {other:?}"),
            }
        };
        assert_eq!(close, 1009, "round {round}");
        // The close handshake ends cleanly: the node read the rest and the
        // client's reply before it closed, so no reset follows.
        loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("the connection ends") {
                None | Some(Err(tokio_tungstenite::tungstenite::Error::ConnectionClosed)) => break,
                Some(Ok(_)) => continue,
                Some(Err(e)) => panic!("round {round}: the connection was reset after the close: {e}"),
            }
        }
    }
}

#[tokio::test]
async fn an_open_answered_but_never_read_is_closed_for_the_actor() {
    use futures_util::FutureExt;
    let n = node(test_limits()).await;
    let target = envelope(&n, "open/room", wasmkeep_core::Origin::Outside);
    // The client's side polls once (the open is posted), then stops
    // reading: the actor answers into a wait nobody reads any more.
    let mut opening =
        Box::pin(n.node.open_socket(target, wasmkeep_actors::SocketRequest { path: "/ws".into(), headers: vec![] }));
    assert!((&mut opening).now_or_never().is_none());
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 1).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(opening);
    assert_eq!(n.node.open_sockets(), 0, "the socket no client holds is gone");
    assert_eq!(closes(&n, "open/room").await, vec!["1 1006 ".to_owned()], "and its actor heard it close");
}

#[tokio::test]
async fn a_client_leaving_while_its_socket_opens_leaves_nothing_behind() {
    let n = node(Limits { sockets_per_actor: 3, ..test_limits() }).await;
    // Three clients ask for a socket on one room whose open takes 1.5 s,
    // and each is gone after 0.3 s. The first open runs (the actor accepts
    // it) after its client left; the other two wait behind it, and their
    // clients are gone before they run. With a leak, the room's three
    // places would stay taken.
    let leave = |name: &'static str| upgrade_and_leave(&n, name, Duration::from_millis(300));
    tokio::join!(
        leave("/actor/open/room/ws?slowopen=1500"),
        leave("/actor/open/room/ws?slowopen=1500"),
        leave("/actor/open/room/ws?slowopen=1500"),
    );
    let closes = closes(&n, "open/room").await;
    assert_eq!(closes, vec!["1 1006 ".to_owned()], "the accepted open hears its close");
    assert!(eventually(Duration::from_secs(10), || n.node.open_sockets() == 0).await, "no entry is left");
    let opened = json_list(&n, "/actor/open/room/opened").await;
    assert_eq!(opened.len(), 1, "the opens whose clients had left never ran: {opened:?}");
    let listed = json_list(&n, "/actor/open/room/sockets").await;
    assert!(listed.is_empty(), "the actor lists no socket: {listed:?}");
    // The places are free: three real sockets open, a fourth is refused.
    let _s: Vec<Ws> = futures_util::future::join_all((0..3).map(|_| connect(&n, "/actor/open/room/ws"))).await;
    assert!(
        tokio_tungstenite::connect_async(format!("{}/actor/open/room/ws", n.url.replace("http", "ws"))).await.is_err()
    );
}

#[tokio::test]
async fn a_client_leaving_before_its_open_runs_is_never_opened() {
    let n = node(test_limits()).await;
    // The actor is busy for 1 s; the open queues behind it; the client
    // leaves meanwhile.
    let busy = n.get("/actor/open/room/sleep?ms=1000");
    let leave = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        upgrade_and_leave(&n, "/actor/open/room/ws?late", Duration::from_millis(300)).await;
    };
    let _ = tokio::join!(busy, leave);
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let opened = json_list(&n, "/actor/open/room/opened").await;
    assert!(opened.is_empty(), "the actor never ran the open: {opened:?}");
    assert!(json_list(&n, "/actor/open/room/closes").await.is_empty(), "nor a close");
}

#[tokio::test]
async fn a_message_that_waits_past_its_deadline_closes_the_socket_and_the_actor_hears_it() {
    // A message waits at most the call limit (1 s here); the actor is busy
    // for 2 s.
    let n = node(Limits { call_limit_secs: 1.0, ..test_limits() }).await;
    let mut ws = connect(&n, "/actor/open/room/ws").await;
    let (client, url) = (n.client.clone(), n.url.clone());
    let busy = tokio::spawn(async move { client.get(format!("{url}/actor/open/room/sleep?ms=2000")).send().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    ws.send(Message::text("echo late")).await.unwrap();
    // The message never runs: the client is told to come back later...
    assert_eq!(closed(&mut ws).await, (1013, "the actor is overloaded".to_owned()));
    assert_eq!(busy.await.unwrap().unwrap().status(), 200);
    // ...and the actor, still there, hears its socket close.
    assert_eq!(closes(&n, "open/room").await, vec!["1 1013 the actor is overloaded".to_owned()]);
    assert_eq!(n.node.metrics().refusals.get(wasmkeep_core::RefusalReason::DeadlinePassed), 1);
    assert!(eventually(Duration::from_secs(5), || n.node.open_sockets() == 0).await);
}
