//! Values sealed at rest.
//!
//! An app's values (its secrets) are stored encrypted with AES-256-GCM under a
//! server key, so a copy of the database alone reveals none of them. The
//! caller's context (app and value name) is authenticated with each value, so
//! a sealed value copied to another app or name fails to open instead of
//! leaking into the wrong place.

use std::fmt;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand;

/// First byte of every sealed value, so the format can change (new cipher,
/// key rotation) without guessing what old rows contain.
pub const VERSION: u8 = 1;

const KEY_LEN: usize = 32;
const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + NONCE_LEN;

/// Errors of sealing and opening. Messages never contain a key or a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("value key must be exactly 32 bytes, got {0}")]
    KeyLength(usize),
    #[error("sealed value is too short ({0} bytes)")]
    Truncated(usize),
    #[error("sealed value has unsupported format version {0}")]
    UnsupportedVersion(u8),
    #[error("sealed value failed authentication: wrong key, wrong context or corrupted")]
    Rejected,
}

/// The server key under which values are sealed.
pub struct ValueKey {
    bytes: [u8; KEY_LEN],
    key: LessSafeKey,
}

impl ValueKey {
    pub fn generate() -> ValueKey {
        let mut bytes = [0u8; KEY_LEN];
        fill_random(&mut bytes);
        ValueKey::from_array(bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<ValueKey, SealError> {
        let bytes: [u8; KEY_LEN] = bytes.try_into().map_err(|_| SealError::KeyLength(bytes.len()))?;
        Ok(ValueKey::from_array(bytes))
    }

    fn from_array(bytes: [u8; KEY_LEN]) -> ValueKey {
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes).expect("a 32-byte key is valid for AES-256-GCM");
        ValueKey { bytes, key: LessSafeKey::new(unbound) }
    }

    /// The raw key, for writing it to the server's key file.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.bytes
    }

    /// Encrypts `plaintext`, binding it to `context`.
    ///
    /// The nonce is random rather than a counter so that several servers can
    /// seal under one key without coordinating; at 96 bits that is safe for
    /// far more values than one key will ever seal (the usual bound is 2³²).
    pub fn seal(&self, context: &[u8], plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&mut nonce);

        let mut out = Vec::with_capacity(HEADER_LEN + plaintext.len() + TAG_LEN);
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(context), &mut out[HEADER_LEN..])
            .expect("AES-GCM sealing fails only past 64 GiB of input");
        out.extend_from_slice(tag.as_ref());
        out
    }

    /// Decrypts a value made by [`ValueKey::seal`] with the same key and context.
    pub fn open(&self, context: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        if sealed.len() < HEADER_LEN + TAG_LEN {
            return Err(SealError::Truncated(sealed.len()));
        }
        if sealed[0] != VERSION {
            return Err(SealError::UnsupportedVersion(sealed[0]));
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1..HEADER_LEN]).map_err(|_| SealError::Rejected)?;
        let mut body = sealed[HEADER_LEN..].to_vec();
        let len = self.key.open_in_place(nonce, Aad::from(context), &mut body).map_err(|_| SealError::Rejected)?.len();
        body.truncate(len);
        Ok(body)
    }
}

impl Clone for ValueKey {
    fn clone(&self) -> Self {
        ValueKey::from_array(self.bytes)
    }
}

impl fmt::Debug for ValueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ValueKey(…)")
    }
}

