//! A call's exchange on a stream of its own, as bytes: HTTP/1.1, the
//! request's head then its body whole (its length given), the answer's
//! head then its body whole. No sockets here: the transport writes what
//! [`request_head`] and [`answer_head`] give, and reads with
//! [`read_request`] and [`read_answer`].
//!
//! Why not a general HTTP/1.1 client and server: a call is one request and
//! one answer on a stream that carries nothing else and never upgrades, so
//! the sender finishes its side with the request, the peer finishes its
//! side with the answer, and each side reads what came whole. Two packets
//! and no task of hyper's a call, where a general connection on each side
//! needed five packets and a task. A relay (a WebSocket upgrade) is the one
//! exchange that goes on after its answer: hyper serves it.

use bytes::{Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, uri::PathAndQuery};

/// Most headers an answer may carry (hyper's own default).
pub const MAX_HEADERS: usize = 100;
/// Most bytes an answer's head may take, beyond its body's limit.
pub const MAX_HEAD: usize = 64 * 1024;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the answer's body is over {0} bytes")]
    TooLarge(usize),
    #[error("the answer cannot be read: {0}")]
    Malformed(&'static str),
}

/// Headers that frame or hold a connection: the wire's own, never a
/// message's. A call's length is the body's, whatever a guest's headers
/// said.
fn is_framing(name: &HeaderName) -> bool {
    name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION
}

/// A call's request head: the request line, `head` but its framing
/// headers, and the body's length.
pub fn request_head(method: &Method, path: &PathAndQuery, head: &HeaderMap, body_len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(256 + head.len() * 48);
    out.extend_from_slice(method.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(path.as_str().as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    write_headers(&mut out, head, body_len);
    out.freeze()
}

/// A request's head read off a stream: what it asks, and where its body
/// starts.
#[derive(Debug)]
pub struct RequestHead {
    pub parts: http::request::Parts,
    /// The head's length in bytes: the body starts here.
    pub head_len: usize,
    /// The body's length, as `content-length` gives it (none: empty).
    pub body_len: usize,
}

/// The request whose head starts `buf`, if its head is all there
/// (`None`: read more). Its body is framed by its length: a call's never
/// comes in chunks.
pub fn read_request(buf: &[u8]) -> Result<Option<RequestHead>, WireError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut slots);
    let head_len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(WireError::Malformed("the head is too long"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(WireError::Malformed("too many headers")),
        Err(_) => return Err(WireError::Malformed("not an HTTP/1.1 request")),
    };
    let method = parsed.method.and_then(|m| Method::from_bytes(m.as_bytes()).ok());
    let path = parsed.path.and_then(|p| p.parse::<http::Uri>().ok());
    let (Some(method), Some(uri)) = (method, path) else { return Err(WireError::Malformed("a bad request line")) };
    let mut request = http::Request::builder().method(method).uri(uri);
    let mut body_len = 0;
    for h in parsed.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| WireError::Malformed("a bad header name"))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| WireError::Malformed("a bad header value"))?;
        if name == CONTENT_LENGTH {
            let n = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok());
            body_len = n.ok_or(WireError::Malformed("a bad content-length"))?;
        } else if name == TRANSFER_ENCODING {
            return Err(WireError::Malformed("a call's body comes whole, never in chunks"));
        } else if !is_framing(&name) {
            request = request.header(name, value);
        }
    }
    let (parts, ()) = request.body(()).map_err(|_| WireError::Malformed("a bad request"))?.into_parts();
    Ok(Some(RequestHead { parts, head_len, body_len }))
}

/// An answer's head: the status line, `head` but its framing headers, and
/// the body's length.
pub fn answer_head(status: StatusCode, head: &HeaderMap, body_len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(128 + head.len() * 48);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    write_headers(&mut out, head, body_len);
    out.freeze()
}

