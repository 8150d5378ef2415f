use std::collections::{HashMap, HashSet};

use http::HeaderValue;

use super::*;
use crate::refusal::{CUT, Failure};

// ---- Every variant, and proof that none is missing ----

/// Asserts that `samples` hold every variant of their type: `index` gives
/// each variant its own number below `count`, by a `match` without a
/// wildcard, so a new variant does not compile until it has a number, and
/// fails here until it has a sample.
fn covers<T: std::fmt::Debug>(samples: &[T], count: usize, index: impl Fn(&T) -> usize) {
    let mut seen = vec![false; count];
    for sample in samples {
        let i = index(sample);
        assert!(i < count, "{sample:?} has number {i}, not below {count}: raise the count");
        seen[i] = true;
    }
    let missing: Vec<usize> = (0..count).filter(|i| !seen[*i]).collect();
    assert!(missing.is_empty(), "no sample of the variants numbered {missing:?}");
}

const EVENT_ERRORS: usize = 20;

fn event_error_index(e: &EventError) -> usize {
    match e {
        EventError::Refused(r) => match r {
            Refusal::NoSuchApp => 0,
            Refusal::Suspended => 1,
            Refusal::NoSuchClass => 2,
            Refusal::InvalidName(_) => 3,
            Refusal::Internal => 4,
            Refusal::ValueMissing(_) => 5,
            Refusal::NoSuchActor => 6,
            Refusal::Overloaded => 7,
            Refusal::Capacity => 8,
            Refusal::DeadlinePassed => 9,
            Refusal::Quota { .. } => 10,
            Refusal::TenantBusy => 11,
            Refusal::StoreUnavailable(_) => 12,
            Refusal::Elsewhere { .. } => 13,
        },
        EventError::Trapped(why) if why.is_empty() => 14,
        EventError::Trapped(_) => 19,
        EventError::Wall => 15,
        EventError::InvalidResponse => 16,
        EventError::AnswerTooLarge(_) => 17,
        EventError::ShuttingDown => 18,
    }
}

const QUOTAS: usize = 9;

fn quota_index(q: &Quota) -> usize {
    match q {
        Quota::Requests => 0,
        Quota::ActorEvents => 1,
        Quota::Creations => 2,
        Quota::ResidentActors => 3,
        Quota::Sockets => 4,
        Quota::Egress => 5,
        Quota::ActorStorage => 6,
        Quota::TenantStorage => 7,
        Quota::Actors => 8,
    }
}

const NAME_ERROR_COUNT: usize = 12;

fn name_error_index(e: &NameError) -> usize {
    match e {
        NameError::EmptyClass => 0,
        NameError::ClassTooLong => 1,
        NameError::ClassStart => 2,
        NameError::ClassChar => 3,
        NameError::EmptyName => 4,
        NameError::NameTooLong => 5,
        NameError::NameControl => 6,
        NameError::NameNotUtf8 => 7,
        NameError::BadEncoding => 8,
        NameError::NoSlash => 9,
        NameError::BadTenant => 10,
        NameError::BadAppName => 11,
    }
}

fn every_name_error() -> Vec<NameError> {
    vec![
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
    ]
}

/// Free texts: spaces, newlines, controls, non-ASCII, the characters the
/// grammar gives a meaning, and the longest kept whole.
fn texts() -> Vec<String> {
    vec![
        "K".into(),
        String::new(),
        "-".into(),
        "--".into(),
        "%".into(),
        "%2D".into(),
        "a b  c ".into(),
        " leading".into(),
        "line one\nline two\r\n".into(),
        "tab\there\0nul\x7fdel".into(),
        "é 😀 中文".into(),
        "disk I/O error at /var/lib/x: \"quoted\" 'single' (100%)".into(),
        "~._-azAZ09".into(),
        "x".repeat(TEXT_MAX),
        "é".repeat(TEXT_MAX / 2),
    ]
}

