//! The `x-wasmkeep-` head: the header range the host reserves, the names
//! in it, how actor names are encoded in it, and parsers for the values a
//! guest reads.
//!
//! Only the host sets these headers. It removes the whole range from what
//! clients send and from what a caller puts on [`crate::actors::call`], so
//! a guest can trust what it reads here: [`Request::caller`],
//! [`Request::chain`] and [`Request::app`] read them for you.
//!
//! This copy of the codec keeps the SDK free of the host's crates; its
//! tests and the host's read the same cases, `spec/head-cases.json`.
//!
//! [`Request::caller`]: crate::Request::caller
//! [`Request::chain`]: crate::Request::chain
//! [`Request::app`]: crate::Request::app

use std::fmt;

/// The reserved prefix, lowercase (header names compare case-insensitively).
pub const PREFIX: &str = "x-wasmkeep-";

/// Who calls: `<tenant>/<class>/<encoded name>`, or `<tenant>/_front/main`.
/// Absent when the caller is outside the app (a client).
pub const CALLER: &str = "x-wasmkeep-caller";
/// The actors waiting on the call, oldest first: `<class>/<encoded name>`,
/// comma separated; empty for none.
pub const CHAIN: &str = "x-wasmkeep-chain";
/// The app the event belongs to: `<tenant>/<app>`.
pub const APP: &str = "x-wasmkeep-app";
/// The actor an event is for, between nodes (a guest never sees it).
pub const TARGET: &str = "x-wasmkeep-target";
/// What is left of the caller's deadline, between nodes (a guest never
/// sees it).
pub const DEADLINE: &str = "x-wasmkeep-deadline";
/// The mark on a WebSocket upgrade the host keeps aside for the front; its
/// one value is [`UPGRADE_WEBSOCKET`].
pub const UPGRADE: &str = "x-wasmkeep-upgrade";
/// In a front's hand-off answer: the class that takes the socket.
pub const HANDOFF_CLASS: &str = "x-wasmkeep-handoff-class";
/// In a front's hand-off answer: the actor that takes it, its name encoded
/// with [`encode_name`].
pub const HANDOFF_NAME: &str = "x-wasmkeep-handoff-name";
/// In a front's hand-off answer: the path and query the actor's
/// `on-websocket-open` sees.
pub const HANDOFF_PATH: &str = "x-wasmkeep-handoff-path";
/// A node's signature over the head between nodes (a guest never sees it).
pub const INTERNAL: &str = "x-wasmkeep-internal";

/// The host's error on a hop's answer, between nodes (a guest never sees it).
pub const ERROR: &str = "x-wasmkeep-error";

/// The mark of a node's request for an app's log records, between nodes
/// (a guest never sees it).
pub const TAIL: &str = "x-wasmkeep-tail";

/// Every name of the range the host uses.
pub const NAMES: [&str; 12] =
    [CALLER, CHAIN, APP, TARGET, DEADLINE, UPGRADE, HANDOFF_CLASS, HANDOFF_NAME, HANDOFF_PATH, INTERNAL, ERROR, TAIL];

/// The value of [`UPGRADE`], exactly.
pub const UPGRADE_WEBSOCKET: &str = "websocket";

/// The class the front calls as, in [`CALLER`] (no actor class can start
/// with `_`).
pub const FRONT_CLASS: &str = "_front";
/// The name the front calls as, in [`CALLER`].
pub const FRONT_NAME: &str = "main";

/// Longest class, tenant or app name, in bytes.
pub const CLASS_NAME_MAX: usize = 63;
/// Longest actor name, in bytes of UTF-8.
pub const ACTOR_NAME_MAX: usize = 512;

/// Whether the header `name` is in the reserved range (case-insensitively).
/// The host drops such headers from what a guest sends.
pub fn is_reserved(name: &str) -> bool {
    name.len() >= PREFIX.len() && name.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}

// ---- Names ----

/// Percent-encodes an actor name as the head and URL paths carry it: every
/// byte but ASCII letters, digits and `-._~` becomes `%XX` (uppercase hex).
pub fn encode_name(name: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.extend(['%', HEX[usize::from(b >> 4)] as char, HEX[usize::from(b & 0xf)] as char]);
        }
    }
    out
}

