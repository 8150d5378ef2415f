//! Deploys and sockets on one node (docs/spec/actors-and-admission.md §7,
//! docs/spec/sockets.md §11): sockets survive a deploy, a class made
//! `internal` closes its outside sockets at their next event while the
//! front's stay, and a removed class closes its sockets with 1001.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use wasmkeep_actors::VersionSpec;
use wasmkeep_core::Access;
use wasmkeep_tests::{TestNode, class, guests, probe_classes, test_limits};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn spec(classes: Vec<wasmkeep_actors::ClassSpec>) -> VersionSpec {
    VersionSpec { front: Some(guests().front.clone()), classes, ..Default::default() }
}

async fn socket(n: &TestNode, path: &str) -> Ws {
    let url = format!("{}{path}", n.url.replace("http://", "ws://"));
    tokio_tungstenite::connect_async(url).await.expect("101").0
}

/// The next message: a text, or the close's code.
async fn next(ws: &mut Ws) -> Result<String, u16> {
    match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.expect("something comes") {
        Some(Ok(Message::Text(t))) => Ok(t.to_string()),
        Some(Ok(Message::Close(f))) => Err(f.map_or(1005, |f| u16::from(f.code))),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_class_made_internal_closes_only_its_outside_sockets_at_their_next_event() {
    let n = TestNode::start(test_limits(), spec(probe_classes())).await;
    let mut outside = socket(&n, "/actor/open/room/ws").await;
    let mut front = socket(&n, "/ws/open/room").await;
    let probe = &guests().probe;
    let internal = vec![class("open", Access::Internal, probe), class("existing", Access::Existing, probe)];
    n.node.deploy("t", "app", spec(internal)).await.unwrap();
    assert_eq!(n.node.open_sockets(), 2, "sockets survive a deploy");
    outside.send(Message::text("echo:still?")).await.unwrap();
    assert_eq!(next(&mut outside).await, Err(1008));
    front.send(Message::text("echo:still here")).await.unwrap();
    assert_eq!(next(&mut front).await, Ok("still here".into()), "the front's socket stays");
}

#[tokio::test]
async fn a_removed_class_closes_its_sockets_with_1001_and_others_survive() {
    let n = TestNode::start(test_limits(), spec(probe_classes())).await;
    let mut kept = socket(&n, "/actor/open/a/ws").await;
    let mut removed = socket(&n, "/ws/internal/room").await;
    let probe = &guests().probe;
    n.node.deploy("t", "app", spec(vec![class("open", Access::Open, probe)])).await.unwrap();
    assert_eq!(next(&mut removed).await, Err(1001));
    kept.send(Message::text("echo:on the new version")).await.unwrap();
    assert_eq!(next(&mut kept).await, Ok("on the new version".into()));
}

/// The classes of a version naming one component share one compile:
/// matched by buffer when they share one (a bundle's decoded component),
/// by hash when they do not. Compiled per class, a bundle of 100 classes
/// would compile (and hold) its component 100 times.
#[tokio::test]
async fn classes_naming_one_component_share_one_compile() {
    let probe: std::sync::Arc<[u8]> = guests().probe.clone().into();
    let mut classes: Vec<wasmkeep_actors::ClassSpec> = (0..50)
        .map(|i| wasmkeep_actors::ClassSpec {
            name: wasmkeep_core::ClassName::parse(&format!("s{i}")).unwrap(),
            access: Access::Open,
            wasm: probe.clone(),
        })
        .collect();
    // The same bytes in buffers of their own.
    classes.extend((0..3).map(|i| class(&format!("d{i}"), Access::Open, &guests().probe)));
    let n = TestNode::start(test_limits(), VersionSpec { classes, ..Default::default() }).await;
    let version = n.node.app(n.app).unwrap().active().unwrap();
    let first = &version.class("s0").unwrap().component;
    for name in (1..50).map(|i| format!("s{i}")).chain((0..3).map(|i| format!("d{i}"))) {
        let component = &version.class(&name).unwrap().component;
        assert!(std::sync::Arc::ptr_eq(first, component), "{name} has a compile of its own");
    }
}
