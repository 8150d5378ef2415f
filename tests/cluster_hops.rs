//! Two nodes of a cluster in this process, as `serve` wires them: one
//! real PostgreSQL store, each node's heartbeat in it, hops over QUIC with
//! mutual TLS under the cluster CA, signed and checked. A counter is
//! incremented through both; hops that are not signed, are replayed, or
//! carry a forged head are refused on the cluster port.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmkeep_actors::{Node, NodeConfig, Request, VersionSpec};
use wasmkeep_cluster::cluster_dir::{self, ClusterDir, NodeId};
use wasmkeep_cluster::hop_server::HopServer;
use wasmkeep_cluster::membership::{Load, Membership, unix_ms};
use wasmkeep_cluster::peers::Peers;
use wasmkeep_cluster::signing::{Signer, Verifier, body_sha256};
use wasmkeep_cluster::transport::Transport;
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, NodeState};
use wasmkeep_core::signature::CALL_NAMES;
use wasmkeep_core::{Access, AppId, Origin, RawAddress};
use wasmkeep_storage::{PostgresStore, Store};
use wasmkeep_tests::{cache_dir, class, guests, test_limits};

struct Member {
    node: Node,
    transport: Arc<Transport>,
    dir: ClusterDir,
}

async fn cluster(names: &[&str]) -> (tempfile::TempDir, Vec<Member>, AppId) {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<NodeId> = names.iter().map(|n| NodeId::parse(n).unwrap()).collect();
    cluster_dir::init(dir.path(), &ids).unwrap();
    let url = wasmkeep_storage::test_postgres::server().database().await;
    let store = Arc::new(PostgresStore::connect(&url, 8).await.unwrap());
    let values = Arc::new(wasmkeep_storage::ValueKey::generate());
    let (mut members, mut app) = (Vec::new(), None);
    for id in &ids {
        let cd = ClusterDir::load(dir.path(), id).unwrap();
        let transport = Arc::new(Transport::bind("127.0.0.1:0".parse().unwrap(), &cd).unwrap());
        let me = Heartbeat {
            node: id.to_string(),
            version: "test".into(),
            public_addr: "127.0.0.1:1".into(),
            cluster_addr: transport.local_addr().to_string(),
            started_ms: unix_ms(),
            sent_ms: unix_ms(),
            state: NodeState::Serving,
            resident: 0,
            pool: 0,
            sockets: 0,
            capabilities: Capabilities::OURS,
        };
        let membership = Arc::new(Membership::new(store.clone(), me, Duration::from_secs(10), Load::default));
        let peers = Arc::new(Peers::new(membership.clone(), transport.clone(), &cd.secret, 16 << 20));
        let config = NodeConfig {
            id: id.to_string(),
            limits: test_limits(),
            cache_dir: Some(cache_dir()),
            egress: EgressPolicy::Open,
            values: values.clone(),
            egress_roots: Vec::new(),
        };
        let node = Node::in_cluster(config, store.clone() as Arc<dyn Store>, peers).unwrap();
        let spec = VersionSpec {
            front: None,
            classes: vec![class("probe", Access::Open, &guests().probe)],
            required_values: vec![],
        };
        app = Some(node.deploy("t", "app", spec).await.unwrap().app);
        let server = HopServer::new(node.clone(), Arc::new(Verifier::new(&cd.secret)));
        let serving = transport.clone();
        tokio::spawn(async move {
            serving
                .serve(hyper::service::service_fn(move |req| {
                    let server = server.clone();
                    async move { Ok::<_, std::convert::Infallible>(server.answer(req).await) }
                }))
                .await
        });
        membership.run();
        members.push((Member { node, transport, dir: cd }, membership));
    }
    // Everyone has read everyone's heartbeat.
    for (_, m) in &members {
        m.beat(unix_ms()).await.unwrap();
    }
    (dir, members.into_iter().map(|(m, _)| m).collect(), app.unwrap())
}

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
    assert_eq!(e, wasmkeep_core::EventError::Trapped);
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
    // upgrade: never read as a call (seed 0027).
    let mut relay = call_head("t/app");
    relay.insert("x-wasmkeep-upgrade", "websocket".parse().unwrap());
    let pq = http::uri::PathAndQuery::from_static("/count");
    let names = wasmkeep_core::signature::RELAY_NAMES;
    Signer::new("a", &secret).sign(&http::Method::GET, &pq, &body_sha256(b""), &mut relay, &names, unix_ms()).unwrap();
    assert_eq!(hop(a, b, "b", relay, "/count").await.0, 403);
    // Signed, for an app this cluster does not have: 404, as for a client.
    assert_eq!(hop(a, b, "b", signed(&secret, call_head("t/none"), "/count", unix_ms()), "/count").await.0, 404);
}
