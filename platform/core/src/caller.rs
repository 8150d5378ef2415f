//! Who makes a call, and the chain of actors waiting on it
//! (docs/spec/calls.md §3–§4). Their header forms are the head's
//! (`head.rs`).

use std::fmt;

use crate::names::Address;

/// The class and name the front calls as.
pub const FRONT_CLASS: &str = "_front";
pub const FRONT_NAME: &str = "main";

/// Where an event comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An HTTP client at `/actor/`.
    Outside,
    /// The app's front or one of its actors, with the actors waiting on
    /// this event.
    Inside { caller: Caller, chain: Chain },
}

impl Origin {
    pub fn is_outside(&self) -> bool {
        matches!(self, Self::Outside)
    }
}

/// An inside caller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// An actor of the app.
    Actor(Address),
    /// The app's front (never in a chain).
    Front,
}

/// The actors waiting on a call, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain(Vec<Address>);

impl Chain {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `a` is waiting in the chain.
    pub fn contains(&self, a: &Address) -> bool {
        self.0.contains(a)
    }

    /// The chain a call from `caller` carries: this chain, plus the caller
    /// if it is an actor.
    pub fn extended_by(&self, caller: &Caller) -> Self {
        let mut next = self.clone();
        if let Caller::Actor(a) = caller {
            next.0.push(a.clone());
        }
        next
    }

    /// Whether a call from `caller` (waiting on this chain) to `callee`
    /// would wait on itself: `reentrant`.
    pub fn is_reentrant(&self, caller: &Caller, callee: &Address) -> bool {
        matches!(caller, Caller::Actor(a) if a == callee) || self.contains(callee)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The waiting actors, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Address> {
        self.0.iter()
    }
}

impl From<Vec<Address>> for Chain {
    fn from(actors: Vec<Address>) -> Self {
        Self(actors)
    }
}

impl fmt::Display for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As the head writes it (`x-wasmkeep-chain`).
        let addresses: Vec<String> = self.iter().map(crate::names::format_address).collect();
        f.write_str(&addresses.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Address {
        Address::parse(s).unwrap()
    }

    #[test]
    fn chains_extend_by_actors_only() {
        let c = Chain::new().extended_by(&Caller::Front);
        assert!(c.is_empty());
        let c = c.extended_by(&Caller::Actor(a("cart/u,1"))).extended_by(&Caller::Actor(a("profile/x/y")));
        assert_eq!(c.to_string(), "cart/u%2C1,profile/x%2Fy");
        assert_eq!(c.len(), 2);
        assert!(c.contains(&a("profile/x/y")));
    }

    #[test]
    fn reentrancy_is_the_caller_itself_or_anyone_in_the_chain() {
        let b = Caller::Actor(a("b/1"));
        let chain = Chain::new().extended_by(&Caller::Actor(a("a/1")));
        assert!(chain.is_reentrant(&b, &a("b/1")));
        assert!(chain.is_reentrant(&b, &a("a/1")));
        assert!(!chain.is_reentrant(&b, &a("c/1")));
        assert!(!chain.is_reentrant(&Caller::Front, &a("c/1")));
        assert!(!Chain::new().is_reentrant(&Caller::Front, &a("a/1")));
    }
}
