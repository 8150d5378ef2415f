//! The router's second route (docs/spec/request-path.md §4): an actor owned
//! by another node of the cluster. The cluster crate implements [`Remote`]
//! (owner hints, signed hops over QUIC, membership); this file decides,
//! once for every path, when an event goes there.
//!
//! A request event goes to the node the hints name, when that node is
//! alive. Otherwise it is queued here, and the actor's task takes the
//! actor (a compare-and-set in the store against its owner's liveness):
//! if another node owns it, the task hands the event on to that node. A
//! node that receives a hop for an actor it does not own answers
//! [`Refusal::Elsewhere`] with the owner it found, and the sending node
//! sends it on there, a few times at most. An owner that does not answer
//! is waited for until its heartbeat says it died (the failover wait) or
//! the event's deadline passes; then the actor is taken here.
//!
//! A socket's open travels once, as a relay (docs/spec/sockets.md §15): an
//! `/actor/` upgrade or a front's hand-off for an actor owned elsewhere is
//! relayed to the owner, where the socket lives; this node then only copies
//! bytes. A socket's messages and close never travel.

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::{Envelope, EventError, MailboxKey, Origin, Refusal};
use wasmkeep_runtime::{Request, Response};
use wasmkeep_telemetry::Metrics;

use crate::NodeInner;
use crate::event::EventKind;
use crate::router::{Answering, LocalRouter, Router};

/// How many times one event follows an owner's "it is elsewhere".
const REROUTES: usize = 3;
/// How often an unreachable owner's liveness is looked at again.
const RECHECK: Duration = Duration::from_millis(250);

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
    /// This node's id.
    fn me(&self) -> &str;
    /// A heartbeat sent before this (unix ms) is a dead node's: what a take
    /// of an actor passes.
    fn dead_before_ms(&self) -> u64;
    /// Whether node `node` is alive now.
    fn is_alive(&self, node: &str) -> bool;
    /// The node believed to own `actor`, if it is another one, alive.
    fn hint(&self, actor: &MailboxKey) -> Option<String>;
    /// Another live node that takes actors, to run `actor` while this one
    /// drains (the same one for the same actor, as long as the nodes stay).
    fn successor(&self, actor: &MailboxKey) -> Option<String>;
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
    /// Carries a request event to node `owner`, signed; answers its
    /// actor's response.
    fn request(
        &self,
        owner: String,
        envelope: Envelope,
        request: Request,
    ) -> Answering<'_, Result<Response, HopFailure>>;
    /// Whether node `node` announces that it takes relayed hand-offs (the
    /// heartbeat's capability word `handoff`).
    fn takes_handoffs(&self, node: String) -> Answering<'_, bool>;
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

/// Local mailboxes, and the cluster's nodes.
pub(crate) struct ClusterRouter {
    pub local: LocalRouter,
    pub remote: std::sync::Arc<dyn Remote>,
    pub node: Weak<NodeInner>,
}

/// Sends an event's hop to `owner` with `send`, following its
/// "elsewhere" a few times and waiting out an owner that does not answer;
/// answers `None` when the event is to run here after all (the owner died,
/// or the actor has no owner any more).
pub(crate) async fn follow<T>(
    remote: &dyn Remote,
    metrics: &Metrics,
    kind: HopKind,
    mut owner: String,
    envelope: &Envelope,
    mut send: impl FnMut(String) -> Answering<'static, Result<T, HopFailure>>,
) -> Option<Result<T, EventError>> {
    let key = envelope.mailbox();
    let mut reroutes = 0;
    loop {
        // An owner that dies while the hop is on its way never answers: its
        // heartbeat ageing out ends the wait (a node that took the actor
        // since fences any late commit of the dead one's).
        let answered = tokio::select! {
            answered = send(owner.clone()) => answered,
            () = until_dead(remote, &owner) => Err(HopFailure::Unreachable(format!("node {owner} died"))),
        };
        match answered {
            Ok(answer) => return Some(Ok(answer)),
            Err(HopFailure::Answer(error)) => return Some(Err(error)),
            Err(HopFailure::Elsewhere(next)) if next == remote.me() => {
                // The owner gave it up, to this node (it drains): the
                // store decides here.
                remote.note(&key, None);
                return None;
            }
            Err(HopFailure::Elsewhere(next)) if reroutes < REROUTES && next != owner && !next.is_empty() => {
                reroutes += 1;
                metrics.reroutes.inc(kind);
                remote.note(&key, Some(&next));
                owner = next;
            }
            Err(HopFailure::Elsewhere(_)) => {
                // The owners disagree, or none is left: the store decides here.
                remote.note(&key, None);
                return None;
            }
            Err(HopFailure::Unreachable(why)) => {
                tracing::debug!(%owner, "an owner did not answer: {why}");
                // Wait for the takeover: the owner's heartbeat ages out
                // (then the actor is taken here), within the deadline.
                loop {
                    if Instant::now() >= envelope.deadline {
                        return Some(Err(Refusal::DeadlinePassed.into()));
                    }
                    if !remote.is_alive(&owner) {
                        remote.note(&key, None);
                        return None;
                    }
                    tokio::time::sleep(RECHECK.min(envelope.deadline - Instant::now())).await;
                }
            }
        }
    }
}

