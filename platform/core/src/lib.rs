//! wasmkeep's sans-IO domain: names and addresses, access rules, the
//! `x-wasmkeep-` header range, `/actor/` paths, limits, deadlines, budgets and refusals. No
//! sockets, no clock, no runtime: everything here is pure and tested here.

pub mod access;
pub mod actor_key;
pub mod budget;
pub mod caller;
pub mod connection;
pub mod deadline;
pub mod handoff;
pub mod header_range;
pub mod limits;
pub mod names;
pub mod path;
pub mod refusal;
pub mod response;

pub use access::Access;
pub use actor_key::{ActorKey, AppId};
pub use caller::{Caller, Chain, Origin};
pub use limits::Limits;
pub use names::{ActorName, Address, ClassName, NameError, RawAddress};
pub use refusal::Refusal;
