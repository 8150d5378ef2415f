//! The `x-wasmkeep-` head: the host's header range
//! (docs/spec/actors-and-admission.md §8, docs/spec/calls.md §3), every
//! name of it, a parser and a formatter for each value, the strip rule, and
//! the envelope to and from the head. This is the one file of the node that
//! spells a name of the range; the signed hop between nodes carries exactly
//! this head.
//!
//! Every header of the range a client sends is removed at the edge, and
//! the range is stripped from the answers guests give to clients, so no
//! client and no guest can forge what the host sets in it.
//!
//! The cases in `spec/head-cases.json` are the contract: this module's
//! tests and the SDKs' tests read the same file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::caller::{Caller, Chain, FRONT_CLASS, FRONT_NAME, Origin};
use crate::envelope::{AppRef, Envelope, TraceContext};
use crate::handoff::{HandOff, HandOffError};
pub use crate::header_range::{PREFIX, ValueError, is_reserved};
use crate::names::{Address, AppName, NameError, RawAddress, TenantId, decode, encode_bytes};
pub use crate::names::{format_address, parse_address};

/// Who calls: `<tenant>/<class>/<encoded name>`, or `<tenant>/_front/main`.
pub const CALLER: &str = "x-wasmkeep-caller";
/// The actors waiting on the call, oldest first: `<class>/<encoded name>`,
/// comma separated; empty for none.
pub const CHAIN: &str = "x-wasmkeep-chain";
/// The app the event belongs to: `<tenant>/<app>`.
pub const APP: &str = "x-wasmkeep-app";
/// The actor an event is for, on the hop: `<class>/<encoded name>`.
pub const TARGET: &str = "x-wasmkeep-target";
/// What is left of the caller's deadline, on the hop: whole milliseconds.
pub const DEADLINE: &str = "x-wasmkeep-deadline";
/// The mark on an upgrade the host keeps aside for the front.
pub const UPGRADE: &str = "x-wasmkeep-upgrade";
/// The class that takes a handed-off socket, as written.
pub const HANDOFF_CLASS: &str = "x-wasmkeep-handoff-class";
/// The actor that takes it, its name percent-encoded.
pub const HANDOFF_NAME: &str = "x-wasmkeep-handoff-name";
/// The path and query its `on-websocket-open` sees.
pub const HANDOFF_PATH: &str = "x-wasmkeep-handoff-path";
/// The node's signature over the hop's head (docs/spec/cluster.md §5:
/// `v4 <node> <unix-ms> <nonce> <names> <mac>`, the cluster's to make and
/// check; `<names>` lists `x-wasmkeep-target` and `x-wasmkeep-deadline`).
pub const INTERNAL: &str = "x-wasmkeep-internal";
/// The host's error on a hop's answer: the owner's node answers it, in
/// place of the actor's response, when the event failed there (an
/// [`EventError`](crate::EventError), written and read by
/// [`hop_answer`](crate::hop_answer): `<kind> <args...>`). An actor cannot
/// set it: the range is stripped from actors' answers.
pub const ERROR: &str = "x-wasmkeep-error";
/// The mark of a hop that asks a node for an app's guests' log records
/// (a tail across the cluster): never a call, never a relay. Its filter is
/// in its path; it is signed, the mark among the signed names.
pub const TAIL: &str = "x-wasmkeep-tail";

/// Every name of the range the host sets.
pub const NAMES: [&str; 12] =
    [CALLER, CHAIN, APP, TARGET, DEADLINE, UPGRADE, HANDOFF_CLASS, HANDOFF_NAME, HANDOFF_PATH, INTERNAL, ERROR, TAIL];

/// The upgrade mark's one value.
pub const UPGRADE_WEBSOCKET: &str = "websocket";

/// The W3C trace context, outside the range: a client may start a trace.
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
/// Longest `tracestate` carried (W3C: 32 members of up to 256 bytes are
/// allowed, but 512 bytes is what a carrier must at least pass on).
pub const TRACESTATE_MAX: usize = 512;

/// Most actors a chain read from a head may list: far more than any
/// deadline lets wait on one another; a longer one is a forged head.
pub const CHAIN_MAX: usize = 256;

/// Longest deadline the hop carries: a day, far past every limit.
pub const DEADLINE_MAX: Duration = crate::deadline::FOREVER;

