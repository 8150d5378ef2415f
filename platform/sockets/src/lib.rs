//! The host's WebSocket registry (docs/spec/sockets.md §1 and §9): sockets
//! belong to the host, not to an instance. Each entry holds the socket's
//! actor, whether the front opened it (the mark its events admit with), and
//! its send queue; the connection's own task drains the queue and reads the
//! client. An actor that hibernates leaves its entries here: it is parked,
//! and its sockets keep their ids.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

/// A socket's id, stable for its life.
pub type ConnId = u64;

/// What the connection's task sends to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    Text(String),
    Binary(Vec<u8>),
    Close { code: u16, reason: String },
}

impl Outgoing {
    fn len(&self) -> u64 {
        match self {
            Self::Text(t) => t.len() as u64,
            Self::Binary(b) => b.len() as u64,
            Self::Close { reason, .. } => reason.len() as u64,
        }
    }
}

/// The registry's limits (docs/spec/tenancy.md §8).
#[derive(Debug, Clone, Copy)]
pub struct SocketLimits {
    pub per_actor: usize,
    pub per_node: usize,
    pub message_bytes: u64,
    pub queue_bytes: u64,
}

/// Why a socket cannot open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenRefusal {
    #[error("too many sockets on this actor")]
    ActorFull,
    #[error("too many sockets on this node")]
    NodeFull,
}

/// Why a send failed, as the `sockets` interface says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("no open socket of this actor has that id")]
    NoSuchSocket,
    #[error("the message is over the per-message limit")]
    TooLarge,
    #[error("the socket's send queue is full")]
    QueueFull,
}

struct Entry<K, O> {
    actor: K,
    origin: O,
    tx: mpsc::UnboundedSender<Outgoing>,
    queued: Arc<AtomicU64>,
}

struct Inner<K, O> {
    sockets: HashMap<ConnId, Entry<K, O>>,
    by_actor: HashMap<K, BTreeSet<ConnId>>,
}

/// Every open socket of the node: each with its actor `K` and where its
/// events come from, `O` (what they are admitted as).
pub struct Registry<K, O> {
    inner: Mutex<Inner<K, O>>,
    next: AtomicU64,
    limits: SocketLimits,
}

/// The connection's side of a registered socket: what to send, and how
/// much of it is queued (given back as it is written).
pub struct SocketQueue {
    pub conn: ConnId,
    pub rx: mpsc::UnboundedReceiver<Outgoing>,
    queued: Arc<AtomicU64>,
}

impl SocketQueue {
    /// Marks `message` as written: its bytes leave the queue.
    pub fn written(&self, message: &Outgoing) {
        self.queued.fetch_sub(message.len(), Ordering::Relaxed);
    }
}

