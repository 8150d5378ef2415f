use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::actor_key::AppId;
use crate::names::{ActorName, ClassName};

/// The cases every implementation of the head reads.
fn cases() -> Value {
    serde_json::from_str(include_str!("../../../../spec/head-cases.json")).expect("spec/head-cases.json parses")
}

fn section<'v>(cases: &'v Value, name: &str) -> &'v Vec<Value> {
    cases[name].as_array().unwrap_or_else(|| panic!("the cases have no {name} list"))
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.append(HeaderName::from_bytes(n.as_bytes()).unwrap(), v.parse().unwrap());
    }
    h
}

fn address(case: &Value) -> Address {
    Address::new(
        ClassName::parse(case["class"].as_str().unwrap()).unwrap(),
        ActorName::parse(case["name"].as_str().unwrap()).unwrap(),
    )
}

fn is_error(case: &Value) -> bool {
    case["error"].as_bool() == Some(true)
}

#[test]
fn the_names_are_the_cases_names_and_all_in_the_range() {
    let cases = cases();
    assert_eq!(cases["prefix"], PREFIX);
    let names = cases["names"].as_object().unwrap();
    let ours = [
        ("caller", CALLER),
        ("chain", CHAIN),
        ("app", APP),
        ("target", TARGET),
        ("deadline", DEADLINE),
        ("upgrade", UPGRADE),
        ("handoff_class", HANDOFF_CLASS),
        ("handoff_name", HANDOFF_NAME),
        ("handoff_path", HANDOFF_PATH),
        ("internal", INTERNAL),
        ("error", ERROR),
        ("tail", TAIL),
    ];
    assert_eq!(names.len(), ours.len());
    assert_eq!(NAMES.len(), ours.len());
    for (key, name) in ours {
        assert_eq!(names[key], name, "{key}");
        assert!(is_reserved(name) && NAMES.contains(&name), "{name}");
        // Every name is a valid, lowercase header name.
        assert_eq!(HeaderName::from_static(name).as_str(), name);
    }
    for name in section(&cases["reserved"], "in_range") {
        assert!(is_reserved(name.as_str().unwrap()), "{name}");
    }
    for name in section(&cases["reserved"], "outside") {
        assert!(!is_reserved(name.as_str().unwrap()), "{name}");
    }
}

#[test]
fn names_encode_and_decode_as_the_cases_say() {
    let cases = cases();
    for case in section(&cases, "name_encoding") {
        let (name, encoded) = (case["name"].as_str().unwrap(), case["encoded"].as_str().unwrap());
        assert_eq!(ActorName::parse(name).unwrap().encoded(), encoded);
        assert_eq!(ActorName::from_encoded(encoded).unwrap().as_str(), name);
    }
    for bad in section(&cases, "bad_encodings") {
        assert_eq!(decode(bad.as_str().unwrap()), Err(NameError::BadEncoding), "{bad}");
    }
}

#[test]
fn callers_parse_and_format_as_the_cases_say() {
    let cases = cases();
    for case in section(&cases, "caller") {
        let value = case["value"].as_str().unwrap();
        if is_error(case) {
            assert!(parse_caller(value).is_err(), "{value}");
            continue;
        }
        let tenant = TenantId::parse(case["tenant"].as_str().unwrap()).unwrap();
        let caller =
            if case["front"].as_bool() == Some(true) { Caller::Front } else { Caller::Actor(address(&case["actor"])) };
        assert_eq!(parse_caller(value).unwrap(), (tenant.clone(), caller.clone()), "{value}");
        assert_eq!(format_caller(&tenant, &caller), value);
    }
}

#[test]
fn chains_parse_and_format_as_the_cases_say() {
    let cases = cases();
    for case in section(&cases, "chain") {
        let value = case["value"].as_str().unwrap();
        if is_error(case) {
            assert!(parse_chain(value).is_err(), "{value}");
            continue;
        }
        let chain = Chain::from(case["actors"].as_array().unwrap().iter().map(address).collect::<Vec<_>>());
        assert_eq!(parse_chain(value).unwrap(), chain, "{value}");
        assert_eq!(format_chain(&chain), value);
    }
}

#[test]
fn apps_parse_and_format_as_the_cases_say() {
    let cases = cases();
    for case in section(&cases, "app") {
        let value = case["value"].as_str().unwrap();
        if is_error(case) {
            assert!(parse_app(value).is_err(), "{value}");
            continue;
        }
        let (tenant, app) = parse_app(value).unwrap();
        assert_eq!((tenant.as_str(), app.as_str()), (case["tenant"].as_str().unwrap(), case["app"].as_str().unwrap()));
        assert_eq!(format_app(&tenant, &app), value);
    }
}

