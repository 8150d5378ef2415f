//! Where an actor lives, asked in one place (docs/spec/request-path.md
//! §4). Every path asks the router: an HTTP event at `/actor/`,
//! `actors.call`, each entry of a `call-many`, a socket's open, message
//! and close, a front's hand-off, a hop or a relay from another node, a
//! delete. The decisions are `core::placement`'s [`Route`]; this file
//! drives it: it reads what the route needs (the mailboxes, the hints, the
//! members, the clock), queues the event here or sends it through the
//! cluster's [`Remote`], and waits as the route says. A node alone has no
//! remote: its members are itself, and every route runs here.
//!
//! Bodies are whole at both ends (a guest takes and gives `list<u8>`);
//! a hop streams them and hands them on whole.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Instant;

use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::placement::{Entry, Hop, IfElsewhere, Members, Next, Note, Route, Start};
use wasmkeep_core::{Envelope, EventError, MailboxKey, Refusal, RefusalReason};

use crate::NodeInner;
use crate::clock::now;
use crate::event::{Event, EventKind, RequestAnswer};
use crate::remote::{Answering, HopFailure, Remote};

/// The node's router: its mailboxes, and the cluster's nodes.
pub(crate) struct Router {
    /// The node this router is part of (it outlives every call to it).
    node: Weak<NodeInner>,
    remote: Option<Arc<dyn Remote>>,
    /// A node alone's members: itself.
    alone: Arc<Members>,
}

/// What an event's actor did with it here.
pub(crate) enum Ran<T> {
    /// Its answer (or why there is none).
    Answer(T),
    /// Another node owns the actor; the event is back in the carrier.
    Elsewhere(String),
}

/// An event the router carries: queued here, or sent to another node.
pub(crate) trait Carried: Send {
    type Out: Send;
    type Error: From<EventError> + Send;
    /// Runs the event here; `if_elsewhere` says whether the actor hands
    /// it back when another node owns it.
    fn here(
        &mut self,
        router: &Router,
        if_elsewhere: IfElsewhere,
    ) -> impl Future<Output = Ran<Result<Self::Out, Self::Error>>> + Send;
    /// Sends (a copy of) the event to node `to`.
    fn send(&self, remote: &Arc<dyn Remote>, to: String) -> Answering<'static, Result<Self::Out, HopFailure>>;
}

impl Router {
    pub(crate) fn new(node: Weak<NodeInner>, me: &str, remote: Option<Arc<dyn Remote>>) -> Self {
        Self { node, remote, alone: Arc::new(Members::alone(me)) }
    }

    /// The members as last read (a node alone: itself).
    pub(crate) fn members(&self) -> Arc<Members> {
        self.remote.as_ref().map_or_else(|| self.alone.clone(), |remote| remote.members())
    }

    /// This node's tenure ([`Remote::tenure`]; a node alone has one).
    pub(crate) fn tenure(&self) -> u64 {
        self.remote.as_ref().map_or(0, |remote| remote.tenure())
    }

    /// Whether this node's heartbeat is current ([`Remote::is_current`]; a
    /// node alone has none to be).
    pub(crate) fn is_current(&self) -> bool {
        self.remote.as_ref().is_none_or(|remote| remote.is_current())
    }

    /// Asks the other nodes for their guests' records ([`Remote::tail`]);
    /// answers how many were asked.
    pub(crate) fn tail(
        &self,
        filter: wasmkeep_telemetry::logs::LogFilter,
        follow: bool,
        to: tokio::sync::mpsc::Sender<wasmkeep_telemetry::logs::TailItem>,
    ) -> usize {
        self.remote.as_ref().map_or(0, |remote| remote.tail(filter, follow, to))
    }

    /// Notes what a decision learnt of the actor's owner.
    pub(crate) fn note(&self, actor: &MailboxKey, note: Note) {
        if let Some(remote) = &self.remote {
            match note {
                Note::Keep => {}
                Note::Forget => remote.note(actor, None),
                Note::Owner(owner) => remote.note(actor, Some(&owner)),
            }
        }
    }