/// Why a head (or one of its values) is not valid. For the node's log and
/// the hop's refusal; never shown to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("{name}: {error}")]
    Name { name: &'static str, error: NameError },
    #[error("{0} is not a whole number of milliseconds up to a day")]
    BadDeadline(&'static str),
    #[error("the app {0} is not on this node")]
    UnknownApp(String),
    #[error("{CHAIN} lists more than {CHAIN_MAX} actors")]
    ChainTooLong,
}

// ---- The range and its strip rule ----

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

// ---- Values ----

/// The `x-wasmkeep-caller` value for a caller of `tenant`.
pub fn format_caller(tenant: &TenantId, caller: &Caller) -> String {
    match caller {
        Caller::Actor(a) => format!("{tenant}/{}", format_address(a)),
        Caller::Front => format!("{tenant}/{FRONT_CLASS}/{FRONT_NAME}"),
    }
}

/// Parses an `x-wasmkeep-caller` value into its tenant and caller.
pub fn parse_caller(value: &str) -> Result<(TenantId, Caller), NameError> {
    let (tenant, rest) = value.split_once('/').ok_or(NameError::NoSlash)?;
    let tenant = TenantId::parse(tenant)?;
    if rest == format!("{FRONT_CLASS}/{FRONT_NAME}") {
        return Ok((tenant, Caller::Front));
    }
    Ok((tenant, Caller::Actor(parse_address(rest)?)))
}

/// The `x-wasmkeep-chain` value.
pub fn format_chain(chain: &Chain) -> String {
    chain.to_string()
}

/// Parses an `x-wasmkeep-chain` value (empty for an empty chain).
pub fn parse_chain(value: &str) -> Result<Chain, NameError> {
    if value.is_empty() {
        return Ok(Chain::new());
    }
    value.split(',').map(parse_address).collect::<Result<Vec<_>, _>>().map(Chain::from)
}

/// The `x-wasmkeep-app` value.
pub fn format_app(tenant: &TenantId, app: &AppName) -> String {
    format!("{tenant}/{app}")
}

pub fn parse_app(value: &str) -> Result<(TenantId, AppName), NameError> {
    let (tenant, app) = value.split_once('/').ok_or(NameError::NoSlash)?;
    Ok((TenantId::parse(tenant)?, AppName::parse(app)?))
}

/// The `x-wasmkeep-target` value: the address as the caller gave it, its
/// name encoded (admission validates it, in its order, at the owner).
pub fn format_target(target: &RawAddress) -> String {
    format!("{}/{}", target.class, encode_bytes(&target.name))
}

pub fn parse_target(value: &str) -> Result<RawAddress, NameError> {
    let (class, name) = value.split_once('/').ok_or(NameError::NoSlash)?;
    Ok(RawAddress { class: class.to_owned(), name: decode(name)? })
}

/// The `x-wasmkeep-deadline` value: what is left at `now`, in whole
/// milliseconds (rounded down: the receiver never waits longer).
pub fn format_deadline(deadline: Instant, now: Instant) -> String {
    deadline.saturating_duration_since(now).min(DEADLINE_MAX).as_millis().to_string()
}

pub fn parse_deadline(value: &str, now: Instant) -> Result<Instant, HeadError> {
    let bad = HeadError::BadDeadline(DEADLINE);
    if value.is_empty() || value.len() > 8 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    let left = Duration::from_millis(value.parse().map_err(|_| bad.clone())?);
    if left > DEADLINE_MAX {
        return Err(bad);
    }
    Ok(now + left)
}

/// Whether `value` is the upgrade mark's.
pub fn is_upgrade_mark(value: &[u8]) -> bool {
    value == UPGRADE_WEBSOCKET.as_bytes()
}

/// A `traceparent` as W3C writes it: `00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
/// neither id all zeros. Anything else starts a new trace.
pub fn is_valid_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    parts.len() == 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && nonzero(parts[1])
        && hex(parts[2], 16)
        && nonzero(parts[2])
        && hex(parts[3], 2)
}

