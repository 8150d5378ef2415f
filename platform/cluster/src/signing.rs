//! Signed hops between nodes (docs/spec/cluster.md §5; batch entries:
//! docs/spec/calls.md §14; relays: docs/spec/sockets.md §15): the MAC over
//! core's canonical form, under the cluster's secret.
//!
//! [`Signer`] stamps a hop's head with `x-wasmkeep-internal`; [`Verifier`]
//! checks one in the order `core::signature` gives (the form, the time
//! window, that every header of the range is covered, the MAC in constant
//! time) and spends its (node, nonce) last, so only a signature that
//! verified takes room in the record. One `Verifier` serves every listener
//! of a node (the cluster port, and the public port under
//! `--cluster-plaintext allow`), so a signature is spent once per node.

use std::sync::Mutex;

use aws_lc_rs::{digest, hmac};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Method};
use wasmkeep_core::head::INTERNAL;
use wasmkeep_core::signature::{self, SignatureError, Signed, Spent, Stamp};

/// The SHA-256 of a hop's body, as the signature covers it.
pub fn body_sha256(body: &[u8]) -> [u8; 32] {
    digest::digest(&digest::SHA256, body).as_ref().try_into().expect("SHA-256 is 32 bytes")
}

fn key(secret: &[u8; 32]) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, secret)
}

/// Signs this node's hops.
pub struct Signer {
    node: String,
    key: hmac::Key,
}

impl Signer {
    pub fn new(node: &str, secret: &[u8; 32]) -> Self {
        Self { node: node.to_owned(), key: key(secret) }
    }

    /// Sets `x-wasmkeep-internal` on `head`: this node's signature at
    /// `now_ms` over the request and the fixed names plus `names` (a
    /// call's [`signature::CALL_NAMES`], a relay's
    /// [`signature::RELAY_NAMES`]), under a fresh nonce.
    pub fn sign(
        &self,
        method: &Method,
        path_and_query: &PathAndQuery,
        body_sha256: &[u8; 32],
        head: &mut HeaderMap,
        names: &[&str],
        now_ms: u64,
    ) -> Result<(), SignatureError> {
        let mut nonce = [0u8; 16];
        aws_lc_rs::rand::fill(&mut nonce).expect("the system's random source");
        let stamp = Stamp {
            node: self.node.clone(),
            unix_ms: now_ms,
            nonce: hex::encode(nonce),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        };
        head.remove(INTERNAL);
        let bytes = signature::canonical(method, path_and_query, body_sha256, &stamp, head)?;
        let tag = hmac::sign(&self.key, bytes.as_bytes());
        let mac = tag.as_ref().try_into().expect("HMAC-SHA256 is 32 bytes");
        let value = Signed { stamp, mac }.format();
        head.insert(INTERNAL, HeaderValue::try_from(value).expect("a signature is visible ASCII"));
        Ok(())
    }
}

/// Why a hop's signature was not believed. Never told to the sender
/// beyond its status: the node logs it and counts it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HopRefusal {
    #[error("no signature")]
    Unsigned,
    #[error("the signature appears more than once")]
    Repeated,
    #[error("the signature cannot be read: {0}")]
    Malformed(SignatureError),
    #[error("the signature's time is outside the accepted window")]
    OutOfWindow,
    #[error("the head cannot be checked: {0}")]
    Head(SignatureError),
    #[error("the signature does not match")]
    BadMac,
    #[error("the signature was used before")]
    Replayed,
    #[error("too many signatures to remember; refused until some expire")]
    Full,
}

/// Checks hops signed by any node of the cluster.
pub struct Verifier {
    key: hmac::Key,
    spent: Mutex<Spent>,
}

impl Verifier {
    pub fn new(secret: &[u8; 32]) -> Self {
        Self::with_spent(secret, Spent::new())
    }

    /// With a record of spent nonces of its own size (tests).
    pub fn with_spent(secret: &[u8; 32], spent: Spent) -> Self {
        Self { key: key(secret), spent: Mutex::new(spent) }
    }

