//! What an awake actor holds between events, and what a hibernated one
//! keeps on this node: its owner epoch.

use std::collections::HashMap;
use std::sync::Mutex;

use wasmkeep_core::{ActorName, MailboxKey};
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
    /// Its name, once admission has checked it (it stays valid).
    pub name: Option<ActorName>,
    /// The pool instance it may use.
    pub lease: Option<InstanceLease>,
}

/// Most hibernated actors whose owner epoch the node keeps (about 100
/// bytes each); past it, an arbitrary one is forgotten and its next wake
/// asks the store again.
pub(crate) const OWNED_MAX: usize = 100_000;

/// The owner epochs of hibernated actors this node woke: waking one of
/// them again needs no write to the store. Safe because every commit is
/// fenced by its epoch: were another node to take the actor, this node's
/// next commit would fail and its epoch be forgotten (the actor task drops
/// an epoch whose commit failed), and an actor deleted here is forgotten
/// at once.
#[derive(Default)]
pub(crate) struct Owned(Mutex<HashMap<MailboxKey, Epoch>>);

impl Owned {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MailboxKey, Epoch>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The epoch a hibernated actor held, taken back as it wakes.
    pub(crate) fn take(&self, key: &MailboxKey) -> Option<Epoch> {
        self.lock().remove(key)
    }

    /// Keeps the epoch of an actor going to sleep.
    pub(crate) fn keep(&self, key: &MailboxKey, epoch: Epoch) {
        let mut owned = self.lock();
        if owned.len() >= OWNED_MAX
            && let Some(some) = owned.keys().next().cloned()
        {
            owned.remove(&some);
        }
        owned.insert(key.clone(), epoch);
    }
}
