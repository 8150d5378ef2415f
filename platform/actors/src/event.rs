//! Events: what an actor's mailbox holds, and where each answer goes.

use std::time::Instant;

use tokio::sync::oneshot;
use wasmkeep_core::placement::IfElsewhere;
use wasmkeep_core::{Envelope, EventError};
use wasmkeep_runtime::{Request, Response, SocketMessage};

/// One event in a mailbox: its envelope (who, for whom, from where, until
/// when), what it is, and when it arrived.
pub(crate) struct Event {
    pub envelope: Envelope,
    pub kind: EventKind,
    /// When the event arrived: its admission wait counts from here.
    pub arrived: Instant,
    /// What its actor does with it when another node owns the actor
    /// (the event's route says).
    pub if_elsewhere: IfElsewhere,
}

/// What an event is, and where its answer goes.
pub(crate) enum EventKind {
    Request {
        request: Request,
        reply: oneshot::Sender<RequestAnswer>,
    },
    SocketOpen {
        conn: u64,
        path: String,
        reply: oneshot::Sender<Result<Result<(), String>, EventError>>,
    },
    Socket(SocketEvent),
    /// The control plane deletes the actor (as its own `delete-self`).
    Delete {
        reply: oneshot::Sender<Result<(), EventError>>,
    },
}

/// A request event's answer: the actor's, or the event itself, handed
/// back to its route because another node owns the actor.
pub(crate) enum RequestAnswer {
    Done(Result<Response, EventError>),
    /// Boxed: the common answer stays small.
    Elsewhere {
        owner: String,
        event: Box<(Envelope, Request)>,
    },
}

/// A socket's message or close: posted, never awaited.
pub(crate) enum SocketEvent {
    Message { conn: u64, message: SocketMessage },
    Close { conn: u64, code: u16, reason: String },
}

impl EventKind {
    /// Whether admission may create the actor for this event: a socket's
    /// message or close never does (docs/spec/sockets.md §10).
    pub(crate) fn may_create(&self) -> bool {
        matches!(self, Self::Request { .. } | Self::SocketOpen { .. })
    }
}

pub(crate) fn from_failure(f: wasmkeep_runtime::EventFailure) -> EventError {
    match f {
        wasmkeep_runtime::EventFailure::Wall => EventError::Wall,
        wasmkeep_runtime::EventFailure::Trap(why) => EventError::trapped(&why),
        wasmkeep_runtime::EventFailure::NoMemory => EventError::Refused(wasmkeep_core::Refusal::Capacity),
    }
}