    /// Believes `head`'s signature at `now_ms`, or says why not; answers
    /// what it stamped (the signing node, the names it covers).
    pub fn verify(
        &self,
        method: &Method,
        path_and_query: &PathAndQuery,
        body_sha256: &[u8; 32],
        head: &HeaderMap,
        now_ms: u64,
    ) -> Result<Stamp, HopRefusal> {
        let mut values = head.get_all(INTERNAL).iter();
        let value = values.next().ok_or(HopRefusal::Unsigned)?;
        if values.next().is_some() {
            return Err(HopRefusal::Repeated);
        }
        let value = value.to_str().map_err(|_| HopRefusal::Malformed(SignatureError::NotText(INTERNAL.into())))?;
        let signed = Signed::parse(value).map_err(HopRefusal::Malformed)?;
        if !signature::within_window(signed.stamp.unix_ms, now_ms) {
            return Err(HopRefusal::OutOfWindow);
        }
        signature::check_covered(head, &signed.stamp.names).map_err(HopRefusal::Head)?;
        let bytes =
            signature::canonical(method, path_and_query, body_sha256, &signed.stamp, head).map_err(HopRefusal::Head)?;
        hmac::verify(&self.key, bytes.as_bytes(), &signed.mac).map_err(|_| HopRefusal::BadMac)?;
        let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        if spent.spend(&signed.stamp.node, &signed.stamp.nonce, now_ms) {
            Ok(signed.stamp)
        } else if spent.is_full(now_ms) {
            Err(HopRefusal::Full)
        } else {
            Err(HopRefusal::Replayed)
        }
    }
}

#[cfg(test)]
mod tests {
    use wasmkeep_core::head::{APP, CALLER, CHAIN, DEADLINE, TARGET, UPGRADE};
    use wasmkeep_core::signature::{CALL_NAMES, EMPTY_BODY_SHA256, RELAY_NAMES};

    use super::*;

    const SECRET: [u8; 32] = [7; 32];
    const NOW: u64 = 1_800_000_000_000;

