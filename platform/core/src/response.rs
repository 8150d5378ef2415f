//! What an answer must be to travel as HTTP. Checked before an event's
//! writes commit, so an answer that cannot be delivered leaves nothing.

use http::{HeaderName, HeaderValue, StatusCode};

/// Why an answer cannot be delivered. For the node's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidResponse {
    #[error("status {0} is not an HTTP status")]
    Status(u16),
    #[error("header name {0:?} is not valid")]
    HeaderName(String),
    #[error("the value of header {0} is not valid")]
    HeaderValue(String),
}

pub fn check(status: u16, headers: &[(String, Vec<u8>)]) -> Result<(), InvalidResponse> {
    // 1xx answers are the host's to send (informational, upgrades).
    if !(200..=599).contains(&status) || StatusCode::from_u16(status).is_err() {
        return Err(InvalidResponse::Status(status));
    }
    for (name, value) in headers {
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| InvalidResponse::HeaderName(name.clone()))?;
        HeaderValue::from_bytes(value).map_err(|_| InvalidResponse::HeaderValue(name.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect()
    }

    #[test]
    fn statuses_and_headers() {
        assert_eq!(check(200, &h(&[("content-type", b"text/plain")])), Ok(()));
        assert_eq!(check(599, &[]), Ok(()));
        assert_eq!(check(101, &[]), Err(InvalidResponse::Status(101)));
        assert_eq!(check(199, &[]), Err(InvalidResponse::Status(199)));
        assert_eq!(check(600, &[]), Err(InvalidResponse::Status(600)));
        assert_eq!(check(0, &[]), Err(InvalidResponse::Status(0)));
        assert_eq!(check(200, &h(&[("bad name", b"x")])), Err(InvalidResponse::HeaderName("bad name".into())));
        assert_eq!(check(200, &h(&[("", b"x")])), Err(InvalidResponse::HeaderName("".into())));
        assert_eq!(check(200, &h(&[("x", b"a\nb")])), Err(InvalidResponse::HeaderValue("x".into())));
        assert_eq!(check(200, &h(&[("X-Upper", b"\xff")])), Ok(()));
    }
}