fn write_headers(out: &mut BytesMut, head: &HeaderMap, body_len: usize) {
    for (name, value) in head.iter().filter(|(name, _)| !is_framing(name)) {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(body_len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
}

/// The answer in `stream`, everything the peer sent before finishing:
/// status, headers (the framing ones dropped) and body, framed by its
/// length, by chunks, or by the stream's end. A body over `body_limit` is
/// [`WireError::TooLarge`].
pub fn read_answer(stream: Bytes, body_limit: usize) -> Result<http::Response<Bytes>, WireError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut slots);
    let head_len = match parsed.parse(&stream) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(WireError::Malformed("the head ends early")),
        Err(httparse::Error::TooManyHeaders) => return Err(WireError::Malformed("too many headers")),
        Err(_) => return Err(WireError::Malformed("not an HTTP/1.1 answer")),
    };
    let status = parsed.code.and_then(|c| StatusCode::from_u16(c).ok()).ok_or(WireError::Malformed("a bad status"))?;
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    let (mut length, mut chunked) = (None, false);
    for h in parsed.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| WireError::Malformed("a bad header name"))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| WireError::Malformed("a bad header value"))?;
        if name == CONTENT_LENGTH {
            let n = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok());
            length = Some(n.ok_or(WireError::Malformed("a bad content-length"))?);
        } else if name == TRANSFER_ENCODING {
            chunked = h.value.eq_ignore_ascii_case(b"chunked");
            if !chunked {
                return Err(WireError::Malformed("a transfer-encoding other than chunked"));
            }
        }
        if !is_framing(&name) {
            headers.append(name, value);
        }
    }
    let rest = stream.slice(head_len..);
    let body = if chunked {
        unchunk(&rest, body_limit)?
    } else if let Some(n) = length {
        if n > body_limit {
            return Err(WireError::TooLarge(body_limit));
        }
        if rest.len() != n {
            return Err(WireError::Malformed("the body's length is not what its head says"));
        }
        rest
    } else {
        if rest.len() > body_limit {
            return Err(WireError::TooLarge(body_limit));
        }
        rest
    };
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// A chunked body's bytes, its trailers dropped.
fn unchunk(mut rest: &[u8], body_limit: usize) -> Result<Bytes, WireError> {
    let mut body = BytesMut::new();
    loop {
        let (start, size) = match httparse::parse_chunk_size(rest) {
            Ok(httparse::Status::Complete(found)) => found,
            _ => return Err(WireError::Malformed("a bad chunk")),
        };
        rest = &rest[start..];
        if size == 0 {
            // Trailers, if any, then the empty line.
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            return match httparse::parse_headers(rest, &mut slots) {
                Ok(httparse::Status::Complete(_)) => Ok(body.freeze()),
                _ => Err(WireError::Malformed("bad trailers")),
            };
        }
        let size = usize::try_from(size).map_err(|_| WireError::TooLarge(body_limit))?;
        if body.len().saturating_add(size) > body_limit {
            return Err(WireError::TooLarge(body_limit));
        }
        if rest.len() < size + 2 || &rest[size..size + 2] != b"\r\n" {
            return Err(WireError::Malformed("a chunk ends early"));
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str, limit: usize) -> Result<http::Response<Bytes>, WireError> {
        read_answer(Bytes::copy_from_slice(text.as_bytes()), limit)
    }

    #[test]
    fn a_request_head_carries_its_length_and_never_a_guests_framing() {
        let mut head = HeaderMap::new();
        head.insert("x-wasmkeep-target", HeaderValue::from_static("counter/a"));
        head.insert("content-length", HeaderValue::from_static("999"));
        head.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        head.insert("connection", HeaderValue::from_static("upgrade"));
        head.append("x-many", HeaderValue::from_static("1"));
        head.append("x-many", HeaderValue::from_static("2"));
        let path = PathAndQuery::from_static("/a/b?c=d");
        let bytes = request_head(&Method::POST, &path, &head, 5);
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "POST /a/b?c=d HTTP/1.1\r\nx-wasmkeep-target: counter/a\r\nx-many: 1\r\nx-many: 2\r\ncontent-length: 5\r\n\r\n"
        );
        // What hyper's server reads of it: the same request.
        let mut slots = [httparse::EMPTY_HEADER; 8];
        let mut parsed = httparse::Request::new(&mut slots);
        assert_eq!(parsed.parse(&bytes).unwrap(), httparse::Status::Complete(bytes.len()));
        assert_eq!(parsed.headers.len(), 4);
    }

    #[test]
    fn a_request_reads_back_as_it_was_written_and_waits_for_its_whole_head() {
        let mut head = HeaderMap::new();
        head.insert("x-wasmkeep-target", HeaderValue::from_static("counter/a"));
        head.append("x-many", HeaderValue::from_static("1"));
        head.append("x-many", HeaderValue::from_static("2"));
        let path = PathAndQuery::from_static("/a/b?c=d");
        let mut bytes = request_head(&Method::PUT, &path, &head, 5).to_vec();
        let head_len = bytes.len();
        bytes.extend_from_slice(b"hello");
        for cut in 0..head_len {
            assert!(read_request(&bytes[..cut]).unwrap().is_none(), "{cut}");
        }
        let read = read_request(&bytes).unwrap().unwrap();
        assert_eq!((read.head_len, read.body_len), (head_len, 5));
        assert_eq!((read.parts.method.as_str(), read.parts.uri.to_string()), ("PUT", "/a/b?c=d".to_owned()));
        assert_eq!(read.parts.headers, head, "the length is the wire's, not a header of the request");
        let no_length = read_request(b"GET / HTTP/1.1\r\n\r\n").unwrap().unwrap();
        assert_eq!(no_length.body_len, 0);
    }

    #[test]
    fn a_broken_or_endless_request_head_is_refused() {
        for broken in [
            &b"GET / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\ncontent-length: x\r\n\r\n",
            b"GET / HTTP/1.1\r\ncontent-length: -3\r\n\r\n",
            b"\x16\x03\x01 hello\r\n\r\n",
            b"GET  HTTP/1.1\r\n\r\n",
        ] {
            assert!(read_request(broken).is_err(), "{:?}", String::from_utf8_lossy(broken));
        }
        let endless = format!("GET / HTTP/1.1\r\nx: {}", "y".repeat(MAX_HEAD));
        assert_eq!(read_request(endless.as_bytes()).unwrap_err(), WireError::Malformed("the head is too long"));
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "x: 1\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(read_request(many.as_bytes()).unwrap_err(), WireError::Malformed("too many headers"));
    }

    #[test]
    fn an_answer_reads_back_as_it_was_written() {
        let mut head = HeaderMap::new();
        head.insert("x-wasmkeep-error", HeaderValue::from_static("refused;elsewhere;b"));
        head.insert("content-length", HeaderValue::from_static("1"));
        let mut bytes = answer_head(StatusCode::from_u16(421).unwrap(), &head, 3).to_vec();
        assert!(bytes.starts_with(b"HTTP/1.1 421 Misdirected Request\r\n"));
        bytes.extend_from_slice(b"abc");
        let read = read_answer(Bytes::from(bytes), 3).unwrap();
        assert_eq!((read.status().as_u16(), &read.body()[..]), (421, &b"abc"[..]));
        assert_eq!(read.headers().len(), 1);
        assert_eq!(read.headers()["x-wasmkeep-error"], "refused;elsewhere;b");
        let odd = answer_head(StatusCode::from_u16(599).unwrap(), &HeaderMap::new(), 0);
        assert_eq!(read_answer(odd, 0).unwrap().status().as_u16(), 599);
    }

    #[test]
    fn an_answer_is_read_by_its_length_its_chunks_or_the_streams_end() {
        let r =
            answer("HTTP/1.1 201 Created\r\ncontent-length: 5\r\nx-a: 1\r\nconnection: close\r\n\r\nhello", 5).unwrap();
        assert_eq!((r.status().as_u16(), &r.body()[..]), (201, &b"hello"[..]));
        assert_eq!(r.headers().len(), 1, "framing headers dropped: {:?}", r.headers());
        let r = answer(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nt: 1\r\n\r\n",
            5,
        )
        .unwrap();
        assert_eq!(&r.body()[..], b"hello");
        let r = answer("HTTP/1.1 404 Not Found\r\n\r\nno such", 10).unwrap();
        assert_eq!((r.status().as_u16(), &r.body()[..]), (404, &b"no such"[..]));
        let r = answer("HTTP/1.1 204 No Content\r\n\r\n", 0).unwrap();
        assert!(r.body().is_empty());
    }

    #[test]
    fn an_answer_over_the_limit_is_too_large_however_framed() {
        assert_eq!(
            answer("HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nhello!", 5).unwrap_err(),
            WireError::TooLarge(5)
        );
        assert_eq!(
            answer("HTTP/1.1 200 OK\r\ncontent-length: 99999999999\r\n\r\n", 5).unwrap_err(),
            WireError::TooLarge(5)
        );
        let chunks = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhel\r\n3\r\nlo!\r\n0\r\n\r\n";
        assert_eq!(answer(chunks, 5).unwrap_err(), WireError::TooLarge(5));
        let huge = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffff\r\n";
        assert_eq!(answer(huge, 5).unwrap_err(), WireError::TooLarge(5));
        assert_eq!(answer("HTTP/1.1 200 OK\r\n\r\nhello!", 5).unwrap_err(), WireError::TooLarge(5));
    }

    #[test]
    fn a_broken_answer_is_malformed_never_a_panic() {
        for broken in [
            "",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n",
            "SSH-2.0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhello",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nx",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhelXX0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n",
            "HTTP/1.1 99 Odd\r\n\r\n",
        ] {
            assert!(matches!(answer(broken, 100), Err(WireError::Malformed(_))), "{broken:?}");
        }
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "x: 1\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(answer(&many, 100).unwrap_err(), WireError::Malformed("too many headers"));
    }
}
