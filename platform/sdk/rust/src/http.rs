//! Requests and responses, as an actor sees and answers them.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::head;
use crate::wit::actors as w;

/// A request event: an HTTP request at `/actor/<class>/<name>/...` (the
/// path is what follows the name) or a call from the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path and query, starting with `/`.
    pub uri: String,
    /// Header names are lowercase.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The path without its query.
    pub fn path(&self) -> &str {
        self.uri.split_once('?').map_or(&self.uri, |(p, _)| p)
    }

    /// The path's segments, each percent-decoded (`None` if one is not
    /// UTF-8 once decoded): `/page/bob%20smith` is `["page", "bob smith"]`.
    pub fn segments(&self) -> Option<Vec<String>> {
        self.path().trim_start_matches('/').split('/').map(percent_decode).collect()
    }

    /// The query, without `?`.
    pub fn query(&self) -> Option<&str> {
        self.uri.split_once('?').map(|(_, q)| q)
    }

    /// A query parameter's value, percent-decoded (`None` if absent or
    /// not UTF-8 once decoded).
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query()?.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k).as_deref() == Some(name)).then(|| percent_decode(v)).flatten()
        })
    }

    /// A field of an `application/x-www-form-urlencoded` body (an HTML
    /// form's POST), decoded (`+` is a space).
    pub fn form_param(&self, name: &str) -> Option<String> {
        let body = std::str::from_utf8(&self.body).ok()?;
        body.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| percent_decode(&s.replace('+', " "));
            (decode(k).as_deref() == Some(name)).then(|| decode(v)).flatten()
        })
    }

    /// The first value of a header, if it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// Who calls, when an actor or the front of the app calls ([`head::CALLER`]);
    /// `None` for an outside caller (an HTTP client), whose request has no
    /// such header. Only the host sets it: the reserved range
    /// ([`head::PREFIX`]) is removed from what clients send and from what
    /// callers put on a call.
    pub fn caller(&self) -> Option<head::Caller> {
        head::parse_caller(self.header(head::CALLER)?)
    }

    /// The actors waiting on this call, oldest first ([`head::CHAIN`]):
    /// empty when only the caller waits, `None` for an outside caller. Set
    /// only by the host, like [`Request::caller`].
    pub fn chain(&self) -> Option<Vec<head::ActorRef>> {
        head::parse_chain(self.header(head::CHAIN)?)
    }

    /// The tenant and app of an inside call ([`head::APP`]); `None` for an
    /// outside caller. Set only by the host, like [`Request::caller`].
    pub fn app(&self) -> Option<(String, String)> {
        head::parse_app(self.header(head::APP)?)
    }

    /// The body as text, if it is UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

impl From<w::Request> for Request {
    fn from(r: w::Request) -> Self {
        Self { method: r.method, uri: r.path, headers: r.headers, body: r.body }
    }
}

impl From<Request> for w::Request {
    fn from(r: Request) -> Self {
        Self { method: r.method, path: r.uri, headers: r.headers, body: r.body }
    }
}

/// A response: status, headers, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Response {
    /// An empty response with `status`.
    pub fn empty(status: u16) -> Self {
        Self { status, headers: Vec::new(), body: Vec::new() }
    }

    /// A plain-text response.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self::empty(status).header("content-type", "text/plain; charset=utf-8").body(body.into().into_bytes())
    }

    /// A JSON response.
    pub fn json<T: Serialize + ?Sized>(status: u16, value: &T) -> Self {
        let body = serde_json::to_vec(value).expect("a value serializes as JSON");
        Self::empty(status).header("content-type", "application/json").body(body)
    }

    /// `404` with a short text.
    pub fn not_found() -> Self {
        Self::text(404, "not found")
    }

    /// Sets a header: any of the same name (in any case) is replaced, as
    /// `http::HeaderMap::insert` does. `Response::text(200, page)
    /// .header("content-type", "text/html")` has one `Content-Type`.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.append_header(name, value)
    }

    /// Adds a header, keeping any of the same name (`set-cookie` twice), as
    /// `http::HeaderMap::append` does.
    pub fn append_header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    /// Replaces the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The body as text, if it is UTF-8.
    pub fn text_body(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }
}

impl From<Response> for w::Response {
    fn from(r: Response) -> Self {
        Self { status: r.status, headers: r.headers, body: r.body }
    }
}

impl From<w::Response> for Response {
    fn from(r: w::Response) -> Self {
        Self { status: r.status, headers: r.headers, body: r.body }
    }
}

