//! Which app a request's host names: `<app>.<tenant>.<base domain>`.
//!
//! A hosted node's public port picks the tenant's app only from the host
//! the client addressed: the absolute-form target's authority when there
//! is one (it wins over `Host`, RFC 9112 §3.2.2; HTTP/2's `:authority`
//! arrives there too), else the `Host` header. `X-Forwarded-Host` is
//! client-controlled and never looked at. Anything that does not match
//! exactly is no app at all.

use std::fmt;

use crate::names::{AppName, TenantId};

/// Longest DNS name, in bytes (without a trailing dot).
const DNS_NAME_MAX: usize = 253;
/// Longest DNS label, in bytes.
const DNS_LABEL_MAX: usize = 63;

/// Why a base domain is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("base domain is empty")]
    Empty,
    #[error("base domain is longer than {DNS_NAME_MAX} bytes")]
    TooLong,
    #[error("base domain label {0:?} must be 1-63 of letters, digits and '-', not starting or ending with '-'")]
    BadLabel(String),
    #[error("base domain ends in an all-digit label, like an IP address")]
    NumericTop,
}

/// The base domain a hosted node serves apps under, normalised (lower case, no trailing dot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseDomain(String);

impl BaseDomain {
    /// Parses a DNS name; one trailing dot is dropped, case is folded.
    pub fn parse(s: &str) -> Result<Self, HostError> {
        let s = s.strip_suffix('.').unwrap_or(s);
        if s.is_empty() {
            return Err(HostError::Empty);
        }
        if s.len() > DNS_NAME_MAX {
            return Err(HostError::TooLong);
        }
        for label in s.split('.') {
            let b = label.as_bytes();
            let ok = !b.is_empty()
                && b.len() <= DNS_LABEL_MAX
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
                && b.first() != Some(&b'-')
                && b.last() != Some(&b'-');
            if !ok {
                return Err(HostError::BadLabel(label.to_owned()));
            }
        }
        // An IPv4 address is not a domain apps can sit under.
        if s.rsplit('.').next().is_some_and(|top| top.bytes().all(|c| c.is_ascii_digit())) {
            return Err(HostError::NumericTop);
        }
        Ok(Self(s.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BaseDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An app's host name under the base domain.
pub fn app_host(app: &AppName, tenant: &TenantId, base: &BaseDomain) -> String {
    format!("{app}.{tenant}.{base}")
}

/// The (tenant, app) a request's authority names, if any.
pub fn app_of(authority: &str, base: &BaseDomain) -> Option<(TenantId, AppName)> {
    let host = strip_port(authority)?;
    let host = host.strip_suffix('.').unwrap_or(host);
    // `<app>.<tenant>` `.` `<base>`, the base matched whole labels only.
    let split = host.len().checked_sub(base.0.len() + 1)?;
    let (names, rest) = (host.get(..split)?, host.get(split..)?);
    if !rest.strip_prefix('.')?.eq_ignore_ascii_case(&base.0) {
        return None;
    }
    // A dot left in the tenant fails its name rule.
    let (app, tenant) = names.split_once('.')?;
    let tenant = TenantId::parse(&tenant.to_ascii_lowercase()).ok()?;
    let app = AppName::parse(&app.to_ascii_lowercase()).ok()?;
    Some((tenant, app))
}

/// The host with a `:port` suffix removed; `None` when the port is not a
/// decimal `u16`.
fn strip_port(authority: &str) -> Option<&str> {
    match authority.rsplit_once(':') {
        None => Some(authority),
        Some((host, port)) => {
            let digits = !port.is_empty() && port.bytes().all(|c| c.is_ascii_digit());
            (digits && port.parse::<u16>().is_ok()).then_some(host)
        }
    }
}

/// The authority a request names: the absolute-form (or authority-form)
/// target's when present, else the one `Host` header's value (`None` when
/// absent or not visible ASCII).
///
/// A request with more than one `Host` header is malformed (RFC 9112
/// §3.2); the caller must refuse it rather than pick one.
pub fn request_authority<'a>(uri: &'a http::Uri, host_header: Option<&'a http::HeaderValue>) -> Option<&'a str> {
    match uri.authority() {
        Some(authority) => Some(authority.as_str()),
        None => host_header?.to_str().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Uri};

    fn localhost() -> BaseDomain {
        BaseDomain::parse("localhost").unwrap()
    }

    fn names(tenant: &str, app: &str) -> Option<(TenantId, AppName)> {
        Some((TenantId::parse(tenant).unwrap(), AppName::parse(app).unwrap()))
    }

    fn none_for(base: &BaseDomain, hosts: &[&str]) {
        for host in hosts {
            assert_eq!(app_of(host, base), None, "{host:?}");
        }
    }

    #[test]
    fn base_domains_are_normalised() {
        for (raw, norm) in [
            ("localhost", "localhost"),
            ("LocalHost", "localhost"),
            ("localhost.", "localhost"),
            ("Apps.Example.COM.", "apps.example.com"),
            ("x-1.example", "x-1.example"),
            ("1a.example", "1a.example"),
            ("a.b2", "a.b2"),
        ] {
            let base = BaseDomain::parse(raw).unwrap();
            assert_eq!(base.as_str(), norm, "{raw}");
            assert_eq!(base.to_string(), norm, "{raw}");
        }
        let longest = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
        assert_eq!(longest.len(), 253);
        assert!(BaseDomain::parse(&longest).is_ok());
        assert!(BaseDomain::parse(&format!("{longest}.")).is_ok());
        assert!(BaseDomain::parse(&format!("{}.com", "a".repeat(63))).is_ok());
    }

    #[test]
    fn bad_base_domains() {
        assert_eq!(BaseDomain::parse(""), Err(HostError::Empty));
        assert_eq!(BaseDomain::parse("."), Err(HostError::Empty));
        let too_long = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(62));
        assert_eq!(BaseDomain::parse(&too_long), Err(HostError::TooLong));
        assert_eq!(BaseDomain::parse(&"a.".repeat(100_000)), Err(HostError::TooLong));
        for (raw, label) in [
            ("..", ""),
            ("a..b", ""),
            (".a", ""),
            ("a..", ""),
            ("-a.com", "-a"),
            ("a-.com", "a-"),
            ("a_b.com", "a_b"),
            ("a b", "a b"),
            ("café.com", "café"),
            ("localhost:8080", "localhost:8080"),
            ("[::1]", "[::1]"),
            ("*.example.com", "*"),
            ("user@example.com", "user@example"),
            ("%6c.com", "%6c"),
        ] {
            assert_eq!(BaseDomain::parse(raw), Err(HostError::BadLabel(label.to_owned())), "{raw:?}");
        }
        let long_label = "a".repeat(64);
        assert_eq!(BaseDomain::parse(&format!("{long_label}.com")), Err(HostError::BadLabel(long_label)));
        for ip in ["127.0.0.1", "10.0.0.1.", "a.123", "8080"] {
            assert_eq!(BaseDomain::parse(ip), Err(HostError::NumericTop), "{ip}");
        }
    }

    #[test]
    fn host_errors_are_one_line() {
        for e in [HostError::Empty, HostError::TooLong, HostError::BadLabel("a_b".into()), HostError::NumericTop] {
            let text = e.to_string();
            assert!(!text.is_empty() && !text.contains('\n'), "{text}");
        }
    }

    #[test]
    fn app_host_is_app_tenant_base() {
        let app = AppName::parse("counter").unwrap();
        let tenant = TenantId::parse("acme").unwrap();
        assert_eq!(app_host(&app, &tenant, &localhost()), "counter.acme.localhost");
        let base = BaseDomain::parse("Apps.Example.com.").unwrap();
        assert_eq!(app_host(&app, &tenant, &base), "counter.acme.apps.example.com");
    }

    #[test]
    fn app_host_round_trips() {
        for base in ["localhost", "apps.example.com", "x.y"] {
            let base = BaseDomain::parse(base).unwrap();
            for (tenant, app) in [("acme", "counter"), ("a", "1"), ("t_1-x", "my_app-2"), ("z", &"a".repeat(63))] {
                let (t, a) = (TenantId::parse(tenant).unwrap(), AppName::parse(app).unwrap());
                let host = app_host(&a, &t, &base);
                assert_eq!(app_of(&host, &base), Some((t.clone(), a.clone())), "{host}");
                assert_eq!(app_of(&format!("{host}:8080"), &base), Some((t, a)), "{host}");
            }
        }
    }

    #[test]
    fn names_the_app() {
        let base = localhost();
        assert_eq!(app_of("counter.acme.localhost:8080", &base), names("acme", "counter"));
        assert_eq!(app_of("counter.acme.localhost", &base), names("acme", "counter"));
        let base = BaseDomain::parse("apps.example.com").unwrap();
        assert_eq!(app_of("shop.acme.apps.example.com:443", &base), names("acme", "shop"));
        none_for(&base, &["shop.acme.example.com", "shop.acme.apps.example", "shop.acme.xapps.example.com"]);
    }

    #[test]
    fn case_is_folded() {
        let base = localhost();
        for host in [
            "Counter.ACME.localhost",
            "COUNTER.acme.LOCALHOST:8080",
            "counter.Acme.LocalHost.",
            "cOuNtEr.aCmE.lOcAlHoSt",
        ] {
            assert_eq!(app_of(host, &base), names("acme", "counter"), "{host}");
        }
        let base = BaseDomain::parse("Apps.Example.COM").unwrap();
        assert_eq!(app_of("counter.acme.APPS.example.Com", &base), names("acme", "counter"));
        // Only ASCII folds: a Kelvin sign is not a `k`.
        none_for(&localhost(), &["wor\u{212a}.acme.localhost", "counter.\u{212a}acme.localhost"]);
    }

    #[test]
    fn a_port_is_ignored_when_well_formed() {
        let base = localhost();
        for host in [
            "counter.acme.localhost:80",
            "counter.acme.localhost:0",
            "counter.acme.localhost:08080",
            "counter.acme.localhost:65535",
        ] {
            assert_eq!(app_of(host, &base), names("acme", "counter"), "{host}");
        }
        none_for(
            &base,
            &[
                "counter.acme.localhost:",
                "counter.acme.localhost:abc",
                "counter.acme.localhost:80a",
                "counter.acme.localhost:+80",
                "counter.acme.localhost:-1",
                "counter.acme.localhost: 80",
                "counter.acme.localhost:65536",
                "counter.acme.localhost:99999999999999999999",
                "counter.acme.localhost:80:80",
                "counter.acme.localhost::80",
                "counter.acme.localhost:८०",
                ":8080",
                ":",
            ],
        );
    }

    #[test]
    fn one_trailing_dot_is_accepted() {
        let base = localhost();
        assert_eq!(app_of("counter.acme.localhost.", &base), names("acme", "counter"));
        assert_eq!(app_of("counter.acme.localhost.:8080", &base), names("acme", "counter"));
        let dotted = BaseDomain::parse("localhost.").unwrap();
        assert_eq!(app_of("counter.acme.localhost.", &dotted), names("acme", "counter"));
        none_for(
            &base,
            &["counter.acme.localhost..", "counter.acme.localhost..:8080", ".", "counter.acme.localhost.:"],
        );
    }

    #[test]
    fn exactly_two_labels_before_the_base() {
        none_for(
            &localhost(),
            &[
                "",
                "localhost",
                "localhost.",
                ".localhost",
                "acme.localhost",
                "acme.localhost:8080",
                "a.b.c.localhost",
                "www.counter.acme.localhost",
                "a.b.c.d.localhost:8080",
            ],
        );
    }

    #[test]
    fn the_base_matches_whole_labels() {
        none_for(
            &localhost(),
            &[
                "counter.acme.evillocalhost",
                "counter.acme-localhost",
                "counter.acmelocalhost",
                "counter.acme.localhostx",
                "counter.acme.localhost.evil",
                "counter.acme.localhost.evil.com",
                "counter.acme.localhost.localhost",
                "counter.acme.local",
                "counter.acme.ocalhost",
            ],
        );
        let base = BaseDomain::parse("example.com").unwrap();
        none_for(&base, &["counter.acme.notexample.com", "counter.acme.example.com.evil", "counter.acmeexample.com"]);
    }

    #[test]
    fn ip_literals_name_no_app() {
        none_for(
            &localhost(),
            &[
                "[::1]:8080",
                "[::1]",
                "[::ffff:127.0.0.1]:8080",
                "[counter.acme.localhost]",
                "[counter.acme.localhost]:8080",
                "127.0.0.1",
                "127.0.0.1:8080",
                "0.0.0.0",
                "::1",
            ],
        );
    }

    #[test]
    fn userinfo_names_no_app() {
        none_for(
            &localhost(),
            &[
                "user@counter.acme.localhost",
                "user:pw@counter.acme.localhost:8080",
                "@counter.acme.localhost",
                "counter.acme.localhost@evil.com",
                "evil.com@counter.acme.localhost",
            ],
        );
    }

    #[test]
    fn empty_labels_name_no_app() {
        none_for(
            &localhost(),
            &[
                ".acme.localhost",
                "counter..localhost",
                "..localhost",
                "counter.acme..localhost",
                ".counter.acme.localhost",
                "counter.acme.localhost..",
            ],
        );
    }

    #[test]
    fn labels_follow_the_name_rules() {
        let base = localhost();
        // An app may start with a digit or hold `_`; a tenant must start with a letter.
        assert_eq!(app_of("1shop.acme.localhost", &base), names("acme", "1shop"));
        assert_eq!(app_of("my_app.my-team.localhost", &base), names("my-team", "my_app"));
        assert_eq!(app_of("-x.t_.localhost", &base), names("t_", "-x"));
        let app63 = "a".repeat(63);
        assert_eq!(app_of(&format!("{app63}.{app63}.localhost"), &base), names(&app63, &app63));
        none_for(
            &base,
            &[
                "counter.1acme.localhost",
                "counter._acme.localhost",
                "counter.-acme.localhost",
                &format!("{}.acme.localhost", "a".repeat(64)),
                &format!("counter.{}.localhost", "a".repeat(64)),
            ],
        );
    }

    #[test]
    fn odd_bytes_name_no_app() {
        none_for(
            &localhost(),
            &[
                "%63ounter.acme.localhost",
                "counter%2eacme.localhost",
                "counter.acme%2elocalhost",
                "counter.acme.localhost%2e",
                " counter.acme.localhost",
                "counter.acme.localhost ",
                "counter .acme.localhost",
                "counter.acme.localhost\t",
                "counter\0.acme.localhost",
                "counter\r\n.acme.localhost",
                "counter.acme.localhost/",
                "counter.acme.localhost/x",
                "counter.acme.localhost?x",
                "counter.acme.localhost#x",
                "counter.acme.localhost\\",
                "count*er.acme.localhost",
                "*.acme.localhost",
                "cöunter.acme.localhost",
                "counter.acmé.localhost",
                "é.acme.localhost",
                "acélocalhost",
                "éélocalhost",
                "counter.acme.localhosté",
                "counter.acme.localhost\u{200b}",
            ],
        );
    }

    #[test]
    fn very_long_input_names_no_app() {
        let base = localhost();
        let inputs = [
            format!("{}.acme.localhost", "a".repeat(100_000)),
            format!("counter.{}.localhost", "a".repeat(100_000)),
            format!("{}localhost", "a.".repeat(50_000)),
            format!("counter.acme.localhost:{}", "9".repeat(100_000)),
            ":".repeat(100_000),
            ".".repeat(100_000),
            "é".repeat(100_000),
            format!("counter.acme.{}", "localhost.".repeat(10_000)),
        ];
        for input in &inputs {
            assert_eq!(app_of(input, &base), None, "{}…", &input[..20]);
        }
    }

    #[test]
    fn absolute_form_wins_over_host() {
        let uri: Uri = "http://counter.acme.localhost:8080/x?y".parse().unwrap();
        let host = HeaderValue::from_static("other.evil.localhost");
        assert_eq!(request_authority(&uri, Some(&host)), Some("counter.acme.localhost:8080"));
        assert_eq!(request_authority(&uri, None), Some("counter.acme.localhost:8080"));
        // No falling back: an absolute-form target that names no app is no app.
        let uri: Uri = "http://127.0.0.1/".parse().unwrap();
        let host = HeaderValue::from_static("counter.acme.localhost");
        let authority = request_authority(&uri, Some(&host)).unwrap();
        assert_eq!(authority, "127.0.0.1");
        assert_eq!(app_of(authority, &localhost()), None);
    }

    #[test]
    fn absolute_form_keeps_case_and_userinfo() {
        let uri: Uri = "https://Counter.ACME.localhost/".parse().unwrap();
        let authority = request_authority(&uri, None).unwrap();
        assert_eq!(app_of(authority, &localhost()), names("acme", "counter"));
        let uri: Uri = "http://user@counter.acme.localhost/".parse().unwrap();
        let host = HeaderValue::from_static("counter.acme.localhost");
        let authority = request_authority(&uri, Some(&host)).unwrap();
        assert_eq!(authority, "user@counter.acme.localhost");
        assert_eq!(app_of(authority, &localhost()), None);
    }

    #[test]
    fn authority_form_is_the_target() {
        let uri: Uri = "counter.acme.localhost:443".parse().unwrap();
        let host = HeaderValue::from_static("other.acme.localhost");
        assert_eq!(request_authority(&uri, Some(&host)), Some("counter.acme.localhost:443"));
    }

    #[test]
    fn origin_form_falls_back_to_host() {
        let host = HeaderValue::from_static("counter.acme.localhost:8080");
        for target in ["/", "/x/y?z", "*"] {
            let uri: Uri = target.parse().unwrap();
            assert_eq!(request_authority(&uri, Some(&host)), Some("counter.acme.localhost:8080"), "{target}");
            let authority = request_authority(&uri, Some(&host)).unwrap();
            assert_eq!(app_of(authority, &localhost()), names("acme", "counter"));
        }
    }

    #[test]
    fn neither_names_nothing() {
        let uri: Uri = "/x".parse().unwrap();
        assert_eq!(request_authority(&uri, None), None);
    }

    #[test]
    fn a_host_that_is_not_visible_ascii_is_none() {
        let uri: Uri = "/".parse().unwrap();
        for bytes in [&b"caf\xe9.acme.localhost"[..], b"caf\xc3\xa9.acme.localhost", b"\xff"] {
            let host = HeaderValue::from_bytes(bytes).unwrap();
            assert_eq!(request_authority(&uri, Some(&host)), None, "{bytes:?}");
        }
        let host = HeaderValue::from_static("");
        assert_eq!(request_authority(&uri, Some(&host)), Some(""));
        assert_eq!(app_of("", &localhost()), None);
    }
}