/// The trace context a request brings: kept only when `traceparent` is
/// valid, and `tracestate` only with it, visible ASCII and not too long.
pub fn read_trace(headers: &HeaderMap) -> TraceContext {
    let one = |name: &str| {
        let mut values = headers.get_all(name).iter();
        let first = values.next()?.to_str().ok()?;
        values.next().is_none().then(|| first.to_owned())
    };
    match one(TRACEPARENT).filter(|p| is_valid_traceparent(p)) {
        Some(parent) => {
            TraceContext { state: one(TRACESTATE).filter(|s| s.len() <= TRACESTATE_MAX), parent: Some(parent) }
        }
        None => TraceContext::default(),
    }
}

// ---- The hand-off ----

/// The three headers of a front's hand-off answer.
pub fn format_handoff(actor: &Address, path: &str) -> [(&'static str, String); 3] {
    [(HANDOFF_CLASS, actor.class.to_string()), (HANDOFF_NAME, actor.name.encoded()), (HANDOFF_PATH, path.to_owned())]
}

/// Reads a front's answer headers: `None` when it names no hand-off at
/// all; otherwise the hand-off, or why it is broken. Each of the three
/// headers must appear exactly once.
pub fn read_handoff(headers: &HeaderMap) -> Option<Result<HandOff, HandOffError>> {
    let names = [HANDOFF_CLASS, HANDOFF_NAME, HANDOFF_PATH];
    if names.iter().all(|n| !headers.contains_key(*n)) {
        return None;
    }
    Some(parse_handoff(headers))
}

fn parse_handoff(headers: &HeaderMap) -> Result<HandOff, HandOffError> {
    let class = needed(headers, HANDOFF_CLASS)?;
    let name = needed(headers, HANDOFF_NAME)?;
    let path = needed(headers, HANDOFF_PATH)?;
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

// ---- The envelope and the head ----

/// What an inside caller's request event tells its actor: who calls, who
/// waits, and the app. An outside caller's event carries none of it.
pub fn guest_head(envelope: &Envelope) -> Vec<(String, Vec<u8>)> {
    match &envelope.origin {
        Origin::Outside => Vec::new(),
        Origin::Inside { caller, chain } => vec![
            (CALLER.to_owned(), format_caller(&envelope.app.tenant, caller).into_bytes()),
            (CHAIN.to_owned(), format_chain(chain).into_bytes()),
            (APP.to_owned(), format_app(&envelope.app.tenant, &envelope.app.name).into_bytes()),
        ],
    }
}

/// The head the hop carries for `envelope` at `now`: the app, the target,
/// the deadline left, the origin (no caller for an outside one) and the
/// trace context. The signature (`INTERNAL`) is added over it by the cluster.
pub fn to_head(envelope: &Envelope, now: Instant) -> HeaderMap {
    let mut head = HeaderMap::new();
    let mut put = |name: &'static str, value: String| {
        // Every value formatted here is visible ASCII.
        if let Ok(value) = HeaderValue::try_from(value) {
            head.append(HeaderName::from_static(name), value);
        }
    };
    put(APP, format_app(&envelope.app.tenant, &envelope.app.name));
    put(TARGET, format_target(&envelope.target));
    put(DEADLINE, format_deadline(envelope.deadline, now));
    if let Origin::Inside { caller, chain } = &envelope.origin {
        put(CALLER, format_caller(&envelope.app.tenant, caller));
        put(CHAIN, format_chain(chain));
    }
    if let Some(parent) = &envelope.trace.parent {
        put(TRACEPARENT, parent.clone());
        if let Some(state) = &envelope.trace.state {
            put(TRACESTATE, state.clone());
        }
    }
    head
}

/// The head a relayed socket's open carries (docs/spec/sockets.md §15): the
/// app and the trace context; for the front's hand-off, the front's caller
/// and the upgrade mark too (the cluster signs it, the mark among the
/// names). An outside upgrade carries no caller: its owner reads it as a
/// client's.
pub fn to_relay_head(envelope: &Envelope) -> HeaderMap {
    let mut head = HeaderMap::new();
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::try_from(value) {
            head.append(HeaderName::from_static(name), value);
        }
    };
    put(APP, format_app(&envelope.app.tenant, &envelope.app.name));
    if let Origin::Inside { caller, .. } = &envelope.origin {
        put(CALLER, format_caller(&envelope.app.tenant, caller));
        put(UPGRADE, UPGRADE_WEBSOCKET.to_owned());
    }
    if let Some(parent) = &envelope.trace.parent {
        put(TRACEPARENT, parent.clone());
        if let Some(state) = &envelope.trace.state {
            put(TRACESTATE, state.clone());
        }
    }
    head
}