/// Decodes an encoded actor name. Strict: every `%` must begin a `%XX`
/// escape (the encoding never writes a bare one), and the result must be
/// UTF-8. It does not check that the name is valid (see [`parse_caller`]).
pub fn decode_name(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let escapes_are_whole = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'%')
        .all(|(i, _)| bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)));
    if !escapes_are_whole {
        return None;
    }
    crate::http::percent_decode(encoded)
}

/// A class name or tenant: 1–63 of `a-z0-9-_`, starting with a letter.
fn is_class(s: &str) -> bool {
    s.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_app(s)
}

/// An app name: 1–63 of `a-z0-9-_` (it may start with a digit).
fn is_app(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= CLASS_NAME_MAX
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// An actor name: 1–512 bytes of UTF-8 without control characters.
fn is_actor_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= ACTOR_NAME_MAX && !s.chars().any(char::is_control)
}

// ---- Values ----

/// An actor of the app, as the head names one: its class and its (decoded)
/// name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActorRef {
    pub class: String,
    pub name: String,
}

impl ActorRef {
    /// Parses `<class>/<encoded name>`, as [`CHAIN`] lists actors.
    pub fn parse_encoded(value: &str) -> Option<Self> {
        let (class, name) = value.split_once('/')?;
        let name = decode_name(name)?;
        (is_class(class) && is_actor_name(&name)).then(|| Self { class: class.to_owned(), name })
    }
}

/// `class/name`, the name as written (not encoded): the address
/// [`crate::actors::call`] takes.
impl fmt::Display for ActorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.class, self.name)
    }
}

/// Who calls an actor from inside the app, as [`CALLER`] tells it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The tenant of the app (a caller is always of the callee's app).
    pub tenant: String,
    pub kind: CallerKind,
}

/// The front, or one of the app's actors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CallerKind {
    /// The app's front (`<tenant>/_front/main`).
    Front,
    Actor(ActorRef),
}

impl Caller {
    /// Whether the app's front calls.
    pub fn is_front(&self) -> bool {
        self.kind == CallerKind::Front
    }

    /// The calling actor, if an actor calls.
    pub fn actor(&self) -> Option<&ActorRef> {
        match &self.kind {
            CallerKind::Actor(a) => Some(a),
            CallerKind::Front => None,
        }
    }
}

/// Parses a [`CALLER`] value: `<tenant>/<class>/<encoded name>`, or
/// `<tenant>/_front/main`. `None` if it is not valid.
pub fn parse_caller(value: &str) -> Option<Caller> {
    let (tenant, rest) = value.split_once('/')?;
    if !is_class(tenant) {
        return None;
    }
    let kind = match rest.split_once('/') {
        Some((FRONT_CLASS, FRONT_NAME)) => CallerKind::Front,
        _ => CallerKind::Actor(ActorRef::parse_encoded(rest)?),
    };
    Some(Caller { tenant: tenant.to_owned(), kind })
}

/// Parses a [`CHAIN`] value: the actors waiting on the call, oldest first
/// (empty for none). `None` if it is not valid.
pub fn parse_chain(value: &str) -> Option<Vec<ActorRef>> {
    if value.is_empty() {
        return Some(Vec::new());
    }
    value.split(',').map(ActorRef::parse_encoded).collect()
}

