//! API tokens of the provisioning API.
//!
//! A token's secret is shown to its holder once and never stored: the server
//! keeps only an HMAC of it under a server-side pepper, so a leaked database
//! alone neither reveals working tokens nor allows an offline guess to be
//! checked without the pepper.

use std::fmt;
use std::str::FromStr;

use aws_lc_rs::{constant_time, hmac, rand};

/// Marks a string as one of ours, so leaked tokens are recognisable by secret
/// scanners and a misplaced credential from another service is refused early.
pub const TOKEN_PREFIX: &str = "wk_";

/// Bytes of randomness in a generated secret: 256 bits, beyond any guessing.
const SECRET_BYTES: usize = 32;

/// Longest token body accepted after the prefix; bounds the work an
/// unauthenticated request can cause and leaves room for a longer format later.
pub const MAX_TOKEN_BODY: usize = 100;

/// Errors of token handling. Messages never contain a presented token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("expected `Authorization: Bearer wk_…`")]
    MissingBearer,
    #[error("unsupported authorization scheme; expected `Authorization: Bearer wk_…`")]
    WrongScheme,
    #[error("bearer token is empty; expected `Authorization: Bearer wk_…`")]
    EmptyToken,
    #[error("bearer token does not start with `wk_`")]
    MissingPrefix,
    #[error("bearer token is longer than {MAX_TOKEN_BODY} characters after `wk_`")]
    TooLong,
    #[error("bearer token contains characters other than letters, digits, `-` and `_`")]
    InvalidCharacters,
    #[error("unknown scope {0:?}; expected `admin`, `deploy` or `read`")]
    UnknownScope(String),
    #[error("pepper must be exactly 32 bytes, got {0}")]
    PepperLength(usize),
    #[error("token hash must be 64 hexadecimal characters")]
    InvalidHash,
}

/// What a token may do. Scopes are ordered so that a broader one implies the
/// narrower ones, which keeps the check at each endpoint a single call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Admin,
    Deploy,
    Read,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Admin => "admin",
            Scope::Deploy => "deploy",
            Scope::Read => "read",
        }
    }

    pub fn parse(s: &str) -> Result<Scope, TokenError> {
        match s {
            "admin" => Ok(Scope::Admin),
            "deploy" => Ok(Scope::Deploy),
            "read" => Ok(Scope::Read),
            other => Err(TokenError::UnknownScope(other.to_owned())),
        }
    }

    /// Whether a token of this scope may perform an action needing `needed`.
    pub fn allows(self, needed: Scope) -> bool {
        match self {
            Scope::Admin => true,
            Scope::Deploy => matches!(needed, Scope::Deploy | Scope::Read),
            Scope::Read => needed == Scope::Read,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::parse(s)
    }
}

