//! The host's error on a hop's answer: how the owner's node tells the
//! calling node that an event failed there, so that the caller gets
//! exactly the [`EventError`] the owner had, and a call or an HTTP event
//! fails the same way whether its actor is local or remote.
//!
//! The owner answers such a hop with [`status`] and the header
//! [`ERROR`](crate::head::ERROR) set to [`encode`]'s value; the caller
//! reads the header with [`decode`] (the header is what counts; the
//! status is for logs and plain HTTP clients). An actor's own answer
//! never carries the header: the range is stripped from actors' answers.
//!
//! # Grammar
//!
//! ```text
//! value  = kind *( SP arg )        ; single spaces, none at either end
//! kind   = a lowercase word: 1-64 of a-z 0-9 _, starting with a letter
//! number = "0" / ( %x31-39 *DIGIT ) ; decimal, no leading zero, in range
//! word   = one of the words a kind's argument lists below
//! text   = "-"                      ; the empty text
//!        / 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "%" HEXDIG HEXDIG )
//! ```
//!
//! A `text` is the UTF-8 bytes of a string percent-encoded as actor names
//! are ([`crate::names::encode`]: every byte but ASCII letters, digits and
//! `-._~`), so it holds no space and no byte outside visible ASCII; the
//! empty text is `-` (an empty field would be a trailing or double space,
//! which HTTP does not keep), and the text `-` itself is `%2D`. A text is
//! at most [`TEXT_MAX`] bytes decoded: a longer one is cut by [`encode`] at
//! a character boundary and ends with `…` (in practice only a store's
//! error or a trap's text is ever that long; a value name is at most
//! 128 bytes and a node id 63). The whole value is at most [`VALUE_MAX`]
//! bytes.
//!
//! | kind                | arguments                      | the error                               |
//! |---------------------|--------------------------------|-----------------------------------------|
//! | `no_such_app`       |                                | `Refused(NoSuchApp)`                    |
//! | `suspended`         |                                | `Refused(Suspended)`                    |
//! | `no_such_class`     |                                | `Refused(NoSuchClass)`                  |
//! | `invalid_name`      | `<name error word>`            | `Refused(InvalidName(_))`               |
//! | `internal`          |                                | `Refused(Internal)`                     |
//! | `value_missing`     | `<text>` the value's name      | `Refused(ValueMissing(_))`              |
//! | `no_such_actor`     |                                | `Refused(NoSuchActor)`                  |
//! | `overloaded`        |                                | `Refused(Overloaded)`                   |
//! | `capacity`          |                                | `Refused(Capacity)`                     |
//! | `deadline_passed`   |                                | `Refused(DeadlinePassed)`               |
//! | `quota`             | `<quota word> <number u32>`    | `Refused(Quota { quota, retry_after })` |
//! | `tenant_busy`       |                                | `Refused(TenantBusy)`                   |
//! | `store_unavailable` | `<text>` for the log           | `Refused(StoreUnavailable(_))`          |
//! | `elsewhere`         | `<text>` a node id             | `Refused(Elsewhere { owner })`          |
//! | `trapped`           |                                | `Trapped` with no text                  |
//! | `trapped_because`   | `<text>` what its tenant reads | `Trapped(_)`                            |
//! | `wall`              |                                | `Wall`                                  |
//! | `invalid_response`  |                                | `InvalidResponse`                       |
//! | `answer_too_large`  | `<number u64>` the body limit  | `AnswerTooLarge(_)`                     |
//! | `shutting_down`     |                                | `ShuttingDown`                          |
//!
//! Quota words: `requests_per_second`, `events_per_second_per_actor`,
//! `actor_creations_per_second`, `resident_actors`, `sockets`,
//! `egress_requests_per_second`, `storage_bytes_per_actor`,
//! `storage_bytes`, `actors`. Name error words: `empty_class`,
//! `class_too_long`, `class_start`, `class_char`, `empty_name`,
//! `name_too_long`, `name_control`, `name_not_utf8`, `bad_encoding`,
//! `no_slash`, `bad_tenant`, `bad_app_name`.
//!
//! The words are spelled here, not taken from the metrics' labels, so
//! that renaming a label does not change what nodes say to one another.
//! Examples: `trapped`, `quota requests_per_second 2`, `invalid_name
//! empty_name`, `store_unavailable disk%20I%2FO%20error`, `elsewhere
//! node-b`.
//!
//! # Versions
//!
//! A kind's arguments never change: a newer form is a new kind. A kind
//! this node does not know (a newer node's) decodes to
//! [`HopAnswerError::Unknown`], and so does nothing else; an unknown quota
//! or name error word is [`HopAnswerError::UnknownQuota`] or
//! [`HopAnswerError::UnknownNameError`]. The caller takes any error of
//! [`decode`] as a failure of the hop.
//!
//! `trapped_because` is such a newer form of `trapped`: a trap with its
//! text. A trap with no text is still `trapped`, which every node reads.