/// Parses an [`APP`] value into its tenant and app name. `None` if it is
/// not valid.
pub fn parse_app(value: &str) -> Option<(String, String)> {
    let (tenant, app) = value.split_once('/')?;
    (is_class(tenant) && is_app(app)).then(|| (tenant.to_owned(), app.to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::Request;

    /// The cases the host's codec is tested against too.
    const CASES: &str = include_str!("../../../../spec/head-cases.json");

    fn cases() -> Value {
        serde_json::from_str(CASES).expect("spec/head-cases.json is JSON")
    }

    /// A section the SDK reads: a missing one fails the test.
    fn section<'v>(cases: &'v Value, name: &str) -> &'v Value {
        cases.get(name).unwrap_or_else(|| panic!("spec/head-cases.json has no `{name}`"))
    }

    fn list<'v>(cases: &'v Value, name: &str) -> &'v [Value] {
        let list = section(cases, name).as_array().unwrap_or_else(|| panic!("`{name}` is a list"));
        assert!(!list.is_empty(), "`{name}` has no cases");
        list
    }

    fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
        v.get(key).and_then(Value::as_str).unwrap_or_else(|| panic!("{v}: no string `{key}`"))
    }

    fn strs<'v>(v: &'v Value, key: &str) -> Vec<&'v str> {
        let list = v.get(key).and_then(Value::as_array).unwrap_or_else(|| panic!("{v}: no list `{key}`"));
        list.iter().map(|s| s.as_str().unwrap_or_else(|| panic!("{s} is not a string"))).collect()
    }

    fn is_error(case: &Value) -> bool {
        case.get("error").and_then(Value::as_bool).unwrap_or(false)
    }

    fn actor_of(v: &Value) -> ActorRef {
        ActorRef { class: str_of(v, "class").into(), name: str_of(v, "name").into() }
    }

    #[test]
    fn the_names_are_the_hosts() {
        let cases = cases();
        assert_eq!(str_of(&cases, "prefix"), PREFIX);
        let names = section(&cases, "names").as_object().expect("`names` is an object");
        let ours = [
            ("caller", CALLER),
            ("chain", CHAIN),
            ("app", APP),
            ("target", TARGET),
            ("deadline", DEADLINE),
            ("upgrade", UPGRADE),
            ("handoff_class", HANDOFF_CLASS),
            ("handoff_name", HANDOFF_NAME),
            ("handoff_path", HANDOFF_PATH),
            ("internal", INTERNAL),
            ("error", ERROR),
            ("tail", TAIL),
        ];
        // Every name of the file is ours, and every one of ours is in it.
        assert_eq!(names.len(), ours.len(), "the file's names: {names:?}");
        for (key, ours) in ours {
            assert_eq!(names.get(key).and_then(Value::as_str), Some(ours), "name `{key}`");
        }
        let mut all = NAMES.to_vec();
        all.sort_unstable();
        let mut theirs: Vec<&str> = names.values().filter_map(Value::as_str).collect();
        theirs.sort_unstable();
        assert_eq!(all, theirs);
        assert!(NAMES.iter().all(|n| is_reserved(n)));
    }

    #[test]
    fn the_range_is_the_hosts() {
        let reserved = section(&cases(), "reserved").clone();
        let (inside, outside) = (strs(&reserved, "in_range"), strs(&reserved, "outside"));
        assert!(!inside.is_empty() && !outside.is_empty());
        for name in inside {
            assert!(is_reserved(name), "{name:?} is in the range");
        }
        for name in outside {
            assert!(!is_reserved(name), "{name:?} is outside the range");
        }
    }

    #[test]
    fn names_are_encoded_as_the_host_encodes_them() {
        let cases = cases();
        for case in list(&cases, "name_encoding") {
            let (name, encoded) = (str_of(case, "name"), str_of(case, "encoded"));
            assert_eq!(encode_name(name), encoded, "encoding {name:?}");
            assert_eq!(decode_name(encoded).as_deref(), Some(name), "decoding {encoded:?}");
        }
        for bad in list(&cases, "bad_encodings") {
            let bad = bad.as_str().expect("a bad encoding is a string");
            assert_eq!(decode_name(bad), None, "{bad:?} is refused");
        }
    }

    #[test]
    fn callers_parse_as_the_host_parses_them() {
        let cases = cases();
        for case in list(&cases, "caller") {
            let value = str_of(case, "value");
            let parsed = parse_caller(value);
            if is_error(case) {
                assert_eq!(parsed, None, "caller {value:?} is refused");
                continue;
            }
            let kind = if case.get("front").and_then(Value::as_bool) == Some(true) {
                CallerKind::Front
            } else {
                CallerKind::Actor(actor_of(case.get("actor").unwrap_or_else(|| panic!("{case}: no actor"))))
            };
            assert_eq!(parsed, Some(Caller { tenant: str_of(case, "tenant").into(), kind }), "caller {value:?}");
        }
    }

    #[test]
    fn chains_parse_as_the_host_parses_them() {
        let cases = cases();
        for case in list(&cases, "chain") {
            let value = str_of(case, "value");
            let parsed = parse_chain(value);
            if is_error(case) {
                assert_eq!(parsed, None, "chain {value:?} is refused");
                continue;
            }
            let actors = case.get("actors").and_then(Value::as_array).unwrap_or_else(|| panic!("{case}: no actors"));
            assert_eq!(parsed, Some(actors.iter().map(actor_of).collect()), "chain {value:?}");
        }
    }

    #[test]
    fn apps_parse_as_the_host_parses_them() {
        let cases = cases();
        for case in list(&cases, "app") {
            let value = str_of(case, "value");
            let parsed = parse_app(value);
            if is_error(case) {
                assert_eq!(parsed, None, "app {value:?} is refused");
                continue;
            }
            let expected = (str_of(case, "tenant").to_owned(), str_of(case, "app").to_owned());
            assert_eq!(parsed, Some(expected), "app {value:?}");
        }
    }

    fn request_with(name: &str, value: &str) -> Request {
        Request::get("/").with_header(name, value)
    }

    #[test]
    fn only_the_exact_mark_is_an_upgrade() {
        let upgrade = section(&cases(), "upgrade").clone();
        let value = str_of(&upgrade, "value");
        assert_eq!(value, UPGRADE_WEBSOCKET);
        assert!(crate::is_websocket(&request_with(UPGRADE, value)));
        let not = strs(&upgrade, "not");
        assert!(!not.is_empty());
        for other in not {
            assert!(!crate::is_websocket(&request_with(UPGRADE, other)), "{other:?} is not the mark");
        }
        assert!(!crate::is_websocket(&Request::get("/")));
    }

    #[test]
    fn a_hand_off_writes_the_hosts_headers() {
        let cases = cases();
        for case in list(&cases, "handoff") {
            let answer = crate::front::hand_off(str_of(case, "class"), str_of(case, "name"), str_of(case, "path"));
            let expected = case.get("headers").and_then(Value::as_object).expect("`headers` is an object");
            assert_eq!(expected.len(), 3);
            // Exactly the listed headers of the range, each once.
            let mut written: Vec<(&str, &[u8])> =
                answer.headers.iter().filter(|(n, _)| is_reserved(n)).map(|(n, v)| (n.as_str(), &v[..])).collect();
            written.sort_unstable();
            let mut listed: Vec<(&str, &[u8])> = expected
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str().expect("a header value is a string").as_bytes()))
                .collect();
            listed.sort_unstable();
            assert_eq!(written, listed, "hand-off {case}");
        }
    }

    #[test]
    fn the_request_reads_its_caller() {
        let outside = Request::get("/");
        assert_eq!((outside.caller(), outside.chain(), outside.app()), (None, None, None));
        let inside = Request::get("/")
            .with_header(CALLER, "acme/room/a%2Fb")
            .with_header(CHAIN, "cart/u%2C1")
            .with_header(APP, "acme/shop");
        let room = ActorRef { class: "room".into(), name: "a/b".into() };
        assert_eq!(inside.caller(), Some(Caller { tenant: "acme".into(), kind: CallerKind::Actor(room.clone()) }));
        assert_eq!(inside.caller().unwrap().actor(), Some(&room));
        assert_eq!(room.to_string(), "room/a/b");
        assert_eq!(inside.chain(), Some(vec![ActorRef { class: "cart".into(), name: "u,1".into() }]));
        assert_eq!(inside.app(), Some(("acme".into(), "shop".into())));
        assert!(request_with(CALLER, "acme/_front/main").caller().is_some_and(|c| c.is_front()));
        assert_eq!(request_with(CHAIN, "").chain(), Some(vec![]));
    }
}
