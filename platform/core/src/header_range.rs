//! The host's header range: the names a client, a guest or an upstream
//! never sets (`core::head` is its codec).

/// The reserved prefix, lowercase (header names are compared lowercase).
pub const PREFIX: &str = "x-wasmkeep-";

/// Why one header of the head cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{0} appears more than once")]
    Repeated(&'static str),
    #[error("{0} is not visible ASCII")]
    NotText(&'static str),
}

/// Whether `name` is in the reserved range (case-insensitively).
pub fn is_reserved(name: &str) -> bool {
    name.len() >= PREFIX.len() && name.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}