/// A token as shown once to its holder. Its `Debug` hides the value so that it
/// cannot end up in logs through a stray `{:?}`; it has no `PartialEq`, since
/// tokens are compared only through their [`TokenHash`], in constant time.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// A fresh token: `wk_` and 43 characters of unpadded base64url.
    pub fn generate() -> Secret {
        let mut bytes = [0u8; SECRET_BYTES];
        fill_random(&mut bytes);
        let mut s = String::with_capacity(TOKEN_PREFIX.len() + 43);
        s.push_str(TOKEN_PREFIX);
        base64url_encode(&bytes, &mut s);
        Secret(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value to store for this secret.
    pub fn hash(&self, pepper: &Pepper) -> TokenHash {
        TokenHash::hash(pepper, &self.0)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(wk_…)")
    }
}

/// The server's HMAC key. Kept outside the database so that stolen token
/// hashes cannot be checked against guesses.
#[derive(Clone)]
pub struct Pepper([u8; 32]);

impl Pepper {
    pub fn generate() -> Pepper {
        let mut bytes = [0u8; 32];
        fill_random(&mut bytes);
        Pepper(bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Pepper, TokenError> {
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| TokenError::PepperLength(bytes.len()))?;
        Ok(Pepper(bytes))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for Pepper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pepper(…)")
    }
}

/// HMAC-SHA256(pepper, token): the only form in which a token is stored.
///
/// Equality is constant-time so that comparing against a presented token's
/// hash leaks nothing about how many leading bytes matched.
#[derive(Clone, Copy)]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// Hashes a presented token. A plain SHA-256 would do for 256-bit random
    /// secrets; the keyed HMAC additionally makes the stored hashes useless
    /// without the pepper.
    pub fn hash(pepper: &Pepper, presented: &str) -> TokenHash {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &pepper.0);
        let tag = hmac::sign(&key, presented.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        TokenHash(out)
    }

    pub fn from_bytes(bytes: [u8; 32]) -> TokenHash {
        TokenHash(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(s: &str) -> Result<TokenHash, TokenError> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| TokenError::InvalidHash)?;
        Ok(TokenHash(out))
    }
}

/// Same as [`TokenHash::hash`], for callers that read better with a free function.
pub fn hash(pepper: &Pepper, presented: &str) -> TokenHash {
    TokenHash::hash(pepper, presented)
}

impl PartialEq for TokenHash {
    fn eq(&self, other: &Self) -> bool {
        constant_time::verify_slices_are_equal(&self.0, &other.0).is_ok()
    }
}

impl Eq for TokenHash {}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenHash({})", self.to_hex())
    }
}

/// Extracts the token from an `Authorization` header value.
///
/// Only the shape is checked here; whether the token exists is decided by
/// comparing its hash. Rejecting malformed values early keeps junk out of the
/// HMAC and gives the client a precise message.
pub fn parse_bearer(header: &str) -> Result<&str, TokenError> {
    // Surrounding whitespace is not part of a field value in HTTP.
    let header = header.trim_matches([' ', '\t']);
    if header.is_empty() {
        return Err(TokenError::MissingBearer);
    }
    let Some((scheme, rest)) = header.split_once(' ') else {
        // A bare value: a token pasted without its scheme, or a lone scheme.
        return Err(if header.eq_ignore_ascii_case("bearer") {
            TokenError::EmptyToken
        } else {
            TokenError::MissingBearer
        });
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(TokenError::WrongScheme);
    }
    let token = rest.trim_start_matches(' ');
    if token.is_empty() {
        return Err(TokenError::EmptyToken);
    }
    let Some(body) = token.strip_prefix(TOKEN_PREFIX) else {
        return Err(TokenError::MissingPrefix);
    };
    if body.is_empty() {
        return Err(TokenError::EmptyToken);
    }
    if body.len() > MAX_TOKEN_BODY {
        return Err(TokenError::TooLong);
    }
    if !body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(TokenError::InvalidCharacters);
    }
    Ok(token)
}

