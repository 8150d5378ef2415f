//! The WebSocket hand-off through the front (docs/spec/sockets.md §5–§8):
//! which requests are upgrades the host marks for the front, and what a
//! front's answer that names the actor taking the socket means. Its headers
//! are the head's (`head::read_handoff`).

use http::{HeaderMap, Method};

use crate::header_range::{ValueError, is_reserved};
use crate::names::RawAddress;

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

/// The client's headers a relayed upgrade carries to the actor's owner
/// (docs/spec/sockets.md §15): its `Sec-WebSocket-*` headers and `Origin`,
/// nothing of the host's range (the edge removed the client's; none of
/// these is in it).
pub fn upgrade_headers(headers: &HeaderMap) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            name.starts_with("sec-websocket-") || name == "origin"
        })
        .filter(|(name, _)| !is_reserved(name.as_str()))
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect()
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
    /// One of the three headers is missing, repeated or not text.
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("the name is not UTF-8 once decoded")]
    NameNotUtf8,
    #[error("the name has a `%` not followed by two hex digits")]
    NameNotDecodable,
    #[error("the path does not start with `/` or is not a valid path and query")]
    BadPath,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_carries_the_clients_websocket_headers_and_origin_only() {
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
            ("sec-websocket-protocol", "chat"),
            ("origin", "https://example.test"),
            ("cookie", "session=1"),
            ("authorization", "Bearer x"),
            ("x-wasmkeep-caller", "t/_front/main"),
            ("host", "chat.t.example"),
        ] {
            h.append(n, v.parse().unwrap());
        }
        let mut names: Vec<String> = upgrade_headers(&h).into_iter().map(|(n, _)| n).collect();
        names.sort();
        assert_eq!(names, ["origin", "sec-websocket-key", "sec-websocket-protocol", "sec-websocket-version"]);
    }

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
}
