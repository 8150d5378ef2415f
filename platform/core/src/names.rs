//! Class names, actor names and addresses
//! (docs/spec/actors-and-admission.md §2).
//!
//! One parser serves every place an address appears: URL paths,
//! `actors.call`, `call-many` entries, hand-off and caller headers.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Longest class name, in bytes.
pub const CLASS_NAME_MAX: usize = 63;
/// Longest actor name, in bytes of UTF-8.
pub const ACTOR_NAME_MAX: usize = 512;

/// Every byte but ASCII letters, digits and `-._~` is percent-encoded.
const NAME_ENCODE_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Why a name is not valid. The text is what a client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("class name is empty")]
    EmptyClass,
    #[error("class name is longer than {CLASS_NAME_MAX} bytes")]
    ClassTooLong,
    #[error("class name must start with a lowercase letter")]
    ClassStart,
    #[error("class name may hold only a-z, 0-9, '-' and '_'")]
    ClassChar,
    #[error("actor name is empty")]
    EmptyName,
    #[error("actor name is longer than {ACTOR_NAME_MAX} bytes")]
    NameTooLong,
    #[error("actor name holds a control character")]
    NameControl,
    #[error("actor name is not valid UTF-8")]
    NameNotUtf8,
    #[error("actor name has a `%` not followed by two hex digits")]
    BadEncoding,
    #[error("address is not class/name")]
    NoSlash,
    #[error("tenant id must be 1-63 of a-z, 0-9, '-' and '_', starting with a letter")]
    BadTenant,
    #[error("app name must be 1-63 of a-z, 0-9, '-' and '_'")]
    BadAppName,
}

/// A valid class name: 1–63 of `a-z0-9-_`, starting with a letter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassName(String);

impl ClassName {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        check_class(s)?;
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn check_class(s: &str) -> Result<(), NameError> {
    let bytes = s.as_bytes();
    match bytes.first() {
        None => return Err(NameError::EmptyClass),
        Some(b) if !b.is_ascii_lowercase() => return Err(NameError::ClassStart),
        _ => {}
    }
    if bytes.len() > CLASS_NAME_MAX {
        return Err(NameError::ClassTooLong);
    }
    if !bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_') {
        return Err(NameError::ClassChar);
    }
    Ok(())
}

impl fmt::Display for ClassName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tenant: named like a class (1–63 of `a-z0-9-_`, starting with a
/// letter), so it can stand first in a caller value and a metric label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(String);

impl TenantId {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        check_class(s).map_err(|_| NameError::BadTenant)?;
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An app's name within its tenant: 1–63 of `a-z0-9-_` (a manifest's
/// `name`; it may start with a digit).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppName(String);

impl AppName {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let ok = !s.is_empty()
            && s.len() <= CLASS_NAME_MAX
            && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !ok {
            return Err(NameError::BadAppName);
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AppName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A valid actor name: 1–512 bytes of UTF-8 without control characters.
/// It may hold `/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorName(String);

impl ActorName {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        if s.is_empty() {
            return Err(NameError::EmptyName);
        }
        if s.len() > ACTOR_NAME_MAX {
            return Err(NameError::NameTooLong);
        }
        if s.chars().any(char::is_control) {
            return Err(NameError::NameControl);
        }
        Ok(Self(s.to_owned()))
    }

    /// Parses raw bytes, as a percent-decoded URL segment gives them.
    pub fn from_bytes(b: &[u8]) -> Result<Self, NameError> {
        Self::parse(std::str::from_utf8(b).map_err(|_| NameError::NameNotUtf8)?)
    }

    /// Parses a percent-encoded name (URL path segment, caller or hand-off
    /// header).
    pub fn from_encoded(s: &str) -> Result<Self, NameError> {
        Self::from_bytes(&decode(s)?)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name percent-encoded: every byte but ASCII letters, digits and
    /// `-._~`.
    pub fn encoded(&self) -> String {
        encode(&self.0)
    }
}

impl fmt::Display for ActorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Percent-encodes `s` the way names are encoded in paths and headers.
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, NAME_ENCODE_SET).to_string()
}

/// Percent-encodes raw bytes the same way (a name not validated yet).
pub fn encode_bytes(b: &[u8]) -> String {
    percent_encoding::percent_encode(b, NAME_ENCODE_SET).to_string()
}

/// Percent-decodes `s` into bytes (not necessarily UTF-8). Strict: a `%`
/// must begin a `%XX` escape, as the encoding never writes a bare one.
pub fn decode(s: &str) -> Result<Vec<u8>, NameError> {
    let bytes = s.as_bytes();
    let escapes_are_whole = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'%')
        .all(|(i, _)| bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)));
    if !escapes_are_whole {
        return Err(NameError::BadEncoding);
    }
    Ok(percent_decode_str(s).collect())
}

/// A valid actor address, `class/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    pub class: ClassName,
    pub name: ActorName,
}

impl Address {
    pub fn new(class: ClassName, name: ActorName) -> Self {
        Self { class, name }
    }

    /// Parses `class/name`, split at the first `/` (the name may hold more).
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let raw = RawAddress::split(s)?;
        Ok(Self { class: ClassName::parse(&raw.class)?, name: ActorName::from_bytes(&raw.name)? })
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.class, self.name)
    }
}

/// An address whose parts are not validated yet. Admission validates them
/// in its own order (the class is looked up before the name is checked).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawAddress {
    pub class: String,
    pub name: Vec<u8>,
}

