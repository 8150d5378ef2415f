//! Call deadlines (docs/spec/calls.md §5 and §10). Pure: the
//! caller passes the instants in.

use std::time::{Duration, Instant};

/// What an event keeps of its wall to answer after its calls: 5 s, or a
/// fifth of a wall shorter than 25 s.
pub fn answer_margin(wall: Duration) -> Duration {
    if wall < Duration::from_secs(25) { wall / 5 } else { Duration::from_secs(5) }
}

/// An actor's call deadline: the event's wall from the event's start, less
/// the answer margin, and never more than `call_limit` from the call's
/// start.
pub fn actor_call_deadline(event_start: Instant, wall: Duration, call_start: Instant, call_limit: Duration) -> Instant {
    (event_start + wall - answer_margin(wall)).min(call_start + call_limit)
}

/// How long the longest wait an event may be given is: a day, far past
/// every limit (the head carries no more).
pub const FOREVER: Duration = Duration::from_secs(86_400);

/// The deadline of an event whose caller sets none: an HTTP client at
/// `/actor/`, a socket's open or message. It waits at most the actors'
/// call limit, as any call does, whoever makes it.
pub fn event_deadline(arrived: Instant, call_limit: Duration) -> Instant {
    arrived + call_limit
}

/// A socket's close always runs, however long it waits: the actor must
/// learn that its socket is gone.
pub fn close_deadline(arrived: Instant) -> Instant {
    arrived + FOREVER
}

/// What a front keeps of its request's wall to answer after its calls.
pub const FRONT_ANSWER_MARGIN: Duration = Duration::from_secs(5);

/// A front's call deadline: 5 s before the request's wall ends, or the
/// actors' call limit from the call's start, whichever is first.
pub fn front_call_deadline(
    request_start: Instant,
    front_wall: Duration,
    call_start: Instant,
    call_limit: Duration,
) -> Instant {
    (request_start + front_wall.saturating_sub(FRONT_ANSWER_MARGIN)).min(call_start + call_limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_margin_is_five_seconds_or_a_fifth_of_a_short_wall() {
        assert_eq!(answer_margin(S(30)), S(5));
        assert_eq!(answer_margin(S(25)), S(5));
        assert_eq!(answer_margin(MS(24_999)), MS(4_999) + Duration::from_nanos(800_000));
        assert_eq!(answer_margin(S(10)), S(2));
        assert_eq!(answer_margin(S(1)), MS(200));
        assert_eq!(answer_margin(S(120)), S(5));
    }

    #[test]
    fn an_actors_deadline_counts_from_its_events_start() {
        let t0 = Instant::now();
        // Default wall: 25 s after the event started, wherever the call starts.
        assert_eq!(actor_call_deadline(t0, S(30), t0 + S(3), S(30)), t0 + S(25));
        assert_eq!(actor_call_deadline(t0, S(30), t0 + S(24), S(30)), t0 + S(25));
        // A short wall keeps a fifth.
        assert_eq!(actor_call_deadline(t0, S(10), t0, S(30)), t0 + S(8));
        // The call limit bounds a long wall.
        assert_eq!(actor_call_deadline(t0, S(120), t0 + S(10), S(30)), t0 + S(40));
        assert_eq!(actor_call_deadline(t0, S(120), t0 + S(100), S(30)), t0 + S(115));
    }

    #[test]
    fn an_uncalled_event_waits_the_call_limit_and_a_close_forever() {
        let t0 = Instant::now();
        assert_eq!(event_deadline(t0, S(30)), t0 + S(30));
        assert_eq!(close_deadline(t0), t0 + S(86_400));
    }

    #[test]
    fn a_fronts_deadline_is_five_seconds_before_its_wall_or_the_call_limit() {
        let t0 = Instant::now();
        assert_eq!(front_call_deadline(t0, S(30), t0, S(30)), t0 + S(25));
        assert_eq!(front_call_deadline(t0, S(30), t0 + S(20), S(30)), t0 + S(25));
        assert_eq!(front_call_deadline(t0, S(60), t0 + S(1), S(30)), t0 + S(31));
        assert_eq!(front_call_deadline(t0, S(60), t0 + S(1), S(2)), t0 + S(3));
        // A wall of 5 s or less leaves no time for calls.
        assert_eq!(front_call_deadline(t0, S(4), t0, S(30)), t0);
    }
}
