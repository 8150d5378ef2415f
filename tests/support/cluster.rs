//! A cluster of nodes in one test process, as `serve` wires them: one
//! real PostgreSQL store, each node's heartbeat in it, hops over QUIC with
//! mutual TLS under the cluster CA, signed and checked, and each node's
//! public port reading signed hops too (`--cluster-plaintext allow`). Every
//! node deploys app `t/app`: the test front, the probe as `probe` and as
//! classes `open`, `existing` and `internal`.

use std::sync::Arc;
use std::time::Duration;

use wasmkeep_actors::{Node, NodeConfig, Request, VersionSpec};
use wasmkeep_cluster::cluster_dir::{self, ClusterDir, NodeId};
use wasmkeep_cluster::hop_server::HopServer;
use wasmkeep_cluster::membership::{Load, Membership, unix_ms};
use wasmkeep_cluster::peers::Peers;
use wasmkeep_cluster::signing::Verifier;
use wasmkeep_cluster::transport::Transport;
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, NodeState};
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::{Access, AppId, RawAddress};
use wasmkeep_edge::{AppRouting, PublicPort};
use wasmkeep_storage::{PostgresStore, Store};

use crate::{cache_dir, class, guests, probe_classes, test_limits};

/// One node of a test cluster.
pub struct Member {
    pub node: Node,
    pub transport: Arc<Transport>,
    pub dir: ClusterDir,
    /// The public port's address.
    pub addr: std::net::SocketAddr,
    /// Its heartbeat and view of the others.
    pub membership: Arc<Membership>,
    /// Its owner hints and hops: what its node asks the cluster.
    pub peers: Arc<Peers>,
}

/// Nodes `names`, every one announcing every capability.
pub async fn cluster(names: &[&str]) -> (tempfile::TempDir, Vec<Member>, AppId) {
    cluster_of(names, &[]).await
}

/// Nodes `names`; those in `older` announce no `handoff` (a node of the
/// version before relayed hand-offs).
pub async fn cluster_of(names: &[&str], older: &[&str]) -> (tempfile::TempDir, Vec<Member>, AppId) {
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
            capabilities: match older.contains(&id.as_str()) {
                true => Capabilities { handoff: false, ..Capabilities::OURS },
                false => Capabilities::OURS,
            },
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
        let node = Node::in_cluster(config, store.clone() as Arc<dyn Store>, peers.clone()).unwrap();
        let mut classes = probe_classes();
        classes.push(class("probe", Access::Open, &guests().probe));
        let spec = VersionSpec { front: Some(guests().front.clone()), classes, ..Default::default() };
        let deployed = node.deploy("t", "app", spec).await.unwrap().app;
        app = Some(deployed);
        let server = HopServer::new(node.clone(), Arc::new(Verifier::new(&cd.secret)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let port =
            PublicPort::new(node.clone(), AppRouting::Single(deployed)).with_signed_hops(Arc::new(server.clone()));
        tokio::spawn(wasmkeep_edge::serve(listener, port, std::future::pending()));
        let serving = transport.clone();
        tokio::spawn(async move { serving.serve(server).await });
        membership.run();
        members.push((Member { node, transport, dir: cd, addr, membership: membership.clone(), peers }, membership));
    }
    // Everyone has read everyone's heartbeat.
    for (_, m) in &members {
        m.beat(unix_ms()).await.unwrap();
    }
    (dir, members.into_iter().map(|(m, _)| m).collect(), app.unwrap())
}

/// A client's WebSocket.
pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A client's WebSocket at `path` on `m`'s public port, with `head` added.
pub async fn ws_with(m: &Member, path: &str, head: &http::HeaderMap) -> Result<Ws, (u16, http::HeaderMap, String)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{}{path}", m.addr).into_client_request().unwrap();
    for (name, value) in head {
        request.headers_mut().append(name, value.clone());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, response)) => {
            assert!(response.headers().keys().all(|h| !h.as_str().starts_with("x-wasmkeep-")), "{response:?}");
            Ok(ws)
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
            Err((response.status().as_u16(), response.headers().clone(), body))
        }
        Err(e) => panic!("{path}: {e}"),
    }
}

/// A client's WebSocket at `path` on `m`'s public port.
pub async fn ws(m: &Member, path: &str) -> Ws {
    ws_with(m, path, &http::HeaderMap::new()).await.unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

/// The next text message, or the close as `close <code> <reason>`.
pub async fn next_text(ws: &mut Ws) -> String {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("a message in time") {
            Some(Ok(Message::Text(t))) => return t.to_string(),
            Some(Ok(Message::Binary(b))) => return format!("binary {b:?}"),
            Some(Ok(Message::Close(f))) => {
                return format!(
                    "close {}",
                    f.map(|f| format!("{} {}", u16::from(f.code), f.reason)).unwrap_or_default()
                );
            }
            Some(Ok(_)) => continue,
            other => panic!("{other:?}"),
        }
    }
}

/// `GET path` of `actor` through node `m`, called by the front, its JSON.
pub async fn actor_get(m: &Member, app: AppId, actor: &str, path: &str) -> serde_json::Value {
    let get = Request { method: "GET".into(), path: path.into(), headers: vec![], body: vec![] };
    let front = wasmkeep_core::Origin::Inside { caller: wasmkeep_core::Caller::Front, chain: Default::default() };
    let r = m.node.request_to(app, RawAddress::split(actor).unwrap(), front, get).await.unwrap();
    serde_json::from_slice(&r.body).unwrap()
}

/// `wasmkeep_forwards_total{kind}` of node `m`.
pub fn forwarded(m: &Member, kind: HopKind) -> u64 {
    m.node.metrics().forwards.get(kind)
}