/// Whether `request` is a WebSocket upgrade the host kept aside for the
/// front: the host sets [`head::UPGRADE`] to exactly
/// [`head::UPGRADE_WEBSOCKET`], and no client can. A front answers one with
/// [`crate::front::hand_off`], or with any response to refuse it.
pub fn is_websocket(request: &Request) -> bool {
    request.header(head::UPGRADE) == Some(head::UPGRADE_WEBSOCKET)
}

/// Decodes `%XX` escapes; `None` if the result is not UTF-8. Lenient, as
/// URLs need: a `%` that begins no escape stays as it is (names in the head
/// are decoded strictly, by [`head::decode_name`]).
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str) -> Request {
        Request { method: "GET".into(), uri: uri.into(), headers: vec![], body: vec![] }
    }

    #[test]
    fn query_params_are_decoded() {
        let r = req("/p?a=1&b=x%2Fy%20z&c&%64=4&bad=%FF");
        assert_eq!(r.path(), "/p");
        assert_eq!(r.query_param("a").as_deref(), Some("1"));
        assert_eq!(r.query_param("b").as_deref(), Some("x/y z"));
        assert_eq!(r.query_param("c").as_deref(), Some(""));
        assert_eq!(r.query_param("d").as_deref(), Some("4"));
        assert_eq!(r.query_param("bad"), None);
        assert_eq!(r.query_param("zz"), None);
        assert_eq!(req("/p").query_param("a"), None);
        assert_eq!(percent_decode("100%"), Some("100%".into()));
    }

    #[test]
    fn names_are_encoded_as_the_host_decodes_them() {
        assert_eq!(head::encode_name("lobby/main é~-._"), "lobby%2Fmain%20%C3%A9~-._");
        assert_eq!(percent_decode(&head::encode_name("a/b c%")), Some("a/b c%".into()));
    }

    #[test]
    fn only_the_hosts_mark_makes_a_websocket() {
        let mut r = req("/ws");
        assert!(!is_websocket(&r));
        r.headers.push(("x-wasmkeep-upgrade".into(), b"websocket".to_vec()));
        assert!(is_websocket(&r));
    }

    #[test]
    fn form_fields_are_decoded() {
        let mut r = req("/login");
        r.body = b"user=ann+b%C3%A9&room=lobby&empty=".to_vec();
        assert_eq!(r.form_param("user").as_deref(), Some("ann b\u{e9}"));
        assert_eq!(r.form_param("room").as_deref(), Some("lobby"));
        assert_eq!(r.form_param("empty").as_deref(), Some(""));
        assert_eq!(r.form_param("missing"), None);
    }

    #[test]
    fn header_sets_and_append_header_adds() {
        let page = Response::text(200, "<p>").header("Content-Type", "text/html");
        assert_eq!(page.headers, [("content-type".to_owned(), b"text/html".to_vec())]);
        let cookies = Response::empty(200).append_header("set-cookie", "a=1").append_header("Set-Cookie", "b=2");
        assert_eq!(cookies.headers.len(), 2);
        assert_eq!(cookies.header("set-cookie", "c=3").headers, [("set-cookie".to_owned(), b"c=3".to_vec())]);
    }

    #[test]
    fn requests_of_every_method_and_a_forwarded_one() {
        let put = Request::put("/kv?key=a", "v").with_header("content-type", "text/plain");
        assert_eq!((put.method(), put.uri.as_str(), put.body.as_slice()), ("PUT", "/kv?key=a", &b"v"[..]));
        assert_eq!(Request::delete("/").method(), "DELETE");
        assert_eq!(Request::patch("/", "x").method(), "PATCH");
        assert_eq!(Request::head("/").method(), "HEAD");
        assert_eq!(Request::new("OPTIONS", "/").method(), "OPTIONS");
        let asked = Request::post("/cart/ann?x=1", "{}").with_header("content-type", "application/json");
        let forwarded = asked.clone().forwarded_to("/items");
        assert_eq!((forwarded.method(), forwarded.uri.as_str()), ("POST", "/items"));
        assert_eq!((forwarded.headers, forwarded.body), (asked.headers, asked.body));
    }

    #[test]
    fn path_segments_are_decoded() {
        assert_eq!(req("/page/bob%20smith?x=1").segments(), Some(vec!["page".into(), "bob smith".into()]));
        assert_eq!(req("/a%2Fb/").segments(), Some(vec!["a/b".into(), "".into()]));
        assert_eq!(req("/").segments(), Some(vec!["".into()]));
        assert_eq!(req("/%FF").segments(), None);
    }
}