impl RawAddress {
    /// Splits `class/name` at the first `/`.
    pub fn split(s: &str) -> Result<Self, NameError> {
        let (class, name) = s.split_once('/').ok_or(NameError::NoSlash)?;
        Ok(Self { class: class.to_owned(), name: name.as_bytes().to_vec() })
    }

    pub fn class_name(&self) -> Result<ClassName, NameError> {
        ClassName::parse(&self.class)
    }

    pub fn actor_name(&self) -> Result<ActorName, NameError> {
        ActorName::from_bytes(&self.name)
    }
}

impl From<&Address> for RawAddress {
    fn from(a: &Address) -> Self {
        Self { class: a.class.as_str().to_owned(), name: a.name.as_str().as_bytes().to_vec() }
    }
}

/// An actor as a chain or the hop lists it: `class/percent-encoded name`.
pub fn format_address(a: &Address) -> String {
    format!("{}/{}", a.class, a.name.encoded())
}

pub fn parse_address(s: &str) -> Result<Address, NameError> {
    let (class, name) = s.split_once('/').ok_or(NameError::NoSlash)?;
    Ok(Address::new(ClassName::parse(class)?, ActorName::from_encoded(name)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names() {
        for ok in ["a", "counter", "room-1", "a_b", &"a".repeat(63)] {
            assert!(ClassName::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(ClassName::parse(""), Err(NameError::EmptyClass));
        assert_eq!(ClassName::parse(&"a".repeat(64)), Err(NameError::ClassTooLong));
        assert_eq!(ClassName::parse("1a"), Err(NameError::ClassStart));
        assert_eq!(ClassName::parse("_front"), Err(NameError::ClassStart));
        assert_eq!(ClassName::parse("-a"), Err(NameError::ClassStart));
        assert_eq!(ClassName::parse("Room"), Err(NameError::ClassStart));
        assert_eq!(ClassName::parse("rOom"), Err(NameError::ClassChar));
        assert_eq!(ClassName::parse("ro.om"), Err(NameError::ClassChar));
        assert_eq!(ClassName::parse("roé"), Err(NameError::ClassChar));
    }

    #[test]
    fn tenants_and_app_names() {
        for ok in ["t", "acme", "dev", "other-tenant", "a_1", &"a".repeat(63)] {
            assert_eq!(TenantId::parse(ok).unwrap().as_str(), ok);
            assert!(AppName::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1a", "_x", "Acme", "a.b", "a/b", "é", &"a".repeat(64)] {
            assert_eq!(TenantId::parse(bad), Err(NameError::BadTenant), "{bad}");
        }
        assert!(AppName::parse("1shop").is_ok());
        for bad in ["", "Shop", "a b", "a/b", "a.b", &"a".repeat(64)] {
            assert_eq!(AppName::parse(bad), Err(NameError::BadAppName), "{bad}");
        }
    }

    #[test]
    fn actor_names() {
        for ok in ["a", "a/b/c", "héllo wörld", "😀", " ", &"x".repeat(512), &"é".repeat(256)] {
            assert!(ActorName::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(ActorName::parse(""), Err(NameError::EmptyName));
        assert_eq!(ActorName::parse(&"x".repeat(513)), Err(NameError::NameTooLong));
        assert_eq!(ActorName::parse(&"é".repeat(257)), Err(NameError::NameTooLong));
        assert_eq!(ActorName::parse("a\nb"), Err(NameError::NameControl));
        assert_eq!(ActorName::parse("a\u{7f}"), Err(NameError::NameControl));
        assert_eq!(ActorName::parse("a\u{85}"), Err(NameError::NameControl));
        assert_eq!(ActorName::from_bytes(b"\xff"), Err(NameError::NameNotUtf8));
    }

    #[test]
    fn encoding_round_trips() {
        let name = ActorName::parse("a/b c~d.e-f_g%é").unwrap();
        assert_eq!(name.encoded(), "a%2Fb%20c~d.e-f_g%25%C3%A9");
        assert_eq!(ActorName::from_encoded(&name.encoded()).unwrap(), name);
        assert_eq!(ActorName::from_encoded("%FF"), Err(NameError::NameNotUtf8));
        assert_eq!(ActorName::from_encoded("a%00"), Err(NameError::NameControl));
        assert_eq!(ActorName::from_encoded(""), Err(NameError::EmptyName));
    }

    #[test]
    fn a_bare_or_short_escape_is_refused() {
        for bad in ["%zz", "a%", "%", "%4", "%4g", "a%%41", "%G0", "ok%2"] {
            assert_eq!(decode(bad), Err(NameError::BadEncoding), "{bad}");
            assert_eq!(ActorName::from_encoded(bad), Err(NameError::BadEncoding), "{bad}");
        }
        assert_eq!(decode("%25%41%2f%2F").unwrap(), b"%A//");
        assert_eq!(decode("plain").unwrap(), b"plain");
    }

    #[test]
    fn addresses_split_at_the_first_slash() {
        let a = Address::parse("room/a/b").unwrap();
        assert_eq!(a.class.as_str(), "room");
        assert_eq!(a.name.as_str(), "a/b");
        assert_eq!(a.to_string(), "room/a/b");
        assert_eq!(Address::parse("room"), Err(NameError::NoSlash));
        assert_eq!(Address::parse("room/"), Err(NameError::EmptyName));
        assert_eq!(Address::parse("/x"), Err(NameError::EmptyClass));
        assert_eq!(Address::parse("Room/x"), Err(NameError::ClassStart));
    }
}
