//! Events: what an actor's mailbox holds, and where each answer goes.

use std::time::Instant;

use tokio::sync::oneshot;
use wasmkeep_core::{Envelope, EventError};
use wasmkeep_runtime::{Request, Response, SocketMessage};

/// One event in a mailbox: its envelope (who, for whom, from where, until
/// when), what it is, and when it arrived.
pub(crate) struct Event {
    pub envelope: Envelope,
    pub kind: EventKind,
    /// When the event arrived: its admission wait counts from here.
    pub arrived: Instant,
    /// It came from another node (or came back from one): if the actor is
    /// owned elsewhere, it is answered so, never handed on again.
    pub forwarded: bool,
}

/// What an event is, and where its answer goes.
pub enum EventKind {
    Request {
        request: Request,
        reply: oneshot::Sender<Result<Response, EventError>>,
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

/// A socket's message or close: posted, never awaited.
pub enum SocketEvent {
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