impl<K: Hash + Eq + Clone, O: Clone> Registry<K, O> {
    pub fn new(limits: SocketLimits) -> Self {
        Self {
            inner: Mutex::new(Inner { sockets: HashMap::new(), by_actor: HashMap::new() }),
            next: AtomicU64::new(1),
            limits,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K, O>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a socket of `actor`, whose events come from `origin`.
    pub fn open(&self, actor: K, origin: O) -> Result<SocketQueue, OpenRefusal> {
        let mut inner = self.lock();
        if inner.sockets.len() >= self.limits.per_node {
            return Err(OpenRefusal::NodeFull);
        }
        if inner.by_actor.get(&actor).is_some_and(|s| s.len() >= self.limits.per_actor) {
            return Err(OpenRefusal::ActorFull);
        }
        let conn = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicU64::new(0));
        inner.by_actor.entry(actor.clone()).or_default().insert(conn);
        inner.sockets.insert(conn, Entry { actor, origin, tx, queued: queued.clone() });
        Ok(SocketQueue { conn, rx, queued })
    }

    /// The socket's actor and origin.
    pub fn get(&self, conn: ConnId) -> Option<(K, O)> {
        self.lock().sockets.get(&conn).map(|e| (e.actor.clone(), e.origin.clone()))
    }

    /// Queues `message` on `actor`'s socket `conn`.
    pub fn send(&self, actor: &K, conn: ConnId, message: Outgoing) -> Result<(), SendError> {
        let inner = self.lock();
        let entry = inner.sockets.get(&conn).filter(|e| &e.actor == actor).ok_or(SendError::NoSuchSocket)?;
        let len = message.len();
        if len > self.limits.message_bytes {
            return Err(SendError::TooLarge);
        }
        let queued = entry.queued.load(Ordering::Relaxed);
        if queued + len > self.limits.queue_bytes {
            return Err(SendError::QueueFull);
        }
        entry.queued.fetch_add(len, Ordering::Relaxed);
        entry.tx.send(message).map_err(|_| SendError::NoSuchSocket)
    }

    /// Closes a socket now, whatever its queue holds, and forgets it: the
    /// host's own close (a full queue, an overloaded actor, a deploy).
    pub fn force_close(&self, conn: ConnId, code: u16, reason: &str) {
        let inner = self.lock();
        if let Some(entry) = inner.sockets.get(&conn) {
            let _ = entry.tx.send(Outgoing::Close { code, reason: reason.to_owned() });
        }
        drop(inner);
        self.remove(conn);
    }

    /// Closes every socket of `actor` as [`Self::force_close`] does.
    pub fn close_all(&self, actor: &K, code: u16, reason: &str) {
        for conn in self.list(actor) {
            self.force_close(conn, code, reason);
        }
    }

    /// Closes every socket whose actor matches `which`.
    pub fn close_where(&self, which: impl Fn(&K) -> bool, code: u16, reason: &str) {
        let actors: Vec<K> = self.lock().by_actor.keys().filter(|k| which(k)).cloned().collect();
        for actor in actors {
            self.close_all(&actor, code, reason);
        }
    }

    /// The open sockets of the actors matching `which`.
    pub fn count_where(&self, which: impl Fn(&K) -> bool) -> usize {
        self.lock().by_actor.iter().filter(|(k, _)| which(k)).map(|(_, s)| s.len()).sum()
    }

    /// `actor`'s open sockets, oldest first.
    pub fn list(&self, actor: &K) -> Vec<ConnId> {
        self.lock().by_actor.get(actor).map(|s| s.iter().copied().collect()).unwrap_or_default()
    }

    /// Forgets a socket (closed, or its connection lost).
    pub fn remove(&self, conn: ConnId) {
        let mut inner = self.lock();
        if let Some(entry) = inner.sockets.remove(&conn)
            && let Some(set) = inner.by_actor.get_mut(&entry.actor)
        {
            set.remove(&conn);
            if set.is_empty() {
                inner.by_actor.remove(&entry.actor);
            }
        }
    }

    /// Every open socket, by id.
    pub fn all(&self) -> Vec<ConnId> {
        self.lock().sockets.keys().copied().collect()
    }

    /// Sockets open on the node.
    pub fn len(&self) -> usize {
        self.lock().sockets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(per_actor: usize, per_node: usize) -> Registry<&'static str, bool> {
        Registry::new(SocketLimits { per_actor, per_node, message_bytes: 10, queue_bytes: 25 })
    }

    #[test]
    fn sockets_are_counted_per_actor_and_per_node() {
        let r = registry(2, 3);
        let a1 = r.open("a", false).unwrap();
        let _a2 = r.open("a", true).unwrap();
        assert_eq!(r.open("a", false).err(), Some(OpenRefusal::ActorFull));
        let _b1 = r.open("b", false).unwrap();
        assert_eq!(r.open("c", false).err(), Some(OpenRefusal::NodeFull));
        r.remove(a1.conn);
        assert_eq!(r.list(&"a").len(), 1);
        assert!(r.open("c", false).is_ok());
    }

    #[test]
    fn ids_are_unique_and_entries_keep_their_mark() {
        let r = registry(10, 10);
        let a = r.open("a", true).unwrap();
        let b = r.open("a", false).unwrap();
        assert_ne!(a.conn, b.conn);
        assert_eq!(r.get(a.conn), Some(("a", true)));
        assert_eq!(r.get(b.conn), Some(("a", false)));
        assert_eq!(r.list(&"a"), vec![a.conn, b.conn]);
        r.remove(a.conn);
        r.remove(b.conn);
        assert_eq!(r.get(a.conn), None);
        assert!(r.list(&"a").is_empty() && r.is_empty());
    }

    #[test]
    fn closing_all_of_an_actors_sockets_leaves_the_others() {
        let r = registry(10, 10);
        let mut a1 = r.open("a", false).unwrap();
        let _a2 = r.open("a", true).unwrap();
        let b = r.open("b", false).unwrap();
        r.close_all(&"a", 1000, "gone");
        assert!(r.list(&"a").is_empty());
        assert_eq!(r.list(&"b"), vec![b.conn]);
        assert_eq!(a1.rx.try_recv().unwrap(), Outgoing::Close { code: 1000, reason: "gone".into() });
        r.close_where(|k| k.starts_with('b'), 1001, "removed");
        assert!(r.is_empty());
    }

    #[test]
    fn sends_reach_only_the_actors_own_socket_within_the_limits() {
        let r = registry(10, 10);
        let mut q = r.open("a", false).unwrap();
        assert_eq!(r.send(&"b", q.conn, Outgoing::Text("hi".into())), Err(SendError::NoSuchSocket));
        assert_eq!(r.send(&"a", 999, Outgoing::Text("hi".into())), Err(SendError::NoSuchSocket));
        assert_eq!(r.send(&"a", q.conn, Outgoing::Binary(vec![0; 11])), Err(SendError::TooLarge));
        for _ in 0..2 {
            r.send(&"a", q.conn, Outgoing::Binary(vec![0; 10])).unwrap();
        }
        assert_eq!(r.send(&"a", q.conn, Outgoing::Text("123456".into())), Err(SendError::QueueFull));
        let first = q.rx.try_recv().unwrap();
        q.written(&first);
        r.send(&"a", q.conn, Outgoing::Text("123456".into())).unwrap();
    }
}
