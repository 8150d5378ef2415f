//! Events and how they end.

use tokio::sync::oneshot;
use tokio::time::Instant;
use wasmkeep_core::Refusal;
use wasmkeep_runtime::{Request, Response};

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
    /// The node is stopping.
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// One request event in a mailbox.
pub(crate) struct Event {
    pub outside: bool,
    pub request: Request,
    /// When the event arrived: its admission wait counts from here.
    pub arrived: Instant,
    pub reply: oneshot::Sender<Result<Response, EventError>>,
}