#[test]
fn targets_keep_the_address_unvalidated() {
    let cases = cases();
    for case in section(&cases, "target") {
        let value = case["value"].as_str().unwrap();
        if is_error(case) {
            assert!(parse_target(value).is_err(), "{value}");
            continue;
        }
        let target = parse_target(value).unwrap();
        assert_eq!(target.class, case["class"].as_str().unwrap());
        let name: Vec<u8> = match case["name"].as_str() {
            Some(name) => name.as_bytes().to_vec(),
            None => case["name_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect(),
        };
        assert_eq!(target.name, name);
        assert_eq!(parse_target(&format_target(&target)).unwrap(), target);
    }
}

#[test]
fn deadlines_are_what_is_left_in_whole_milliseconds() {
    let cases = cases();
    let now = Instant::now();
    for case in section(&cases, "deadline") {
        let value = case["value"].as_str().unwrap();
        if is_error(case) {
            assert_eq!(parse_deadline(value, now), Err(HeadError::BadDeadline(DEADLINE)), "{value}");
            continue;
        }
        let left = Duration::from_millis(case["millis"].as_u64().unwrap());
        assert_eq!(parse_deadline(value, now).unwrap(), now + left);
        assert_eq!(format_deadline(now + left, now), value);
    }
    // Rounded down; a passed deadline is zero; a far one is a day.
    assert_eq!(format_deadline(now + Duration::from_micros(1999), now), "1");
    assert_eq!(format_deadline(now, now + Duration::from_secs(3)), "0");
    assert_eq!(format_deadline(now + Duration::from_secs(200_000), now), "86400000");
}

#[test]
fn the_upgrade_mark_is_one_exact_value() {
    let cases = cases();
    assert!(is_upgrade_mark(cases["upgrade"]["value"].as_str().unwrap().as_bytes()));
    for not in section(&cases["upgrade"], "not") {
        assert!(!is_upgrade_mark(not.as_str().unwrap().as_bytes()), "{not}");
    }
}

#[test]
fn traceparents_are_kept_only_when_valid() {
    let cases = cases();
    let tp = &cases["traceparent"];
    for valid in section(tp, "valid") {
        let valid = valid.as_str().unwrap();
        assert!(is_valid_traceparent(valid), "{valid}");
        let trace = read_trace(&headers(&[(TRACEPARENT, valid), (TRACESTATE, "k=v")]));
        assert_eq!((trace.parent.as_deref(), trace.state.as_deref()), (Some(valid), Some("k=v")));
    }
    for invalid in section(tp, "invalid") {
        let invalid = invalid.as_str().unwrap();
        assert!(!is_valid_traceparent(invalid), "{invalid}");
    }
    // A state without a valid parent, a repeated parent, a long state: dropped.
    assert_eq!(read_trace(&headers(&[(TRACESTATE, "k=v")])), TraceContext::default());
    let valid = section(tp, "valid")[0].as_str().unwrap();
    assert_eq!(read_trace(&headers(&[(TRACEPARENT, valid), (TRACEPARENT, valid)])), TraceContext::default());
    let long = "k=".to_owned() + &"v".repeat(TRACESTATE_MAX);
    assert_eq!(read_trace(&headers(&[(TRACEPARENT, valid), (TRACESTATE, &long)])).state, None);
}

#[test]
fn hand_offs_read_as_the_cases_say() {
    let cases = cases();
    for case in section(&cases, "handoff") {
        let want: Vec<(String, String)> = case["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(n, v)| (n.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let actor = address(case);
        let path = case["path"].as_str().unwrap();
        let formatted: Vec<(String, String)> =
            format_handoff(&actor, path).into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
        let mut sorted = formatted.clone();
        sorted.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(sorted, want_sorted);
        let pairs: Vec<(&str, &str)> = want.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let handoff = read_handoff(&headers(&pairs)).unwrap().unwrap();
        assert_eq!(handoff.actor, RawAddress::from(&actor));
        assert_eq!(handoff.path, path);
    }
}

#[test]
fn no_hand_off_header_is_no_hand_off() {
    assert_eq!(read_handoff(&headers(&[("content-type", "text/plain")])), None);
    assert_eq!(read_handoff(&HeaderMap::new()), None);
}

#[test]
fn a_broken_hand_off_says_why() {
    let ok = [(HANDOFF_CLASS, "room"), (HANDOFF_NAME, "a"), (HANDOFF_PATH, "/")];
    let err = |pairs: &[(&str, &str)]| read_handoff(&headers(pairs)).unwrap().unwrap_err();
    assert_eq!(err(&ok[..2]), HandOffError::Value(ValueError::Missing(HANDOFF_PATH)));
    assert_eq!(err(&ok[1..]), HandOffError::Value(ValueError::Missing(HANDOFF_CLASS)));
    assert_eq!(err(&[ok[0], ok[2]]), HandOffError::Value(ValueError::Missing(HANDOFF_NAME)));
    let mut repeated = ok.to_vec();
    repeated.push((HANDOFF_NAME, "b"));
    assert_eq!(err(&repeated), HandOffError::Value(ValueError::Repeated(HANDOFF_NAME)));
    assert_eq!(err(&[ok[0], (HANDOFF_NAME, "%FF"), ok[2]]), HandOffError::NameNotUtf8);
    assert_eq!(err(&[ok[0], ok[1], (HANDOFF_PATH, "ws")]), HandOffError::BadPath);
    assert_eq!(err(&[ok[0], ok[1], (HANDOFF_PATH, "")]), HandOffError::BadPath);
    assert_eq!(err(&[ok[0], (HANDOFF_NAME, "a%zz"), ok[2]]), HandOffError::NameNotDecodable);
    for bad in ["/a?b=1#frag", "/a#", "/#x", "/a b", "//host/x?#"] {
        assert_eq!(err(&[ok[0], ok[1], (HANDOFF_PATH, bad)]), HandOffError::BadPath, "{bad}");
    }
    let mut h = headers(&ok);
    h.insert(HANDOFF_CLASS, http::HeaderValue::from_bytes(b"r\xc3\xa9").unwrap());
    assert_eq!(read_handoff(&h).unwrap().unwrap_err(), HandOffError::Value(ValueError::NotText(HANDOFF_CLASS)));
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

/// The receiver's call limit, for the hop's tests.
const LONGEST: Duration = Duration::from_secs(30);

fn shop() -> Arc<AppRef> {
    Arc::new(AppRef { id: AppId(3), tenant: TenantId::parse("acme").unwrap(), name: AppName::parse("shop").unwrap() })
}

fn envelope(origin: Origin, deadline: Instant) -> Envelope {
    Envelope {
        app: shop(),
        target: RawAddress { class: "cart".into(), name: "u/1 é".as_bytes().to_vec() },
        origin,
        deadline,
        trace: TraceContext {
            parent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
            state: Some("k=v".into()),
        },
    }
}

#[test]
fn an_envelope_travels_through_its_head_and_back() {
    let now = Instant::now();
    let inside = Origin::Inside {
        caller: Caller::Actor(Address::parse("room/r1").unwrap()),
        chain: Chain::from(vec![Address::parse("lobby/main").unwrap()]),
    };
    for origin in [Origin::Outside, Origin::Inside { caller: Caller::Front, chain: Chain::new() }, inside] {
        let sent = envelope(origin, now + Duration::from_millis(2500));
        let head = to_head(&sent, now);
        assert!(head.keys().all(|n| is_reserved(n.as_str()) || n == TRACEPARENT || n == TRACESTATE));
        // Read a little later, the deadline is where it was (to the millisecond).
        let later = now + Duration::from_millis(100);
        let got =
            from_head(&head, later, LONGEST, |t, a| (t.as_str() == "acme" && a.as_str() == "shop").then(shop)).unwrap();
        assert_eq!(got.deadline, later + Duration::from_millis(2500));
        assert_eq!(Envelope { deadline: sent.deadline + Duration::from_millis(100), ..sent }, got);
    }
}

#[test]
fn a_broken_head_says_what_is_wrong() {
    let now = Instant::now();
    let inside = Origin::Inside { caller: Caller::Front, chain: Chain::new() };
    let head = to_head(&envelope(inside, now), now);
    let apps = |_: &TenantId, _: &AppName| Some(shop());
    for name in [APP, TARGET, DEADLINE] {
        let mut h = head.clone();
        h.remove(name);
        assert_eq!(from_head(&h, now, LONGEST, apps), Err(HeadError::Value(ValueError::Missing(name))), "{name}");
    }
    let mut h = head.clone();
    h.append(CALLER, "acme/_front/main".parse().unwrap());
    assert_eq!(from_head(&h, now, LONGEST, apps), Err(HeadError::Value(ValueError::Repeated(CALLER))));
    // A caller of another tenant cannot call into this one.
    let mut h = head.clone();
    h.insert(CALLER, "evil/_front/main".parse().unwrap());
    assert_eq!(from_head(&h, now, LONGEST, apps), Err(HeadError::Name { name: CALLER, error: NameError::BadTenant }));
    let mut h = head.clone();
    h.insert(DEADLINE, "soon".parse().unwrap());
    assert_eq!(from_head(&h, now, LONGEST, apps), Err(HeadError::BadDeadline(DEADLINE)));
    assert_eq!(from_head(&head, now, LONGEST, |_, _| None), Err(HeadError::UnknownApp("acme/shop".into())));
    let mut h = head.clone();
    h.insert(CHAIN, "cart".parse().unwrap());
    assert!(matches!(from_head(&h, now, LONGEST, apps), Err(HeadError::Name { name: CHAIN, .. })));
    // A chain longer than any wait allows is refused before it is parsed.
    let long = vec!["c/a"; CHAIN_MAX + 1].join(",");
    h.insert(CHAIN, long.parse().unwrap());
    assert_eq!(from_head(&h, now, LONGEST, apps), Err(HeadError::ChainTooLong));
    let longest_allowed = vec!["c/a"; CHAIN_MAX].join(",");
    h.insert(CHAIN, longest_allowed.parse().unwrap());
    assert!(from_head(&h, now, LONGEST, apps).is_ok());
}

#[test]
fn a_heads_deadline_is_never_past_the_receivers_call_limit() {
    let now = Instant::now();
    let far = envelope(Origin::Outside, now + Duration::from_secs(3600));
    let got = from_head(&to_head(&far, now), now, LONGEST, |_, _| Some(shop())).unwrap();
    assert_eq!(got.deadline, now + LONGEST);
    let near = envelope(Origin::Outside, now + Duration::from_secs(2));
    let got = from_head(&to_head(&near, now), now, LONGEST, |_, _| Some(shop())).unwrap();
    assert_eq!(got.deadline, now + Duration::from_secs(2));
}

#[test]
fn the_guest_sees_who_calls_and_the_app_only_from_inside() {
    let now = Instant::now();
    assert!(guest_head(&envelope(Origin::Outside, now)).is_empty());
    let inside = Origin::Inside {
        caller: Caller::Actor(Address::parse("room/a b").unwrap()),
        chain: Chain::from(vec![Address::parse("lobby/x,y").unwrap()]),
    };
    let head: Vec<(String, String)> =
        guest_head(&envelope(inside, now)).into_iter().map(|(n, v)| (n, String::from_utf8(v).unwrap())).collect();
    assert_eq!(
        head,
        [
            (CALLER.to_owned(), "acme/room/a%20b".to_owned()),
            (CHAIN.to_owned(), "lobby/x%2Cy".to_owned()),
            (APP.to_owned(), "acme/shop".to_owned()),
        ]
    );
}

#[test]
fn a_believed_relay_is_the_fronts_only_with_its_exact_caller_and_the_mark() {
    let front = Origin::Inside { caller: Caller::Front, chain: Chain::new() };
    let (tenant, app) = (TenantId::parse("acme").unwrap(), AppName::parse("chat").unwrap());
    let good = [(APP, "acme/chat"), (CALLER, "acme/_front/main"), (UPGRADE, "websocket")];
    assert_eq!(relayed_opener(&headers(&good), true), Ok((tenant.clone(), app.clone(), front)));
    // Believed, with the caller or the mark missing, or another caller.
    for refused in [
        &[(APP, "acme/chat"), (UPGRADE, "websocket")][..],
        &[(APP, "acme/chat"), (CALLER, "acme/_front/main")][..],
        &[(APP, "acme/chat"), (CALLER, "acme/room/lobby"), (UPGRADE, "websocket")][..],
        &[(APP, "acme/chat"), (CALLER, "other/_front/main"), (UPGRADE, "websocket")][..],
        &[(APP, "acme/chat"), (CALLER, "acme/_front/main"), (UPGRADE, "WebSocket")][..],
        &[(APP, "acme/chat"), (CALLER, "acme/_front/main"), (CALLER, "acme/_front/main"), (UPGRADE, "websocket")][..],
    ] {
        assert_eq!(relayed_opener(&headers(refused), true), Err(RelayRefusal::NotTheFront), "{refused:?}");
    }
    // Not believed: outside, whatever caller and mark it carries.
    assert_eq!(relayed_opener(&headers(&good), false), Ok((tenant, app, Origin::Outside)));
    for no_app in [&[][..], &[(APP, "acme")][..], &[(APP, "acme/chat"), (APP, "acme/chat")][..]] {
        assert_eq!(relayed_opener(&headers(no_app), false), Err(RelayRefusal::NoApp));
        assert_eq!(relayed_opener(&headers(no_app), true), Err(RelayRefusal::NoApp));
    }
}
