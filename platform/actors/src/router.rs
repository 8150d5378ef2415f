//! Where an actor lives, answered in one place
//! (docs/spec/request-path.md §4). Every path asks the router: an HTTP
//! event at `/actor/`, `actors.call`, each entry of a `call-many`, a
//! socket's open, message and close, a front's hand-off. One node has one
//! implementation, [`LocalRouter`]: every actor is here, in its mailbox.
//! The cluster adds a remote one (owner hint, signed hop, relay, draining
//! hand-off) behind the same trait, and no caller changes.
//!
//! Bodies are whole at both ends (a guest takes and gives `list<u8>`);
//! a remote router streams them over its hop and hands them on whole.

use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;
use std::time::Instant;

use tokio::sync::oneshot;
use wasmkeep_core::{Envelope, EventError, Refusal, RefusalReason};
use wasmkeep_runtime::{Request, Response};

use crate::NodeInner;
use crate::event::{Event, EventKind};

/// A router's answer, on its way.
pub type Answering<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Delivers events to the actors their envelopes name.
pub trait Router: Send + Sync + 'static {
    /// Delivers any event; its answer, if it has one, goes where the event
    /// says (an owner's refusal too). A refusal here is the router's own
    /// (the mailbox is full, no owner answers).
    fn post(&self, envelope: Envelope, event: EventKind) -> Answering<'_, Result<(), Refusal>>;

    /// Delivers a request event and waits for the actor's answer, or why
    /// there is none.
    fn request(&self, envelope: Envelope, request: Request) -> Answering<'_, Result<Response, EventError>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.post(envelope, EventKind::Request { request, reply }).await?;
            answer.await.unwrap_or(Err(EventError::ShuttingDown))
        })
    }
}

/// Every actor is on this node, in its mailbox.
pub(crate) struct LocalRouter {
    /// The node this router is part of (it outlives every call to it).
    pub node: Weak<NodeInner>,
}

impl LocalRouter {
    /// Queues the event in its actor's mailbox, at once (so events posted
    /// one after another by one task are queued in that order).
    pub(crate) fn post_now(&self, envelope: Envelope, event: EventKind) -> Result<(), Refusal> {
        self.deliver(envelope, event, false)
    }

    /// Queues an event that came from another node, or came back from
    /// one: if the actor is not this node's, it is answered
    /// [`Refusal::Elsewhere`], never sent on again.
    pub(crate) fn post_forwarded(&self, envelope: Envelope, event: EventKind) -> Result<(), Refusal> {
        self.deliver(envelope, event, true)
    }

    fn deliver(&self, envelope: Envelope, event: EventKind, forwarded: bool) -> Result<(), Refusal> {
        // Only a node being dropped has no strong reference left.
        let Some(node) = self.node.upgrade() else { return Err(Refusal::Overloaded) };
        let key = envelope.mailbox();
        let event = Event { envelope, kind: event, arrived: Instant::now(), forwarded };
        let posted = node.mailboxes.post(key, event, |key, event, rx| {
            // The actor's whole task, its host work and its guest's polls,
            // runs on the node's turns, charged to its tenant: a turn ends
            // as the task's poll returns, never queued behind its own work.
            let share = node.guest_share(&event.envelope.app);
            let task = crate::actor::run(node.clone(), key.clone(), rx);
            tokio::spawn(node.runtime.fair(share, task));
        });
        if posted.is_err() {
            node.metrics.refusals.inc(RefusalReason::Overloaded);
        }
        posted
    }
}

impl Router for LocalRouter {
    /// The event is in the mailbox when this returns; the future is ready.
    fn post(&self, envelope: Envelope, event: EventKind) -> Answering<'_, Result<(), Refusal>> {
        Box::pin(std::future::ready(self.post_now(envelope, event)))
    }
}
