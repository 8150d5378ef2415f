//! The closed label sets of the node's metric families, as types: a
//! family takes one of these enums, never a string, so a value outside
//! its family does not compile, and every value is in [`Label::ALL`] for
//! the family to write from zero. The families themselves are the
//! telemetry crate's; this is only the vocabulary.
//!
//! The refusals' reasons ([`RefusalReason`], with [`Refusal`]), the
//! events' faults ([`EventFault`], with [`EventError`]) and the quotas
//! ([`Quota`]) live with what they name.
//!
//! [`Refusal`]: crate::Refusal
//! [`EventError`]: crate::EventError

pub use crate::labels::Label;
use crate::labels::labels;
pub use crate::quota::Quota;
pub use crate::refusal::{EventFault, EventOutcome, RefusalReason};

labels! {
    /// How a front request ended: `wasmkeep_front_requests_total{outcome}`.
    pub enum FrontRequestOutcome {
        Ok => "ok",
        /// The front trapped or asked for a broken hand-off.
        GuestError => "guest_error",
        /// No slot within the slot wait.
        Busy => "busy",
        /// Past the request's wall.
        Timeout => "timeout",
        /// The front handed the socket to an actor.
        Handoff => "handoff",
        NoFront => "no_front",
        /// A value the app requires is not set.
        ValueMissing => "value_missing",
    }
}

labels! {
    /// How a front's call ended (each call-many entry one):
    /// `wasmkeep_front_calls_total{outcome}`.
    pub enum FrontCallOutcome {
        Ok => "ok",
        InvalidAddress => "invalid_address",
        TooLarge => "too_large",
        Timeout => "timeout",
        Reentrant => "reentrant",
        /// The fronts' bound of calls waiting on one actor, or on the node.
        Busy => "busy",
        Failed => "failed",
    }
}

labels! {
    /// What a node sends to another node (`wasmkeep_forwards_total{kind}`),
    /// and sends on after that node answered that a third one owns the
    /// actor (`wasmkeep_reroutes_total{kind}`): the same four, as both
    /// travel the same way.
    pub enum HopKind {
        /// An inside caller's request event (a front's or an actor's call).
        Call => "call",
        /// An outside caller's request event.
        Request => "request",
        /// An `/actor/` socket's open, relayed.
        Upgrade => "upgrade",
        /// A front's hand-off of a socket, relayed.
        Handoff => "handoff",
    }
}

impl Label for Quota {
    const ALL: &'static [Self] = &Quota::ALL;

    fn as_str(self) -> &'static str {
        self.label()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Each value's text is its own within its set, and a Prometheus
    /// label value a dashboard can write without quoting.
    fn distinct<L: Label>() {
        let texts: HashSet<&str> = L::ALL.iter().map(|l| l.as_str()).collect();
        assert_eq!(texts.len(), L::ALL.len(), "{:?}", L::ALL);
        for text in texts {
            assert!(!text.is_empty() && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{text}");
        }
    }

    #[test]
    fn every_set_names_each_value_once() {
        distinct::<FrontRequestOutcome>();
        distinct::<FrontCallOutcome>();
        distinct::<HopKind>();
        distinct::<RefusalReason>();
        distinct::<EventFault>();
        distinct::<EventOutcome>();
        distinct::<Quota>();
    }

    #[test]
    fn an_events_outcomes_are_ok_every_refusal_and_every_fault() {
        assert_eq!(EventOutcome::ALL.len(), 1 + RefusalReason::ALL.len() + EventFault::ALL.len());
        assert_eq!(EventOutcome::ALL[0].as_str(), "ok");
        for reason in RefusalReason::ALL {
            assert!(EventOutcome::ALL.contains(&EventOutcome::Refused(*reason)));
        }
        for fault in EventFault::ALL {
            assert!(EventOutcome::ALL.contains(&EventOutcome::Failed(*fault)));
        }
    }

    #[test]
    fn a_relay_is_a_kind_of_hop() {
        let kinds: Vec<&str> = HopKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(kinds, ["call", "request", "upgrade", "handoff"]);
    }
}
