//! The WebSocket hand-off through the front (seed 0027): which requests
//! are upgrades the host marks for the front, and how the front's answer
//! names the actor that takes the socket. Pure: the front port and the
//! SDK's helpers follow these rules; nothing else reads the headers.

use http::{HeaderMap, Method};

use crate::names::{RawAddress, decode};

/// The mark the host sets on an upgrade it keeps aside for the front.
pub const UPGRADE_MARK: &str = "x-wasmkeep-upgrade";
/// The mark's one value.
pub const UPGRADE_WEBSOCKET: &str = "websocket";
/// The class that takes the socket, as written.
pub const CLASS_HEADER: &str = "x-wasmkeep-handoff-class";
/// The actor's name, percent-encoded as in `x-wasmkeep-caller`.
pub const NAME_HEADER: &str = "x-wasmkeep-handoff-name";
/// The path and query the actor's `on-websocket-open` sees.
pub const PATH_HEADER: &str = "x-wasmkeep-handoff-path";

/// Whether a request is a WebSocket upgrade: a `GET` with `Upgrade:
/// websocket`, `Sec-WebSocket-Version: 13` and a `Sec-WebSocket-Key`.
pub fn is_websocket_upgrade(method: &Method, headers: &HeaderMap) -> bool {
    let has = |name: &str, want: &str| {
        headers
            .get_all(name)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|token| token.trim().eq_ignore_ascii_case(want))))
    };
    method == Method::GET
        && has("upgrade", "websocket")
        && headers.get("sec-websocket-version").is_some_and(|v| v.as_bytes() == b"13")
        && headers.get("sec-websocket-key").is_some_and(|v| !v.is_empty())
}

/// A hand-off the front asked for: the actor and the path its
/// `on-websocket-open` sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandOff {
    /// The class as written and the decoded name; admission validates
    /// both, in its order, as for any event.
    pub actor: RawAddress,
    pub path: String,
}

/// Why a front's hand-off answer cannot be honoured (`500`, counted
/// `guest_error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandOffError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{0} appears more than once")]
    Repeated(&'static str),
    #[error("{0} is not visible ASCII")]
    NotText(&'static str),
    #[error("the name is not UTF-8 once decoded")]
    NameNotUtf8,
    #[error("the name has a `%` not followed by two hex digits")]
    NameNotDecodable,
    #[error("the path does not start with `/` or is not a valid path and query")]
    BadPath,
}

/// Reads a front's answer headers: `None` when it names no hand-off at
/// all; otherwise the hand-off, or why it is broken. Each of the three
/// headers must appear exactly once.
pub fn read(headers: &HeaderMap) -> Option<Result<HandOff, HandOffError>> {
    let names = [CLASS_HEADER, NAME_HEADER, PATH_HEADER];
    if names.iter().all(|n| !headers.contains_key(*n)) {
        return None;
    }
    Some(parse(headers))
}

fn one<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<&'h str, HandOffError> {
    let mut values = headers.get_all(name).iter();
    let value = values.next().ok_or(HandOffError::Missing(name))?;
    if values.next().is_some() {
        return Err(HandOffError::Repeated(name));
    }
    value.to_str().map_err(|_| HandOffError::NotText(name))
}

