//! The checks a call passes before it leaves its caller
//! (docs/spec/calls.md §2 and §10), in their order, with the clock passed
//! in. Each answers at once: nothing is sent for a call that fails one.

use std::time::Instant;

use crate::caller::{Caller, Chain};
use crate::names::Address;

/// Why a call was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRefusal {
    InvalidAddress,
    TooLarge,
    Reentrant,
    Timeout,
}

/// Who calls, under which bounds.
#[derive(Debug, Clone, Copy)]
pub struct CallCheck<'a> {
    pub caller: &'a Caller,
    pub chain: &'a Chain,
    pub body_limit: u64,
    pub deadline: Instant,
}

impl CallCheck<'_> {
    /// One `actors.call`: the address, the body, reentrancy, the deadline.
    pub fn call(&self, address: &str, body_len: u64, now: Instant) -> Result<Address, CallRefusal> {
        let callee = Address::parse(address).map_err(|_| CallRefusal::InvalidAddress)?;
        if body_len > self.body_limit {
            return Err(CallRefusal::TooLarge);
        }
        if self.chain.is_reentrant(self.caller, &callee) {
            return Err(CallRefusal::Reentrant);
        }
        if now >= self.deadline {
            return Err(CallRefusal::Timeout);
        }
        Ok(callee)
    }

    /// One entry of a `call-many` whose bodies passed as a batch: the
    /// address, the deadline (a batch past it fails every entry with
    /// `timeout` but one with a bad address), reentrancy.
    pub fn entry(&self, address: &str, now: Instant) -> Result<Address, CallRefusal> {
        let callee = Address::parse(address).map_err(|_| CallRefusal::InvalidAddress)?;
        if now >= self.deadline {
            return Err(CallRefusal::Timeout);
        }
        if self.chain.is_reentrant(self.caller, &callee) {
            return Err(CallRefusal::Reentrant);
        }
        Ok(callee)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn a(s: &str) -> Address {
        Address::parse(s).unwrap()
    }

    #[test]
    fn a_call_is_checked_address_body_reentrancy_deadline() {
        let now = Instant::now();
        let caller = Caller::Actor(a("b/1"));
        let chain = Chain::new().extended_by(&Caller::Actor(a("a/1")));
        let live = CallCheck { caller: &caller, chain: &chain, body_limit: 10, deadline: now + Duration::from_secs(1) };
        let passed = CallCheck { deadline: now, ..live };
        assert_eq!(live.call("c/1", 10, now), Ok(a("c/1")));
        // Each failing check hides the ones after it.
        assert_eq!(passed.call("nope", 11, now), Err(CallRefusal::InvalidAddress));
        assert_eq!(passed.call("a/1", 11, now), Err(CallRefusal::TooLarge));
        assert_eq!(passed.call("a/1", 10, now), Err(CallRefusal::Reentrant));
        assert_eq!(passed.call("b/1", 0, now), Err(CallRefusal::Reentrant));
        assert_eq!(passed.call("c/1", 0, now), Err(CallRefusal::Timeout));
        assert_eq!(live.call("c/1", 0, now + Duration::from_secs(1)), Err(CallRefusal::Timeout));
    }

    #[test]
    fn an_entry_is_checked_address_deadline_reentrancy() {
        let now = Instant::now();
        let front = Caller::Front;
        let chain = Chain::new();
        let live = CallCheck { caller: &front, chain: &chain, body_limit: 0, deadline: now + Duration::from_secs(1) };
        assert_eq!(live.entry("c/1", now), Ok(a("c/1")));
        assert_eq!(CallCheck { deadline: now, ..live }.entry("/x", now), Err(CallRefusal::InvalidAddress));
        assert_eq!(CallCheck { deadline: now, ..live }.entry("c/1", now), Err(CallRefusal::Timeout));
        let me = Caller::Actor(a("c/1"));
        let mine = CallCheck { caller: &me, ..live };
        assert_eq!(mine.entry("c/1", now), Err(CallRefusal::Reentrant));
        assert_eq!(CallCheck { deadline: now, ..mine }.entry("c/1", now), Err(CallRefusal::Timeout));
    }
}
