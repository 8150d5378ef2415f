//! Several calls at once (`calls.call-many`).

use crate::actors::CallError;
use crate::http::{Request, Response};
use crate::wit::calls as w;

/// Starts every call at once and returns when all have answered or this
/// event's call deadline passed: one result per entry, in input order.
///
/// At most 16 entries; the requests together and the answers together at
/// most 16 MiB. No order between entries is promised. Do not let the
/// callees of one batch call each other: a cycle between them ends in
/// `timeout`.
pub fn call_many(calls: &[(&str, Request)]) -> Vec<Result<Response, CallError>> {
    let entries: Vec<(String, crate::wit::actors::Request)> =
        calls.iter().map(|(a, r)| (a.to_string(), r.clone().into())).collect();
    w::call_many(&entries).into_iter().map(|r| r.map(Response::from)).collect()
}