fn every_event_error() -> Vec<EventError> {
    let mut all: Vec<EventError> = [
        Refusal::NoSuchApp,
        Refusal::Suspended,
        Refusal::NoSuchClass,
        Refusal::Internal,
        Refusal::NoSuchActor,
        Refusal::Overloaded,
        Refusal::Capacity,
        Refusal::DeadlinePassed,
        Refusal::TenantBusy,
        Refusal::Elsewhere { owner: "node-b".into() },
        Refusal::Elsewhere { owner: "a".into() },
        Refusal::Elsewhere { owner: format!("n{}", "_".repeat(62)) },
    ]
    .into_iter()
    .map(EventError::from)
    .collect();
    all.extend(every_name_error().into_iter().map(|e| Refusal::InvalidName(e).into()));
    for quota in Quota::ALL {
        for retry_after in [0, 1, 2, 59, u32::MAX] {
            all.push(Refusal::Quota { quota, retry_after }.into());
        }
    }
    for text in texts() {
        all.push(Refusal::ValueMissing(text.clone()).into());
        all.push(Refusal::StoreUnavailable(text.clone()).into());
        all.push(EventError::Trapped(text));
    }
    all.extend([
        EventError::Trapped(String::new()),
        EventError::Wall,
        EventError::InvalidResponse,
        EventError::AnswerTooLarge(0),
        EventError::AnswerTooLarge(16),
        EventError::AnswerTooLarge(10_485_760),
        EventError::AnswerTooLarge(u64::MAX),
        EventError::ShuttingDown,
    ]);
    all
}

#[test]
fn the_samples_hold_every_variant() {
    let all = every_event_error();
    covers(&all, EVENT_ERRORS, event_error_index);
    covers(&Quota::ALL, QUOTAS, quota_index);
    covers(&every_name_error(), NAME_ERROR_COUNT, name_error_index);
    // And the codec's own lists are whole.
    covers(&NAME_ERRORS, NAME_ERROR_COUNT, name_error_index);
    assert_eq!(KINDS.len(), EVENT_ERRORS);
}

// ---- The round trip ----

#[test]
fn every_error_comes_back_exactly() {
    for error in every_event_error() {
        let value = encode(&error);
        assert_eq!(decode(&value), Ok(error.clone()), "{error:?} as {value:?}");
    }
}

#[test]
fn every_value_is_a_header_value() {
    for error in every_event_error() {
        let value = encode(&error);
        assert!(HeaderValue::from_str(&value).is_ok(), "{value:?}");
        assert!(value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()), "{value:?}");
        assert!(!value.starts_with(' ') && !value.ends_with(' ') && !value.contains("  "), "{value:?}");
        assert!(value.len() <= VALUE_MAX, "{} bytes", value.len());
        // What HTTP keeps of it (the value trimmed) is the value.
        assert_eq!(value.trim(), value);
    }
}

#[test]
fn each_variant_has_its_own_kind_and_each_kind_is_decoded() {
    let mut kinds: HashMap<usize, &'static str> = HashMap::new();
    for error in every_event_error() {
        let k = kind(&error);
        assert!(is_kind(k) && KINDS.contains(&k), "{k}");
        assert_eq!(*kinds.entry(event_error_index(&error)).or_insert(k), k, "{error:?}");
    }
    let distinct: HashSet<&str> = kinds.values().copied().collect();
    assert_eq!(distinct.len(), EVENT_ERRORS);
    assert_eq!(distinct, KINDS.into_iter().collect());
    let quota_words: HashSet<&str> = Quota::ALL.into_iter().map(quota_word).collect();
    assert_eq!(quota_words.len(), QUOTAS);
    let name_words: HashSet<&str> = NAME_ERRORS.iter().map(name_error_word).collect();
    assert_eq!(name_words.len(), NAME_ERROR_COUNT);
}

// ---- The wire: what nodes of different versions read from one another ----

