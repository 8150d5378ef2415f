//! The canonical form of a node's signature over a hop
//! (docs/spec/cluster.md §5): the `x-wasmkeep-internal` value, the exact
//! bytes its MAC covers, the time window a signature is accepted in, and
//! the record of spent nonces. A node trusts the head of a hop (who calls,
//! for which app, which actor, how long it may wait) only because another
//! node signed it; this module makes sure both ends sign and check the same
//! bytes.
//!
//! The value is `v4 <node> <unix-ms> <nonce> <names> <mac>`, six fields
//! separated by single spaces:
//!
//! - `<node>`: the signing node's id ([`is_node_id`]);
//! - `<unix-ms>`: when it signed, decimal unix milliseconds, without
//!   leading zeros (one spelling per time);
//! - `<nonce>`: 16–64 of `A-Z a-z 0-9 - _` (base64url without padding fits);
//! - `<names>`: the header names signed beyond the fixed three (caller,
//!   chain, app), in the order they are signed, joined by `,`; `-` when
//!   none. Each is a lowercase name of the range (`x-wasmkeep-` then a
//!   letter, then `a-z 0-9 -`, 64 bytes at most), never a fixed one nor
//!   `x-wasmkeep-internal`, never twice, at most [`NAMES_MAX`]. Names this
//!   node does not know are accepted: a newer signer may sign more.
//! - `<mac>`: HMAC-SHA256 over [`canonical`]'s bytes, 64 lowercase hex
//!   digits.
//!
//! A call hop lists [`CALL_NAMES`] (`x-wasmkeep-target`,
//! `x-wasmkeep-deadline`); a hand-off relay (docs/spec/sockets.md §15)
//! carries neither, lists `x-wasmkeep-upgrade` alone (`cluster::peers`)
//! and signs the empty body ([`EMPTY_BODY_SHA256`]). [`RELAY_NAMES`], a
//! call's names and the mark, verifies as any list does; no node sends it
//! today. A call without the upgrade mark signs as before, so no existing
//! signature changes.
//!
//! What this module does not do: compute or compare the MAC. The cluster
//! computes HMAC-SHA256 with aws-lc-rs over [`canonical`]'s bytes, under
//! the cluster's key, and compares in constant time; this crate has no
//! crypto library, no clock and no key. A receiver checks, in this order:
//! [`Signed::parse`], [`within_window`], [`check_covered`], the MAC over
//! [`canonical`], and last [`Spent::spend`], so that only a signature that
//! verified can take room in the record of spent nonces.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use http::uri::PathAndQuery;
use http::{HeaderMap, Method};

use crate::head::{APP, CALLER, CHAIN, DEADLINE, INTERNAL, PREFIX, TARGET, UPGRADE, is_reserved};
use crate::heartbeat::is_node_id;

/// The form of the signature this node writes and reads.
pub const VERSION: &str = "v4";
/// How far a signature's time may be from the receiver's clock, either
/// way: a signature outside it is refused.
pub const SKEW: Duration = Duration::from_secs(30);
/// The headers every signature covers, in this order. Absent, each signs
/// with an empty value, so their absence is signed too.
pub const FIXED: [&str; 3] = [CALLER, CHAIN, APP];
/// What a call hop lists.
pub const CALL_NAMES: [&str; 2] = [TARGET, DEADLINE];
/// What a hand-off relay lists: a call's names and the upgrade mark.
pub const RELAY_NAMES: [&str; 3] = [TARGET, DEADLINE, UPGRADE];
/// The SHA-256 of the empty body, which a hand-off relay signs.
pub const EMPTY_BODY_SHA256: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41,
    0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// Shortest nonce.
pub const NONCE_MIN: usize = 16;
/// Longest nonce.
pub const NONCE_MAX: usize = 64;
/// Most names a signature lists: the range has twelve names today, and a
/// longer list is a forged head.
pub const NAMES_MAX: usize = 16;
/// Longest listed name, in bytes.
pub const NAME_MAX: usize = 64;
/// `<names>` when no name is listed.
pub const NO_NAMES: &str = "-";

/// How long a spent pair is remembered: a signature accepted at `t` was
/// made no later than `t + SKEW` (a signer's clock may run ahead) and is
/// accepted until the clock passes its time `+ SKEW`, so it could be
/// replayed until `t + 2 × SKEW`; ten seconds more cover a clock read late.
pub const REMEMBER: Duration = Duration::from_secs(2 * SKEW.as_secs() + 10);
/// Most pairs remembered at once: more than the cluster signs to a node in
/// [`REMEMBER`] (about 14,000 hops a second); 100–200 MB when full, by
/// the length of ids and nonces.
pub const SPENT_MAX: usize = 1_000_000;

/// Why a signature cannot be read, or a head cannot be signed or checked.
/// For the node's log; the hop is refused whichever it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the signature has {0} space-separated fields, not 6")]
    Fields(usize),
    #[error("the signature's version is not {VERSION}")]
    Version,
    #[error("the node id is not 1-63 of a-z, 0-9, '-' and '_', starting with a letter")]
    Node,
    #[error("the time is not unix milliseconds in decimal without leading zeros")]
    Time,
    #[error("the nonce is not {NONCE_MIN}-{NONCE_MAX} of A-Z, a-z, 0-9, '-' and '_'")]
    Nonce,
    #[error("a listed name is not {PREFIX} then a letter and a-z, 0-9 or '-', up to {NAME_MAX} bytes")]
    NameOutsideRange,
    #[error("{0} is always signed and is never listed")]
    NameFixed(&'static str),
    #[error("{INTERNAL} carries the signature and is never listed")]
    NameInternal,
    #[error("{0} is listed more than once")]
    NameRepeated(String),
    #[error("more than {NAMES_MAX} names are listed")]
    TooManyNames,
    #[error("the mac is not 64 lowercase hex digits")]
    Mac,
    #[error("{0} is listed but not in the head")]
    Missing(String),
    #[error("{0} appears more than once in the head")]
    Repeated(String),
    #[error("{0} is not visible ASCII")]
    NotText(String),
    #[error("{0} is in the head but not signed")]
    Unsigned(String),
}

