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
    /// A `GET` of `uri` with no headers and no body.
    pub fn get(uri: impl Into<String>) -> Self {
        Self { method: "GET".into(), uri: uri.into(), headers: Vec::new(), body: Vec::new() }
    }

    /// A `POST` of `uri` with `body`.
    pub fn post(uri: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Self { method: "POST".into(), uri: uri.into(), headers: Vec::new(), body: body.into() }
    }

    /// The request with a header added.
    pub fn with_header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.to_owned(), value.as_ref().to_vec()));
        self
    }
}