/// Reads the hop's head at `now`; `apps` finds the app it names. A caller
/// of another tenant than the app's is refused: the head is one tenant's.
/// The deadline is never later than `longest` from now (the receiver's
/// call limit: no caller waits longer, whatever a head says).
pub fn from_head(
    head: &HeaderMap,
    now: Instant,
    longest: Duration,
    apps: impl FnOnce(&TenantId, &AppName) -> Option<Arc<AppRef>>,
) -> Result<Envelope, HeadError> {
    let named = |name: &'static str| move |error| HeadError::Name { name, error };
    let (tenant, app_name) = parse_app(needed(head, APP)?).map_err(named(APP))?;
    let app = apps(&tenant, &app_name).ok_or_else(|| HeadError::UnknownApp(format_app(&tenant, &app_name)))?;
    let target = parse_target(needed(head, TARGET)?).map_err(named(TARGET))?;
    let deadline = parse_deadline(needed(head, DEADLINE)?, now)?.min(now + longest);
    let origin = match one(head, CALLER)? {
        None => Origin::Outside,
        Some(value) => {
            let (caller_tenant, caller) = parse_caller(value).map_err(named(CALLER))?;
            if caller_tenant != tenant {
                return Err(HeadError::Name { name: CALLER, error: NameError::BadTenant });
            }
            let chain = one(head, CHAIN)?.unwrap_or("");
            if chain.split(',').count() > CHAIN_MAX {
                return Err(HeadError::ChainTooLong);
            }
            let chain = parse_chain(chain).map_err(named(CHAIN))?;
            Origin::Inside { caller, chain }
        }
    };
    Ok(Envelope { app, target, origin, deadline, trace: read_trace(head) })
}

/// Who opens a socket relayed from another node (docs/spec/sockets.md §15),
/// and for which app (`<tenant>/<app>` from `x-wasmkeep-app`). `believed`:
/// its signature is valid, spent for the first time, over the empty body.
/// Believed, it is the front's hand-off only when the signed caller is
/// exactly `<tenant>/_front/main` of the app's tenant and the upgrade mark
/// is `websocket`; a believed signature without them is refused. Not
/// believed (none, or invalid), it is an outside upgrade: caller, chain and
/// mark change nothing.
pub fn relayed_opener(head: &HeaderMap, believed: bool) -> Result<(TenantId, AppName, Origin), RelayRefusal> {
    let app = one(head, APP).map_err(|_| RelayRefusal::NoApp)?.ok_or(RelayRefusal::NoApp)?;
    let (tenant, app) = parse_app(app).map_err(|_| RelayRefusal::NoApp)?;
    if !believed {
        return Ok((tenant, app, Origin::Outside));
    }
    let caller = one(head, CALLER).ok().flatten().and_then(|c| parse_caller(c).ok());
    let mark = one(head, UPGRADE).ok().flatten();
    match (caller, mark) {
        (Some((caller_tenant, Caller::Front)), Some(UPGRADE_WEBSOCKET)) if caller_tenant == tenant => {
            Ok((tenant, app, Origin::Inside { caller: Caller::Front, chain: Chain::new() }))
        }
        _ => Err(RelayRefusal::NotTheFront),
    }
}

/// Why a relayed socket's open is refused before its actor hears of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RelayRefusal {
    /// No readable `x-wasmkeep-app`: the relay names no app (`400`).
    #[error("the relay names no app")]
    NoApp,
    /// A valid signature without the front's caller or the upgrade mark
    /// (`403`).
    #[error("a signed upgrade is the front's hand-off only, with its caller and the upgrade mark")]
    NotTheFront,
}

/// The one value of `name`, if present.
fn one<'h>(head: &'h HeaderMap, name: &'static str) -> Result<Option<&'h str>, ValueError> {
    let mut values = head.get_all(name).iter();
    let Some(first) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(ValueError::Repeated(name));
    }
    first.to_str().map(Some).map_err(|_| ValueError::NotText(name))
}

/// The one value of `name`, which must be present.
fn needed<'h>(head: &'h HeaderMap, name: &'static str) -> Result<&'h str, ValueError> {
    one(head, name)?.ok_or(ValueError::Missing(name))
}

#[cfg(test)]
mod tests;
