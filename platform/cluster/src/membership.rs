//! Membership (docs/spec/cluster.md §2): every node writes its heartbeat to
//! the shared store every second and reads everyone's; a node whose last
//! heartbeat is older than the failover wait is dead. The view a node acts
//! on (who is alive, where it listens, what it can take) is the last one
//! read.
//!
//! A node is ready (`/readyz`) while its own heartbeat is current: written
//! within [`CURRENT`], well inside the failover wait, so a load balancer
//! stops sending to a node that lost the store before the others take its
//! actors.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, INTERVAL, NodeState};
use wasmkeep_storage::{ClusterStore, StoreError};

/// How recent this node's last written heartbeat must be for it to count
/// itself ready (never more than half the failover wait).
pub const CURRENT: Duration = Duration::from_secs(3);

/// Unix milliseconds now.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// What the node's heartbeat says of its load, read when it is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub resident: u64,
    pub pool: u64,
    pub sockets: u64,
}

/// This node's part in the cluster's membership.
pub struct Membership {
    store: Arc<dyn ClusterStore>,
    /// This node's heartbeat but for its load and time.
    me: Heartbeat,
    wait: Duration,
    draining: AtomicBool,
    /// When this node's heartbeat was last written (unix ms; 0: never).
    written_ms: AtomicU64,
    /// How many times this node found its heartbeat unwritten for the
    /// failover wait, and the last write it found that after.
    tenure: AtomicU64,
    stale_after: AtomicU64,
    /// Every node's last heartbeat, as last read (this node's included).
    view: RwLock<BTreeMap<String, Heartbeat>>,
    load: Box<dyn Fn() -> Load + Send + Sync>,
}

impl Membership {
    /// `me` is this node's heartbeat as it starts (its id, version,
    /// addresses, start time, capabilities); `load` reads its load.
    pub fn new(
        store: Arc<dyn ClusterStore>,
        me: Heartbeat,
        wait: Duration,
        load: impl Fn() -> Load + Send + Sync + 'static,
    ) -> Self {
        Self {
            store,
            me,
            wait,
            draining: AtomicBool::new(false),
            written_ms: AtomicU64::new(0),
            tenure: AtomicU64::new(0),
            stale_after: AtomicU64::new(0),
            view: RwLock::new(BTreeMap::new()),
            load: Box::new(load),
        }
    }

    pub fn node(&self) -> &str {
        &self.me.node
    }

    pub fn failover_wait(&self) -> Duration {
        self.wait
    }

    /// This node's heartbeat at `now_ms`.
    fn heartbeat(&self, now_ms: u64) -> Heartbeat {
        let load = (self.load)();
        let draining = self.draining.load(Ordering::Relaxed);
        Heartbeat {
            sent_ms: now_ms,
            state: if draining { NodeState::Draining } else { NodeState::Serving },
            resident: load.resident,
            pool: load.pool,
            sockets: load.sockets,
            // A draining node takes no new actors.
            capabilities: Capabilities { take: !draining && self.me.capabilities.take, ..self.me.capabilities },
            ..self.me.clone()
        }
    }

    /// Writes this node's heartbeat, then reads everyone's.
    pub async fn beat(&self, now_ms: u64) -> Result<(), StoreError> {
        let record = self.heartbeat(now_ms).format();
        self.store.beat(&self.me.node, &record, now_ms).await?;
        self.written_ms.fetch_max(now_ms, Ordering::Relaxed);
        self.refresh().await
    }

    /// Reads everyone's heartbeat now (a node named as an owner that this
    /// node has not heard of yet may have started since the last beat).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let mut view = BTreeMap::new();
        for (node, record, sent_ms) in self.store.heartbeats().await? {
            match Heartbeat::parse(&record) {
                // The store's column is the time that counts (what a take compares).
                Ok(h) if h.node == node => {
                    view.insert(node, Heartbeat { sent_ms, ..h });
                }
                Ok(_) | Err(_) => tracing::warn!(%node, "a node's heartbeat cannot be read; it counts as dead"),
            }
        }
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = view;
        Ok(())
    }

    /// Beats every second until the process ends.
    pub fn run(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = me.beat(unix_ms()).await {
                    tracing::warn!(error = %e, "the heartbeat could not be written");
                }
            }
        })
    }

    /// Whether this node's heartbeat is current at `now_ms`.
    pub fn is_ready(&self, now_ms: u64) -> bool {
        let written = self.written_ms.load(Ordering::Relaxed);
        let current = CURRENT.min(self.wait / 2).as_millis() as u64;
        written != 0 && now_ms.saturating_sub(written) <= current && !self.draining.load(Ordering::Relaxed)
    }

    /// This node's tenure at `now_ms`: it grows, once per silence, when its
    /// own heartbeat has gone unwritten longer than the failover wait (it
    /// was paused, or cut off from the store): the others may have taken
    /// its actors meanwhile.
    pub fn tenure(&self, now_ms: u64) -> u64 {
        let written = self.written_ms.load(Ordering::Acquire);
        let silent = written != 0 && now_ms.saturating_sub(written) > self.wait.as_millis() as u64;
        if silent && self.stale_after.swap(written, Ordering::AcqRel) != written {
            return self.tenure.fetch_add(1, Ordering::AcqRel) + 1;
        }
        self.tenure.load(Ordering::Acquire)
    }

    /// From now on the heartbeat says `draining` and no longer `take`.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Node `node`'s last heartbeat, if it is alive at `now_ms`.
    pub fn live(&self, node: &str, now_ms: u64) -> Option<Heartbeat> {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.get(node).filter(|h| h.is_live(now_ms, self.wait)).cloned()
    }

    /// Whether node `node` is alive at `now_ms` (no copy of its heartbeat:
    /// asked for every event routed by a hint).
    pub fn is_alive(&self, node: &str, now_ms: u64) -> bool {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.get(node).is_some_and(|h| h.is_live(now_ms, self.wait))
    }

    /// Every node alive at `now_ms`, by id.
    pub fn alive(&self, now_ms: u64) -> Vec<Heartbeat> {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        view.values().filter(|h| h.is_live(now_ms, self.wait)).cloned().collect()
    }

    /// Every node's last heartbeat this node read, live or not.
    pub fn heartbeats(&self) -> Vec<Heartbeat> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// A heartbeat sent before this is a dead node's (what a take passes).
    pub fn dead_before_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.wait.as_millis() as u64)
    }
}

