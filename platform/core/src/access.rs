//! Class access levels and what they let a caller do
//! (docs/spec/actors-and-admission.md §4).

use serde::Deserialize;

/// Who may reach the actors of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Outside callers may reach and create actors.
    Open,
    /// Outside callers reach only actors that exist; inside callers create.
    Existing,
    /// Outside callers are refused.
    Internal,
}

impl Access {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(Self::Open),
            "existing" => Some(Self::Existing),
            "internal" => Some(Self::Internal),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Existing => "existing",
            Self::Internal => "internal",
        }
    }

    /// The early rule: an outside caller never reaches an `internal` class.
    pub fn refuses_early(self, outside: bool) -> bool {
        outside && self == Self::Internal
    }

    /// Whether a missing actor is created for this caller: always for an
    /// inside caller, under `open` for an outside one.
    pub fn creates(self, outside: bool) -> bool {
        !outside || self == Self::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_by_access_and_caller() {
        use Access::*;
        assert!(!Open.refuses_early(true));
        assert!(!Existing.refuses_early(true));
        assert!(Internal.refuses_early(true));
        assert!(!Internal.refuses_early(false));
        assert!(Open.creates(true));
        assert!(!Existing.creates(true));
        assert!(Existing.creates(false));
        assert!(Internal.creates(false));
        for a in [Open, Existing, Internal] {
            assert_eq!(Access::parse(a.as_str()), Some(a));
        }
        assert_eq!(Access::parse("public"), None);
    }
}
