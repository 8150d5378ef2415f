//! How the host closes a socket (RFC 6455 §7.4): every code and reason it
//! sends, and which codes an actor may send. Nothing else spells a code.

/// One close the host sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    /// Short, for the client (a close reason holds at most 123 bytes).
    pub reason: &'static str,
}

/// The actor's class left the active version.
pub const CLASS_REMOVED: Close = Close { code: 1001, reason: "the class was removed" };
/// A deploy made the class `internal`, and the socket came from outside.
pub const CLASS_INTERNAL: Close = Close { code: 1008, reason: "the class is internal" };
/// The actor does not exist any more.
pub const ACTOR_GONE: Close = Close { code: 1000, reason: "the actor no longer exists" };
/// The actor deleted itself.
pub const ACTOR_DELETED: Close = Close { code: 1000, reason: "the actor was deleted" };
/// The node is draining (RFC 6455 1012, service restart): the client
/// reconnects, and reaches its actor on another node.
pub const DRAINING: Close = Close { code: 1012, reason: "the node is draining; reconnect" };
/// The actor's mailbox could not take a message (try again later).
pub const OVERLOADED: Close = Close { code: 1013, reason: "the actor is overloaded" };
/// The client does not read what the actor sends.
pub const SEND_QUEUE_FULL: Close = Close { code: 1008, reason: "the send queue is full" };

/// A text message that is not UTF-8.
pub const NOT_UTF8: u16 = 1007;
/// Any other breach of the protocol.
pub const PROTOCOL_ERROR: u16 = 1002;
/// A message over the limit.
pub const TOO_BIG: u16 = 1009;
/// The actor refused the socket at `/actor/`: its reason goes with this code.
pub const REFUSED: u16 = 1008;
/// A connection lost without a close frame: only ever reported, never sent.
pub const LOST: u16 = 1006;
/// A close frame without a code: only ever reported, never sent.
pub const NO_CODE: u16 = 1005;

/// Longest close reason, in bytes (a control frame's 125, less the code).
pub const REASON_MAX: usize = 123;

/// Close codes an endpoint may send (RFC 6455 §7.4): 1004–1006 and 1015
/// are reserved, 1016–2999 are the protocol's, 5000 and up are not codes.
pub fn may_send(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_an_endpoint_may_send() {
        for ok in [1000, 1001, 1002, 1003, 1007, 1008, 1011, 1013, 1014, 3000, 4000, 4999] {
            assert!(may_send(ok), "{ok}");
        }
        for no in [0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, u16::MAX] {
            assert!(!may_send(no), "{no}");
        }
        for close in [CLASS_REMOVED, CLASS_INTERNAL, ACTOR_GONE, ACTOR_DELETED, OVERLOADED, SEND_QUEUE_FULL] {
            assert!(may_send(close.code) && close.reason.len() <= REASON_MAX, "{close:?}");
        }
        for code in [NOT_UTF8, PROTOCOL_ERROR, TOO_BIG, REFUSED] {
            assert!(may_send(code));
        }
        assert!(!may_send(LOST) && !may_send(NO_CODE));
    }
}
