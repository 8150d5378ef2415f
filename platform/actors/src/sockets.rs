//! An actor's sockets (docs/spec/sockets.md §1–§4, §9–§10): opening one
//! runs the actor's `on-websocket-open`; its messages and its close run
//! through the router like every event, admitted as the open was (the
//! registry keeps its envelope) and never creating the actor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use wasmkeep_core::deadline::close_deadline;
use wasmkeep_core::metric_labels::HopKind;
use wasmkeep_core::placement::{Entry, IfElsewhere};
use wasmkeep_core::quota::Quota;
use wasmkeep_core::{Envelope, EventError, MailboxKey, Refusal, close};
use wasmkeep_runtime::{SocketError, SocketMessage, SocketSend};
use wasmkeep_scheduler::ShareTicket;
use wasmkeep_sockets::{ConnId, OpenRefusal, Outgoing, SendError, SocketQueue};

use crate::actor_host::ActorEventHost;
use crate::event::{EventKind, SocketEvent};
use crate::remote::{Answering, HopFailure, Relayed, Remote, SocketRequest};
use crate::router::{Carried, Ran, Router};
use crate::{Node, NodeInner};

/// What the registry keeps of a socket: the envelope its events carry,
/// and its place in its tenant's share of sockets (given back when the
/// last copy goes, with the registry's entry).
#[derive(Clone)]
pub(crate) struct SocketOwner {
    pub envelope: Envelope,
    _ticket: Option<Arc<ShareTicket>>,
}

/// Where a socket opened.
pub enum Opened {
    /// On this node: the queue is the client's connection's to drive.
    Here(SocketQueue),
    /// On the actor's owner, relayed: the owner's answer, and after a
    /// `101` its end of the socket, to copy bytes to and from.
    There(Relayed),
}

/// Why a socket did not open.
#[derive(Debug)]
pub enum SocketOpenError {
    /// Too many sockets on the actor or the node.
    Full(OpenRefusal),
    /// `on-websocket-open` refused it, with the actor's reason.
    Refused(String),
    /// The open event failed: admission refused it, the actor trapped.
    Event(EventError),
}

impl From<EventError> for SocketOpenError {
    fn from(e: EventError) -> Self {
        Self::Event(e)
    }
}

/// A socket's open, carried by the router: opened here, or relayed.
struct OpenEvent<'n> {
    node: &'n Node,
    envelope: Envelope,
    socket: SocketRequest,
}

impl Carried for OpenEvent<'_> {
    type Out = Opened;
    type Error = SocketOpenError;

    async fn here(&mut self, _: &Router, if_elsewhere: IfElsewhere) -> Ran<Result<Opened, SocketOpenError>> {
        match self.node.open_here(self.envelope.clone(), self.socket.path.clone(), if_elsewhere).await {
            Err(SocketOpenError::Event(EventError::Refused(Refusal::Elsewhere { owner })))
                if if_elsewhere == IfElsewhere::HandBack =>
            {
                Ran::Elsewhere(owner)
            }
            opened => Ran::Answer(opened.map(Opened::Here)),
        }
    }

    fn send(&self, remote: &Arc<dyn Remote>, to: String) -> Answering<'static, Result<Opened, HopFailure>> {
        let (remote, envelope, socket) = (remote.clone(), self.envelope.clone(), self.socket.clone());
        Box::pin(async move { remote.relay(to, envelope, socket).await.map(Opened::There) })
    }
}

impl NodeInner {
    /// Tells the actor of `opened` that its socket `conn` closed: an event
    /// that always runs (no deadline).
    pub(crate) async fn tell_closed(&self, opened: Envelope, conn: ConnId, code: u16, reason: String) {
        let envelope = Envelope { deadline: close_deadline(Instant::now()), ..opened };
        let _ = self.router.post(envelope, EventKind::Socket(SocketEvent::Close { conn, code, reason }));
    }
}

