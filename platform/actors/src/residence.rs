//! What an awake actor holds between events, and what a hibernated one
//! keeps on this node: its owner epoch.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use wasmkeep_core::{ActorName, MailboxKey};
use wasmkeep_runtime::ActorInstance;
use wasmkeep_scheduler::{InstanceLease, ShareTicket};
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
    /// The actor, once admission has checked its address.
    pub actor: Option<wasmkeep_core::ActorKey>,
    /// Its name, once admission has checked it (it stays valid).
    pub name: Option<ActorName>,
    /// The pool instance it may use.
    pub lease: Option<InstanceLease>,
    /// Its place in its tenant's share of resident actors, if the tenant
    /// has a plan.
    pub share: Option<ShareTicket>,
    /// When its last event was noted in the node's `LastEvents`.
    pub noted: Option<std::time::Instant>,
    /// Its tenant, when the tenant has a plan (its idle time is then the
    /// scheduler's to cut short).
    pub tenant: Option<wasmkeep_core::TenantId>,
    /// The store's mark after its last commit: its answers and effects wait
    /// until that is durable (and no longer: another actor's writes are not
    /// its to wait for).
    pub written: wasmkeep_storage::WriteMark,
    /// The node's tenure (in a cluster) its epoch was taken under: an epoch
    /// of an older tenure is not trusted (see `Remote::tenure`).
    pub tenure: u64,
}

/// When actors this node ran last had an event (unix seconds), for the
/// control plane: noted at most once a second per actor, for at most
/// `OWNED_MAX` actors (past it, an arbitrary one is forgotten).
#[derive(Default)]
pub(crate) struct LastEvents {
    inner: Mutex<HashMap<MailboxKey, u64>>,
}

impl LastEvents {
    /// Notes an event of `key` now, unless one was noted within a second.
    /// The key is made only then: most events of a busy actor note nothing.
    pub(crate) fn note(&self, key: impl FnOnce() -> MailboxKey, noted: &mut Option<std::time::Instant>) {
        let now = std::time::Instant::now();
        if noted.is_some_and(|at| now.duration_since(at) < std::time::Duration::from_secs(1)) {
            return;
        }
        *noted = Some(now);
        let key = &key();
        let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= OWNED_MAX && !map.contains_key(key) {
            let any = map.keys().next().cloned();
            if let Some(any) = any {
                map.remove(&any);
            }
        }
        map.insert(key.clone(), unix);
    }

    pub(crate) fn get(&self, key: &MailboxKey) -> Option<u64> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).get(key).copied()
    }

    pub(crate) fn forget(&self, key: &MailboxKey) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

/// Most hibernated actors whose owner epoch the node keeps (about 150
/// bytes each); past it, the one that went to sleep first is forgotten,
/// and its next wake asks the store again.
pub(crate) const OWNED_MAX: usize = 100_000;

/// The owner epochs of hibernated actors this node woke: waking one of
/// them again needs no write to the store. Safe because every commit is
/// fenced by its epoch: were another node to take the actor, this node's
/// next commit would fail and its epoch be forgotten (the actor task drops
/// an epoch whose commit failed), and an actor deleted here is forgotten
/// at once.
pub(crate) struct Owned {
    inner: Mutex<Kept>,
    most: usize,
}

#[derive(Default)]
struct Kept {
    /// Each kept epoch, with the tenure it was taken under and when it was
    /// kept.
    epochs: HashMap<MailboxKey, (Epoch, u64, u64)>,
    /// Keys in the order they were kept; an entry whose time is not its
    /// key's in `epochs` any more was taken or kept again since.
    order: VecDeque<(MailboxKey, u64)>,
    next: u64,
}

impl Default for Owned {
    fn default() -> Self {
        Self::new(OWNED_MAX)
    }
}

impl Owned {
    pub(crate) fn new(most: usize) -> Self {
        Self { inner: Mutex::default(), most }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The epoch a hibernated actor held, with the tenure it was taken
    /// under, taken back as it wakes (admission trusts it only under that
    /// same tenure, whatever raced with the keep).
    pub(crate) fn take(&self, key: &MailboxKey) -> Option<(Epoch, u64)> {
        self.lock().epochs.remove(key).map(|(epoch, tenure, _)| (epoch, tenure))
    }

    /// Forgets every kept epoch (the node may have been declared dead).
    pub(crate) fn clear(&self) {
        *self.lock() = Kept::default();
    }

    /// Keeps the epoch of an actor going to sleep.
    pub(crate) fn keep(&self, key: &MailboxKey, epoch: Epoch, tenure: u64) {
        let mut kept = self.lock();
        let Kept { epochs, order, next } = &mut *kept;
        *next += 1;
        epochs.insert(key.clone(), (epoch, tenure, *next));
        order.push_back((key.clone(), *next));
        let current = |epochs: &HashMap<MailboxKey, (Epoch, u64, u64)>, k: &MailboxKey, at: u64| {
            epochs.get(k).is_some_and(|(_, _, kept_at)| *kept_at == at)
        };
        while epochs.len() > self.most {
            let Some((oldest, at)) = order.pop_front() else { break };
            if current(epochs, &oldest, at) {
                epochs.remove(&oldest);
            }
        }
        // Entries of epochs taken back are dropped now and then, so the
        // order never holds many more entries than there are epochs.
        if order.len() > 2 * epochs.len() + 64 {
            order.retain(|(k, at)| current(epochs, k, *at));
        }
    }
}

#[cfg(test)]
mod tests {
    use wasmkeep_core::{AppId, RawAddress};

    use super::*;

    fn key(i: usize) -> MailboxKey {
        MailboxKey { app: AppId(1), address: RawAddress::split(&format!("c/{i}")).unwrap() }
    }

    #[test]
    fn the_first_to_sleep_is_the_first_forgotten() {
        let owned = Owned::new(3);
        for i in 0..3 {
            owned.keep(&key(i), Epoch(i as i64), 0);
        }
        // 0 wakes and sleeps again: it is now the newest.
        assert_eq!(owned.take(&key(0)), Some((Epoch(0), 0)));
        owned.keep(&key(0), Epoch(10), 0);
        owned.keep(&key(3), Epoch(3), 2);
        assert_eq!(owned.take(&key(1)), None, "the oldest went");
        assert_eq!(owned.take(&key(2)), Some((Epoch(2), 0)));
        assert_eq!(owned.take(&key(0)), Some((Epoch(10), 0)));
        assert_eq!(owned.take(&key(3)), Some((Epoch(3), 2)), "with the tenure it was kept under");
        assert_eq!(owned.take(&key(3)), None, "taken once");
    }

    #[test]
    fn the_order_stays_near_the_number_of_epochs() {
        let owned = Owned::new(1000);
        for round in 0..10_000 {
            owned.keep(&key(round % 7), Epoch(round as i64), 0);
            owned.take(&key((round + 3) % 7));
        }
        let kept = owned.lock();
        assert!(kept.order.len() <= 2 * kept.epochs.len() + 65, "{} for {}", kept.order.len(), kept.epochs.len());
    }
}