/// The age of each node's last heartbeat as this node read it: a peer
/// whose age climbs past the failover wait is dead to this node.
impl wasmkeep_telemetry::Source for Membership {
    fn collect(&self, out: &mut wasmkeep_telemetry::Exposition) {
        let now = unix_ms();
        out.gauge_f64(
            "wasmkeep_peer_heartbeat_age_seconds",
            "Age of each node's last heartbeat, as this node last read it, by node.",
            self.heartbeats()
                .into_iter()
                .map(|h| (vec![("node", h.node)], now.saturating_sub(h.sent_ms) as f64 / 1000.0)),
        );
        out.gauge_f64(
            "wasmkeep_failover_wait_seconds",
            "How old a node's heartbeat may be before it is dead.",
            [(vec![], self.wait.as_secs_f64())],
        );
    }
}

#[cfg(test)]
mod tests {
    use wasmkeep_core::heartbeat::Capabilities;
    use wasmkeep_storage::PostgresStore;

    use super::*;

    fn heartbeat(node: &str) -> Heartbeat {
        Heartbeat {
            node: node.into(),
            version: "0.1.0".into(),
            public_addr: "127.0.0.1:8080".into(),
            cluster_addr: "127.0.0.1:9000".into(),
            started_ms: 1,
            sent_ms: 1,
            state: NodeState::Serving,
            resident: 0,
            pool: 0,
            sockets: 0,
            capabilities: Capabilities::OURS,
        }
    }

    #[tokio::test]
    async fn the_tenure_grows_once_per_silence_longer_than_the_wait() {
        let m = members(&["a"]).await;
        assert_eq!(m[0].tenure(T0), 0, "never written: nothing to doubt");
        m[0].beat(T0).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 10_000), 0);
        assert_eq!(m[0].tenure(T0 + 10_001), 1);
        assert_eq!(m[0].tenure(T0 + 20_000), 1, "one silence, one step");
        m[0].beat(T0 + 20_000).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 20_500), 1);
        assert_eq!(m[0].tenure(T0 + 40_000), 2);
    }

    async fn members(names: &[&str]) -> Vec<Arc<Membership>> {
        let url = wasmkeep_storage::test_postgres::server().database().await;
        let store: Arc<dyn ClusterStore> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
        names
            .iter()
            .map(|n| {
                Arc::new(Membership::new(store.clone(), heartbeat(n), Duration::from_secs(10), || Load {
                    resident: 3,
                    pool: 10,
                    sockets: 2,
                }))
            })
            .collect()
    }

    const T0: u64 = 1_800_000_000_000;

    #[tokio::test]
    async fn a_node_is_alive_until_its_heartbeat_is_older_than_the_wait() {
        let m = members(&["a", "b"]).await;
        m[1].beat(T0).await.unwrap();
        m[0].beat(T0 + 500).await.unwrap();
        let b = m[0].live("b", T0 + 10_000).unwrap();
        assert_eq!((b.resident, b.pool, b.sockets, b.cluster_addr.as_str()), (3, 10, 2, "127.0.0.1:9000"));
        assert!(m[0].live("b", T0 + 10_001).is_none());
        assert_eq!(m[0].alive(T0 + 10_001).iter().map(|h| h.node.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(m[0].live("nobody", T0).is_none());
        assert_eq!(m[0].dead_before_ms(T0 + 10_001), T0 + 1);
    }

    #[tokio::test]
    async fn ready_while_its_own_heartbeat_is_current_and_not_draining() {
        let m = members(&["a", "b"]).await;
        assert!(!m[0].is_ready(T0), "ready before any heartbeat");
        m[0].beat(T0).await.unwrap();
        assert!(m[0].is_ready(T0 + 3_000));
        assert!(!m[0].is_ready(T0 + 3_001));
        m[0].start_draining();
        m[0].beat(T0 + 100).await.unwrap();
        assert!(!m[0].is_ready(T0 + 100));
        // The others read it draining, no longer taking actors.
        m[1].beat(T0 + 200).await.unwrap();
        let a = m[1].live("a", T0 + 200).unwrap();
        assert_eq!(a.state, NodeState::Draining);
        assert!(!a.capabilities.take && a.capabilities.handoff);
    }
}
