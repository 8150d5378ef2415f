//! Who makes a call, and the chain of actors waiting on it (DESIGN §3.7):
//! their header forms, `x-wasmkeep-caller` and `x-wasmkeep-chain`.
//!
//! - caller: `<tenant>/<class>/<percent-encoded name>` for an actor,
//!   `<tenant>/_front/main` for the app's front;
//! - chain: the waiting actors as `<class>/<percent-encoded name>`, comma
//!   separated, oldest first (an encoded name holds no comma).

use std::fmt;

use crate::names::{ActorName, Address, ClassName, NameError};

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

impl Caller {
    /// The `x-wasmkeep-caller` value for a caller of `tenant`.
    pub fn header(&self, tenant: &str) -> String {
        match self {
            Self::Actor(a) => format!("{tenant}/{}", encode_address(a)),
            Self::Front => format!("{tenant}/{FRONT_CLASS}/{FRONT_NAME}"),
        }
    }

    /// Parses an `x-wasmkeep-caller` value into its tenant and caller.
    pub fn parse_header(value: &str) -> Result<(String, Self), NameError> {
        let (tenant, rest) = value.split_once('/').ok_or(NameError::NoSlash)?;
        if rest == format!("{FRONT_CLASS}/{FRONT_NAME}") {
            return Ok((tenant.to_owned(), Self::Front));
        }
        Ok((tenant.to_owned(), Self::Actor(decode_address(rest)?)))
    }
}

/// `class/percent-encoded name`, as a chain lists an actor.
pub fn encode_address(a: &Address) -> String {
    format!("{}/{}", a.class, a.name.encoded())
}

fn decode_address(s: &str) -> Result<Address, NameError> {
    let (class, name) = s.split_once('/').ok_or(NameError::NoSlash)?;
    Ok(Address::new(ClassName::parse(class)?, ActorName::from_encoded(name)?))
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

    /// The `x-wasmkeep-chain` value.
    pub fn header(&self) -> String {
        self.0.iter().map(encode_address).collect::<Vec<_>>().join(",")
    }

    /// Parses an `x-wasmkeep-chain` value (empty for an empty chain).
    pub fn parse_header(value: &str) -> Result<Self, NameError> {
        if value.is_empty() {
            return Ok(Self::new());
        }
        value.split(',').map(decode_address).collect::<Result<Vec<_>, _>>().map(Self)
    }
}

impl fmt::Display for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.header())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Address {
        Address::parse(s).unwrap()
    }

    #[test]
    fn caller_headers_round_trip() {
        let room = Caller::Actor(a("room/a/b ,é"));
        assert_eq!(room.header("acme"), "acme/room/a%2Fb%20%2C%C3%A9");
        assert_eq!(Caller::parse_header("acme/room/a%2Fb%20%2C%C3%A9").unwrap(), ("acme".into(), room));
        assert_eq!(Caller::Front.header("acme"), "acme/_front/main");
        assert_eq!(Caller::parse_header("acme/_front/main").unwrap(), ("acme".into(), Caller::Front));
        assert!(Caller::parse_header("acme").is_err());
        assert!(Caller::parse_header("acme/_front/other").is_err());
        assert!(Caller::parse_header("acme/room/").is_err());
        assert!(Caller::parse_header("acme/room/%00").is_err());
    }

    #[test]
    fn chains_extend_by_actors_only_and_round_trip() {
        let c = Chain::new().extended_by(&Caller::Front);
        assert!(c.is_empty());
        let c = c.extended_by(&Caller::Actor(a("cart/u,1"))).extended_by(&Caller::Actor(a("profile/x/y")));
        assert_eq!(c.header(), "cart/u%2C1,profile/x%2Fy");
        assert_eq!(Chain::parse_header(&c.header()).unwrap(), c);
        assert_eq!(Chain::parse_header("").unwrap(), Chain::new());
        assert!(Chain::parse_header("cart").is_err());
        assert!(Chain::parse_header("cart/a,,b/c").is_err());
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