#[test]
fn the_values_are_the_grammars() {
    let cases: Vec<(EventError, &str)> = vec![
        (Refusal::NoSuchApp.into(), "no_such_app"),
        (Refusal::Suspended.into(), "suspended"),
        (Refusal::NoSuchClass.into(), "no_such_class"),
        (Refusal::InvalidName(NameError::EmptyName).into(), "invalid_name empty_name"),
        (Refusal::Internal.into(), "internal"),
        (Refusal::ValueMissing("API_KEY".into()).into(), "value_missing API_KEY"),
        (Refusal::NoSuchActor.into(), "no_such_actor"),
        (Refusal::Overloaded.into(), "overloaded"),
        (Refusal::Capacity.into(), "capacity"),
        (Refusal::DeadlinePassed.into(), "deadline_passed"),
        (Refusal::Quota { quota: Quota::Requests, retry_after: 2 }.into(), "quota requests_per_second 2"),
        (Refusal::TenantBusy.into(), "tenant_busy"),
        (Refusal::StoreUnavailable("disk I/O error".into()).into(), "store_unavailable disk%20I%2FO%20error"),
        (Refusal::Elsewhere { owner: "node-b".into() }.into(), "elsewhere node-b"),
        (EventError::Trapped(String::new()), "trapped"),
        (EventError::Trapped("panicked at boom".into()), "trapped_because panicked%20at%20boom"),
        (EventError::Wall, "wall"),
        (EventError::InvalidResponse, "invalid_response"),
        (EventError::AnswerTooLarge(10_485_760), "answer_too_large 10485760"),
        (EventError::ShuttingDown, "shutting_down"),
        // The empty text, the text `-`, spaces, newlines and non-ASCII.
        (Refusal::StoreUnavailable(String::new()).into(), "store_unavailable -"),
        (Refusal::StoreUnavailable("-".into()).into(), "store_unavailable %2D"),
        (Refusal::StoreUnavailable("a\nb é".into()).into(), "store_unavailable a%0Ab%20%C3%A9"),
    ];
    covers(&cases.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(), EVENT_ERRORS, event_error_index);
    for (error, value) in cases {
        assert_eq!(encode(&error), value);
        assert_eq!(decode(value), Ok(error));
    }
    let quotas = [
        (Quota::Requests, "requests_per_second"),
        (Quota::ActorEvents, "events_per_second_per_actor"),
        (Quota::Creations, "actor_creations_per_second"),
        (Quota::ResidentActors, "resident_actors"),
        (Quota::Sockets, "sockets"),
        (Quota::Egress, "egress_requests_per_second"),
        (Quota::ActorStorage, "storage_bytes_per_actor"),
        (Quota::TenantStorage, "storage_bytes"),
        (Quota::Actors, "actors"),
    ];
    covers(&quotas.map(|(q, _)| q), QUOTAS, quota_index);
    for (quota, word) in quotas {
        assert_eq!(encode(&Refusal::Quota { quota, retry_after: 0 }.into()), format!("quota {word} 0"));
    }
    let names = [
        (NameError::EmptyClass, "empty_class"),
        (NameError::ClassTooLong, "class_too_long"),
        (NameError::ClassStart, "class_start"),
        (NameError::ClassChar, "class_char"),
        (NameError::EmptyName, "empty_name"),
        (NameError::NameTooLong, "name_too_long"),
        (NameError::NameControl, "name_control"),
        (NameError::NameNotUtf8, "name_not_utf8"),
        (NameError::BadEncoding, "bad_encoding"),
        (NameError::NoSlash, "no_slash"),
        (NameError::BadTenant, "bad_tenant"),
        (NameError::BadAppName, "bad_app_name"),
    ];
    covers(&names.clone().map(|(e, _)| e), NAME_ERROR_COUNT, name_error_index);
    for (e, word) in names {
        assert_eq!(encode(&Refusal::InvalidName(e).into()), format!("invalid_name {word}"));
    }
}

// ---- Free text ----

