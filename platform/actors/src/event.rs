//! Events and how they end.

use tokio::sync::oneshot;
use tokio::time::Instant;
use wasmkeep_core::{Origin, Refusal};
use wasmkeep_runtime::{Request, Response, SocketMessage};

/// Why an event gave no response of the actor's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Admission refused it; the refusal says why.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The guest trapped; its writes were rolled back.
    #[error("the actor failed")]
    Trapped,
    /// The event ran past its wall and was cut; its writes were rolled back.
    #[error("the actor's event ran past its wall")]
    Wall,
    /// The actor answered what HTTP cannot carry (a bad status or header);
    /// its writes were rolled back.
    #[error("the actor answered an invalid response")]
    InvalidResponse,
    /// The actor's answer is over the body limit; its writes were rolled
    /// back.
    #[error("the actor's answer is over {0} bytes")]
    AnswerTooLarge(u64),
    /// The node is stopping.
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// One event in a mailbox.
pub(crate) struct Event {
    pub origin: Origin,
    pub kind: EventKind,
    /// When the event arrived: its admission wait counts from here.
    pub arrived: Instant,
}

/// What an event is, and where its answer goes.
pub(crate) enum EventKind {
    Request { request: Request, reply: oneshot::Sender<Result<Response, EventError>> },
    SocketOpen { conn: u64, path: String, reply: oneshot::Sender<Result<Result<(), String>, EventError>> },
    SocketMessage { conn: u64, message: SocketMessage },
    SocketClose { conn: u64, code: u16, reason: String },
}

impl EventKind {
    /// Whether admission may create the actor for this event: a socket's
    /// message or close never does (seed 0027).
    pub fn may_create(&self) -> bool {
        matches!(self, Self::Request { .. } | Self::SocketOpen { .. })
    }
}

/// How an event's failure is answered: the one place that decides, for the
/// public port and for calls alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorAnswer {
    pub status: u16,
    pub retry_after: Option<u32>,
    /// For the client: no host detail.
    pub text: String,
}

impl From<wasmkeep_runtime::EventFailure> for EventError {
    fn from(f: wasmkeep_runtime::EventFailure) -> Self {
        match f {
            wasmkeep_runtime::EventFailure::Wall => Self::Wall,
            wasmkeep_runtime::EventFailure::Trap(_) => Self::Trapped,
        }
    }
}

impl EventError {
    pub fn answer(&self) -> ErrorAnswer {
        let (status, retry_after) = match self {
            Self::Refused(r) => match r {
                Refusal::NoSuchApp | Refusal::NoSuchClass | Refusal::NoSuchActor => (404, None),
                Refusal::InvalidName(_) => (400, None),
                Refusal::Internal => (403, None),
                Refusal::ValueMissing(_) => (503, Some(10)),
                Refusal::Overloaded | Refusal::Capacity | Refusal::StoreUnavailable(_) => (503, Some(1)),
            },
            Self::Trapped | Self::InvalidResponse | Self::AnswerTooLarge(_) => (500, None),
            Self::Wall => (504, None),
            Self::ShuttingDown => (503, Some(1)),
        };
        ErrorAnswer { status, retry_after, text: self.to_string() }
    }
}
