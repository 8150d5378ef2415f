//! Resident actors waiting for their next event, per tenant, oldest idle
//! first: when the pool is full, the scheduler asks one of them to
//! hibernate now instead of at the end of its idle time.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

struct Idle<K> {
    by_age: BTreeMap<u64, (K, Arc<Notify>)>,
    age_of: HashMap<K, u64>,
}

impl<K> Default for Idle<K> {
    fn default() -> Self {
        Self { by_age: BTreeMap::new(), age_of: HashMap::new() }
    }
}

/// Idle resident actors (`K`) of each tenant (`T`).
pub struct IdleActors<T, K> {
    inner: Mutex<(u64, HashMap<T, Idle<K>>)>,
}

impl<T, K> Default for IdleActors<T, K> {
    fn default() -> Self {
        Self { inner: Mutex::new((0, HashMap::new())) }
    }
}

impl<T: Hash + Eq + Clone, K: Hash + Eq + Clone> IdleActors<T, K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, HashMap<T, Idle<K>>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `key` of `tenant` is idle from now: the answer is notified when it
    /// should hibernate early.
    pub fn park(&self, tenant: &T, key: &K) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        let mut inner = self.lock();
        inner.0 += 1;
        let age = inner.0;
        let idle = inner.1.entry(tenant.clone()).or_default();
        if let Some(old) = idle.age_of.insert(key.clone(), age) {
            idle.by_age.remove(&old);
        }
        idle.by_age.insert(age, (key.clone(), notify.clone()));
        notify
    }

    /// `key` of `tenant` is busy again (or gone).
    pub fn unpark(&self, tenant: &T, key: &K) {
        let mut inner = self.lock();
        if let Some(idle) = inner.1.get_mut(tenant) {
            if let Some(age) = idle.age_of.remove(key) {
                idle.by_age.remove(&age);
            }
            if idle.age_of.is_empty() {
                inner.1.remove(tenant);
            }
        }
    }

    /// Asks `tenant`'s longest idle actor to hibernate now; false when it
    /// has none idle.
    pub fn evict_oldest(&self, tenant: &T) -> bool {
        let mut inner = self.lock();
        let Some(idle) = inner.1.get_mut(tenant) else { return false };
        let Some((_, (key, notify))) = idle.by_age.pop_first() else { return false };
        idle.age_of.remove(&key);
        if idle.age_of.is_empty() {
            inner.1.remove(tenant);
        }
        notify.notify_one();
        true
    }

    /// Tenants with an idle actor.
    pub fn has_idle(&self, tenant: &T) -> bool {
        self.lock().1.contains_key(tenant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_longest_idle_is_asked_first_and_once() {
        let idle = IdleActors::<&str, u32>::default();
        let a1 = idle.park(&"a", &1);
        let a2 = idle.park(&"a", &2);
        let _b1 = idle.park(&"b", &1);
        // 1 got busy and idle again: 2 is now the longest idle.
        idle.unpark(&"a", &1);
        let a1 = {
            drop(a1);
            idle.park(&"a", &1)
        };
        assert!(idle.evict_oldest(&"a"));
        tokio::time::timeout(std::time::Duration::from_secs(1), a2.notified()).await.unwrap();
        assert!(idle.evict_oldest(&"a"));
        a1.notified().await;
        assert!(!idle.evict_oldest(&"a"), "none left");
        assert!(!idle.has_idle(&"a") && idle.has_idle(&"b"));
    }
}
