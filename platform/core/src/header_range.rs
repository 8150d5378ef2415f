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
}