impl Node {
    /// Opens a socket on the actor `envelope` names and runs its
    /// `on-websocket-open`: here, or relayed to the node that owns the
    /// actor (the hints' guess, or the store's answer to the open here),
    /// which answers whether it opened. The router's route decides.
    pub async fn open_socket(&self, envelope: Envelope, socket: SocketRequest) -> Result<Opened, SocketOpenError> {
        let handoff = !envelope.origin.is_outside();
        let kind = if handoff { HopKind::Handoff } else { HopKind::Upgrade };
        let (actor, deadline) = (envelope.mailbox(), envelope.deadline);
        let open = OpenEvent { node: self, envelope, socket };
        self.0.router.carry(Entry::Open { handoff }, &actor, deadline, kind, open).await
    }

    /// Opens a socket relayed from another node: here, or refused
    /// [`Refusal::Elsewhere`] when another node owns the actor (a relay is
    /// never sent on), or refused while this node drains.
    pub async fn open_socket_relayed(&self, envelope: Envelope, path: String) -> Result<SocketQueue, SocketOpenError> {
        let (actor, deadline) = (envelope.mailbox(), envelope.deadline);
        let socket = SocketRequest { path, headers: Vec::new() };
        let open = OpenEvent { node: self, envelope, socket };
        match self.0.router.carry(Entry::Relayed, &actor, deadline, HopKind::Upgrade, open).await? {
            Opened::Here(queue) => Ok(queue),
            Opened::There(_) => unreachable!("a relayed open is never relayed on"),
        }
    }

    /// Opens a socket on this node: the actor's task refuses it
    /// [`Refusal::Elsewhere`] if another node owns the actor.
    async fn open_here(
        &self,
        envelope: Envelope,
        path: String,
        if_elsewhere: IfElsewhere,
    ) -> Result<SocketQueue, SocketOpenError> {
        let node = &self.0;
        // The tenant's share of the node's sockets, held as long as the socket.
        let ticket = match node.tenant(&envelope.app) {
            Some(tenant) => Some(Arc::new(tenant.sockets.take().ok_or_else(|| {
                let refusal = node.over_quota(&tenant.id, Quota::Sockets, Duration::from_secs(5));
                SocketOpenError::Event(refusal.into())
            })?)),
            None => None,
        };
        let owner = SocketOwner { envelope: envelope.clone(), _ticket: ticket };
        let queue = node.sockets.open(envelope.mailbox(), owner).map_err(SocketOpenError::Full)?;
        let conn = queue.conn;
        let (reply, answer) = oneshot::channel();
        // Should the client leave while this waits, the guard forgets the
        // socket (and the actor side closes what it accepted).
        let mut opening = Opening { node: self, conn, answer: Some(answer) };
        let opened = match node.router.deliver(envelope, EventKind::SocketOpen { conn, path, reply }, if_elsewhere) {
            Ok(()) => opening.answer().await,
            Err(refusal) => Err(refusal.into()),
        };
        opening.answer = None;
        match opened {
            Ok(Ok(())) => Ok(queue),
            Ok(Err(reason)) => {
                node.sockets.remove(conn);
                Err(SocketOpenError::Refused(reason))
            }
            Err(e) => {
                node.sockets.remove(conn);
                Err(SocketOpenError::Event(e))
            }
        }
    }

    /// A message from the client of socket `conn`.
    pub async fn socket_message(&self, conn: ConnId, message: SocketMessage) {
        let Some((_, SocketOwner { envelope: opened, .. })) = self.0.sockets.get(conn) else { return };
        let envelope = Envelope { deadline: self.0.uncalled_deadline(&opened.app), ..opened.clone() };
        let event = EventKind::Socket(SocketEvent::Message { conn, message });
        if self.0.router.post(envelope, event).is_err() {
            // A full mailbox cannot take the message: the client learns it,
            // and the actor hears the close if its mailbox can take that.
            let overloaded = close::OVERLOADED;
            self.0.sockets.force_close(conn, overloaded.code, overloaded.reason);
            self.0.tell_closed(opened, conn, overloaded.code, overloaded.reason.into()).await;
        }
    }

