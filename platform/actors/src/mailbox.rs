//! Mailboxes: one bounded queue and one task per awake actor.
//!
//! Events are posted under the map's lock, and a task retires (removes its
//! entry and ends) under the same lock only when its queue is empty, so an
//! event is never posted to a task that has ended.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;
use wasmkeep_core::{MailboxKey, Refusal};

use crate::event::Event;

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

    /// Queues `event` for the actor at `key`, starting its task with
    /// `start` (given the event it starts for) if it has none. A full
    /// queue refuses the event (`callee overloaded`).
    pub(crate) fn post(
        &self,
        key: MailboxKey,
        event: Event,
        start: impl Fn(&MailboxKey, &Event, mpsc::Receiver<Event>),
    ) -> Result<(), Refusal> {
        let mut map = self.lock();
        let spawn = |key: &MailboxKey, event: &Event| {
            let (tx, rx) = mpsc::channel(self.capacity);
            start(key, event, rx);
            tx
        };
        if let Some(tx) = map.get(&key) {
            return match tx.try_send(event) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(_)) => Err(Refusal::Overloaded),
                // A task ends without retiring only if it panicked: the
                // actor gets a new task rather than staying unreachable.
                Err(mpsc::error::TrySendError::Closed(event)) => {
                    tracing::error!(app = %key.app, "an actor's task ended unexpectedly; restarting it");
                    let tx = spawn(&key, &event);
                    let sent = tx.try_send(event).map_err(|_| Refusal::Overloaded);
                    map.insert(key, tx);
                    sent
                }
            };
        }
        let tx = spawn(&key, &event);
        let sent = tx.try_send(event).map_err(|_| Refusal::Overloaded);
        map.insert(key, tx);
        sent
    }

    /// Removes the actor's entry if its queue is empty, running `last`
    /// under the same lock (before any new task can start for the actor);
    /// answers whether the task may end.
    pub(crate) fn retire(&self, key: &MailboxKey, rx: &mpsc::Receiver<Event>, last: impl FnOnce()) -> bool {
        let mut map = self.lock();
        if !rx.is_empty() {
            return false;
        }
        map.remove(key);
        last();
        true
    }

    /// Each awake actor with the events queued for it, not yet running.
    pub(crate) fn queued(&self) -> Vec<(MailboxKey, usize)> {
        self.lock().iter().map(|(k, tx)| (k.clone(), tx.max_capacity() - tx.capacity())).collect()
    }

    /// Whether the actor has a task now.
    pub(crate) fn contains(&self, key: &MailboxKey) -> bool {
        self.lock().contains_key(key)
    }

    /// Actors with a task now (awake, or about to hibernate).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
