//! Placement: where each actor runs and where each event goes
//! (docs/spec/cluster.md, docs/spec/request-path.md §4), decided here and
//! nowhere else. Everything is pure: the drivers (the actors crate's
//! router, admission and actor task, the cluster's membership) read the
//! store, the hints and the clock, pass in what they read, and do what
//! the decision says.
//!
//! - [`Members`]: the heartbeats as last read, and liveness, the failover
//!   wait, a draining node's successor, who takes hand-offs.
//! - [`Route`]: one event's way: here, or to the owner (following its
//!   "elsewhere"), waiting out an owner that does not answer.
//! - [`take`]: how admission takes an actor for this node, and what its
//!   answer means.
//! - [`holding`]: what a node keeps of an actor between events (its epoch,
//!   under its tenure) and when it lets go.

use std::time::Instant;

pub mod holding;
mod members;
mod route;
pub mod take;

pub use members::Members;
pub use route::{Decision, Entry, Hop, IfElsewhere, Next, RECHECK, REROUTES, Route, Start};

/// The time a decision is made at: a monotonic instant for deadlines, and
/// unix milliseconds for heartbeats (written by one node, read by others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    pub unix_ms: u64,
}

/// What a decision notes of the actor's owner, in the node's hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Nothing new.
    Keep,
    /// This node owns it, or none is known: the next event asks the store.
    Forget,
    /// Node `.0` owns it.
    Owner(String),
}
