//! Calls to the other actors of the app.

use crate::http::{Request, Response};
use crate::wit::actors as w;

pub use w::CallError;

/// Calls the actor at `address` (`class/name`) and waits for its answer,
/// an error, or this event's call deadline.
///
/// The callee sees a request event with [`crate::head::CALLER`],
/// [`crate::head::CHAIN`] and [`crate::head::APP`] set by the host (any
/// header of the reserved range set here is dropped); it reads them with
/// [`Request::caller`], [`Request::chain`] and [`Request::app`]. Calling
/// this actor itself, or an actor waiting on this event, fails `reentrant`
/// at once.
pub fn call(address: &str, request: Request) -> Result<Response, CallError> {
    w::call(address, &request.into()).map(Response::from)
}

impl Request {
    /// A request of `method` for `uri` (a path and query, starting with
    /// `/`), with no headers and no body.
    pub fn new(method: impl Into<String>, uri: impl Into<String>) -> Self {
        Self { method: method.into(), uri: uri.into(), headers: Vec::new(), body: Vec::new() }
    }

    /// A `GET` of `uri` with no headers and no body.
    pub fn get(uri: impl Into<String>) -> Self {
        Self::new("GET", uri)
    }

    /// A `HEAD` of `uri`.
    pub fn head(uri: impl Into<String>) -> Self {
        Self::new("HEAD", uri)
    }

    /// A `DELETE` of `uri`.
    pub fn delete(uri: impl Into<String>) -> Self {
        Self::new("DELETE", uri)
    }

    /// A `POST` of `uri` with `body`.
    pub fn post(uri: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Self::new("POST", uri).with_body(body)
    }

    /// A `PUT` of `uri` with `body`.
    pub fn put(uri: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Self::new("PUT", uri).with_body(body)
    }

    /// A `PATCH` of `uri` with `body`.
    pub fn patch(uri: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Self::new("PATCH", uri).with_body(body)
    }

    /// The request with a header added (any of the same name kept).
    pub fn with_header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    /// The request with `body` as its body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The request with `uri` as its path and query: a front forwarding
    /// what it was asked to an actor, under the actor's own path
    /// (`actors::call("cart/ann", req.forwarded_to("/items"))`). Method,
    /// headers and body stay; the host drops any header of its reserved
    /// range and sets the callee's caller headers itself.
    pub fn forwarded_to(mut self, uri: impl Into<String>) -> Self {
        self.uri = uri.into();
        self
    }
}