use std::borrow::Cow;

use crate::heartbeat::is_node_id;
use crate::names::{self, NameError};
use crate::quota::Quota;
pub use crate::refusal::TEXT_MAX;
use crate::refusal::{EventError, Refusal, cut};

/// Longest value [`decode`] reads, in bytes (what [`encode`] writes is
/// always shorter: a text encodes to at most three bytes a byte).
pub const VALUE_MAX: usize = 2048;
/// Longest kind, in bytes.
pub const KIND_MAX: usize = 64;

/// The empty text.
const EMPTY_TEXT: &str = "-";

/// Why a hop's error value cannot be read. For the node's log; the caller
/// takes any of them as a failure of the hop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HopAnswerError {
    #[error("the hop's error is empty")]
    Empty,
    #[error("the hop's error is over {VALUE_MAX} bytes")]
    TooLong,
    #[error("the hop's error holds a byte other than visible ASCII and spaces")]
    NotText,
    #[error("the hop's error has an empty field (a space at either end, or two together)")]
    EmptyField,
    #[error("{0:?} is not a kind (1-{KIND_MAX} of a-z, 0-9 and _, starting with a letter)")]
    BadKind(String),
    /// A kind this node does not know: a newer node's.
    #[error("unknown kind {0}")]
    Unknown(String),
    #[error("{kind} takes {expected} argument(s), not {found}")]
    Arity { kind: &'static str, expected: usize, found: usize },
    #[error("{kind}: {value:?} is not a decimal number in range, without leading zeros")]
    BadNumber { kind: &'static str, value: String },
    #[error("{kind}: its text is not percent-encoded as the grammar says")]
    BadText { kind: &'static str },
    #[error("{kind}: its text is not UTF-8")]
    NotUtf8 { kind: &'static str },
    #[error("{kind}: its text is over {TEXT_MAX} bytes")]
    TextTooLong { kind: &'static str },
    #[error("unknown quota {0}")]
    UnknownQuota(String),
    #[error("unknown name error {0}")]
    UnknownNameError(String),
    #[error("elsewhere: {0:?} is not a node id")]
    BadOwner(String),
}

/// The value of the hop's error header for `error`: visible ASCII and
/// single spaces, at most [`VALUE_MAX`] bytes. Never fails; texts over
/// [`TEXT_MAX`] bytes are cut.
pub fn encode(error: &EventError) -> String {
    let kind = kind(error);
    let args: Vec<Cow<'_, str>> = match error {
        EventError::Refused(r) => match r {
            Refusal::NoSuchApp
            | Refusal::Suspended
            | Refusal::NoSuchClass
            | Refusal::Internal
            | Refusal::NoSuchActor
            | Refusal::Overloaded
            | Refusal::Capacity
            | Refusal::DeadlinePassed
            | Refusal::TenantBusy => vec![],
            Refusal::InvalidName(e) => vec![name_error_word(e).into()],
            Refusal::ValueMissing(name) => vec![encode_text(name).into()],
            Refusal::Quota { quota, retry_after } => vec![quota_word(*quota).into(), retry_after.to_string().into()],
            Refusal::StoreUnavailable(text) => vec![encode_text(text).into()],
            Refusal::Elsewhere { owner } => vec![encode_text(owner).into()],
        },
        EventError::Trapped(why) if why.is_empty() => vec![],
        EventError::Trapped(why) => vec![encode_text(why).into()],
        EventError::Wall | EventError::InvalidResponse | EventError::ShuttingDown => vec![],
        EventError::AnswerTooLarge(limit) => vec![limit.to_string().into()],
    };
    let mut value = kind.to_owned();
    for arg in args {
        value.push(' ');
        value.push_str(&arg);
    }
    value
}

/// Reads the hop's error header's value.
pub fn decode(value: &str) -> Result<EventError, HopAnswerError> {
    if value.is_empty() {
        return Err(HopAnswerError::Empty);
    }
    if value.len() > VALUE_MAX {
        return Err(HopAnswerError::TooLong);
    }
    if !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(HopAnswerError::NotText);
    }
    let mut fields = value.split(' ');
    let kind = fields.next().unwrap_or_default();
    let args: Vec<&str> = fields.collect();
    if kind.is_empty() || args.iter().any(|a| a.is_empty()) {
        return Err(HopAnswerError::EmptyField);
    }
    if !is_kind(kind) {
        return Err(HopAnswerError::BadKind(kind.to_owned()));
    }
    let kind = KINDS.iter().find(|k| **k == kind).copied().ok_or_else(|| HopAnswerError::Unknown(kind.to_owned()))?;
    let arity = |expected: usize| {
        if args.len() == expected { Ok(()) } else { Err(HopAnswerError::Arity { kind, expected, found: args.len() }) }
    };
    let refused = |r: Refusal| Ok(EventError::Refused(r));
    match kind {
        "no_such_app" => arity(0).and(refused(Refusal::NoSuchApp)),
        "suspended" => arity(0).and(refused(Refusal::Suspended)),
        "no_such_class" => arity(0).and(refused(Refusal::NoSuchClass)),
        "invalid_name" => {
            arity(1)?;
            let e = NAME_ERRORS
                .iter()
                .find(|e| name_error_word(e) == args[0])
                .ok_or_else(|| HopAnswerError::UnknownNameError(args[0].to_owned()))?;
            refused(Refusal::InvalidName(e.clone()))
        }
        "internal" => arity(0).and(refused(Refusal::Internal)),
        "value_missing" => {
            arity(1)?;
            refused(Refusal::ValueMissing(decode_text(kind, args[0])?))
        }
        "no_such_actor" => arity(0).and(refused(Refusal::NoSuchActor)),
        "overloaded" => arity(0).and(refused(Refusal::Overloaded)),
        "capacity" => arity(0).and(refused(Refusal::Capacity)),
        "deadline_passed" => arity(0).and(refused(Refusal::DeadlinePassed)),
        "quota" => {
            arity(2)?;
            let quota = Quota::ALL
                .into_iter()
                .find(|q| quota_word(*q) == args[0])
                .ok_or_else(|| HopAnswerError::UnknownQuota(args[0].to_owned()))?;
            refused(Refusal::Quota { quota, retry_after: number(kind, args[1])? })
        }
        "tenant_busy" => arity(0).and(refused(Refusal::TenantBusy)),
        "store_unavailable" => {
            arity(1)?;
            refused(Refusal::StoreUnavailable(decode_text(kind, args[0])?))
        }
        "elsewhere" => {
            arity(1)?;
            let owner = decode_text(kind, args[0])?;
            if !is_node_id(&owner) {
                return Err(HopAnswerError::BadOwner(owner));
            }
            refused(Refusal::Elsewhere { owner })
        }
        "trapped" => arity(0).and(Ok(EventError::Trapped(String::new()))),
        "trapped_because" => {
            arity(1)?;
            Ok(EventError::Trapped(decode_text(kind, args[0])?))
        }
        "wall" => arity(0).and(Ok(EventError::Wall)),
        "invalid_response" => arity(0).and(Ok(EventError::InvalidResponse)),
        "answer_too_large" => {
            arity(1)?;
            Ok(EventError::AnswerTooLarge(number(kind, args[0])?))
        }
        "shutting_down" => arity(0).and(Ok(EventError::ShuttingDown)),
        // `KINDS` lists the kinds matched above, and only them.
        other => Err(HopAnswerError::Unknown(other.to_owned())),
    }
}

/// Every kind [`decode`] reads.
const KINDS: [&str; 20] = [
    "no_such_app",
    "suspended",
    "no_such_class",
    "invalid_name",
    "internal",
    "value_missing",
    "no_such_actor",
    "overloaded",
    "capacity",
    "deadline_passed",
    "quota",
    "tenant_busy",
    "store_unavailable",
    "elsewhere",
    "trapped",
    "trapped_because",
    "wall",
    "invalid_response",
    "answer_too_large",
    "shutting_down",
];

/// The kind of `error`: its first field.
fn kind(error: &EventError) -> &'static str {
    match error {
        EventError::Refused(r) => match r {
            Refusal::NoSuchApp => "no_such_app",
            Refusal::Suspended => "suspended",
            Refusal::NoSuchClass => "no_such_class",
            Refusal::InvalidName(_) => "invalid_name",
            Refusal::Internal => "internal",
            Refusal::ValueMissing(_) => "value_missing",
            Refusal::NoSuchActor => "no_such_actor",
            Refusal::Overloaded => "overloaded",
            Refusal::Capacity => "capacity",
            Refusal::DeadlinePassed => "deadline_passed",
            Refusal::Quota { .. } => "quota",
            Refusal::TenantBusy => "tenant_busy",
            Refusal::StoreUnavailable(_) => "store_unavailable",
            Refusal::Elsewhere { .. } => "elsewhere",
        },
        EventError::Trapped(why) if why.is_empty() => "trapped",
        EventError::Trapped(_) => "trapped_because",
        EventError::Wall => "wall",
        EventError::InvalidResponse => "invalid_response",
        EventError::AnswerTooLarge(_) => "answer_too_large",
        EventError::ShuttingDown => "shutting_down",
    }
}

fn quota_word(quota: Quota) -> &'static str {
    match quota {
        Quota::Requests => "requests_per_second",
        Quota::ActorEvents => "events_per_second_per_actor",
        Quota::Creations => "actor_creations_per_second",
        Quota::ResidentActors => "resident_actors",
        Quota::Sockets => "sockets",
        Quota::Egress => "egress_requests_per_second",
        Quota::ActorStorage => "storage_bytes_per_actor",
        Quota::TenantStorage => "storage_bytes",
        Quota::Actors => "actors",
    }
}

