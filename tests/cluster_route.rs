//! The router's remote route with real nodes on one real PostgreSQL store:
//! two nodes in this process serve the probe app; ownership is taken in
//! the store against the nodes' heartbeats. The hop between them is the
//! test's neighbour: a direct call of the other node's
//! `request_forwarded` (the QUIC transport and the signatures are the
//! cluster crate's, tested there).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmkeep_actors::{
    Answering, HopFailure, Node, NodeConfig, Relayed, Remote, Request, Response, SocketRequest, VersionSpec,
};
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, NodeState};
use wasmkeep_core::placement::Members;
use wasmkeep_core::{Access, AppId, Envelope, EventError, MailboxKey, Origin, RawAddress, Refusal};
use wasmkeep_storage::{ClusterStore, PostgresStore, Store};
use wasmkeep_tests::{cache_dir, class, guests, test_limits};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

const WAIT: Duration = Duration::from_secs(10);

/// The cluster as a node of this test sees it: the heartbeats (as the
/// store has them), who answers, the hints, and the other nodes, reached
/// directly.
struct Direct {
    me: String,
    nodes: Arc<Mutex<HashMap<String, Node>>>,
    beats: Arc<Mutex<HashMap<String, u64>>>,
    reachable: Arc<Mutex<HashSet<String>>>,
    hints: Mutex<HashMap<MailboxKey, String>>,
    /// This node's tenure, as the test says.
    tenures: Arc<Mutex<HashMap<String, u64>>>,
}

impl Remote for Direct {
    /// Every node the test beat for, serving and taking actors (hand-offs
    /// are relayed over the real transport, `cluster_hops.rs`, not here).
    fn members(&self) -> Arc<Members> {
        let beats: Vec<Heartbeat> = self
            .beats
            .lock()
            .unwrap()
            .iter()
            .map(|(node, sent_ms)| Heartbeat {
                node: node.clone(),
                version: "0.1.0".into(),
                public_addr: "127.0.0.1:1".into(),
                cluster_addr: "127.0.0.1:2".into(),
                started_ms: 0,
                sent_ms: *sent_ms,
                state: NodeState::Serving,
                resident: 0,
                pool: 0,
                sockets: 0,
                capabilities: Capabilities { handoff: false, ..Capabilities::OURS },
            })
            .collect();
        Arc::new(Members::new(self.me.clone(), WAIT, beats))
    }

    fn members_knowing(&self, _: String) -> Answering<'_, Arc<Members>> {
        Box::pin(std::future::ready(self.members()))
    }

    fn tenure(&self) -> u64 {
        self.tenures.lock().unwrap().get(&self.me).copied().unwrap_or(0)
    }

    /// As the test's beats say.
    fn is_current(&self) -> bool {
        let sent = self.beats.lock().unwrap().get(&self.me).copied().unwrap_or(0);
        wasmkeep_core::placement::holding::is_current(sent, now_ms(), WAIT)
    }

    fn hint(&self, actor: &MailboxKey) -> Option<String> {
        self.hints.lock().unwrap().get(actor).cloned()
    }

    fn note(&self, actor: &MailboxKey, owner: Option<&str>) {
        let mut hints = self.hints.lock().unwrap();
        match owner {
            Some(owner) => hints.insert(actor.clone(), owner.to_owned()),
            None => hints.remove(actor),
        };
    }

    fn relay(&self, owner: String, _: Envelope, _: SocketRequest) -> Answering<'_, Result<Relayed, HopFailure>> {
        Box::pin(std::future::ready(Err(HopFailure::Unreachable(format!("{owner}: no relays in this test")))))
    }

    fn request(
        &self,
        owner: String,
        envelope: Envelope,
        request: Request,
    ) -> Answering<'_, Result<Response, HopFailure>> {
        Box::pin(async move {
            if !self.reachable.lock().unwrap().contains(&owner) {
                return Err(HopFailure::Unreachable(format!("{owner} does not answer")));
            }
            let node = self.nodes.lock().unwrap().get(&owner).cloned();
            let Some(node) = node else { return Err(HopFailure::Unreachable(format!("no node {owner}"))) };
            match node.request_forwarded(envelope, request).await {
                Ok(response) => Ok(response),
                Err(EventError::Refused(Refusal::Elsewhere { owner })) => Err(HopFailure::Elsewhere(owner)),
                Err(e) => Err(HopFailure::Answer(e)),
            }
        })
    }
}

struct Cluster {
    store: Arc<PostgresStore>,
    nodes: Arc<Mutex<HashMap<String, Node>>>,
    beats: Arc<Mutex<HashMap<String, u64>>>,
    reachable: Arc<Mutex<HashSet<String>>>,
    tenures: Arc<Mutex<HashMap<String, u64>>>,
    app: AppId,
}

