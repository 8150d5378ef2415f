//! What a node keeps of an actor between its events (docs/spec/cluster.md
//! §5, §8-9): the epoch it took, under the tenure it took it in. A kept
//! epoch lets the next event skip the store; a tenure that grew since (the
//! node went unheard for the failover wait, and another may have taken
//! the actor) makes it worthless, and a drain gives it up.

use std::time::Instant;

/// Whether what an actor holds (its epoch, its instance's memory) still
/// stands for an event admitted under tenure `now`: only if it was taken
/// under that same tenure.
pub fn still_holds(taken_under: u64, now: u64) -> bool {
    taken_under == now
}

/// Whether an event that arrived at `arrived` finds its actor given up
/// first: it came after the node began to drain (`draining_since`), so it
/// and every later one go to the actor's next owner.
pub fn gives_up(arrived: Instant, draining_since: Option<Instant>) -> bool {
    draining_since.is_some_and(|since| arrived >= since)
}

/// What becomes of an actor's epoch as its task retires (its writes are
/// durable by then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtRetire {
    /// Kept for the actor's next event here.
    Keep,
    /// Released in the store, so another node takes it at once.
    Release,
    /// Forgotten: the next event takes the actor afresh.
    Drop,
}

/// What an actor's epoch taken under tenure `taken_under` becomes as its
/// task retires under tenure `now`.
pub fn at_retire(taken_under: u64, now: u64, draining: bool) -> AtRetire {
    if draining {
        AtRetire::Release
    } else if still_holds(taken_under, now) {
        AtRetire::Keep
    } else {
        AtRetire::Drop
    }
}

/// How long a node trusts its own silence: three quarters of the failover
/// wait. Another node judges this node's heartbeat by its own clock, which
/// may run ahead of this one's; the quarter left is the margin for that
/// (2.5 s of the default 10 s), so a node gives its actors up before any
/// other can take them.
pub fn trusted_silence(wait: std::time::Duration) -> std::time::Duration {
    wait - wait / 4
}

/// Whether a node whose heartbeat was last written at `written_ms` (0:
/// never) vouches for itself at `now_ms`: it was written within
/// [`trusted_silence`]. A node that does not may already be dead to the
/// others, and takes no actor until it has written its heartbeat again
/// (a take in its silence would be trusted past it).
pub fn is_current(written_ms: u64, now_ms: u64, wait: std::time::Duration) -> bool {
    let trusted_ms = u64::try_from(trusted_silence(wait).as_millis()).unwrap_or(u64::MAX);
    written_ms != 0 && now_ms.saturating_sub(written_ms) <= trusted_ms
}

/// A node's tenure (docs/spec/cluster.md §3): how many times it found its
/// own heartbeat unwritten for longer than [`trusted_silence`] (it was
/// paused, or cut off from the store), when the others may have taken its
/// actors. It grows once per silence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tenure {
    count: u64,
    /// The last write after which a silence was counted.
    counted_after: u64,
}

impl Tenure {
    /// The tenure as last found (without looking again).
    pub fn last(&self) -> u64 {
        self.count
    }

    /// The tenure at `now_ms`, the node's heartbeat last written at
    /// `written_ms` (0: never). It must be asked before each heartbeat is
    /// written, as well as before each event: a silence that a write ended
    /// unasked would go unseen.
    pub fn at(&mut self, written_ms: u64, now_ms: u64, wait: std::time::Duration) -> u64 {
        let silent = written_ms != 0 && !is_current(written_ms, now_ms, wait);
        if silent && self.counted_after != written_ms {
            self.counted_after = written_ms;
            self.count += 1;
        }
        self.count
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_epoch_stands_only_under_the_tenure_it_was_taken_in() {
        assert!(still_holds(3, 3));
        assert!(!still_holds(2, 3));
        assert_eq!(at_retire(3, 3, false), AtRetire::Keep);
        assert_eq!(at_retire(2, 3, false), AtRetire::Drop);
    }

    #[test]
    fn a_draining_node_releases_every_epoch_it_retires() {
        assert_eq!(at_retire(3, 3, true), AtRetire::Release);
        assert_eq!(at_retire(2, 3, true), AtRetire::Release, "the store's epoch compare decides");
    }

    #[test]
    fn only_an_event_that_arrived_once_the_drain_began_gives_its_actor_up() {
        let t = Instant::now();
        assert!(!gives_up(t, None));
        assert!(gives_up(t, Some(t)));
        assert!(gives_up(t + Duration::from_millis(1), Some(t)));
        assert!(!gives_up(t, Some(t + Duration::from_millis(1))));
    }

    #[test]
    fn a_node_vouches_for_itself_within_the_trusted_silence() {
        let wait = Duration::from_secs(10);
        assert!(!is_current(0, 50_000, wait), "never written");
        assert!(is_current(1_000, 8_500, wait));
        assert!(!is_current(1_000, 8_501, wait));
        assert!(is_current(9_000, 8_000, wait), "a write from the future is current");
    }

    #[test]
    fn the_tenure_grows_once_per_silence_longer_than_three_quarters_of_the_wait() {
        let wait = Duration::from_secs(10);
        assert_eq!(trusted_silence(wait), Duration::from_millis(7_500));
        let mut t = Tenure::default();
        assert_eq!(t.at(0, 50_000, wait), 0, "never written: nothing to doubt");
        assert_eq!(t.at(1_000, 8_500, wait), 0, "exactly trusted");
        assert_eq!(t.at(1_000, 8_501, wait), 1);
        assert_eq!(t.at(1_000, 30_000, wait), 1, "one silence, one step");
        assert_eq!(t.at(30_000, 30_500, wait), 1, "written again");
        assert_eq!(t.at(30_000, 45_000, wait), 2);
        assert_eq!(t.at(30_000, 45_001, wait), 2);
    }
}
