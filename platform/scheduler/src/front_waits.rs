//! The bounds on the calls a node's fronts have waiting
//! (docs/spec/actors-and-admission.md §8, docs/spec/calls.md §12): at most
//! a quarter of the slots on one actor, at most the slots' worth on the
//! node. A call past a bound fails at once; a call within them holds a
//! [`FrontWait`] for as long as it waits.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// Which bound a call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontBusy {
    /// Too many front calls wait on this one actor.
    Actor,
    /// Too many front calls wait on this node.
    Node,
}

/// The front calls waiting on a node, by callee.
pub struct FrontWaits<K> {
    inner: Arc<Mutex<Waiting<K>>>,
    per_actor: usize,
    per_node: usize,
}

struct Waiting<K> {
    total: usize,
    by_actor: HashMap<K, usize>,
}

/// One front call waiting on `K`; dropping it ends the wait.
pub struct FrontWait<K: Hash + Eq> {
    inner: Arc<Mutex<Waiting<K>>>,
    key: Option<K>,
}

impl<K: Hash + Eq + Clone> FrontWaits<K> {
    pub fn new(per_actor: usize, per_node: usize) -> Self {
        Self { inner: Arc::new(Mutex::new(Waiting { total: 0, by_actor: HashMap::new() })), per_actor, per_node }
    }

    /// Starts a wait on `callee`, or says which bound it would break.
    pub fn hold(&self, callee: &K) -> Result<FrontWait<K>, FrontBusy> {
        let mut w = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let on_actor = w.by_actor.get(callee).copied().unwrap_or(0);
        if on_actor >= self.per_actor {
            return Err(FrontBusy::Actor);
        }
        if w.total >= self.per_node {
            return Err(FrontBusy::Node);
        }
        w.total += 1;
        *w.by_actor.entry(callee.clone()).or_insert(0) += 1;
        Ok(FrontWait { inner: self.inner.clone(), key: Some(callee.clone()) })
    }

    /// Front calls waiting now.
    pub fn waiting(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

impl<K: Hash + Eq> Drop for FrontWait<K> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        let mut w = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        w.total -= 1;
        if let Some(n) = w.by_actor.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                w.by_actor.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actor_takes_at_most_its_share_and_the_node_its_total() {
        let waits = FrontWaits::new(2, 3);
        let a1 = waits.hold(&"a").unwrap();
        let _a2 = waits.hold(&"a").unwrap();
        assert_eq!(waits.hold(&"a").err(), Some(FrontBusy::Actor));
        let _b1 = waits.hold(&"b").unwrap();
        assert_eq!(waits.hold(&"c").err(), Some(FrontBusy::Node));
        assert_eq!(waits.hold(&"a").err(), Some(FrontBusy::Actor), "the actor's bound is checked first");
        assert_eq!(waits.waiting(), 3);
        drop(a1);
        assert_eq!(waits.waiting(), 2);
        let _c1 = waits.hold(&"c").unwrap();
        assert_eq!(waits.hold(&"b").err(), Some(FrontBusy::Node));
    }

    #[test]
    fn ended_waits_leave_nothing_behind() {
        let waits = FrontWaits::new(1, 10);
        for _ in 0..100 {
            let w = waits.hold(&7u32).unwrap();
            assert_eq!(waits.hold(&7u32).err(), Some(FrontBusy::Actor));
            drop(w);
        }
        assert_eq!(waits.waiting(), 0);
        assert!(waits.inner.lock().unwrap().by_actor.is_empty());
    }
}