/// What a signature says of itself but its MAC: who signed, when, with
/// which nonce, and which names beyond the fixed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub node: String,
    pub unix_ms: u64,
    pub nonce: String,
    /// In the order they are signed.
    pub names: Vec<String>,
}

impl Stamp {
    /// Whether every field is as the textual form requires.
    pub fn check(&self) -> Result<(), SignatureError> {
        if !is_node_id(&self.node) {
            return Err(SignatureError::Node);
        }
        if !is_nonce(&self.nonce) {
            return Err(SignatureError::Nonce);
        }
        check_names(self.names.iter().map(String::as_str))
    }
}

/// A node's signature: the `x-wasmkeep-internal` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub stamp: Stamp,
    /// HMAC-SHA256 over [`canonical`]'s bytes.
    pub mac: [u8; 32],
}

impl Signed {
    /// The header's value: `v4 <node> <unix-ms> <nonce> <names> <mac>`.
    /// A stamp that fails [`Stamp::check`] writes a value
    /// [`Signed::parse`] refuses ([`canonical`] refuses to sign it first).
    pub fn format(&self) -> String {
        let Stamp { node, unix_ms, nonce, names } = &self.stamp;
        let names = if names.is_empty() { NO_NAMES.to_owned() } else { names.join(",") };
        format!("{VERSION} {node} {unix_ms} {nonce} {names} {}", hex(&self.mac))
    }

    /// Reads the header's value. Fields are checked in order, so the
    /// first bad one is named.
    pub fn parse(value: &str) -> Result<Self, SignatureError> {
        let fields: Vec<&str> = value.split(' ').take(7).collect();
        let [version, node, unix_ms, nonce, names, mac] = fields[..] else {
            return Err(SignatureError::Fields(value.split(' ').count()));
        };
        if version != VERSION {
            return Err(SignatureError::Version);
        }
        if !is_node_id(node) {
            return Err(SignatureError::Node);
        }
        let unix_ms = parse_ms(unix_ms).ok_or(SignatureError::Time)?;
        if !is_nonce(nonce) {
            return Err(SignatureError::Nonce);
        }
        let names: Vec<&str> =
            if names == NO_NAMES { Vec::new() } else { names.split(',').take(NAMES_MAX + 1).collect() };
        check_names(names.iter().copied())?;
        let mac = unhex(mac).ok_or(SignatureError::Mac)?;
        let names = names.into_iter().map(str::to_owned).collect();
        Ok(Self { stamp: Stamp { node: node.to_owned(), unix_ms, nonce: nonce.to_owned(), names }, mac })
    }
}

/// The bytes the MAC covers, one item a line, joined by `\n` (no trailing
/// newline):
///
/// ```text
/// v4
/// <method>
/// <path and query>
/// <hex SHA-256 of the body, lowercase>
/// <node>
/// <unix-ms>
/// <nonce>
/// x-wasmkeep-caller:<value>
/// x-wasmkeep-chain:<value>
/// x-wasmkeep-app:<value>
/// <each listed name>:<value>      (in the listed order)
/// ```
///
/// Values are written as they are, between the name's `:` and the line's
/// end. A fixed header that is absent signs as `name:`, as an empty one
/// does: the head's readers give both the same meaning (no caller or app
/// is empty; an absent chain is an empty one). No line can hold a `\n`:
/// methods, paths and header values cannot, and the stamp is checked.
///
/// Refused: a stamp that fails [`Stamp::check`], a listed name absent from
/// the head, a listed or fixed name present more than once, a value that
/// is not visible ASCII. A signer never signs an ambiguous head.
pub fn canonical(
    method: &Method,
    path_and_query: &PathAndQuery,
    body_sha256: &[u8; 32],
    stamp: &Stamp,
    head: &HeaderMap,
) -> Result<String, SignatureError> {
    stamp.check()?;
    let mut bytes = String::with_capacity(512);
    for line in [VERSION, method.as_str(), path_and_query.as_str(), &hex(body_sha256), &stamp.node] {
        bytes.push_str(line);
        bytes.push('\n');
    }
    bytes.push_str(&stamp.unix_ms.to_string());
    bytes.push('\n');
    bytes.push_str(&stamp.nonce);
    for name in FIXED {
        push_header(&mut bytes, name, one(head, name)?.unwrap_or(""));
    }
    for name in &stamp.names {
        let value = one(head, name)?.ok_or_else(|| SignatureError::Missing(name.clone()))?;
        push_header(&mut bytes, name, value);
    }
    Ok(bytes)
}

/// Whether the signature covers every header of the range in `head`: each
/// is fixed, listed in `names`, or the signature itself. A receiver
/// refuses a head carrying one it would read unsigned (such as an upgrade
/// mark added to a signed call).
pub fn check_covered(head: &HeaderMap, names: &[String]) -> Result<(), SignatureError> {
    for name in head.keys().map(|n| n.as_str()) {
        let covered = name == INTERNAL || FIXED.contains(&name) || names.iter().any(|n| n == name);
        if is_reserved(name) && !covered {
            return Err(SignatureError::Unsigned(name.to_owned()));
        }
    }
    Ok(())
}

/// Whether a signature made at `signed_ms` is accepted at `now_ms`: within
/// [`SKEW`] either way, the edges included.
pub fn within_window(signed_ms: u64, now_ms: u64) -> bool {
    signed_ms.abs_diff(now_ms) <= millis(SKEW)
}

/// Whether `s` is a nonce: 16–64 of `A-Z a-z 0-9 - _`.
pub fn is_nonce(s: &str) -> bool {
    (NONCE_MIN..=NONCE_MAX).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `name` may be listed: a lowercase name of the range, neither
/// fixed nor the signature's own.
pub fn check_listable(name: &str) -> Result<(), SignatureError> {
    let suffix = name.strip_prefix(PREFIX).ok_or(SignatureError::NameOutsideRange)?;
    let well_formed = name.len() <= NAME_MAX
        && suffix.starts_with(|c: char| c.is_ascii_lowercase())
        && suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !well_formed {
        return Err(SignatureError::NameOutsideRange);
    }
    if let Some(fixed) = FIXED.iter().find(|f| **f == name) {
        return Err(SignatureError::NameFixed(fixed));
    }
    if name == INTERNAL {
        return Err(SignatureError::NameInternal);
    }
    Ok(())
}

fn check_names<'n>(names: impl ExactSizeIterator<Item = &'n str> + Clone) -> Result<(), SignatureError> {
    if names.len() > NAMES_MAX {
        return Err(SignatureError::TooManyNames);
    }
    for (i, name) in names.clone().enumerate() {
        check_listable(name)?;
        if names.clone().take(i).any(|earlier| earlier == name) {
            return Err(SignatureError::NameRepeated(name.to_owned()));
        }
    }
    Ok(())
}