/// Fills `buf` from the operating system's generator. Its failure leaves no
/// safe way to make keys or tokens, so it is treated as fatal.
fn fill_random(buf: &mut [u8]) {
    rand::fill(buf).expect("the system random number generator failed");
}

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Unpadded base64url (RFC 4648 §5): a few lines rather than a dependency.
fn base64url_encode(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(BASE64URL[index as usize]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base64url_decode(s: &str) -> Option<Vec<u8>> {
        let mut bits = 0u32;
        let mut nbits = 0;
        let mut out = Vec::new();
        for c in s.bytes() {
            let v = BASE64URL.iter().position(|&x| x == c)? as u32;
            bits = (bits << 6) | v;
            nbits += 6;
            if nbits >= 8 {
                nbits -= 8;
                out.push((bits >> nbits) as u8);
                bits &= (1 << nbits) - 1;
            }
        }
        // Unpadded base64url leaves only zero bits over.
        (bits == 0).then_some(out)
    }

    #[test]
    fn scope_matrix() {
        use Scope::*;
        let cases = [
            (Admin, Admin, true),
            (Admin, Deploy, true),
            (Admin, Read, true),
            (Deploy, Admin, false),
            (Deploy, Deploy, true),
            (Deploy, Read, true),
            (Read, Admin, false),
            (Read, Deploy, false),
            (Read, Read, true),
        ];
        for (held, needed, expected) in cases {
            assert_eq!(held.allows(needed), expected, "{held} allows {needed}");
        }
    }

    #[test]
    fn scope_strings_round_trip() {
        for scope in [Scope::Admin, Scope::Deploy, Scope::Read] {
            assert_eq!(Scope::parse(scope.as_str()), Ok(scope));
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
        }
        assert!(Scope::parse("Admin").is_err());
        assert!(Scope::parse("").is_err());
        assert!(Scope::parse("write").is_err());
    }

    #[test]
    fn base64url_known_vectors() {
        let enc = |b: &[u8]| {
            let mut s = String::new();
            base64url_encode(b, &mut s);
            s
        };
        assert_eq!(enc(b""), "");
        assert_eq!(enc(b"f"), "Zg");
        assert_eq!(enc(b"fo"), "Zm8");
        assert_eq!(enc(b"foo"), "Zm9v");
        assert_eq!(enc(b"foob"), "Zm9vYg");
        assert_eq!(enc(&[0xfb, 0xff, 0xbf]), "-_-_");
    }

    #[test]
    fn generated_secrets_are_distinct_prefixed_and_decode() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..64 {
            let secret = Secret::generate();
            let s = secret.as_str();
            assert!(s.starts_with("wk_"), "{s}");
            assert_eq!(s.len(), 3 + 43);
            let bytes = base64url_decode(&s[3..]).expect("valid base64url");
            assert_eq!(bytes.len(), 32);
            assert_eq!(parse_bearer(&format!("Bearer {s}")), Ok(s));
            assert!(seen.insert(s.to_owned()), "duplicate secret");
        }
    }

    #[test]
    fn hash_is_deterministic_per_pepper() {
        let pepper = Pepper::generate();
        let other = Pepper::generate();
        let secret = Secret::generate();
        assert_eq!(hash(&pepper, secret.as_str()), TokenHash::hash(&pepper, secret.as_str()));
        assert_eq!(secret.hash(&pepper), hash(&pepper, secret.as_str()));
        assert_ne!(hash(&pepper, secret.as_str()), hash(&other, secret.as_str()));
        assert_ne!(hash(&pepper, secret.as_str()), hash(&pepper, Secret::generate().as_str()));
    }

    #[test]
    fn hash_is_hmac_sha256_of_the_token() {
        // Pinned so that stored hashes stay valid across refactors; computed
        // independently with Python's hmac module.
        let pepper = Pepper::from_bytes(&[0x0b; 32]).unwrap();
        assert_eq!(
            hash(&pepper, "wk_example").to_hex(),
            "ccb63c3b403b54298cd2ea878329a204fd8bd5c11eb1c461e5c929f18dce8849"
        );
    }

    #[test]
    fn hash_hex_round_trip() {
        let h = hash(&Pepper::generate(), "wk_example");
        let hex = h.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(TokenHash::from_hex(&hex), Ok(h));
        assert_eq!(TokenHash::from_hex(&hex.to_uppercase()), Ok(h));
        assert_eq!(TokenHash::from_hex(&hex[..62]), Err(TokenError::InvalidHash));
        assert_eq!(TokenHash::from_hex(&format!("{hex}00")), Err(TokenError::InvalidHash));
        assert_eq!(TokenHash::from_hex(&format!("zz{}", &hex[2..])), Err(TokenError::InvalidHash));
    }

    #[test]
    fn pepper_length_is_exact() {
        assert!(Pepper::from_bytes(&[7; 32]).is_ok());
        assert_eq!(Pepper::from_bytes(&[7; 31]).unwrap_err(), TokenError::PepperLength(31));
        assert_eq!(Pepper::from_bytes(&[7; 33]).unwrap_err(), TokenError::PepperLength(33));
        assert_eq!(Pepper::from_bytes(&[]).unwrap_err(), TokenError::PepperLength(0));
        let p = Pepper::generate();
        assert_eq!(Pepper::from_bytes(p.as_bytes()).unwrap().as_bytes(), p.as_bytes());
    }

    #[test]
    fn bearer_parsing() {
        let token = "wk_AbC-_09";
        assert_eq!(parse_bearer("Bearer wk_AbC-_09"), Ok(token));
        assert_eq!(parse_bearer("bearer wk_AbC-_09"), Ok(token));
        assert_eq!(parse_bearer("BEARER   wk_AbC-_09"), Ok(token));
        assert_eq!(parse_bearer(" Bearer wk_AbC-_09 "), Ok(token));
        let hex_token = format!("wk_{}", "0123456789abcdef".repeat(4));
        assert_eq!(parse_bearer(&format!("Bearer {hex_token}")), Ok(hex_token.as_str()));
        let longest = format!("wk_{}", "a".repeat(MAX_TOKEN_BODY));
        assert_eq!(parse_bearer(&format!("Bearer {longest}")), Ok(longest.as_str()));

        assert_eq!(parse_bearer("wk_AbC-_09"), Err(TokenError::MissingBearer));
        assert_eq!(parse_bearer("Basic dXNlcjpwYXNz"), Err(TokenError::WrongScheme));
        assert_eq!(parse_bearer("Token wk_AbC"), Err(TokenError::WrongScheme));
        assert_eq!(parse_bearer("Bearer AbC-_09"), Err(TokenError::MissingPrefix));
        assert_eq!(parse_bearer("Bearer WK_AbC"), Err(TokenError::MissingPrefix));
        let too_long = format!("Bearer wk_{}", "a".repeat(MAX_TOKEN_BODY + 1));
        assert_eq!(parse_bearer(&too_long), Err(TokenError::TooLong));
        assert_eq!(parse_bearer("Bearer wk_abc.def"), Err(TokenError::InvalidCharacters));
        assert_eq!(parse_bearer("Bearer wk_abc=="), Err(TokenError::InvalidCharacters));
        assert_eq!(parse_bearer("Bearer wk_abc def"), Err(TokenError::InvalidCharacters));
        assert_eq!(parse_bearer("Bearer wk_abcé"), Err(TokenError::InvalidCharacters));
        assert_eq!(parse_bearer(""), Err(TokenError::MissingBearer));
        assert_eq!(parse_bearer("   "), Err(TokenError::MissingBearer));
        assert_eq!(parse_bearer("Bearer"), Err(TokenError::EmptyToken));
        assert_eq!(parse_bearer("Bearer "), Err(TokenError::EmptyToken));
        assert_eq!(parse_bearer("Bearer wk_"), Err(TokenError::EmptyToken));
    }

    #[test]
    fn errors_never_echo_the_token() {
        let inputs = [
            "wk_SECRETSECRET",
            "Basic wk_SECRETSECRET",
            "Bearer SECRETSECRET",
            "Bearer wk_SECRETSECRET.",
            &format!("Bearer wk_SECRETSECRET{}", "a".repeat(200)),
        ];
        for input in inputs {
            let message = parse_bearer(input).unwrap_err().to_string();
            assert!(!message.contains("SECRETSECRET"), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn debug_output_hides_secrets() {
        let secret = Secret::generate();
        let debug = format!("{secret:?}");
        assert_eq!(debug, "Secret(wk_…)");
        assert!(!debug.contains(&secret.as_str()[3..]));

        let pepper = Pepper::from_bytes(&[0xab; 32]).unwrap();
        let debug = format!("{pepper:?}");
        assert!(!debug.contains("ab") && !debug.contains("171"), "{debug}");
    }
}