/// Joins context parts with a length before each, so that distinct part lists
/// never give the same bytes (app `ab` + name `c` vs app `a` + name `bc`).
pub fn context(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| 8 + p.len()).sum());
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// Fills `buf` from the operating system's generator. Its failure leaves no
/// safe way to make keys or nonces, so it is treated as fatal.
fn fill_random(buf: &mut [u8]) {
    rand::fill(buf).expect("the system random number generator failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: &[u8] = b"app-1/DATABASE_URL";
    const VALUE: &[u8] = b"postgres://user:hunter2@db.internal/app";

    #[test]
    fn round_trip() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, VALUE);
        assert_eq!(sealed[0], VERSION);
        assert_eq!(sealed.len(), 1 + NONCE_LEN + VALUE.len() + TAG_LEN);
        assert_eq!(key.open(CTX, &sealed).unwrap(), VALUE);
    }

    #[test]
    fn round_trip_through_key_bytes() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, VALUE);
        let again = ValueKey::from_bytes(key.as_bytes()).unwrap();
        assert_eq!(again.open(CTX, &sealed).unwrap(), VALUE);
        assert_eq!(key.clone().open(CTX, &sealed).unwrap(), VALUE);
    }

    #[test]
    fn empty_plaintext_works() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, b"");
        assert_eq!(sealed.len(), 1 + NONCE_LEN + TAG_LEN);
        assert_eq!(key.open(CTX, &sealed).unwrap(), b"");
        assert_eq!(key.open(b"other", &sealed), Err(SealError::Rejected));
    }

    #[test]
    fn two_seals_of_one_value_differ() {
        let key = ValueKey::generate();
        let a = key.seal(CTX, VALUE);
        let b = key.seal(CTX, VALUE);
        assert_ne!(a, b);
        assert_ne!(a[1..HEADER_LEN], b[1..HEADER_LEN], "nonces must differ");
    }

    #[test]
    fn ciphertext_does_not_contain_plaintext() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, VALUE);
        assert!(!sealed.windows(VALUE.len()).any(|w| w == VALUE));
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
    }

    #[test]
    fn wrong_key_is_rejected() {
        let sealed = ValueKey::generate().seal(CTX, VALUE);
        assert_eq!(ValueKey::generate().open(CTX, &sealed), Err(SealError::Rejected));
    }

    #[test]
    fn wrong_context_is_rejected() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, VALUE);
        assert_eq!(key.open(b"app-2/DATABASE_URL", &sealed), Err(SealError::Rejected));
        assert_eq!(key.open(b"app-1/OTHER", &sealed), Err(SealError::Rejected));
        assert_eq!(key.open(b"", &sealed), Err(SealError::Rejected));
    }

    #[test]
    fn flipped_bit_in_any_region_is_rejected() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, VALUE);
        let body_start = HEADER_LEN;
        let tag_start = sealed.len() - TAG_LEN;
        let regions = [
            ("version", 0),
            ("nonce start", 1),
            ("nonce end", HEADER_LEN - 1),
            ("body start", body_start),
            ("body end", tag_start - 1),
            ("tag start", tag_start),
            ("tag end", sealed.len() - 1),
        ];
        for (region, index) in regions {
            for bit in [0, 7] {
                let mut tampered = sealed.clone();
                tampered[index] ^= 1 << bit;
                assert!(key.open(CTX, &tampered).is_err(), "bit {bit} of {region} (byte {index})");
            }
        }
        // Every single-bit flip anywhere, for good measure.
        for index in 0..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[index] ^= 0x10;
            assert!(key.open(CTX, &tampered).is_err(), "byte {index}");
        }
    }

    #[test]
    fn wrong_version_is_reported() {
        let key = ValueKey::generate();
        let mut sealed = key.seal(CTX, VALUE);
        sealed[0] = 2;
        assert_eq!(key.open(CTX, &sealed), Err(SealError::UnsupportedVersion(2)));
    }

    #[test]
    fn truncated_is_rejected() {
        let key = ValueKey::generate();
        let sealed = key.seal(CTX, VALUE);
        for len in [0, 1, HEADER_LEN, HEADER_LEN + TAG_LEN - 1] {
            assert_eq!(key.open(CTX, &sealed[..len]), Err(SealError::Truncated(len)));
        }
        for len in [HEADER_LEN + TAG_LEN, sealed.len() - 1] {
            assert_eq!(key.open(CTX, &sealed[..len]), Err(SealError::Rejected), "length {len}");
        }
        let mut extended = sealed.clone();
        extended.push(0);
        assert_eq!(key.open(CTX, &extended), Err(SealError::Rejected));
    }

    #[test]
    fn key_length_is_exact() {
        assert!(ValueKey::from_bytes(&[1; 32]).is_ok());
        assert_eq!(ValueKey::from_bytes(&[1; 16]).unwrap_err(), SealError::KeyLength(16));
        assert_eq!(ValueKey::from_bytes(&[1; 33]).unwrap_err(), SealError::KeyLength(33));
        assert_eq!(ValueKey::from_bytes(&[]).unwrap_err(), SealError::KeyLength(0));
    }

    #[test]
    fn context_parts_are_unambiguous() {
        assert_ne!(context(&[b"ab", b"c"]), context(&[b"a", b"bc"]));
        assert_ne!(context(&[b"abc"]), context(&[b"abc", b""]));
        let key = ValueKey::generate();
        let sealed = key.seal(&context(&[b"app-1", b"NAME"]), VALUE);
        assert_eq!(key.open(&context(&[b"app-1", b"NAME"]), &sealed).unwrap(), VALUE);
        assert_eq!(key.open(&context(&[b"app-1N", b"AME"]), &sealed), Err(SealError::Rejected));
    }

    #[test]
    fn debug_and_errors_hide_key_material() {
        let key = ValueKey::from_bytes(&[0xab; 32]).unwrap();
        let debug = format!("{key:?}");
        assert_eq!(debug, "ValueKey(…)");
        let sealed = key.seal(CTX, VALUE);
        let errors = [
            ValueKey::generate().open(CTX, &sealed).unwrap_err(),
            key.open(CTX, &sealed[..3]).unwrap_err(),
            ValueKey::from_bytes(&[0xab; 5]).unwrap_err(),
        ];
        for error in errors {
            let message = error.to_string();
            assert!(!message.contains("hunter2") && !message.contains("ab ab") && !message.contains('\n'), "{message}");
        }
    }
}