fn push_header(bytes: &mut String, name: &str, value: &str) {
    bytes.push('\n');
    bytes.push_str(name);
    bytes.push(':');
    bytes.push_str(value);
}

/// The one value of `name` in `head`, if present.
fn one<'h>(head: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, SignatureError> {
    let mut values = head.get_all(name).iter();
    let Some(first) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(SignatureError::Repeated(name.to_owned()));
    }
    first.to_str().map(Some).map_err(|_| SignatureError::NotText(name.to_owned()))
}

/// Decimal digits without a sign or leading zeros, within `u64`.
fn parse_ms(s: &str) -> Option<u64> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]).map(char::from).collect()
}

/// 64 lowercase hex digits into 32 bytes.
fn unhex(s: &str) -> Option<[u8; 32]> {
    let digit = |b: u8| HEX.iter().position(|h| *h == b).and_then(|d| u8::try_from(d).ok());
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

const fn millis(d: Duration) -> u64 {
    d.as_secs() * 1000 + d.subsec_millis() as u64
}

/// The record of spent `(node, nonce)` pairs: a pair is accepted once,
/// and refused while it is remembered ([`REMEMBER`] from its spending,
/// longer than a signature stays within the window, so a replay is
/// refused here or by [`within_window`]). Sans-IO: the time is passed in.
///
/// At most [`SPENT_MAX`] pairs are remembered. When full, new pairs are
/// refused (fail closed) rather than unexpired ones forgotten: forgetting
/// one would let its signature be replayed, and a full record means the
/// node is signed at more than it can check anyway.
///
/// Expired pairs are forgotten as new ones are spent, oldest first, from
/// a queue in the order of their expiry. A clock that steps back does not
/// disorder it: a pair is kept at least as long as the one spent before
/// it. A clock that jumps forward forgets early, as it widens the window.
#[derive(Debug)]
pub struct Spent {
    /// Each remembered pair with the time it is forgotten after, in that
    /// time's order.
    by_expiry: VecDeque<(u64, Arc<str>)>,
    /// The same pairs, `<node> <nonce>` (neither holds a space).
    pairs: HashSet<Arc<str>>,
    bound: usize,
}

impl Default for Spent {
    fn default() -> Self {
        Self::new()
    }
}

impl Spent {
    /// An empty record of up to [`SPENT_MAX`] pairs.
    pub fn new() -> Self {
        Self::with_bound(SPENT_MAX)
    }

    /// An empty record of up to `bound` pairs.
    pub fn with_bound(bound: usize) -> Self {
        Self { by_expiry: VecDeque::new(), pairs: HashSet::new(), bound }
    }

    /// Spends `(node, nonce)` at `now_ms`: `true` the first time, `false`
    /// when the pair is remembered (a replay), when the record is full, or
    /// when either is not as a signature writes it.
    pub fn spend(&mut self, node: &str, nonce: &str, now_ms: u64) -> bool {
        if !is_node_id(node) || !is_nonce(nonce) {
            return false;
        }
        self.forget_expired(now_ms);
        let pair: Arc<str> = format!("{node} {nonce}").into();
        if self.pairs.contains(&pair) || self.pairs.len() >= self.bound {
            return false;
        }
        let latest = self.by_expiry.back().map_or(0, |(expires, _)| *expires);
        let expires = now_ms.saturating_add(millis(REMEMBER)).max(latest);
        self.by_expiry.push_back((expires, pair.clone()));
        self.pairs.insert(pair);
        true
    }

    /// Pairs remembered, expired ones not forgotten yet included.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Whether a new pair would be refused at `now_ms` for want of room.
    pub fn is_full(&mut self, now_ms: u64) -> bool {
        self.forget_expired(now_ms);
        self.pairs.len() >= self.bound
    }

    /// Forgets every pair whose time has passed (`expires < now`).
    fn forget_expired(&mut self, now_ms: u64) {
        while let Some((expires, _)) = self.by_expiry.front()
            && *expires < now_ms
        {
            if let Some((_, pair)) = self.by_expiry.pop_front() {
                self.pairs.remove(&pair);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderName, HeaderValue};

    use super::*;
    use crate::head::{HANDOFF_CLASS, HANDOFF_NAME, HANDOFF_PATH, NAMES, TRACEPARENT};

    const NODE: &str = "node-a";
    const NONCE: &str = "AbCdEfGhIjKlMnOp_-0123";
    const T: u64 = 1_700_000_000_000;
    const MAC: [u8; 32] = [0xab; 32];
    const MAC_HEX: &str = "abababababababababababababababababababababababababababababababab";

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    fn stamp(list: &[&str]) -> Stamp {
        Stamp { node: NODE.to_owned(), unix_ms: T, nonce: NONCE.to_owned(), names: names(list) }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(HeaderName::from_bytes(n.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    /// A call hop's head from an inside caller.
    fn call_head() -> HeaderMap {
        headers(&[
            (APP, "acme/shop"),
            (TARGET, "cart/alice%2F1"),
            (DEADLINE, "29000"),
            (CALLER, "acme/checkout/bob"),
            (CHAIN, "checkout/bob"),
            (TRACEPARENT, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ])
    }

    fn post() -> (Method, PathAndQuery) {
        (Method::POST, PathAndQuery::from_static("/actor/cart/alice%2F1/add?n=2"))
    }

    fn sign(head: &HeaderMap, list: &[&str]) -> Result<String, SignatureError> {
        let (method, path) = post();
        canonical(&method, &path, &[0x11; 32], &stamp(list), head)
    }

    const CALL_CANONICAL: &str = "v4\nPOST\n/actor/cart/alice%2F1/add?n=2\n\
        1111111111111111111111111111111111111111111111111111111111111111\n\
        node-a\n1700000000000\nAbCdEfGhIjKlMnOp_-0123\n\
        x-wasmkeep-caller:acme/checkout/bob\nx-wasmkeep-chain:checkout/bob\nx-wasmkeep-app:acme/shop\n\
        x-wasmkeep-target:cart/alice%2F1\nx-wasmkeep-deadline:29000";

    // ---- Constants ----

    #[test]
    fn the_constants_are_the_designs() {
        assert_eq!(VERSION, "v4");
        assert_eq!(SKEW, Duration::from_secs(30));
        assert_eq!(FIXED, ["x-wasmkeep-caller", "x-wasmkeep-chain", "x-wasmkeep-app"]);
        assert_eq!(CALL_NAMES, ["x-wasmkeep-target", "x-wasmkeep-deadline"]);
        assert_eq!(RELAY_NAMES, ["x-wasmkeep-target", "x-wasmkeep-deadline", "x-wasmkeep-upgrade"]);
        assert_eq!(hex(&EMPTY_BODY_SHA256), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert!(REMEMBER > 2 * SKEW, "a pair is remembered as long as its signature can be replayed");
        assert_eq!(millis(REMEMBER), 70_000);
        assert_eq!(SPENT_MAX, 1_000_000);
        assert!(NAMES.len() <= NAMES_MAX);
        // Every name of the range is at most NAME_MAX long, and every one
        // a hop may list is listable.
        for name in NAMES {
            assert!(name.len() <= NAME_MAX, "{name}");
        }
        for name in RELAY_NAMES.into_iter().chain([HANDOFF_CLASS, HANDOFF_NAME, HANDOFF_PATH]) {
            assert_eq!(check_listable(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn millis_counts_whole_milliseconds() {
        assert_eq!(millis(SKEW), 30_000);
        assert_eq!(millis(Duration::from_micros(1_999)), 1);
        assert_eq!(millis(Duration::ZERO), 0);
    }

    // ---- The value ----

    #[test]
    fn a_signature_is_written_as_six_fields() {
        let signed = Signed { stamp: stamp(&CALL_NAMES), mac: MAC };
        assert_eq!(
            signed.format(),
            format!("v4 node-a 1700000000000 {NONCE} x-wasmkeep-target,x-wasmkeep-deadline {MAC_HEX}")
        );
        let none = Signed { stamp: stamp(&[]), mac: [0; 32] };
        assert_eq!(none.format(), format!("v4 node-a 1700000000000 {NONCE} - {}", "0".repeat(64)));
    }

    #[test]
    fn a_signature_reads_back_what_was_written() {
        let mut mac = [0; 32];
        for (i, b) in mac.iter_mut().enumerate() {
            *b = u8::try_from(i * 8 + 1).unwrap();
        }
        for list in [&[][..], &CALL_NAMES[..], &RELAY_NAMES[..], &[UPGRADE, TARGET][..], &["x-wasmkeep-future-2"][..]] {
            let signed = Signed { stamp: stamp(list), mac };
            assert_eq!(Signed::parse(&signed.format()), Ok(signed.clone()), "{list:?}");
        }
        for unix_ms in [0, 1, 10, u64::MAX] {
            let signed = Signed { stamp: Stamp { unix_ms, ..stamp(&CALL_NAMES) }, mac };
            assert_eq!(Signed::parse(&signed.format()), Ok(signed));
        }
        let edges = Signed {
            stamp: Stamp {
                node: "z".repeat(63),
                unix_ms: T,
                nonce: "-".repeat(NONCE_MAX),
                names: (0..NAMES_MAX).map(|i| format!("x-wasmkeep-n{i}")).collect(),
            },
            mac: [0xff; 32],
        };
        assert_eq!(Signed::parse(&edges.format()), Ok(edges));
    }

    #[test]
    fn the_value_is_six_fields_separated_by_single_spaces() {
        let good = format!("v4 {NODE} {T} {NONCE} - {MAC_HEX}");
        assert!(Signed::parse(&good).is_ok());
        let cases = [
            (String::new(), 1),
            ("v4".to_owned(), 1),
            (format!("v4 {NODE} {T} {NONCE} -"), 5),
            (format!("{good} extra"), 7),
            (format!("{good} "), 7),
            (format!(" {good}"), 7),
            (good.replacen(' ', "  ", 1), 7),
            (format!("{good} a b c d"), 10),
            (good.replace(' ', "\t"), 1),
            (good.replace(' ', ""), 1),
        ];
        for (value, fields) in cases {
            assert_eq!(Signed::parse(&value), Err(SignatureError::Fields(fields)), "{value:?}");
        }
    }

    /// The good value with field `i` (0-based) replaced.
    fn with_field(i: usize, field: &str) -> String {
        let names = CALL_NAMES.join(",");
        let mut fields = ["v4", NODE, "1700000000000", NONCE, &names, MAC_HEX];
        fields[i] = field;
        fields.join(" ")
    }

    #[test]
    fn every_bad_field_is_named() {
        use SignatureError::*;
        let long_node = "a".repeat(64);
        let short_nonce = "a".repeat(NONCE_MIN - 1);
        let long_nonce = "a".repeat(NONCE_MAX + 1);
        let cases: &[(usize, &str, SignatureError)] = &[
            (0, "v3", Version),
            (0, "V4", Version),
            (0, "v4.1", Version),
            (0, "v44", Version),
            (0, "", Version),
            (1, "", Node),
            (1, "Node-a", Node),
            (1, "1node", Node),
            (1, "-node", Node),
            (1, "_node", Node),
            (1, "node.a", Node),
            (1, "nodé", Node),
            (1, &long_node, Node),
            (2, "", Time),
            (2, "-1", Time),
            (2, "+1", Time),
            (2, "01", Time),
            (2, "00", Time),
            (2, "1.5", Time),
            (2, "1e3", Time),
            (2, "0x10", Time),
            (2, "18446744073709551616", Time),
            (2, "99999999999999999999", Time),
            (3, "", Nonce),
            (3, &short_nonce, Nonce),
            (3, &long_nonce, Nonce),
            (3, "AbCdEfGhIjKlMnOp+/", Nonce),
            (3, "AbCdEfGhIjKlMnOp==", Nonce),
            (3, "AbCdEfGhIjKlMnOp.1", Nonce),
            (3, "AbCdEfGhIjKlMnOpé", Nonce),
            (4, "", NameOutsideRange),
            (4, "--", NameOutsideRange),
            (4, "-,x-wasmkeep-target", NameOutsideRange),
            (4, "x-wasmkeep-target,", NameOutsideRange),
            (4, ",x-wasmkeep-target", NameOutsideRange),
            (4, "x-wasmkeep-target,,x-wasmkeep-deadline", NameOutsideRange),
            (4, "X-Wasmkeep-Target", NameOutsideRange),
            (4, "x-wasmkeep-Target", NameOutsideRange),
            (4, "content-type", NameOutsideRange),
            (4, "traceparent", NameOutsideRange),
            (4, "x-wasmkeep-", NameOutsideRange),
            (4, "x-wasmkeep-1", NameOutsideRange),
            (4, "x-wasmkeep--target", NameOutsideRange),
            (4, "x-wasmkeep-tar_get", NameOutsideRange),
            (4, "x-wasmkeep-tar:get", NameOutsideRange),
            (4, "x-wasmkeep-target;x-wasmkeep-deadline", NameOutsideRange),
            (4, CALLER, NameFixed(CALLER)),
            (4, CHAIN, NameFixed(CHAIN)),
            (4, APP, NameFixed(APP)),
            (4, "x-wasmkeep-target,x-wasmkeep-app", NameFixed(APP)),
            (4, INTERNAL, NameInternal),
            (4, "x-wasmkeep-target,x-wasmkeep-target", NameRepeated(TARGET.to_owned())),
            (4, "x-wasmkeep-target,x-wasmkeep-deadline,x-wasmkeep-target", NameRepeated(TARGET.to_owned())),
            (5, "", Mac),
            (5, &MAC_HEX[1..], Mac),
            (5, "abababababababababababababababababababababababababababababababab0", Mac),
            (5, "ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB", Mac),
            (5, "abababababababababababababababababababababababababababababababAb", Mac),
            (5, "gbababababababababababababababababababababababababababababababab", Mac),
            (5, "+bababababababababababababababababababababababababababababababab", Mac),
            (5, "abababababababababababababababababababababababababababababababé", Mac),
        ];
        for (i, field, error) in cases {
            assert_eq!(Signed::parse(&with_field(*i, field)).as_ref().err(), Some(error), "field {i}: {field:?}");
        }
    }

    #[test]
    fn the_first_bad_field_is_the_one_named() {
        let value = format!("v3 Node {T} short - x");
        assert_eq!(Signed::parse(&value), Err(SignatureError::Version));
        let value = format!("v4 {NODE} 01 short - x");
        assert_eq!(Signed::parse(&value), Err(SignatureError::Time));
        let value = format!("v4 {NODE} {T} {NONCE} x-wasmkeep-app x");
        assert_eq!(Signed::parse(&value), Err(SignatureError::NameFixed(APP)));
    }

    #[test]
    fn at_most_sixteen_names_are_listed() {
        let sixteen: Vec<String> = (0..NAMES_MAX).map(|i| format!("x-wasmkeep-n{i}")).collect();
        assert!(Signed::parse(&with_field(4, &sixteen.join(","))).is_ok());
        let seventeen: Vec<String> = (0..=NAMES_MAX).map(|i| format!("x-wasmkeep-n{i}")).collect();
        assert_eq!(Signed::parse(&with_field(4, &seventeen.join(","))), Err(SignatureError::TooManyNames));
        // Counted before any is read.
        let repeated = vec![TARGET; NAMES_MAX + 1].join(",");
        assert_eq!(Signed::parse(&with_field(4, &repeated)), Err(SignatureError::TooManyNames));
    }

    #[test]
    fn a_listed_name_is_at_most_sixty_four_bytes() {
        let longest = format!("{PREFIX}{}", "a".repeat(NAME_MAX - PREFIX.len()));
        assert_eq!(check_listable(&longest), Ok(()));
        assert_eq!(check_listable(&format!("{longest}a")), Err(SignatureError::NameOutsideRange));
        assert_eq!(check_listable("x-wasmkeep-a-1-"), Ok(()));
    }

    #[test]
    fn the_times_edges_read() {
        assert_eq!(Signed::parse(&with_field(2, "0")).unwrap().stamp.unix_ms, 0);
        assert_eq!(Signed::parse(&with_field(2, "18446744073709551615")).unwrap().stamp.unix_ms, u64::MAX);
        assert_eq!(Signed::parse(&with_field(3, &"Z".repeat(NONCE_MIN))).unwrap().stamp.nonce, "Z".repeat(16));
    }

    #[test]
    fn a_stamp_is_checked_as_its_value_is_read() {
        assert_eq!(stamp(&CALL_NAMES).check(), Ok(()));
        let bad = [
            (Stamp { node: "N".to_owned(), ..stamp(&[]) }, SignatureError::Node),
            (Stamp { nonce: "short".to_owned(), ..stamp(&[]) }, SignatureError::Nonce),
            (stamp(&[CHAIN]), SignatureError::NameFixed(CHAIN)),
            (stamp(&[INTERNAL]), SignatureError::NameInternal),
            (stamp(&[TARGET, TARGET]), SignatureError::NameRepeated(TARGET.to_owned())),
            (stamp(&["x-wasmkeep-a b"]), SignatureError::NameOutsideRange),
            (stamp(&["x-wasmkeep-a\nx-wasmkeep-app:forged"]), SignatureError::NameOutsideRange),
        ];
        for (stamp, error) in bad {
            assert_eq!(stamp.check(), Err(error.clone()), "{stamp:?}");
            assert!(Signed::parse(&Signed { stamp, mac: MAC }.format()).is_err());
        }
    }

    #[test]
    fn the_errors_are_one_line() {
        let errors = [
            SignatureError::Fields(7),
            SignatureError::Version,
            SignatureError::Node,
            SignatureError::Time,
            SignatureError::Nonce,
            SignatureError::NameOutsideRange,
            SignatureError::NameFixed(APP),
            SignatureError::NameInternal,
            SignatureError::NameRepeated(TARGET.to_owned()),
            SignatureError::TooManyNames,
            SignatureError::Mac,
            SignatureError::Missing(TARGET.to_owned()),
            SignatureError::Repeated(APP.to_owned()),
            SignatureError::NotText(CALLER.to_owned()),
            SignatureError::Unsigned(UPGRADE.to_owned()),
        ];
        for e in errors {
            let text = e.to_string();
            assert!(!text.is_empty() && !text.contains('\n'), "{e:?}");
        }
        assert_eq!(SignatureError::Version.to_string(), "the signature's version is not v4");
        assert_eq!(
            SignatureError::NameInternal.to_string(),
            "x-wasmkeep-internal carries the signature and is never listed"
        );
    }

    // ---- The canonical bytes ----

    #[test]
    fn a_call_hop_signs_these_bytes() {
        assert_eq!(sign(&call_head(), &CALL_NAMES).unwrap(), CALL_CANONICAL);
    }

    #[test]
    fn an_absent_fixed_header_signs_empty() {
        // An outside caller: no caller, no chain.
        let head = headers(&[(APP, "acme/shop"), (TARGET, "cart/alice"), (DEADLINE, "30000")]);
        let bytes = sign(&head, &CALL_NAMES).unwrap();
        assert!(
            bytes.ends_with(
                "\nx-wasmkeep-caller:\nx-wasmkeep-chain:\nx-wasmkeep-app:acme/shop\n\
                 x-wasmkeep-target:cart/alice\nx-wasmkeep-deadline:30000"
            ),
            "{bytes}"
        );
        // Nothing at all: every fixed line is there, empty.
        let bytes = sign(&HeaderMap::new(), &[]).unwrap();
        assert!(bytes.ends_with(&format!("{NONCE}\nx-wasmkeep-caller:\nx-wasmkeep-chain:\nx-wasmkeep-app:")));
        assert_eq!(bytes.lines().count(), 10);
        // An empty chain signs as an absent one (the head reads both alike).
        let mut empty_chain = call_head();
        empty_chain.insert(CHAIN, HeaderValue::from_static(""));
        let mut no_chain = call_head();
        no_chain.remove(CHAIN);
        assert_eq!(sign(&empty_chain, &CALL_NAMES), sign(&no_chain, &CALL_NAMES));
        assert_ne!(sign(&call_head(), &CALL_NAMES), sign(&no_chain, &CALL_NAMES));
    }

    #[test]
    fn a_handoff_relay_signs_the_upgrade_mark_after_a_calls_names() {
        let mut head = call_head();
        head.insert(UPGRADE, HeaderValue::from_static("websocket"));
        let (method, path) = (Method::GET, PathAndQuery::from_static("/chat/room-1"));
        let bytes = canonical(&method, &path, &EMPTY_BODY_SHA256, &stamp(&RELAY_NAMES), &head).unwrap();
        let lines: Vec<&str> = bytes.split('\n').collect();
        assert_eq!(lines.len(), 13);
        assert_eq!(lines[..4], ["v4", "GET", "/chat/room-1", hex(&EMPTY_BODY_SHA256).as_str()]);
        assert_eq!(
            lines[10..],
            ["x-wasmkeep-target:cart/alice%2F1", "x-wasmkeep-deadline:29000", "x-wasmkeep-upgrade:websocket"]
        );
    }

    #[test]
    fn a_call_without_the_mark_signs_as_before() {
        // The upgrade mark in the head, unlisted, changes nothing signed
        // (and the receiver refuses it as unsigned).
        let mut marked = call_head();
        marked.insert(UPGRADE, HeaderValue::from_static("websocket"));
        assert_eq!(sign(&marked, &CALL_NAMES).unwrap(), CALL_CANONICAL);
        assert_eq!(check_covered(&marked, &names(&CALL_NAMES)), Err(SignatureError::Unsigned(UPGRADE.to_owned())));
        // Listed, it adds exactly one line after the call's.
        let relay = sign(&marked, &RELAY_NAMES).unwrap();
        assert_eq!(relay, format!("{CALL_CANONICAL}\nx-wasmkeep-upgrade:websocket"));
        // And a relay without the mark in its head cannot be signed.
        assert_eq!(sign(&call_head(), &RELAY_NAMES), Err(SignatureError::Missing(UPGRADE.to_owned())));
    }

    #[test]
    fn names_sign_in_the_order_listed() {
        let bytes = sign(&call_head(), &[DEADLINE, TARGET]).unwrap();
        assert!(bytes.ends_with("\nx-wasmkeep-deadline:29000\nx-wasmkeep-target:cart/alice%2F1"), "{bytes}");
        assert_ne!(bytes, CALL_CANONICAL);
        // Listing fewer names signs fewer lines.
        assert_eq!(sign(&call_head(), &[TARGET]).unwrap().lines().count(), 11);
    }

    #[test]
    fn every_input_changes_the_bytes() {
        let (method, path) = post();
        let head = call_head();
        let base = canonical(&method, &path, &[0x11; 32], &stamp(&CALL_NAMES), &head).unwrap();
        let mut variants = vec![
            canonical(&Method::PUT, &path, &[0x11; 32], &stamp(&CALL_NAMES), &head),
            canonical(
                &method,
                &PathAndQuery::from_static("/actor/cart/alice%2F1/add?n=3"),
                &[0x11; 32],
                &stamp(&CALL_NAMES),
                &head,
            ),
            canonical(
                &method,
                &PathAndQuery::from_static("/actor/cart/alice%2F1/add"),
                &[0x11; 32],
                &stamp(&CALL_NAMES),
                &head,
            ),
            canonical(&method, &path, &[0x12; 32], &stamp(&CALL_NAMES), &head),
            canonical(&method, &path, &[0x11; 32], &Stamp { node: "node-b".to_owned(), ..stamp(&CALL_NAMES) }, &head),
            canonical(&method, &path, &[0x11; 32], &Stamp { unix_ms: T + 1, ..stamp(&CALL_NAMES) }, &head),
            canonical(&method, &path, &[0x11; 32], &Stamp { nonce: format!("{NONCE}x"), ..stamp(&CALL_NAMES) }, &head),
        ];
        for (name, value) in
            [(CALLER, "acme/checkout/eve"), (CHAIN, ""), (APP, "acme/other"), (TARGET, "cart/eve"), (DEADLINE, "29001")]
        {
            let mut changed = head.clone();
            changed.insert(name, HeaderValue::from_static(value));
            variants.push(canonical(&method, &path, &[0x11; 32], &stamp(&CALL_NAMES), &changed));
        }
        for (i, variant) in variants.into_iter().enumerate() {
            assert_ne!(variant.unwrap(), base, "variant {i}");
        }
        // What is outside the signature does not change it.
        let mut outside = head.clone();
        outside
            .insert(TRACEPARENT, HeaderValue::from_static("00-11111111111111111111111111111111-2222222222222222-01"));
        outside.insert("content-type", HeaderValue::from_static("application/json"));
        assert_eq!(canonical(&method, &path, &[0x11; 32], &stamp(&CALL_NAMES), &outside).unwrap(), base);
    }

    #[test]
    fn an_ambiguous_head_is_not_signed() {
        let mut head = call_head();
        head.append(TARGET, HeaderValue::from_static("cart/eve"));
        assert_eq!(sign(&head, &CALL_NAMES), Err(SignatureError::Repeated(TARGET.to_owned())));
        for fixed in FIXED {
            let mut head = call_head();
            head.append(fixed, HeaderValue::from_static("acme/x"));
            assert_eq!(sign(&head, &CALL_NAMES), Err(SignatureError::Repeated(fixed.to_owned())), "{fixed}");
        }
        // Two empty values are refused too, though one alone signs as absent.
        let mut head = call_head();
        head.remove(CHAIN);
        head.append(CHAIN, HeaderValue::from_static(""));
        head.append(CHAIN, HeaderValue::from_static(""));
        assert_eq!(sign(&head, &CALL_NAMES), Err(SignatureError::Repeated(CHAIN.to_owned())));
        // A listed name missing.
        let mut head = call_head();
        head.remove(DEADLINE);
        assert_eq!(sign(&head, &CALL_NAMES), Err(SignatureError::Missing(DEADLINE.to_owned())));
    }

    #[test]
    fn values_must_be_visible_ascii() {
        let opaque = HeaderValue::from_bytes(b"acme/caf\xc3\xa9").unwrap();
        for name in [CALLER, CHAIN, APP, TARGET] {
            let mut head = call_head();
            head.insert(name, opaque.clone());
            assert_eq!(sign(&head, &CALL_NAMES), Err(SignatureError::NotText(name.to_owned())), "{name}");
        }
        // A value with inner spaces or a tab is text, signed as it is.
        let mut head = call_head();
        head.insert(CHAIN, HeaderValue::from_static("a b\tc"));
        assert!(sign(&head, &CALL_NAMES).unwrap().contains("\nx-wasmkeep-chain:a b\tc\n"));
    }

    #[test]
    fn a_bad_stamp_is_not_signed() {
        let (method, path) = post();
        let bad = Stamp { node: "Node A".to_owned(), ..stamp(&CALL_NAMES) };
        assert_eq!(canonical(&method, &path, &[0; 32], &bad, &call_head()), Err(SignatureError::Node));
        let injected = stamp(&["x-wasmkeep-target\nx-wasmkeep-app:acme/forged"]);
        assert_eq!(canonical(&method, &path, &[0; 32], &injected, &call_head()), Err(SignatureError::NameOutsideRange));
        let fixed = stamp(&[TARGET, APP]);
        assert_eq!(canonical(&method, &path, &[0; 32], &fixed, &call_head()), Err(SignatureError::NameFixed(APP)));
    }

    #[test]
    fn what_is_read_is_what_is_signed() {
        // A receiver reads the stamp from the value and signs the same bytes.
        let signed = Signed { stamp: stamp(&CALL_NAMES), mac: MAC };
        let read = Signed::parse(&signed.format()).unwrap();
        assert_eq!(sign(&call_head(), &CALL_NAMES), {
            let (method, path) = post();
            canonical(&method, &path, &[0x11; 32], &read.stamp, &call_head())
        });
    }

    // ---- Coverage ----

    #[test]
    fn every_header_of_the_range_in_the_head_is_signed() {
        let listed = names(&CALL_NAMES);
        let mut head = call_head();
        head.insert(INTERNAL, HeaderValue::from_static("v4 x"));
        assert_eq!(check_covered(&head, &listed), Ok(()));
        assert_eq!(check_covered(&HeaderMap::new(), &[]), Ok(()));
        for unsigned in [UPGRADE, HANDOFF_CLASS, "x-wasmkeep-future"] {
            let mut head = call_head();
            head.insert(HeaderName::from_static(unsigned), HeaderValue::from_static("x"));
            assert_eq!(check_covered(&head, &listed), Err(SignatureError::Unsigned(unsigned.to_owned())), "{unsigned}");
        }
        // Unlisted target: its header would be read unsigned.
        assert_eq!(check_covered(&call_head(), &names(&[DEADLINE])), Err(SignatureError::Unsigned(TARGET.to_owned())));
        // Headers outside the range are not the signature's.
        assert_eq!(check_covered(&headers(&[("content-type", "text/plain"), (APP, "a/b")]), &[]), Ok(()));
    }

    // ---- The window ----

    #[test]
    fn a_signature_is_accepted_within_thirty_seconds_either_way() {
        assert!(within_window(T, T));
        assert!(within_window(T - 30_000, T));
        assert!(within_window(T + 30_000, T));
        assert!(!within_window(T - 30_001, T));
        assert!(!within_window(T + 30_001, T));
        assert!(within_window(T - 1, T) && within_window(T + 1, T));
        // Near the ends of time nothing overflows.
        assert!(within_window(0, 30_000));
        assert!(!within_window(0, 30_001));
        assert!(within_window(30_000, 0));
        assert!(!within_window(30_001, 0));
        assert!(within_window(u64::MAX, u64::MAX - 30_000));
        assert!(!within_window(u64::MAX, u64::MAX - 30_001));
        assert!(!within_window(0, u64::MAX));
        assert!(!within_window(u64::MAX, 0));
    }

    // ---- Spent nonces ----

    fn nonce(i: usize) -> String {
        format!("nonce-{i:016}")
    }

    #[test]
    fn a_pair_is_spent_once() {
        let mut spent = Spent::new();
        assert!(spent.is_empty());
        assert!(spent.spend(NODE, NONCE, T));
        assert!(!spent.spend(NODE, NONCE, T), "a replay at once");
        assert!(!spent.spend(NODE, NONCE, T + 29_999), "a replay later in the window");
        assert!(spent.spend("node-b", NONCE, T), "another node's nonce");
        assert!(spent.spend(NODE, &nonce(1), T), "another nonce of the node");
        assert_eq!(spent.len(), 3);
    }

    #[test]
    fn a_pair_is_remembered_longer_than_the_window() {
        let remember = millis(REMEMBER);
        let mut spent = Spent::new();
        assert!(spent.spend(NODE, NONCE, T));
        assert!(!spent.spend(NODE, NONCE, T + remember), "remembered to the edge");
        assert!(spent.spend(NODE, NONCE, T + remember + 1), "forgotten past it");
        // A signature made as late as the window allows at the first
        // spending (its signer's clock ahead) leaves the window before the
        // pair is forgotten.
        let signed = T + millis(SKEW);
        assert!(within_window(signed, T));
        assert!(within_window(signed, T + 2 * millis(SKEW)));
        assert!(!within_window(signed, T + 2 * millis(SKEW) + 1));
        assert!(T + 2 * millis(SKEW) < T + remember);
    }

    #[test]
    fn pairs_are_forgotten_oldest_first() {
        let remember = millis(REMEMBER);
        let mut spent = Spent::new();
        assert!(spent.spend(NODE, &nonce(0), T));
        assert!(spent.spend(NODE, &nonce(1), T + 10_000));
        assert!(spent.spend(NODE, &nonce(2), T + 20_000));
        // Past the first's time: only the first is forgotten.
        assert!(!spent.is_full(T + remember + 1));
        assert_eq!(spent.len(), 2);
        assert!(spent.spend(NODE, &nonce(0), T + remember + 1));
        assert!(!spent.spend(NODE, &nonce(1), T + remember + 1));
        assert!(!spent.spend(NODE, &nonce(2), T + remember + 1));
        // Past the second's.
        assert!(spent.spend(NODE, &nonce(1), T + 10_000 + remember + 1));
        assert!(!spent.spend(NODE, &nonce(2), T + 10_000 + remember + 1));
        // Much later, everything spent is forgotten and spendable again.
        assert!(!spent.is_full(T + 1_000_000));
        assert!(spent.is_empty());
    }

    #[test]
    fn a_clock_stepping_back_forgets_nothing_early() {
        let remember = millis(REMEMBER);
        let mut spent = Spent::new();
        assert!(spent.spend(NODE, &nonce(0), T + 50_000));
        assert!(spent.spend(NODE, &nonce(1), T), "spent as the clock stepped back");
        // Past the second's own time but not the first's: both remembered.
        assert!(!spent.spend(NODE, &nonce(1), T + remember + 1));
        assert!(!spent.spend(NODE, &nonce(0), T + remember + 1));
        assert_eq!(spent.len(), 2);
        // Past the first's: both forgotten.
        assert!(spent.spend(NODE, &nonce(1), T + 50_000 + remember + 1));
        assert!(spent.spend(NODE, &nonce(0), T + 50_000 + remember + 1));
    }

    #[test]
    fn a_full_record_refuses_new_pairs() {
        let remember = millis(REMEMBER);
        let mut spent = Spent::with_bound(3);
        for i in 0..3 {
            assert!(spent.spend(NODE, &nonce(i), T + u64::try_from(i).unwrap()));
        }
        assert!(spent.is_full(T + 3));
        assert!(!spent.spend(NODE, &nonce(3), T + 3), "fail closed");
        assert!(!spent.spend(NODE, &nonce(0), T + 3), "a replay is still one");
        assert_eq!(spent.len(), 3);
        // The oldest expires: room for exactly one.
        assert!(!spent.is_full(T + remember + 1));
        assert!(spent.spend(NODE, &nonce(3), T + remember + 1));
        assert!(!spent.spend(NODE, &nonce(4), T + remember + 1));
        assert!(spent.spend(NODE, &nonce(4), T + remember + 2));
        // A bound of zero refuses everything.
        assert!(!Spent::with_bound(0).spend(NODE, NONCE, T));
    }

    #[test]
    fn the_default_record_holds_a_million_pairs() {
        assert_eq!(Spent::new().bound, SPENT_MAX);
        assert_eq!(Spent::default().bound, SPENT_MAX);
    }

    #[test]
    fn only_pairs_a_signature_can_hold_are_spent() {
        let mut spent = Spent::new();
        assert!(!spent.spend("", NONCE, T));
        assert!(!spent.spend("node a", "b".repeat(16).as_str(), T));
        assert!(!spent.spend(NODE, "short", T));
        assert!(!spent.spend(NODE, &"n".repeat(NONCE_MAX + 1), T));
        assert!(spent.is_empty());
        // Node and nonce do not run into one another.
        assert!(spent.spend("a", "bcccccccccccccccc", T));
        assert!(spent.spend("ab", "cccccccccccccccc", T));
    }

    #[test]
    fn time_at_the_end_of_u64_does_not_overflow() {
        let mut spent = Spent::new();
        assert!(spent.spend(NODE, NONCE, u64::MAX));
        assert!(!spent.spend(NODE, NONCE, u64::MAX));
        assert!(spent.spend(NODE, &nonce(1), 0));
        assert_eq!(spent.len(), 2);
    }

    // ---- Hex ----

    #[test]
    fn hex_round_trips() {
        let bytes: [u8; 32] = std::array::from_fn(|i| u8::try_from(i * 7).unwrap());
        assert_eq!(unhex(&hex(&bytes)), Some(bytes));
        assert_eq!(hex(&[0x00, 0x0f, 0xf0, 0xff]), "000ff0ff");
        assert_eq!(unhex(&"0".repeat(64)), Some([0; 32]));
        assert_eq!(unhex(&"f".repeat(64)), Some([0xff; 32]));
    }
}
