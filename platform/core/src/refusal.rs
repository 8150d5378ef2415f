//! Why the host did not run an event. Each refusal becomes one HTTP answer
//! (in the front's error layer) or one call error; nothing else decides.

use crate::names::NameError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No app answers at this host name.
    #[error("no such app")]
    NoSuchApp,
    /// The class is not one of the active version's.
    #[error("no such actor class")]
    NoSuchClass,
    /// The name (or class syntax) is not valid.
    #[error("{0}")]
    InvalidName(NameError),
    /// An outside caller reached an `internal` class (the early rule).
    #[error("actor class is internal")]
    Internal,
    /// A value the app requires is not set.
    #[error("app value {0} is not set")]
    ValueMissing(String),
    /// The actor does not exist and this caller does not create it.
    #[error("no such actor")]
    NoSuchActor,
    /// The actor's mailbox is full.
    #[error("callee overloaded")]
    Overloaded,
    /// No pool instance was free within the admission wait.
    #[error("no capacity for this actor now")]
    Capacity,
    /// The store failed; the text is for the log, not the client.
    #[error("store unavailable")]
    StoreUnavailable(String),
}