/// Completes once node `node` is no longer alive (looked at every
/// [`RECHECK`], the first time after one).
async fn until_dead(remote: &dyn Remote, node: &str) {
    loop {
        tokio::time::sleep(RECHECK).await;
        if !remote.is_alive(node) {
            return;
        }
    }
}

impl ClusterRouter {
    /// Carries a request event to `owner` ([`follow`]).
    pub(crate) async fn carry(
        remote: &std::sync::Arc<dyn Remote>,
        metrics: &Metrics,
        owner: String,
        envelope: &Envelope,
        request: Request,
    ) -> Option<Result<Response, EventError>> {
        let kind = if matches!(envelope.origin, Origin::Inside { .. }) { HopKind::Call } else { HopKind::Request };
        let send = |owner: String| -> Answering<'static, _> {
            metrics.forwards.inc(kind);
            let (remote, envelope, request) = (remote.clone(), envelope.clone(), request.clone());
            Box::pin(async move { remote.request(owner, envelope, request).await })
        };
        follow(&**remote, metrics, kind, owner, envelope, send).await
    }

    /// Relays a socket's open to `owner` ([`follow`]): a front's hand-off
    /// only to an owner that takes them (otherwise the actor is moving, a
    /// `503` to retry, and the owner was sent nothing).
    pub(crate) async fn relay(
        remote: &std::sync::Arc<dyn Remote>,
        metrics: &std::sync::Arc<Metrics>,
        owner: String,
        envelope: &Envelope,
        socket: &SocketRequest,
    ) -> Option<Result<Relayed, EventError>> {
        let handoff = matches!(envelope.origin, Origin::Inside { .. });
        let kind = if handoff { HopKind::Handoff } else { HopKind::Upgrade };
        let send = |owner: String| -> Answering<'static, _> {
            let (remote, envelope, socket, metrics) =
                (remote.clone(), envelope.clone(), socket.clone(), metrics.clone());
            Box::pin(async move {
                if handoff && !remote.takes_handoffs(owner.clone()).await {
                    return Err(HopFailure::Answer(Refusal::Elsewhere { owner }.into()));
                }
                metrics.forwards.inc(kind);
                remote.relay(owner, envelope, socket).await
            })
        };
        follow(&**remote, metrics, kind, owner, envelope, send).await
    }
}

impl Router for ClusterRouter {
    fn post(&self, envelope: Envelope, event: EventKind) -> Answering<'_, Result<(), Refusal>> {
        let Some(node) = self.node.upgrade() else { return self.local.post(envelope, event) };
        // An actor awake here is this node's: no hint is asked.
        let elsewhere = match &event {
            EventKind::Request { .. } if !node.mailboxes.contains(&envelope.mailbox()) => {
                self.remote.hint(&envelope.mailbox())
            }
            _ => None,
        };
        match (event, elsewhere) {
            (EventKind::Request { request, reply }, Some(owner)) => {
                hand_on(&node, self.remote.clone(), owner, envelope, request, reply);
                Box::pin(std::future::ready(Ok(())))
            }
            (event, _) => self.local.post(envelope, event),
        }
    }

    /// As [`Router::post`] then the answer, but an event for another node
    /// is carried from the caller's own task: a call waits for its answer
    /// anyway, and a task of its own would cost two wake-ups a call.
    fn request(&self, envelope: Envelope, request: Request) -> Answering<'_, Result<Response, EventError>> {
        Box::pin(async move {
            let elsewhere = match self.node.upgrade() {
                Some(node) if !node.mailboxes.contains(&envelope.mailbox()) => {
                    self.remote.hint(&envelope.mailbox()).map(|owner| (owner, node.metrics.clone()))
                }
                _ => None,
            };
            let (reply, answer) = oneshot::channel();
            match elsewhere {
                Some((owner, metrics)) => {
                    match ClusterRouter::carry(&self.remote, &metrics, owner, &envelope, request.clone()).await {
                        Some(answer) => return answer,
                        // To run here after all, never handed on twice.
                        None => self.local.post_forwarded(envelope, EventKind::Request { request, reply })?,
                    }
                }
                None => self.local.post(envelope, EventKind::Request { request, reply }).await?,
            }
            answer.await.unwrap_or(Err(EventError::ShuttingDown))
        })
    }
}

/// Hands a request event on to `owner` (the hints' guess, or the store's
/// answer to the actor's task), replying with its answer when it comes;
/// an event to run here after all is queued again (behind what arrived
/// since) and never handed on twice. Returns at once.
pub(crate) fn hand_on(
    node: &std::sync::Arc<NodeInner>,
    remote: std::sync::Arc<dyn Remote>,
    owner: String,
    envelope: Envelope,
    request: Request,
    reply: oneshot::Sender<Result<Response, EventError>>,
) {
    let local = LocalRouter { node: std::sync::Arc::downgrade(node) };
    let metrics = node.metrics.clone();
    tokio::spawn(async move {
        match ClusterRouter::carry(&remote, &metrics, owner, &envelope, request.clone()).await {
            Some(answer) => {
                let _ = reply.send(answer);
            }
            None => {
                if let Err(refusal) = local.post_forwarded(envelope, EventKind::Request { request, reply }) {
                    tracing::debug!("an event taken back could not be queued: {refusal}");
                }
            }
        }
    });
}
