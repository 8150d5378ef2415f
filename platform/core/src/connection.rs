//! When the public port closes a connection that is not doing its share:
//! an idle one (no request in flight past the keep-alive idle time) and a
//! slow one (a request head begun and not finished within the head read
//! time). Pure: the port's watchdog passes `now` and what it saw.

use std::time::Duration;

/// What a connection's watchdog has seen, in time since the connection
/// was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionSeen {
    /// Requests whose answer is not written yet.
    pub in_flight: usize,
    /// Since when no request has been in flight.
    pub idle_since: Duration,
    /// When the first byte of the next request head arrived, if one did
    /// (HTTP/1.1 only: HTTP/2 frames between requests are not heads).
    pub head_started: Option<Duration>,
}

/// What the watchdog does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing; look again at this time.
    LookAgainAt(Duration),
    /// Idle too long: close it gracefully.
    Idle,
    /// A head took too long: drop it.
    SlowHead,
}

/// The rule, at `now` (time since the connection was accepted).
pub fn verdict(seen: ConnectionSeen, now: Duration, header_read: Duration, keepalive_idle: Duration) -> Verdict {
    if seen.in_flight > 0 {
        // A request's own pace is its body's and its wall's business.
        return Verdict::LookAgainAt(now + keepalive_idle);
    }
    if let Some(started) = seen.head_started {
        let ends = started + header_read;
        return if now >= ends { Verdict::SlowHead } else { Verdict::LookAgainAt(ends) };
    }
    let ends = seen.idle_since + keepalive_idle;
    if now >= ends { Verdict::Idle } else { Verdict::LookAgainAt(ends) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(30);

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn seen(in_flight: usize, idle_since: u64, head_started: Option<u64>) -> ConnectionSeen {
        ConnectionSeen { in_flight, idle_since: s(idle_since), head_started: head_started.map(s) }
    }

    #[test]
    fn an_idle_connection_closes_after_the_idle_time() {
        assert_eq!(verdict(seen(0, 0, None), s(29), HEAD, IDLE), Verdict::LookAgainAt(s(30)));
        assert_eq!(verdict(seen(0, 0, None), s(30), HEAD, IDLE), Verdict::Idle);
        // Idle counts from the last answer, not from the accept.
        assert_eq!(verdict(seen(0, 100, None), s(120), HEAD, IDLE), Verdict::LookAgainAt(s(130)));
        assert_eq!(verdict(seen(0, 100, None), s(131), HEAD, IDLE), Verdict::Idle);
    }

    #[test]
    fn a_begun_head_has_the_head_time_from_its_first_byte() {
        assert_eq!(verdict(seen(0, 0, Some(5)), s(14), HEAD, IDLE), Verdict::LookAgainAt(s(15)));
        assert_eq!(verdict(seen(0, 0, Some(5)), s(15), HEAD, IDLE), Verdict::SlowHead);
        // A head begun just before the idle time ends still gets its time.
        assert_eq!(verdict(seen(0, 0, Some(29)), s(31), HEAD, IDLE), Verdict::LookAgainAt(s(39)));
        // A head time longer than the idle time is honoured too.
        assert_eq!(verdict(seen(0, 0, Some(1)), s(35), s(60), IDLE), Verdict::LookAgainAt(s(61)));
    }

    #[test]
    fn a_request_in_flight_is_never_cut_here() {
        assert_eq!(verdict(seen(1, 0, Some(0)), s(1000), HEAD, IDLE), Verdict::LookAgainAt(s(1030)));
        assert_eq!(verdict(seen(3, 0, None), s(31), HEAD, IDLE), Verdict::LookAgainAt(s(61)));
    }
}