#[test]
fn a_long_text_is_cut_at_a_character_and_marked() {
    for long in
        ["x".repeat(TEXT_MAX + 1), "é".repeat(TEXT_MAX), "😀".repeat(1000), format!("{}ééé", "x".repeat(TEXT_MAX - 4))]
    {
        let value = encode(&Refusal::StoreUnavailable(long.clone()).into());
        assert!(value.len() <= VALUE_MAX);
        let Ok(EventError::Refused(Refusal::StoreUnavailable(kept))) = decode(&value) else {
            panic!("{value:?} does not decode");
        };
        assert!(kept.len() <= TEXT_MAX && kept.len() > TEXT_MAX - 8, "{} bytes", kept.len());
        let head = kept.strip_suffix(CUT).expect("a cut text ends with the mark");
        assert!(long.starts_with(head));
    }
    // The longest text is kept whole.
    let longest = "é".repeat(TEXT_MAX / 2);
    assert_eq!(
        decode(&encode(&Refusal::ValueMissing(longest.clone()).into())),
        Ok(Refusal::ValueMissing(longest).into())
    );
}

#[test]
fn the_client_answer_never_holds_the_text_but_the_hop_keeps_it() {
    let error: EventError = Refusal::StoreUnavailable("disk I/O error at /var/lib/x".into()).into();
    assert_eq!(encode(&error), "store_unavailable disk%20I%2FO%20error%20at%20%2Fvar%2Flib%2Fx");
    assert_eq!(Failure::from(error).answer().text, "store unavailable\n");
}

// ---- Malformed values ----

#[test]
fn a_malformed_value_says_what_is_wrong() {
    use HopAnswerError as E;
    let long_kind = "k".repeat(KIND_MAX + 1);
    let too_long_value = format!("store_unavailable {}", "x".repeat(VALUE_MAX));
    let too_long_text = format!("store_unavailable {}", "x".repeat(TEXT_MAX + 1));
    let cases: Vec<(&str, E)> = vec![
        ("", E::Empty),
        (&too_long_value, E::TooLong),
        ("trapped\n", E::NotText),
        ("trapped\t", E::NotText),
        ("value_missing é", E::NotText),
        ("trapped\0", E::NotText),
        (" trapped", E::EmptyField),
        ("trapped ", E::EmptyField),
        (" ", E::EmptyField),
        ("quota  requests_per_second 2", E::EmptyField),
        ("quota requests_per_second 2 ", E::EmptyField),
        ("Trapped", E::BadKind("Trapped".into())),
        ("1trapped", E::BadKind("1trapped".into())),
        ("_trapped", E::BadKind("_trapped".into())),
        ("trap-ped", E::BadKind("trap-ped".into())),
        ("tr@pped x", E::BadKind("tr@pped".into())),
        (&long_kind, E::BadKind(long_kind.clone())),
        ("trapped now", E::Arity { kind: "trapped", expected: 0, found: 1 }),
        ("trapped_because", E::Arity { kind: "trapped_because", expected: 1, found: 0 }),
        ("trapped_because a b", E::Arity { kind: "trapped_because", expected: 1, found: 2 }),
        ("elsewhere", E::Arity { kind: "elsewhere", expected: 1, found: 0 }),
        ("elsewhere a b", E::Arity { kind: "elsewhere", expected: 1, found: 2 }),
        ("quota requests_per_second", E::Arity { kind: "quota", expected: 2, found: 1 }),
        ("quota requests_per_second 1 2", E::Arity { kind: "quota", expected: 2, found: 3 }),
        ("answer_too_large", E::Arity { kind: "answer_too_large", expected: 1, found: 0 }),
        ("invalid_name", E::Arity { kind: "invalid_name", expected: 1, found: 0 }),
        ("quota requests_per_second 02", E::BadNumber { kind: "quota", value: "02".into() }),
        ("quota requests_per_second -1", E::BadNumber { kind: "quota", value: "-1".into() }),
        ("quota requests_per_second +1", E::BadNumber { kind: "quota", value: "+1".into() }),
        ("quota requests_per_second 4294967296", E::BadNumber { kind: "quota", value: "4294967296".into() }),
        ("quota requests_per_second 1.5", E::BadNumber { kind: "quota", value: "1.5".into() }),
        ("answer_too_large 00", E::BadNumber { kind: "answer_too_large", value: "00".into() }),
        (
            "answer_too_large 18446744073709551616",
            E::BadNumber { kind: "answer_too_large", value: "18446744073709551616".into() },
        ),
        ("answer_too_large x", E::BadNumber { kind: "answer_too_large", value: "x".into() }),
        ("quota bananas 1", E::UnknownQuota("bananas".into())),
        ("quota REQUESTS_PER_SECOND 1", E::UnknownQuota("REQUESTS_PER_SECOND".into())),
        ("invalid_name bananas", E::UnknownNameError("bananas".into())),
        ("value_missing a%zz", E::BadText { kind: "value_missing" }),
        ("value_missing a%", E::BadText { kind: "value_missing" }),
        ("value_missing a/b", E::BadText { kind: "value_missing" }),
        ("store_unavailable a+b", E::BadText { kind: "store_unavailable" }),
        ("store_unavailable \"x\"", E::BadText { kind: "store_unavailable" }),
        ("value_missing %FF", E::NotUtf8 { kind: "value_missing" }),
        ("store_unavailable %C3", E::NotUtf8 { kind: "store_unavailable" }),
        (&too_long_text, E::TextTooLong { kind: "store_unavailable" }),
        ("elsewhere %2D", E::BadOwner("-".into())),
        ("elsewhere -", E::BadOwner(String::new())),
        ("elsewhere Node-B", E::BadOwner("Node-B".into())),
        ("elsewhere node%20b", E::BadOwner("node b".into())),
        ("elsewhere node%zz", E::BadText { kind: "elsewhere" }),
    ];
    for (value, error) in cases {
        assert_eq!(decode(value), Err(error), "{value:?}");
    }
}