    /// Carries `event`, which entered this node as `entry`, to the actor
    /// `actor` until `deadline`: the route's decisions, done. `kind` names
    /// its hops in the metrics.
    pub(crate) async fn carry<C: Carried>(
        &self,
        entry: Entry,
        actor: &MailboxKey,
        deadline: Instant,
        kind: HopKind,
        mut event: C,
    ) -> Result<C::Out, C::Error> {
        let Some(node) = self.node.upgrade() else { return Err(EventError::ShuttingDown.into()) };
        let mut route = Route::new(entry, deadline);
        let start = Start {
            resident: node.mailboxes.contains(actor),
            hint: self.remote.as_ref().and_then(|remote| remote.hint(actor)),
            draining: node.is_draining(),
        };
        let mut decision = route.start(start, actor, now(), &self.members());
        loop {
            self.note(actor, decision.note);
            decision = match decision.next {
                Next::RunHere(if_elsewhere) => match event.here(self, if_elsewhere).await {
                    Ran::Answer(answer) => return answer,
                    Ran::Elsewhere(owner) => route.ran_elsewhere(owner, now(), &self.members()),
                },
                Next::Confirm { to, .. } => {
                    let Some(remote) = &self.remote else { return Err(EventError::ShuttingDown.into()) };
                    route.confirmed(now(), &*remote.members_knowing(to).await)
                }
                Next::Send { to, reroute } => {
                    let Some(remote) = &self.remote else { return Err(EventError::ShuttingDown.into()) };
                    if reroute {
                        node.metrics.reroutes.inc(kind);
                    }
                    node.metrics.forwards.inc(kind);
                    let mut hop = event.send(remote, to.clone());
                    loop {
                        let look = route.next_look().unwrap_or(deadline);
                        // An owner that dies while the hop is on its way never
                        // answers: the route looks at it meanwhile.
                        let failure = tokio::select! {
                            answered = &mut hop => match answered {
                                Ok(answer) => return Ok(answer),
                                Err(HopFailure::Answer(error)) => return Err(error.into()),
                                Err(HopFailure::Elsewhere(owner)) => Hop::Elsewhere(owner),
                                Err(HopFailure::Unreachable(why)) => {
                                    tracing::debug!(owner = %to, "an owner did not answer: {why}");
                                    Hop::Unreachable
                                }
                            },
                            () = tokio::time::sleep_until(look.into()) => {
                                let looked = route.look(now(), &self.members());
                                if looked.next == Next::Wait {
                                    continue;
                                }
                                break looked;
                            }
                        };
                        break route.hop(failure, now(), &self.members());
                    }
                }
                Next::Wait => {
                    let look = route.next_look().unwrap_or(deadline);
                    tokio::time::sleep_until(look.into()).await;
                    route.look(now(), &self.members())
                }
                Next::Fail(error) => return Err(error.into()),
            };
        }
    }

    /// Delivers a socket's message or close, or a delete: queued here at
    /// once, so events posted one after another by one task are queued in
    /// that order. A refusal is the router's own (the mailbox is full).
    pub(crate) fn post(&self, envelope: Envelope, event: EventKind) -> Result<(), Refusal> {
        let entry = match &event {
            EventKind::Delete { .. } => Entry::Delete,
            EventKind::Socket(_) => Entry::Traffic,
            EventKind::Request { .. } | EventKind::SocketOpen { .. } => {
                unreachable!("a request or a socket's open is carried, not posted")
            }
        };
        let key = envelope.mailbox();
        let decision = Route::new(entry, envelope.deadline).start(Start::default(), &key, now(), &self.members());
        match decision.next {
            Next::RunHere(if_elsewhere) => self.deliver(envelope, event, if_elsewhere),
            next => unreachable!("a socket's traffic and a delete run here, not {next:?}"),
        }
    }

    /// Queues the event in its actor's mailbox.
    pub(crate) fn deliver(
        &self,
        envelope: Envelope,
        event: EventKind,
        if_elsewhere: IfElsewhere,
    ) -> Result<(), Refusal> {
        // Only a node being dropped has no strong reference left.
        let Some(node) = self.node.upgrade() else { return Err(Refusal::Overloaded) };
        let key = envelope.mailbox();
        let event = Event { envelope, kind: event, arrived: Instant::now(), if_elsewhere };
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

/// A request event, carried (its envelope and request are the actor's
/// while it runs here, and come back if it hands them back).
struct RequestEvent {
    envelope: Option<Envelope>,
    request: Option<wasmkeep_runtime::Request>,
}

impl Carried for RequestEvent {
    type Out = wasmkeep_runtime::Response;
    type Error = EventError;

    async fn here(&mut self, router: &Router, if_elsewhere: IfElsewhere) -> Ran<Result<Self::Out, EventError>> {
        let (Some(envelope), Some(request)) = (self.envelope.take(), self.request.take()) else {
            return Ran::Answer(Err(EventError::ShuttingDown));
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if let Err(refusal) = router.deliver(envelope, EventKind::Request { request, reply }, if_elsewhere) {
            return Ran::Answer(Err(refusal.into()));
        }
        match answer.await {
            Ok(RequestAnswer::Done(answer)) => Ran::Answer(answer),
            Ok(RequestAnswer::Elsewhere { owner, event }) => {
                let (envelope, request) = *event;
                (self.envelope, self.request) = (Some(envelope), Some(request));
                Ran::Elsewhere(owner)
            }
            Err(_) => Ran::Answer(Err(EventError::ShuttingDown)),
        }
    }

    fn send(&self, remote: &Arc<dyn Remote>, to: String) -> Answering<'static, Result<Self::Out, HopFailure>> {
        let (remote, envelope, request) = (remote.clone(), self.envelope.clone(), self.request.clone());
        Box::pin(async move {
            match (envelope, request) {
                (Some(envelope), Some(request)) => remote.request(to, envelope, request).await,
                _ => Err(HopFailure::Unreachable("the event was not in hand".into())),
            }
        })
    }
}

impl Router {
    /// Delivers a request event that entered as `entry` to its actor, here
    /// or at its owner, and waits for the actor's answer, or why there is
    /// none. A node that is to run it elsewhere carries it from the
    /// caller's own task: a call waits for its answer anyway.
    pub(crate) async fn request(
        &self,
        entry: Entry,
        envelope: Envelope,
        request: wasmkeep_runtime::Request,
    ) -> Result<wasmkeep_runtime::Response, EventError> {
        let kind = if envelope.origin.is_outside() { HopKind::Request } else { HopKind::Call };
        let (actor, deadline) = (envelope.mailbox(), envelope.deadline);
        let event = RequestEvent { envelope: Some(envelope), request: Some(request) };
        self.carry(entry, &actor, deadline, kind, event).await
    }
}
