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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, INTERVAL, NodeState};
use wasmkeep_core::placement::Members;
use wasmkeep_core::placement::holding::{self, Tenure};
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
    /// failover wait (`placement::holding::Tenure`).
    tenure: Mutex<Tenure>,
    /// Every node's last heartbeat, as last read (this node's included).
    view: RwLock<Arc<Members>>,
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
            wait,
            draining: AtomicBool::new(false),
            written_ms: AtomicU64::new(0),
            tenure: Mutex::new(Tenure::default()),
            view: RwLock::new(Arc::new(Members::new(me.node.clone(), wait, []))),
            load: Box::new(load),
            me,
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
        // A silence is looked for before the write ends it: a node paused
        // past the failover wait whose first act is this beat would
        // otherwise never see it, and serve from memory actors another
        // node took meanwhile.
        self.tenure(now_ms);
        let record = self.heartbeat(now_ms).format();
        self.store.beat(&self.me.node, &record, now_ms).await?;
        self.written_ms.fetch_max(now_ms, Ordering::Relaxed);
        self.refresh().await
    }

    /// Reads everyone's heartbeat now (a node named as an owner that this
    /// node has not heard of yet may have started since the last beat).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let mut beats = Vec::new();
        for (node, record, sent_ms) in self.store.heartbeats().await? {
            match Heartbeat::parse(&record) {
                // The store's column is the time that counts (what a take compares).
                Ok(h) if h.node == node => beats.push(Heartbeat { sent_ms, ..h }),
                Ok(_) | Err(_) => tracing::warn!(%node, "a node's heartbeat cannot be read; it counts as dead"),
            }
        }
        let members = Arc::new(Members::new(self.me.node.clone(), self.wait, beats));
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = members;
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
    /// own heartbeat has gone unwritten longer than three quarters of the
    /// failover wait (it was paused, or cut off from the store): the
    /// others, their clocks perhaps ahead, may have taken its actors.
    pub fn tenure(&self, now_ms: u64) -> u64 {
        let mut tenure = self.tenure.lock().unwrap_or_else(|p| p.into_inner());
        tenure.at(self.written_ms.load(Ordering::Acquire), now_ms, self.wait)
    }

    /// Whether this node's heartbeat is current at `now_ms`
    /// (`placement::holding::is_current`): it takes actors only then.
    pub fn is_current(&self, now_ms: u64) -> bool {
        holding::is_current(self.written_ms.load(Ordering::Acquire), now_ms, self.wait)
    }

    /// From now on the heartbeat says `draining` and no longer `take`.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// The members as last read.
    pub fn members(&self) -> Arc<Members> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Node `node`'s last heartbeat, if it is alive at `now_ms`.
    pub fn live(&self, node: &str, now_ms: u64) -> Option<Heartbeat> {
        self.members().live(node, now_ms).cloned()
    }

    /// Whether node `node` is alive at `now_ms`.
    pub fn is_alive(&self, node: &str, now_ms: u64) -> bool {
        self.members().is_alive(node, now_ms)
    }

    /// Every node alive at `now_ms`, by id.
    pub fn alive(&self, now_ms: u64) -> Vec<Heartbeat> {
        self.members().alive(now_ms).cloned().collect()
    }

    /// Every node's last heartbeat this node read, live or not.
    pub fn heartbeats(&self) -> Vec<Heartbeat> {
        self.members().heartbeats().cloned().collect()
    }

    /// A heartbeat sent before this is a dead node's (what a take passes).
    pub fn dead_before_ms(&self, now_ms: u64) -> u64 {
        self.members().dead_before_ms(now_ms)
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
    async fn the_tenure_grows_once_per_silence_longer_than_three_quarters_of_the_wait() {
        let m = members(&["a"]).await;
        assert_eq!(m[0].tenure(T0), 0, "never written: nothing to doubt");
        m[0].beat(T0).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 7_500), 0);
        assert_eq!(m[0].tenure(T0 + 7_501), 1, "the clocks' margin: a quarter of the wait");
        assert_eq!(m[0].tenure(T0 + 20_000), 1, "one silence, one step");
        m[0].beat(T0 + 20_000).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 20_500), 1);
        assert_eq!(m[0].tenure(T0 + 40_000), 2);
    }

    /// A node paused past the failover wait whose first act on waking is
    /// its heartbeat still finds its tenure grown: the beat looks for the
    /// silence before its write ends it (else the node would serve from
    /// memory actors another node took meanwhile).
    #[tokio::test]
    async fn a_silence_that_the_next_beat_ends_still_grows_the_tenure() {
        let m = members(&["a"]).await;
        m[0].beat(T0).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 500), 0);
        // Paused for 15 s; nothing asked before the beat.
        m[0].beat(T0 + 15_000).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 15_100), 1, "the silence was seen");
        m[0].beat(T0 + 16_000).await.unwrap();
        assert_eq!(m[0].tenure(T0 + 16_100), 1, "one silence, one step");
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
