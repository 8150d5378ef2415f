//! The `x-wasmkeep-` header range: the host's alone (DESIGN §3.5).
//!
//! Every header of the range a client sends is removed at the edge, and
//! the range is stripped from the answers guests give to clients, so no
//! client and no guest can forge what the host sets in it.

use http::HeaderMap;

/// The reserved prefix, lowercase (header names are compared lowercase).
pub const PREFIX: &str = "x-wasmkeep-";

/// Whether `name` is in the reserved range (case-insensitively).
pub fn is_reserved(name: &str) -> bool {
    name.len() >= PREFIX.len() && name.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}

/// Removes every header of the range.
pub fn strip(headers: &mut HeaderMap) {
    // `HeaderName`s are lowercase already.
    let reserved: Vec<_> = headers.keys().filter(|n| is_reserved(n.as_str())).cloned().collect();
    for name in reserved {
        headers.remove(name);
    }
}

/// Removes the range from a body frame's trailers (trailers are headers
/// too); data frames pass unchanged.
pub fn strip_trailers<D>(frame: http_body::Frame<D>) -> http_body::Frame<D> {
    match frame.into_trailers() {
        Ok(mut trailers) => {
            strip(&mut trailers);
            http_body::Frame::trailers(trailers)
        }
        Err(frame) => frame,
    }
}

/// Removes every pair of the range from a guest-facing header list.
pub fn strip_pairs<V>(headers: &mut Vec<(String, V)>) {
    headers.retain(|(n, _)| !is_reserved(n));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_case_insensitive_and_exact() {
        assert!(is_reserved("x-wasmkeep-caller"));
        assert!(is_reserved("X-WasmKeep-Upgrade"));
        assert!(is_reserved("x-wasmkeep-"));
        assert!(!is_reserved("x-wasmkeep"));
        assert!(!is_reserved("x-wasmkeeper"));
        assert!(!is_reserved("wasmkeep-caller"));
        assert!(!is_reserved("x-other"));
    }

    #[test]
    fn strip_removes_every_value_of_the_range() {
        let mut h = HeaderMap::new();
        h.append("x-wasmkeep-caller", "a".parse().unwrap());
        h.append("x-wasmkeep-caller", "b".parse().unwrap());
        h.append("X-Wasmkeep-Chain", "c".parse().unwrap());
        h.append("content-type", "text/plain".parse().unwrap());
        strip(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("content-type"));

        let mut pairs = vec![("X-WASMKEEP-APP".to_string(), 1), ("accept".to_string(), 2)];
        strip_pairs(&mut pairs);
        assert_eq!(pairs, vec![("accept".to_string(), 2)]);
    }

    #[test]
    fn trailers_lose_the_range_and_data_passes() {
        let mut t = HeaderMap::new();
        t.append("x-wasmkeep-app", "1".parse().unwrap());
        t.append("grpc-status", "0".parse().unwrap());
        let frame = strip_trailers(http_body::Frame::<&[u8]>::trailers(t));
        let t = frame.into_trailers().unwrap();
        assert_eq!(t.len(), 1);
        assert!(t.contains_key("grpc-status"));
        let data = strip_trailers(http_body::Frame::data(&b"x-wasmkeep-app: 1"[..]));
        assert_eq!(data.into_data().unwrap(), b"x-wasmkeep-app: 1");
    }
}