    /// The client closed socket `conn` (or its connection was lost: 1006).
    /// The socket leaves the registry before the actor hears of it.
    pub async fn socket_closed(&self, conn: ConnId, code: u16, reason: String) {
        if let Some(opened) = self.forget_socket(conn) {
            self.0.tell_closed(opened, conn, code, reason).await;
        }
    }

    /// Takes socket `conn` out of the registry; answers its envelope.
    fn forget_socket(&self, conn: ConnId) -> Option<Envelope> {
        let entry = self.0.sockets.get(conn);
        self.0.sockets.remove(conn);
        entry.map(|(_, owner)| owner.envelope)
    }

    /// Forgets socket `conn` without telling its actor (the actor closed it).
    pub fn socket_gone(&self, conn: ConnId) {
        self.0.sockets.remove(conn);
    }

    /// Sockets open on this node.
    pub fn open_sockets(&self) -> usize {
        self.0.sockets.len()
    }
}

/// A socket's open in progress, on the side of its client's connection.
/// Dropped before the answer is read (the client left), it forgets the
/// socket; if the actor had accepted it already, the actor hears it close.
struct Opening<'n> {
    node: &'n Node,
    conn: ConnId,
    answer: Option<oneshot::Receiver<Result<Result<(), String>, EventError>>>,
}

impl Opening<'_> {
    async fn answer(&mut self) -> Result<Result<(), String>, EventError> {
        let answer = self.answer.as_mut().expect("an open waits for its answer");
        answer.await.unwrap_or(Err(EventError::ShuttingDown))
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let Some(mut answer) = self.answer.take() else { return };
        // No answer can slip in after this look: the actor's side then
        // finds its answer unwanted and does the rest.
        answer.close();
        let accepted = matches!(answer.try_recv(), Ok(Ok(Ok(()))));
        let forgotten = self.node.forget_socket(self.conn);
        // Accepted already: the actor hears the socket close. (Not answered
        // yet: the actor's side sees the answer unwanted.)
        if let (true, Some(opened), Ok(runtime)) = (accepted, forgotten, tokio::runtime::Handle::try_current()) {
            let (node, conn) = (self.node.clone(), self.conn);
            runtime.spawn(async move { node.0.tell_closed(opened, conn, close::LOST, String::new()).await });
        }
    }
}

/// The `sockets` interface for one resident actor.
impl ActorEventHost {
    pub(crate) async fn send_on_socket(
        &mut self,
        conn: u64,
        message: SocketSend,
    ) -> Result<Result<(), SocketError>, String> {
        let outgoing = match message {
            SocketSend::Text(t) => Outgoing::Text(t),
            SocketSend::Binary(b) => Outgoing::Binary(b),
            SocketSend::Close { code, reason } => {
                if !close::may_send(code) {
                    return Err(format!("close code {code} is not one a socket may send"));
                }
                if reason.len() > close::REASON_MAX {
                    return Ok(Err(SocketError::TooLarge));
                }
                Outgoing::Close { code, reason }
            }
        };
        // The output gate: nothing leaves before the writes made before it.
        self.gate.flush().await.map_err(|e| format!("commit before a socket send failed: {e}"))?;
        let key = MailboxKey::of(&self.key);
        let closing = matches!(outgoing, Outgoing::Close { .. });
        let sent = self.node.sockets.send(&key, conn, outgoing);
        if closing && sent.is_ok() {
            // Closed by the actor itself: no close event follows.
            self.node.sockets.remove(conn);
        }
        Ok(sent.map_err(|e| match e {
            SendError::NoSuchSocket => SocketError::NoSuchSocket,
            SendError::TooLarge => SocketError::TooLarge,
            SendError::QueueFull => {
                let full = close::SEND_QUEUE_FULL;
                self.node.sockets.force_close(conn, full.code, full.reason);
                SocketError::QueueFull
            }
        }))
    }

    pub(crate) fn sockets_of_actor(&self) -> Vec<u64> {
        self.node.sockets.list(&MailboxKey::of(&self.key))
    }
}