impl Cluster {
    async fn start(names: &[&str]) -> Self {
        let url = wasmkeep_storage::test_postgres::server().database().await;
        let store = Arc::new(PostgresStore::connect(&url, 8).await.unwrap());
        let nodes = Arc::new(Mutex::new(HashMap::new()));
        let (beats, reachable) = (Arc::new(Mutex::new(HashMap::new())), Arc::new(Mutex::new(HashSet::new())));
        let tenures = Arc::new(Mutex::new(HashMap::new()));
        let values = Arc::new(wasmkeep_storage::ValueKey::generate());
        let mut app = None;
        for name in names {
            let remote = Arc::new(Direct {
                me: name.to_string(),
                nodes: nodes.clone(),
                beats: beats.clone(),
                reachable: reachable.clone(),
                hints: Mutex::new(HashMap::new()),
                tenures: tenures.clone(),
            });
            let config = NodeConfig {
                id: name.to_string(),
                limits: test_limits(),
                cache_dir: Some(cache_dir()),
                egress: EgressPolicy::Open,
                values: values.clone(),
                egress_roots: Vec::new(),
            };
            let node = Node::in_cluster(config, store.clone() as Arc<dyn Store>, remote).unwrap();
            let spec = VersionSpec {
                front: None,
                classes: vec![class("probe", Access::Open, &guests().probe)],
                ..Default::default()
            };
            app = Some(node.deploy("t", "app", spec).await.unwrap().app);
            nodes.lock().unwrap().insert(name.to_string(), node);
            reachable.lock().unwrap().insert(name.to_string());
        }
        let c = Self { store, nodes, beats, reachable, tenures, app: app.unwrap() };
        for name in names {
            c.beat(name, now_ms()).await;
        }
        c
    }

    /// Node `name`'s heartbeat, sent at `sent_ms`.
    async fn beat(&self, name: &str, sent_ms: u64) {
        self.store.beat(name, "", sent_ms).await.unwrap();
        self.beats.lock().unwrap().insert(name.to_owned(), sent_ms);
    }

    fn node(&self, name: &str) -> Node {
        self.nodes.lock().unwrap()[name].clone()
    }

    /// One more on counter `actor`, through node `via`, as an outside caller.
    async fn count(&self, via: &str, actor: &str) -> Result<i64, EventError> {
        let node = self.node(via);
        let get = Request { method: "GET".into(), path: "/count".into(), headers: vec![], body: vec![] };
        let target = RawAddress::split(&format!("probe/{actor}")).unwrap();
        let r = node.request_to(self.app, target, Origin::Outside, get).await?;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        Ok(v["count"].as_i64().unwrap())
    }

    fn forwards(&self, node: &str) -> String {
        let text = wasmkeep_telemetry::render(&[&**self.node(node).metrics()]);
        text.lines()
            .filter(|l| l.starts_with("wasmkeep_forwards_total{") || l.starts_with("wasmkeep_reroutes_total{"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_through_both_nodes_has_one_owner_and_counts_in_order() {
    let c = Cluster::start(&["a", "b"]).await;
    let mut last = 0;
    for i in 0..12 {
        let via = if i % 2 == 0 { "a" } else { "b" };
        let n = c.count(via, "x").await.unwrap();
        assert_eq!(n, last + 1, "through {via}");
        last = n;
    }
    // The first node to take it owns it; the other carried its events there.
    let key = wasmkeep_core::ActorKey { app: c.app, address: wasmkeep_core::Address::parse("probe/x").unwrap() };
    assert_eq!(c.store.owner(&key).await.unwrap().as_deref(), Some("a"));
    assert!(c.forwards("b").contains("wasmkeep_forwards_total{kind=\"request\"} 6"), "{}", c.forwards("b"));
    assert!(c.forwards("a").contains("wasmkeep_forwards_total{kind=\"request\"} 0"), "{}", c.forwards("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_died_is_waited_for_then_its_actor_is_taken_with_nothing_lost() {
    let c = Cluster::start(&["a", "b"]).await;
    for n in 1..=3 {
        assert_eq!(c.count("a", "y").await.unwrap(), n);
    }
    // a stops answering; its last heartbeat ages past the failover wait
    // only a while later: b waits for that, then takes the actor.
    c.reachable.lock().unwrap().remove("a");
    let c = Arc::new(c);
    let dying = tokio::spawn({
        let c = c.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            c.beat("a", now_ms() - WAIT.as_millis() as u64 - 1).await;
        }
    });
    let started = std::time::Instant::now();
    assert_eq!(c.count("b", "y").await.unwrap(), 4);
    assert!(started.elapsed() >= Duration::from_millis(500), "b did not wait for the takeover");
    dying.await.unwrap();
    let key = wasmkeep_core::ActorKey { app: c.app, address: wasmkeep_core::Address::parse("probe/y").unwrap() };
    assert_eq!(c.store.owner(&key).await.unwrap().as_deref(), Some("b"));
    assert_eq!(c.count("b", "y").await.unwrap(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_back_from_the_dead_takes_its_actors_afresh_and_finds_them_elsewhere() {
    let c = Cluster::start(&["a", "b"]).await;
    // a owns z and keeps it resident.
    assert_eq!(c.count("a", "z").await.unwrap(), 1);
    assert_eq!(c.count("a", "z").await.unwrap(), 2);
    // a is paused past the failover wait: b takes z and counts on.
    c.reachable.lock().unwrap().remove("a");
    c.beat("a", now_ms() - WAIT.as_millis() as u64 - 1).await;
    assert_eq!(c.count("b", "z").await.unwrap(), 3);
    // a comes back; it finds it was silent too long (its tenure grows):
    // its resident z and its epoch are not trusted; the event is taken
    // afresh, found b's, and carried there.
    c.reachable.lock().unwrap().insert("a".into());
    c.beat("a", now_ms()).await;
    c.tenures.lock().unwrap().insert("a".into(), 1);
    assert_eq!(c.count("a", "z").await.unwrap(), 4);
    assert_eq!(c.count("b", "z").await.unwrap(), 5);
}
