//! When the public port closes a connection that is not doing its share:
//! an idle one (no request in flight past the keep-alive idle time), a
//! slow one (a request head begun and not finished within the head read
//! time), and a stalled one (requests in flight, yet no byte read or
//! written for longer than any answer may take to start: a client that
//! does not read its answers). Pure: the port's watchdog passes `now` and
//! what it saw.

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
    /// When a byte was last read from or written to the connection.
    pub last_io: Duration,
    /// Whether an answer's bytes wait for the client to take them.
    pub writing: bool,
}

/// The times the rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionTimes {
    pub header_read: Duration,
    pub keepalive_idle: Duration,
    /// With requests in flight, the longest the connection may go without
    /// a byte either way.
    pub stalled: Duration,
    /// Whether an answer may take as long as it likes to start or to go on
    /// (the API's log tail waits for lines): then only a client that does
    /// not take its answer's bytes stalls. A request's body is paced on its
    /// own either way.
    pub answers_may_wait: bool,
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
    /// Requests in flight, and nothing moved for too long: drop it.
    Stalled,
}

/// The rule, at `now` (time since the connection was accepted).
pub fn verdict(seen: ConnectionSeen, now: Duration, times: ConnectionTimes) -> Verdict {
    if seen.writing || (seen.in_flight > 0 && !times.answers_may_wait) {
        // A request's own pace is its body's and its wall's business; a
        // connection where nothing moves at all is the client's.
        let ends = seen.last_io + times.stalled;
        return if now >= ends { Verdict::Stalled } else { Verdict::LookAgainAt(ends) };
    }
    if seen.in_flight > 0 {
        // An answer taking its time: look again, in case the client stops
        // taking its bytes.
        return Verdict::LookAgainAt(now + times.stalled);
    }
    if let Some(started) = seen.head_started {
        let ends = started + times.header_read;
        return if now >= ends { Verdict::SlowHead } else { Verdict::LookAgainAt(ends) };
    }
    // Idle since the last answer ended and its last byte went out.
    let ends = seen.idle_since.max(seen.last_io) + times.keepalive_idle;
    if now >= ends { Verdict::Idle } else { Verdict::LookAgainAt(ends) }
}

/// Who a client is, for every per-client bound: its IPv4 address, or its
/// IPv6 /64 (one host is usually given a whole /64, and may use any
/// address in it).
pub fn client_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMES: ConnectionTimes = ConnectionTimes {
        header_read: Duration::from_secs(10),
        keepalive_idle: Duration::from_secs(30),
        stalled: Duration::from_secs(90),
        answers_may_wait: false,
    };

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn seen(in_flight: usize, idle_since: u64, head_started: Option<u64>) -> ConnectionSeen {
        ConnectionSeen {
            in_flight,
            idle_since: s(idle_since),
            head_started: head_started.map(s),
            last_io: s(0),
            writing: false,
        }
    }

    #[test]
    fn an_idle_connection_closes_after_the_idle_time() {
        assert_eq!(verdict(seen(0, 0, None), s(29), TIMES), Verdict::LookAgainAt(s(30)));
        assert_eq!(verdict(seen(0, 0, None), s(30), TIMES), Verdict::Idle);
        // Idle counts from the last answer, not from the accept.
        assert_eq!(verdict(seen(0, 100, None), s(120), TIMES), Verdict::LookAgainAt(s(130)));
        assert_eq!(verdict(seen(0, 100, None), s(131), TIMES), Verdict::Idle);
    }

    #[test]
    fn a_begun_head_has_the_head_time_from_its_first_byte() {
        assert_eq!(verdict(seen(0, 0, Some(5)), s(14), TIMES), Verdict::LookAgainAt(s(15)));
        assert_eq!(verdict(seen(0, 0, Some(5)), s(15), TIMES), Verdict::SlowHead);
        // A head begun just before the idle time ends still gets its time.
        assert_eq!(verdict(seen(0, 0, Some(29)), s(31), TIMES), Verdict::LookAgainAt(s(39)));
        // A head time longer than the idle time is honoured too.
        let long_heads = ConnectionTimes { header_read: s(60), ..TIMES };
        assert_eq!(verdict(seen(0, 0, Some(1)), s(35), long_heads), Verdict::LookAgainAt(s(61)));
    }

    #[test]
    fn a_request_in_flight_is_cut_only_when_nothing_moves() {
        // Bytes moving (a slow answer being read, a body arriving) keep it.
        let moving = ConnectionSeen { last_io: s(995), ..seen(1, 0, Some(0)) };
        assert_eq!(verdict(moving, s(1000), TIMES), Verdict::LookAgainAt(s(1085)));
        assert_eq!(verdict(seen(3, 0, None), s(31), TIMES), Verdict::LookAgainAt(s(90)));
        // Nothing read or written for the stalled time: a client that does
        // not read its answers (or an HTTP/2 window held shut).
        assert_eq!(verdict(seen(1, 0, None), s(90), TIMES), Verdict::Stalled);
    }

    #[test]
    fn where_answers_may_wait_only_a_client_not_reading_stalls() {
        let waiting = ConnectionTimes { answers_may_wait: true, ..TIMES };
        // A tail waiting for lines: nothing moves, and that is its business.
        assert_eq!(verdict(seen(1, 0, None), s(500), waiting), Verdict::LookAgainAt(s(590)));
        // Its bytes not taken by the client: stalled as anywhere.
        let not_read = ConnectionSeen { writing: true, last_io: s(400), ..seen(1, 0, None) };
        assert_eq!(verdict(not_read, s(489), waiting), Verdict::LookAgainAt(s(490)));
        assert_eq!(verdict(not_read, s(490), waiting), Verdict::Stalled);
        // Heads and idleness are as anywhere.
        assert_eq!(verdict(seen(0, 0, Some(5)), s(15), waiting), Verdict::SlowHead);
        assert_eq!(verdict(seen(0, 0, None), s(30), waiting), Verdict::Idle);
    }

    #[test]
    fn an_answer_the_client_does_not_take_is_not_idleness() {
        // The request is done, but its answer's bytes wait on the client.
        let writing = ConnectionSeen { writing: true, last_io: s(10), ..seen(0, 5, None) };
        assert_eq!(verdict(writing, s(60), TIMES), Verdict::LookAgainAt(s(100)));
        assert_eq!(verdict(writing, s(100), TIMES), Verdict::Stalled);
        // Once written, idle counts from the last byte out.
        let written = ConnectionSeen { last_io: s(50), ..seen(0, 5, None) };
        assert_eq!(verdict(written, s(60), TIMES), Verdict::LookAgainAt(s(80)));
    }
}
