//! Mailboxes: one bounded queue and one task per awake actor.
//!
//! Events are posted under the map's lock, and a task retires (removes its
//! entry and ends) under the same lock only when its queue is empty, so an
//! event is never posted to a task that has ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use wasmkeep_core::{ActorKey, AppId, RawAddress, Refusal};

use crate::NodeInner;
use crate::event::Event;

/// A mailbox's key: the app and the address as the caller gave it.
/// Admission validates the address, in its own order, for every event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MailboxKey {
    pub app: AppId,
    pub address: RawAddress,
}

impl MailboxKey {
    /// The mailbox of an actor whose address is validated.
    pub(crate) fn of(actor: &ActorKey) -> Self {
        Self { app: actor.app, address: RawAddress::from(&actor.address) }
    }
}

pub(crate) struct Mailboxes {
    map: Mutex<HashMap<MailboxKey, mpsc::Sender<Event>>>,
    capacity: usize,
}

impl Mailboxes {
    pub(crate) fn new(capacity: usize) -> Self {
        Self { map: Mutex::new(HashMap::new()), capacity }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MailboxKey, mpsc::Sender<Event>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `event` for the actor, starting its task if it has none.
    /// A full queue refuses the event (`callee overloaded`).
    pub(crate) fn post(&self, node: &Arc<NodeInner>, key: MailboxKey, event: Event) -> Result<(), Refusal> {
        let mut map = self.lock();
        let spawn = |key: &MailboxKey| {
            let (tx, rx) = mpsc::channel(self.capacity);
            tokio::spawn(crate::actor::run(node.clone(), key.clone(), rx));
            tx
        };
        let tx = map.entry(key.clone()).or_insert_with_key(spawn);
        match tx.try_send(event) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(Refusal::Overloaded),
            // A task ends without retiring only if it panicked: the actor
            // gets a new task rather than staying unreachable.
            Err(mpsc::error::TrySendError::Closed(event)) => {
                tracing::error!(app = %key.app, "an actor's task ended unexpectedly; restarting it");
                let tx = spawn(&key);
                let sent = tx.try_send(event).map_err(|_| Refusal::Overloaded);
                map.insert(key, tx);
                sent
            }
        }
    }

    /// Removes the actor's entry if its queue is empty; answers whether the
    /// task may end.
    pub(crate) fn retire(&self, key: &MailboxKey, rx: &mpsc::Receiver<Event>) -> bool {
        let mut map = self.lock();
        if !rx.is_empty() {
            return false;
        }
        map.remove(key);
        true
    }

    /// Each awake actor with the events queued for it, not yet running.
    pub(crate) fn queued(&self) -> Vec<(MailboxKey, usize)> {
        self.lock().iter().map(|(k, tx)| (k.clone(), tx.max_capacity() - tx.capacity())).collect()
    }

    /// Actors with a task now (awake, or about to hibernate).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
