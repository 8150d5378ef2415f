//! What the cluster offers the node's router (docs/spec/request-path.md
//! §4): the members as last read, owner hints, signed hops over QUIC and
//! a socket's relay. The cluster crate implements [`Remote`]; where an
//! event goes is decided by `core::placement`, driven by the router.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use wasmkeep_core::placement::Members;
use wasmkeep_core::{Envelope, EventError, MailboxKey};
use wasmkeep_runtime::{Request, Response};

/// An answer of the cluster's, on its way.
pub type Answering<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a hop brought no answer of the owner's actor.
#[derive(Debug)]
pub enum HopFailure {
    /// The owner's node answered with a host error of its own: the event's
    /// answer, as if it had run here.
    Answer(EventError),
    /// The node does not own the actor; `owner` does, as far as it knows.
    Elsewhere(String),
    /// The node could not be reached (or stopped answering mid-way).
    Unreachable(String),
}

/// A socket's open as its client asked for it: the path its actor's
/// `on-websocket-open` sees, and the client's WebSocket headers (the
/// host's range never among them), which a relay passes on.
#[derive(Debug, Clone, Default)]
pub struct SocketRequest {
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Both ends of a relayed socket's bytes.
pub trait RelayStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> RelayStream for T {}

/// The owner's answer to a relayed open, as its client is to get it.
pub struct Relayed {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// After a `101`, the owner's end of the socket: the relaying node
    /// copies bytes between it and the client.
    pub io: Option<Box<dyn RelayStream>>,
}

impl std::fmt::Debug for Relayed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relayed").field("status", &self.status).field("upgraded", &self.io.is_some()).finish()
    }
}

/// What the cluster offers the node's router.
pub trait Remote: Send + Sync + 'static {
    /// The cluster's members as this node last read them.
    fn members(&self) -> Arc<Members>;
    /// The members, read afresh first if they do not know node `node`
    /// alive (a node the store names may have started since the last
    /// read).
    fn members_knowing(&self, node: String) -> Answering<'_, Arc<Members>>;
    /// The node this one last heard owns `actor`, if any: a guess, which
    /// placement checks.
    fn hint(&self, actor: &MailboxKey) -> Option<String>;
    /// Notes who owns `actor` (`None`: this node, or none known).
    fn note(&self, actor: &MailboxKey, owner: Option<&str>);
    /// This node's tenure: it grows each time the node finds it may have
    /// been declared dead (its own heartbeat went unwritten for the
    /// failover wait: paused, cut off from the store). Owner epochs taken
    /// under an older tenure are dropped before the next event, which takes
    /// its actor afresh: another node may own it now.
    fn tenure(&self) -> u64 {
        0
    }
    /// Whether this node's own heartbeat is current
    /// (`placement::holding::is_current`): a node that is not takes no
    /// actor until it has written one.
    fn is_current(&self) -> bool;
    /// Carries a request event to node `owner`, signed; answers its
    /// actor's response.
    fn request(
        &self,
        owner: String,
        envelope: Envelope,
        request: Request,
    ) -> Answering<'_, Result<Response, HopFailure>>;
    /// Relays a socket's open to node `owner`: an outside upgrade as it
    /// came, a front's hand-off signed; answers the owner's answer, and
    /// after a `101` its end of the socket.
    fn relay(
        &self,
        owner: String,
        envelope: Envelope,
        socket: SocketRequest,
    ) -> Answering<'_, Result<Relayed, HopFailure>>;
    /// Asks every other live node for the guests' records `filter` wants
    /// (those kept, and with `follow` each one after) and sends them to
    /// `to` as they come, until `to`'s reader leaves (or, without
    /// `follow`, each node has sent what it kept). Answers how many nodes
    /// were asked. None by default: a node alone has no others.
    fn tail(
        &self,
        filter: wasmkeep_telemetry::logs::LogFilter,
        follow: bool,
        to: tokio::sync::mpsc::Sender<wasmkeep_telemetry::logs::TailItem>,
    ) -> usize {
        let _ = (filter, follow, to);
        0
    }
}
