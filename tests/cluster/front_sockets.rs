//! Sockets the front hands off, in a cluster (docs/spec/sockets.md §15):
//! they live on their room's owner whichever node's front opened them.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_tests::cluster::{actor_get, cluster, forwarded, ws};
use wasmkeep_tests::enc;

/// A deleted room's sockets close, those relayed from another node's
/// front too, and their close events are not delivered: nothing runs on
/// the room after its delete, so nothing brings it back
/// (docs/spec/sockets.md §10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_rooms_sockets_do_not_bring_it_back() {
    let (_dir, m, app) = cluster(&["a", "b"]).await;
    let (a, b) = (&m[0], &m[1]);
    let mut on_b = ws(b, &format!("/ws/internal/doomed?path={}", enc("/one"))).await;
    let mut via_a = ws(a, &format!("/ws/internal/doomed?path={}", enc("/two"))).await;
    assert_eq!((b.node.open_sockets(), forwarded(a, HopKind::Handoff)), (2, 1), "both live on the owner");
    via_a.send(Message::text("delete")).await.unwrap();
    for ws in [&mut on_b, &mut via_a] {
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap() {
            Some(Ok(Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), 1000),
            other => panic!("{other:?}"),
        }
    }
    for _ in 0..50 {
        if b.node.open_sockets() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(b.node.open_sockets(), 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // No close event ran: the room a call now creates, on either node, has
    // no record, and its storage went with the delete.
    for node in [a, b] {
        assert_eq!(actor_get(node, app, "internal/doomed", "/closes").await, serde_json::json!([]));
        assert_eq!(actor_get(node, app, "internal/doomed", "/opened").await, serde_json::json!([]));
    }
}