/// Every name error [`decode`] reads.
const NAME_ERRORS: [NameError; 12] = [
    NameError::EmptyClass,
    NameError::ClassTooLong,
    NameError::ClassStart,
    NameError::ClassChar,
    NameError::EmptyName,
    NameError::NameTooLong,
    NameError::NameControl,
    NameError::NameNotUtf8,
    NameError::BadEncoding,
    NameError::NoSlash,
    NameError::BadTenant,
    NameError::BadAppName,
];

fn name_error_word(e: &NameError) -> &'static str {
    match e {
        NameError::EmptyClass => "empty_class",
        NameError::ClassTooLong => "class_too_long",
        NameError::ClassStart => "class_start",
        NameError::ClassChar => "class_char",
        NameError::EmptyName => "empty_name",
        NameError::NameTooLong => "name_too_long",
        NameError::NameControl => "name_control",
        NameError::NameNotUtf8 => "name_not_utf8",
        NameError::BadEncoding => "bad_encoding",
        NameError::NoSlash => "no_slash",
        NameError::BadTenant => "bad_tenant",
        NameError::BadAppName => "bad_app_name",
    }
}

fn is_kind(s: &str) -> bool {
    s.len() <= KIND_MAX
        && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `text`, at most [`TEXT_MAX`] bytes (cut at a character boundary, ending
/// with `…`), percent-encoded; `-` when empty.
fn encode_text(text: &str) -> String {
    match &*cut(text) {
        "" => EMPTY_TEXT.to_owned(),
        EMPTY_TEXT => "%2D".to_owned(),
        text => names::encode(text),
    }
}

fn decode_text(kind: &'static str, field: &str) -> Result<String, HopAnswerError> {
    if field == EMPTY_TEXT {
        return Ok(String::new());
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'%');
    if !field.bytes().all(allowed) {
        return Err(HopAnswerError::BadText { kind });
    }
    let bytes = names::decode(field).map_err(|_| HopAnswerError::BadText { kind })?;
    let text = String::from_utf8(bytes).map_err(|_| HopAnswerError::NotUtf8 { kind })?;
    if text.len() > TEXT_MAX {
        return Err(HopAnswerError::TextTooLong { kind });
    }
    Ok(text)
}

/// A decimal number of one spelling: no sign, no leading zero.
fn number<N: std::str::FromStr>(kind: &'static str, field: &str) -> Result<N, HopAnswerError> {
    let bad = || HopAnswerError::BadNumber { kind, value: field.to_owned() };
    let canonical = field.bytes().all(|b| b.is_ascii_digit()) && (field == "0" || !field.starts_with('0'));
    if !canonical {
        return Err(bad());
    }
    field.parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests;
