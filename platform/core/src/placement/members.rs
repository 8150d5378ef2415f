//! The cluster's members as one node last read them (docs/spec/cluster.md
//! §2): every node's last heartbeat, and the rules read from them: who is
//! alive, which heartbeat is a dead node's, who runs an actor while its
//! owner drains, who takes a front's hand-off.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::MailboxKey;
use crate::heartbeat::{Heartbeat, NodeState};

/// The heartbeats a node of a cluster read last (its own among them), with
/// its own id and the failover wait; or a node alone, which has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    me: String,
    wait: Duration,
    beats: BTreeMap<String, Heartbeat>,
    clustered: bool,
}

impl Members {
    /// The view of node `me` of a cluster: `beats` as read (the store's
    /// send time in each), a heartbeat older than `wait` being a dead
    /// node's.
    pub fn new(me: impl Into<String>, wait: Duration, beats: impl IntoIterator<Item = Heartbeat>) -> Self {
        let beats = beats.into_iter().map(|h| (h.node.clone(), h)).collect();
        Self { me: me.into(), wait, beats, clustered: true }
    }

    /// Node `me`, alone: no other node can own its actors.
    pub fn alone(me: impl Into<String>) -> Self {
        Self { me: me.into(), ..Self::default() }
    }

    /// Whether this node is one of a cluster (even of one live node).
    pub fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// This node's id.
    pub fn me(&self) -> &str {
        &self.me
    }

    pub fn failover_wait(&self) -> Duration {
        self.wait
    }

    /// Every node's last heartbeat, live or not, by id.
    pub fn heartbeats(&self) -> impl Iterator<Item = &Heartbeat> {
        self.beats.values()
    }

    /// Node `node`'s last heartbeat, if it is alive at `now_ms`.
    pub fn live(&self, node: &str, now_ms: u64) -> Option<&Heartbeat> {
        self.beats.get(node).filter(|h| h.is_live(now_ms, self.wait))
    }

    /// Whether node `node` is alive at `now_ms`: its last heartbeat is no
    /// older than the failover wait. A node never read is dead.
    pub fn is_alive(&self, node: &str, now_ms: u64) -> bool {
        self.live(node, now_ms).is_some()
    }

    /// Every node alive at `now_ms`, by id.
    pub fn alive(&self, now_ms: u64) -> impl Iterator<Item = &Heartbeat> {
        self.beats.values().filter(move |h| h.is_live(now_ms, self.wait))
    }

    /// A heartbeat sent before this (unix ms) is a dead node's: what a take
    /// of an actor at `now_ms` passes to the store.
    pub fn dead_before_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(u64::try_from(self.wait.as_millis()).unwrap_or(u64::MAX))
    }

    /// The node to run `actor` while this one drains: of the other live
    /// nodes serving and taking actors, the one that scores highest for
    /// the actor (rendezvous hashing), so every draining node picks the
    /// same one for the same actor while the members stay.
    pub fn successor(&self, actor: &MailboxKey, now_ms: u64) -> Option<String> {
        let score = |node: &str| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&(node, actor), &mut h);
            std::hash::Hasher::finish(&h)
        };
        self.alive(now_ms)
            .filter(|peer| peer.node != self.me && peer.capabilities.take && peer.state == NodeState::Serving)
            .max_by_key(|peer| score(&peer.node))
            .map(|peer| peer.node.clone())
    }

    /// Whether node `node` is alive at `now_ms` and announces that it takes
    /// relayed hand-offs (the capability word `handoff`).
    pub fn takes_handoffs(&self, node: &str, now_ms: u64) -> bool {
        self.live(node, now_ms).is_some_and(|peer| peer.capabilities.handoff)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::heartbeat::Capabilities;
    use crate::{AppId, RawAddress};

    pub const WAIT: Duration = Duration::from_secs(10);

    /// A node serving and taking everything, its heartbeat sent at `sent_ms`.
    pub fn beat(node: &str, sent_ms: u64) -> Heartbeat {
        Heartbeat {
            node: node.into(),
            version: "0.1.0".into(),
            public_addr: "127.0.0.1:1".into(),
            cluster_addr: "127.0.0.1:2".into(),
            started_ms: 0,
            sent_ms,
            state: NodeState::Serving,
            resident: 0,
            pool: 0,
            sockets: 0,
            capabilities: Capabilities::OURS,
        }
    }

    pub fn key(name: &str) -> MailboxKey {
        MailboxKey { app: AppId(1), address: RawAddress::split(&format!("counter/{name}")).unwrap() }
    }

    #[test]
    fn a_node_lives_while_its_heartbeat_is_no_older_than_the_wait() {
        let m = Members::new("a", WAIT, [beat("a", 100_000), beat("b", 90_000)]);
        assert!(m.is_alive("b", 100_000));
        assert!(m.is_alive("b", 90_000 + 10_000), "exactly the wait old: alive");
        assert!(!m.is_alive("b", 90_000 + 10_001));
        assert!(!m.is_alive("c", 100_000), "a node never read is dead");
        assert!(m.is_alive("b", 1), "a heartbeat from the future is alive");
        assert_eq!(m.alive(100_001).map(|h| h.node.as_str()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(m.live("a", 100_000).map(|h| h.sent_ms), Some(100_000));
        assert_eq!(m.heartbeats().count(), 2);
    }

    #[test]
    fn a_take_passes_now_less_the_wait() {
        let m = Members::new("a", WAIT, []);
        assert_eq!(m.dead_before_ms(100_000), 90_000);
        assert_eq!(m.dead_before_ms(5), 0, "never below zero");
        assert_eq!(Members::alone("a").dead_before_ms(7), 7, "alone: no wait");
        assert!(!Members::alone("a").is_clustered());
        assert!(Members::new("a", WAIT, []).is_clustered(), "a cluster of one is a cluster");
    }

    #[test]
    fn the_successor_is_another_live_node_serving_and_taking_the_same_for_every_asker() {
        let now = 100_000;
        let mut draining = beat("d", now);
        draining.state = NodeState::Draining;
        let mut no_take = beat("e", now);
        no_take.capabilities.take = false;
        let peers = [beat("a", now), beat("b", now), beat("c", now), beat("dead", now - 20_000), draining, no_take];
        let from_a = Members::new("a", WAIT, peers.clone());
        let from_d = Members::new("d", WAIT, peers.clone());
        let mut chosen = std::collections::BTreeSet::new();
        for i in 0..64 {
            let actor = key(&format!("n{i}"));
            let s = from_a.successor(&actor, now).unwrap();
            assert!(s == "b" || s == "c", "{s}: only live, serving, taking others");
            // Another draining node picks the same (when it is not among them).
            let t = from_d.successor(&actor, now).unwrap();
            if t != "a" {
                assert_eq!(s, t);
            }
            chosen.insert(s);
        }
        assert_eq!(chosen.len(), 2, "actors spread over the candidates");
        let alone = Members::new("a", WAIT, [beat("a", now)]);
        assert_eq!(alone.successor(&key("x"), now), None);
    }

    #[test]
    fn a_handoff_goes_only_to_a_live_node_announcing_it() {
        let now = 100_000;
        let mut old = beat("old", now);
        old.capabilities.handoff = false;
        let m = Members::new("a", WAIT, [beat("b", now), old, beat("dead", now - 10_001)]);
        assert!(m.takes_handoffs("b", now));
        assert!(!m.takes_handoffs("old", now));
        assert!(!m.takes_handoffs("dead", now));
        assert!(!m.takes_handoffs("nobody", now));
    }
}
