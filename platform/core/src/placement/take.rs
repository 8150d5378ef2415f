//! How admission takes an actor for this node (docs/spec/cluster.md §4-5,
//! §9): alone, by waking it; in a cluster, by a compare-and-set in the
//! store against its owner's liveness; while draining, not at all (the
//! actor's owner runs it, or the node that succeeds this one).

use super::{Members, Note};
use crate::{MailboxKey, Refusal};

/// What admission asks the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeBy {
    /// A node alone wakes the actor: no other node can own it.
    Wake,
    /// A draining node takes nothing: it asks who owns the actor
    /// ([`while_draining`]).
    AskOwner,
    /// The compare-and-set: an owner whose heartbeat (in the store) was
    /// sent before `dead_before_ms` is dead and loses the actor.
    CompareAndSet { dead_before_ms: u64 },
    /// Not now: this node's own heartbeat is not current
    /// (`holding::is_current`), so the others may count it dead already;
    /// it takes nothing until it has written one (the client retries).
    NotCurrent,
}

/// How a node takes an actor at `now_ms`; `current`: whether its own
/// heartbeat is (`holding::is_current`).
pub fn take_by(draining: bool, current: bool, members: &Members, now_ms: u64) -> TakeBy {
    match (members.is_clustered(), draining, current) {
        (false, _, _) => TakeBy::Wake,
        (true, true, _) => TakeBy::AskOwner,
        (true, false, false) => TakeBy::NotCurrent,
        (true, false, true) => TakeBy::CompareAndSet { dead_before_ms: members.dead_before_ms(now_ms) },
    }
}

/// A draining node's answer for `actor`, whose owner the store names
/// `stored` (if any): that owner when it is another node and alive,
/// otherwise the node that succeeds this one for it; with neither, no
/// node can run it now ([`Refusal::Capacity`]: the client retries).
pub fn while_draining(stored: Option<&str>, actor: &MailboxKey, members: &Members, now_ms: u64) -> (Note, Refusal) {
    let owner = stored.filter(|o| *o != members.me() && members.is_alive(o, now_ms)).map(str::to_owned);
    match owner.or_else(|| members.successor(actor, now_ms)) {
        Some(owner) => (Note::Owner(owner.clone()), Refusal::Elsewhere { owner }),
        None => (Note::Keep, Refusal::Capacity),
    }
}

/// What the compare-and-set's success notes: this node owns the actor.
pub fn taken_here() -> Note {
    Note::Forget
}

/// What the compare-and-set's finding that live node `owner` owns the
/// actor notes, and the refusal it is (the event goes there).
pub fn owned_elsewhere(owner: String) -> (Note, Refusal) {
    (Note::Owner(owner.clone()), Refusal::Elsewhere { owner })
}

#[cfg(test)]
mod tests {
    use super::super::members::tests::{WAIT, beat, key};
    use super::*;

    #[test]
    fn a_node_alone_wakes_a_draining_one_asks_the_others_compare() {
        let alone = Members::alone("a");
        assert_eq!(take_by(false, true, &alone, 50_000), TakeBy::Wake);
        assert_eq!(take_by(true, true, &alone, 50_000), TakeBy::Wake, "alone, a drain has nowhere to send");
        assert_eq!(take_by(false, false, &alone, 50_000), TakeBy::Wake, "alone, no heartbeat to be current");
        let m = Members::new("a", WAIT, [beat("a", 50_000)]);
        assert_eq!(take_by(true, true, &m, 50_000), TakeBy::AskOwner);
        assert_eq!(take_by(true, false, &m, 50_000), TakeBy::AskOwner, "asking takes nothing");
        assert_eq!(take_by(false, true, &m, 50_000), TakeBy::CompareAndSet { dead_before_ms: 40_000 });
        assert_eq!(take_by(false, false, &m, 50_000), TakeBy::NotCurrent, "a silent node takes nothing");
    }

    #[test]
    fn a_draining_node_sends_to_a_live_owner_then_the_successor_then_refuses() {
        let now = 50_000;
        let m = Members::new("a", WAIT, [beat("a", now), beat("b", now), beat("dead", now - 10_001)]);
        let actor = key("x");
        let elsewhere = |o: &str| (Note::Owner(o.into()), Refusal::Elsewhere { owner: o.into() });
        assert_eq!(while_draining(Some("b"), &actor, &m, now), elsewhere("b"));
        // Its own row, a dead owner, or none: the successor.
        assert_eq!(while_draining(Some("a"), &actor, &m, now), elsewhere("b"));
        assert_eq!(while_draining(Some("dead"), &actor, &m, now), elsewhere("b"));
        assert_eq!(while_draining(None, &actor, &m, now), elsewhere("b"));
        let alone = Members::new("a", WAIT, [beat("a", now)]);
        assert_eq!(while_draining(Some("a"), &actor, &alone, now), (Note::Keep, Refusal::Capacity));
        assert_eq!(while_draining(Some("dead"), &actor, &alone, now), (Note::Keep, Refusal::Capacity));
    }

    #[test]
    fn a_take_here_forgets_the_hint_one_elsewhere_notes_and_refuses() {
        assert_eq!(taken_here(), Note::Forget);
        assert_eq!(owned_elsewhere("b".into()), (Note::Owner("b".into()), Refusal::Elsewhere { owner: "b".into() }));
    }
}
