//! wasmkeep's sans-IO domain: names and addresses, access rules, the
//! host's header range (the head) and the envelope, `/actor/` paths,
//! admission's and calls' rules, limits, deadlines, budgets, refusals and
//! their answers, close codes, the metrics' label sets. No sockets, no clock, no runtime:
//! everything here is pure and tested here.

pub mod access;
pub mod actor_key;
pub mod admission;
pub mod body_units;
pub mod budget;
pub mod call_check;
pub mod caller;
pub mod close;
pub mod connection;
pub mod deadline;
pub mod egress;
pub mod envelope;
pub mod environment;
pub mod handoff;
pub mod head;
pub mod header_range;
pub mod heartbeat;
pub mod hop_answer;
pub mod host;
pub mod labels;
pub mod limits;
pub mod listing;
pub mod metric_labels;
pub mod names;
pub mod path;
pub mod period;
pub mod placement;
pub mod plan;
pub mod quota;
pub mod refusal;
pub mod response;
pub mod signature;

pub use access::Access;
pub use actor_key::{ActorKey, AppId, MailboxKey};
pub use caller::{Caller, Chain, Origin};
pub use envelope::{AppRef, Envelope, TraceContext};
pub use limits::Limits;
pub use names::{ActorName, Address, AppName, ClassName, NameError, RawAddress, TenantId};
pub use refusal::{Answer, AsCall, EventError, EventFault, Failure, FrontError, PortError, Refusal, RefusalReason};
