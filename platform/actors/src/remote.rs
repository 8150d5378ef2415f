//! The router's second route (DESIGN §8, step 3): an actor owned by
//! another node of the cluster. The cluster crate implements [`Remote`]
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
//! Socket events never travel: a socket lives on its actor's owner.

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
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

/// What the cluster offers the node's router.
pub trait Remote: Send + Sync + 'static {
    /// A heartbeat sent before this (unix ms) is a dead node's: what a take
    /// of an actor passes.
    fn dead_before_ms(&self) -> u64;
    /// Whether node `node` is alive now.
    fn is_alive(&self, node: &str) -> bool;
    /// The node believed to own `actor`, if it is another one, alive.
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
    /// Carries a request event to node `owner`, signed; answers its
    /// actor's response.
    fn request(
        &self,
        owner: String,
        envelope: Envelope,
        request: Request,
    ) -> Answering<'_, Result<Response, HopFailure>>;
}

/// Local mailboxes, and the cluster's nodes.
pub(crate) struct ClusterRouter {
    pub local: LocalRouter,
    pub remote: std::sync::Arc<dyn Remote>,
    pub node: Weak<NodeInner>,
}

impl ClusterRouter {
    /// Sends `request` to `owner`, following its "elsewhere" a few times
    /// and waiting out an owner that does not answer; answers `None` when
    /// the event is to run here after all (the owner died, or the actor
    /// has no owner any more).
    pub(crate) async fn carry(
        remote: &dyn Remote,
        metrics: &Metrics,
        mut owner: String,
        envelope: &Envelope,
        request: Request,
    ) -> Option<Result<Response, EventError>> {
        let key = envelope.mailbox();
        let kind = if matches!(envelope.origin, Origin::Inside { .. }) { "call" } else { "request" };
        let mut reroutes = 0;
        loop {
            metrics.forwards.inc(kind);
            match remote.request(owner.clone(), envelope.clone(), request.clone()).await {
                Ok(response) => return Some(Ok(response)),
                Err(HopFailure::Answer(error)) => return Some(Err(error)),
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
        match ClusterRouter::carry(&*remote, &metrics, owner, &envelope, request.clone()).await {
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