    fn call_head() -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in [
            (CALLER, "acme/_front/main"),
            (CHAIN, ""),
            (APP, "acme/shop"),
            (TARGET, "cart/alice"),
            (DEADLINE, "5000"),
            ("content-type", "text/plain"),
        ] {
            h.insert(name, HeaderValue::from_static(value));
        }
        h
    }

    fn pq(s: &'static str) -> PathAndQuery {
        PathAndQuery::from_static(s)
    }

    fn signed(names: &[&str]) -> HeaderMap {
        let mut head = call_head();
        if names.contains(&UPGRADE) {
            head.insert(UPGRADE, HeaderValue::from_static("websocket"));
        }
        Signer::new("a", &SECRET)
            .sign(&Method::POST, &pq("/x?y=1"), &body_sha256(b"hi"), &mut head, names, NOW)
            .unwrap();
        head
    }

    fn verify(v: &Verifier, head: &HeaderMap) -> Result<Stamp, HopRefusal> {
        v.verify(&Method::POST, &pq("/x?y=1"), &body_sha256(b"hi"), head, NOW + 1_000)
    }

    #[test]
    fn a_signed_hop_verifies_once() {
        let v = Verifier::new(&SECRET);
        let head = signed(&CALL_NAMES);
        let stamp = verify(&v, &head).unwrap();
        assert_eq!((stamp.node.as_str(), stamp.names.len()), ("a", 2));
        assert_eq!(verify(&v, &head), Err(HopRefusal::Replayed));
        // Another signature of the same request is its own.
        verify(&v, &signed(&CALL_NAMES)).unwrap();
    }

    #[test]
    fn every_signed_part_is_covered() {
        let v = Verifier::new(&SECRET);
        let head = signed(&CALL_NAMES);
        let other = |m: Method, p: &'static str, body: &[u8]| v.verify(&m, &pq(p), &body_sha256(body), &head, NOW);
        assert_eq!(other(Method::PUT, "/x?y=1", b"hi"), Err(HopRefusal::BadMac));
        assert_eq!(other(Method::POST, "/x?y=2", b"hi"), Err(HopRefusal::BadMac));
        assert_eq!(other(Method::POST, "/x?y=1", b"ho"), Err(HopRefusal::BadMac));
        for (name, value) in [
            (CALLER, "acme/cart/bob"),
            (CHAIN, "cart/bob"),
            (APP, "acme/chat"),
            (TARGET, "cart/bob"),
            (DEADLINE, "29000"),
        ] {
            let mut forged = head.clone();
            forged.insert(name, HeaderValue::from_static(value));
            assert_eq!(verify(&v, &forged), Err(HopRefusal::BadMac), "{name}");
        }
        // A header outside the range is not signed: a hop may carry any.
        let mut extra = head.clone();
        extra.insert("content-type", HeaderValue::from_static("application/json"));
        verify(&v, &extra).unwrap();
        // Another cluster's secret.
        assert_eq!(verify(&Verifier::new(&[8; 32]), &signed(&CALL_NAMES)), Err(HopRefusal::BadMac));
        // The time is signed: a stamp moved in time does not match.
        let mut moved = signed(&CALL_NAMES);
        let value = moved[INTERNAL].to_str().unwrap().replace(&format!(" {NOW} "), &format!(" {} ", NOW + 1));
        moved.insert(INTERNAL, HeaderValue::try_from(value).unwrap());
        assert_eq!(verify(&v, &moved), Err(HopRefusal::BadMac));
    }

    #[test]
    fn the_upgrade_mark_is_signed_only_where_listed() {
        let v = Verifier::new(&SECRET);
        // A relay signs the mark; removing it breaks the MAC's head.
        let relay = signed(&RELAY_NAMES);
        let mut stripped = relay.clone();
        stripped.remove(UPGRADE);
        assert!(matches!(verify(&v, &stripped), Err(HopRefusal::Head(SignatureError::Missing(_)))));
        verify(&v, &relay).unwrap();
        // A call seen on the wire, the mark added: not covered, refused.
        let mut marked = signed(&CALL_NAMES);
        marked.insert(UPGRADE, HeaderValue::from_static("websocket"));
        assert!(matches!(verify(&v, &marked), Err(HopRefusal::Head(SignatureError::Unsigned(_)))));
        // A relay's empty body is what it signs.
        let mut head = call_head();
        head.insert(UPGRADE, HeaderValue::from_static("websocket"));
        Signer::new("b", &SECRET)
            .sign(&Method::GET, &pq("/actor/room/r/ws"), &EMPTY_BODY_SHA256, &mut head, &RELAY_NAMES, NOW)
            .unwrap();
        v.verify(&Method::GET, &pq("/actor/room/r/ws"), &body_sha256(b""), &head, NOW).unwrap();
    }

    #[test]
    fn missing_repeated_unreadable_and_late_signatures_are_refused() {
        let v = Verifier::new(&SECRET);
        assert_eq!(verify(&v, &call_head()), Err(HopRefusal::Unsigned));
        let mut twice = signed(&CALL_NAMES);
        let again = twice[INTERNAL].clone();
        twice.append(INTERNAL, again);
        assert_eq!(verify(&v, &twice), Err(HopRefusal::Repeated));
        let mut garbled = call_head();
        garbled.insert(INTERNAL, HeaderValue::from_static("v4 a 1 nonce"));
        assert!(matches!(verify(&v, &garbled), Err(HopRefusal::Malformed(_))));
        let head = signed(&CALL_NAMES);
        let at = |ms: u64| v.verify(&Method::POST, &pq("/x?y=1"), &body_sha256(b"hi"), &head, ms);
        assert_eq!(at(NOW + 30_001), Err(HopRefusal::OutOfWindow));
        assert_eq!(at(NOW - 30_001), Err(HopRefusal::OutOfWindow));
        // Refusals spend nothing: the same signature is still good in time.
        at(NOW + 30_000).unwrap();
    }

    #[test]
    fn a_full_record_refuses_rather_than_forgets() {
        let v = Verifier::with_spent(&SECRET, Spent::with_bound(1));
        verify(&v, &signed(&CALL_NAMES)).unwrap();
        assert_eq!(verify(&v, &signed(&CALL_NAMES)), Err(HopRefusal::Full));
    }
}
