//! What an awake actor holds between events.

use wasmkeep_runtime::ActorInstance;
use wasmkeep_scheduler::InstanceLease;
use wasmkeep_storage::Epoch;

use crate::actor_host::ActorEventHost;

/// Dropping it hibernates the actor: the instance goes back to the pool,
/// storage stays.
#[derive(Default)]
pub(crate) struct Residence {
    /// Its live instance, if one is running. Declared before `lease`: the
    /// instance leaves the pool before its lease is handed to another.
    pub instance: Option<ActorInstance<ActorEventHost>>,
    /// The owner epoch, once the actor is known to exist.
    pub epoch: Option<Epoch>,
    /// The pool instance it may use.
    pub lease: Option<InstanceLease>,
}