#[test]
fn an_owner_that_is_no_node_id_is_still_written_safely() {
    for owner in ["", "-", "Node B\n", "é"] {
        let value = encode(&Refusal::Elsewhere { owner: owner.into() }.into());
        assert!(HeaderValue::from_str(&value).is_ok(), "{value:?}");
        assert_eq!(decode(&value), Err(HopAnswerError::BadOwner(owner.into())), "{value:?}");
    }
}

#[test]
fn a_newer_nodes_kind_is_unknown_whatever_it_carries() {
    for (value, kind) in [
        ("moved_away", "moved_away"),
        ("moved_away node-c 12", "moved_away"),
        ("quota2 requests_per_second 2", "quota2"),
        ("k%20", "k%20"),
    ] {
        if is_kind(kind) {
            assert_eq!(decode(value), Err(HopAnswerError::Unknown(kind.into())), "{value}");
        } else {
            assert_eq!(decode(value), Err(HopAnswerError::BadKind(kind.into())), "{value}");
        }
    }
    let longest = "k".repeat(KIND_MAX);
    assert_eq!(decode(&longest), Err(HopAnswerError::Unknown(longest.clone())));
}

// ---- The status ----

#[test]
fn the_status_is_the_clients() {
    let table: Vec<(EventError, u16)> = vec![
        (Refusal::NoSuchApp.into(), 404),
        (Refusal::Suspended.into(), 503),
        (Refusal::NoSuchClass.into(), 404),
        (Refusal::InvalidName(NameError::NoSlash).into(), 400),
        (Refusal::Internal.into(), 403),
        (Refusal::ValueMissing("K".into()).into(), 503),
        (Refusal::NoSuchActor.into(), 404),
        (Refusal::Overloaded.into(), 503),
        (Refusal::Capacity.into(), 503),
        (Refusal::DeadlinePassed.into(), 504),
        (Refusal::Quota { quota: Quota::Requests, retry_after: 1 }.into(), 429),
        (Refusal::TenantBusy.into(), 503),
        (Refusal::StoreUnavailable("x".into()).into(), 503),
        (Refusal::Elsewhere { owner: "node-b".into() }.into(), 503),
        (EventError::Trapped(String::new()), 500),
        (EventError::Trapped("panicked at boom".into()), 500),
        (EventError::Wall, 504),
        (EventError::InvalidResponse, 500),
        (EventError::AnswerTooLarge(1), 500),
        (EventError::ShuttingDown, 503),
    ];
    covers(&table.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(), EVENT_ERRORS, event_error_index);
    // The hop's answer carries the status a client would get.
    for (error, want) in table {
        assert_eq!(Failure::from(error.clone()).answer().status, want, "{error:?}");
    }
}