fn parse(headers: &HeaderMap) -> Result<HandOff, HandOffError> {
    let class = one(headers, CLASS_HEADER)?;
    let name = one(headers, NAME_HEADER)?;
    let path = one(headers, PATH_HEADER)?;
    let name = decode(name).map_err(|_| HandOffError::NameNotDecodable)?;
    let name = String::from_utf8(name).map_err(|_| HandOffError::NameNotUtf8)?;
    // What is checked is what is passed on: the parsed path and query must
    // be the header itself (a fragment, which parsing drops, is refused).
    let parsed = http::uri::PathAndQuery::try_from(path).map_err(|_| HandOffError::BadPath)?;
    if !path.starts_with('/') || parsed.as_str() != path {
        return Err(HandOffError::BadPath);
    }
    Ok(HandOff { actor: RawAddress { class: class.to_owned(), name: name.into_bytes() }, path: path.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(http::HeaderName::from_bytes(n.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    fn upgrade() -> Vec<(&'static str, &'static str)> {
        vec![
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]
    }

    #[test]
    fn an_upgrade_is_a_get_with_the_three_headers() {
        assert!(is_websocket_upgrade(&Method::GET, &headers(&upgrade())));
        let mut h = upgrade();
        h[0] = ("Upgrade", "h2c, WebSocket");
        assert!(is_websocket_upgrade(&Method::GET, &headers(&h)), "a token list, any case");
        assert!(!is_websocket_upgrade(&Method::POST, &headers(&upgrade())));
        for missing in 0..4 {
            if missing == 1 {
                continue; // `Connection` is hyper's to check.
            }
            let mut h = upgrade();
            h.remove(missing);
            assert!(!is_websocket_upgrade(&Method::GET, &headers(&h)), "without {missing}");
        }
        let mut h = upgrade();
        h[2] = ("sec-websocket-version", "8");
        assert!(!is_websocket_upgrade(&Method::GET, &headers(&h)));
        h[2] = ("sec-websocket-version", "13");
        h[0] = ("upgrade", "websockets");
        assert!(!is_websocket_upgrade(&Method::GET, &headers(&h)));
    }

    #[test]
    fn a_valid_hand_off_decodes_the_name_and_keeps_the_path() {
        let h = headers(&[
            (CLASS_HEADER, "room"),
            (NAME_HEADER, "lobby%2Fmain%20%C3%A9"),
            (PATH_HEADER, "/ws?user=ann%20b"),
            ("content-type", "text/plain"),
        ]);
        let handoff = read(&h).unwrap().unwrap();
        assert_eq!(handoff.actor.class, "room");
        assert_eq!(handoff.actor.name, "lobby/main é".as_bytes());
        assert_eq!(handoff.path, "/ws?user=ann%20b");
    }

    #[test]
    fn no_hand_off_header_is_no_hand_off() {
        assert_eq!(read(&headers(&[("content-type", "text/plain")])), None);
        assert_eq!(read(&HeaderMap::new()), None);
    }

    #[test]
    fn a_broken_hand_off_says_why() {
        let ok = [(CLASS_HEADER, "room"), (NAME_HEADER, "a"), (PATH_HEADER, "/")];
        let err = |pairs: &[(&str, &str)]| read(&headers(pairs)).unwrap().unwrap_err();
        assert_eq!(err(&ok[..2]), HandOffError::Missing(PATH_HEADER));
        assert_eq!(err(&ok[1..]), HandOffError::Missing(CLASS_HEADER));
        assert_eq!(err(&[ok[0], ok[2]]), HandOffError::Missing(NAME_HEADER));
        let mut repeated = ok.to_vec();
        repeated.push((NAME_HEADER, "b"));
        assert_eq!(err(&repeated), HandOffError::Repeated(NAME_HEADER));
        assert_eq!(err(&[ok[0], (NAME_HEADER, "%FF"), ok[2]]), HandOffError::NameNotUtf8);
        assert_eq!(err(&[ok[0], ok[1], (PATH_HEADER, "ws")]), HandOffError::BadPath);
        assert_eq!(err(&[ok[0], ok[1], (PATH_HEADER, "")]), HandOffError::BadPath);
        assert_eq!(err(&[ok[0], (NAME_HEADER, "a%zz"), ok[2]]), HandOffError::NameNotDecodable);
        for bad in ["/a?b=1#frag", "/a#", "/#x", "/a b", "//host/x?#"] {
            assert_eq!(err(&[ok[0], ok[1], (PATH_HEADER, bad)]), HandOffError::BadPath, "{bad}");
        }
        let mut h = headers(&ok);
        h.insert(CLASS_HEADER, http::HeaderValue::from_bytes(b"r\xc3\xa9").unwrap());
        assert_eq!(read(&h).unwrap().unwrap_err(), HandOffError::NotText(CLASS_HEADER));
    }
}
