//! Fronts: an app's handler for every request outside `/actor/`.
//!
//! A front is a function from a [`Request`] to a [`Response`]; [`front!`]
//! exports it as the component's `wasi:http/incoming-handler`. Every
//! request runs on a fresh instance, so a front keeps nothing between
//! requests: what must last lives in actors, which a front reaches with
//! [`actors::call`] and [`calls::call_many`] as the inside caller
//! `<tenant>/_front/main`.
//!
//! ```ignore
//! use wasmkeep_sdk::front::{Request, Response, actors};
//!
//! fn handle(req: Request) -> Response {
//!     match req.path().strip_prefix("/hello/") {
//!         Some(name) => match actors::call(&format!("greeter/{name}"), Request::get("/")) {
//!             Ok(answer) => answer,
//!             Err(e) => Response::text(502, format!("{e:?}")),
//!         },
//!         None => Response::not_found(),
//!     }
//! }
//!
//! wasmkeep_sdk::front!(handle);
//! ```
//!
//! [`front!`]: crate::front!

pub use crate::http::{Request, Response, is_websocket};
pub use crate::values;

use crate::head;

/// Hands a WebSocket upgrade to the actor `class/name`: its
/// `on-websocket-open` sees `path` (starting with `/`, query included).
/// Answer this to a request for which [`is_websocket`] holds; the host
/// then opens the socket on the actor as the front, an inside caller (an
/// `internal` class is reached, the actor is created if missing). To any
/// other request it is an ordinary `426`: the host honours a hand-off only
/// on an upgrade it marked. A refused open reaches the client as `403`
/// with the actor's reason.
pub fn hand_off(class: &str, name: &str, path: &str) -> Response {
    Response::text(426, "websocket upgrade required")
        .header(head::HANDOFF_CLASS, class)
        .header(head::HANDOFF_NAME, head::encode_name(name))
        .header(head::HANDOFF_PATH, path)
}

/// Calls to the app's actors, from a front: the same as an actor's.
pub mod actors {
    pub use crate::actors::{CallError, call};
}

/// Several calls at once, from a front: the same as an actor's. A front's
/// batch waits until 5 s before the request's wall ends at most.
pub mod calls {
    pub use crate::calls::call_many;
}

#[doc(hidden)]
pub mod __private {
    use wasip2::http::types::{
        Fields, IncomingBody, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
    };
    use wasip2::io::streams::StreamError;

    use super::{Request, Response};

    /// Reads the request, runs the front's function, writes its answer.
    pub fn handle(front: fn(Request) -> Response, incoming: IncomingRequest, out: ResponseOutparam) {
        let response = match read(incoming) {
            Some(request) => front(request),
            None => Response::text(400, "the request body could not be read"),
        };
        write(response, out);
    }

    fn read(incoming: IncomingRequest) -> Option<Request> {
        let method = match incoming.method() {
            Method::Get => "GET".to_owned(),
            Method::Head => "HEAD".into(),
            Method::Post => "POST".into(),
            Method::Put => "PUT".into(),
            Method::Delete => "DELETE".into(),
            Method::Connect => "CONNECT".into(),
            Method::Options => "OPTIONS".into(),
            Method::Trace => "TRACE".into(),
            Method::Patch => "PATCH".into(),
            Method::Other(m) => m,
        };
        let uri = incoming.path_with_query().unwrap_or_else(|| "/".into());
        let headers = incoming.headers().entries();
        let body_resource = incoming.consume().ok()?;
        let mut body = Vec::new();
        {
            let stream = body_resource.stream().ok()?;
            loop {
                match stream.blocking_read(64 * 1024) {
                    Ok(chunk) => body.extend_from_slice(&chunk),
                    Err(StreamError::Closed) => break,
                    Err(StreamError::LastOperationFailed(_)) => return None,
                }
            }
        }
        drop(IncomingBody::finish(body_resource));
        Some(Request { method, uri, headers, body })
    }

    fn write(response: Response, out: ResponseOutparam) {
        let fields = Fields::new();
        for (name, value) in &response.headers {
            // The body's length is set below; framing is the host's.
            if name.eq_ignore_ascii_case("content-length") {
                continue;
            }
            // A header HTTP cannot carry is dropped, as the host would.
            let _ = fields.append(name, value);
        }
        let _ = fields.set("content-length", &[response.body.len().to_string().into_bytes()]);
        let outgoing = OutgoingResponse::new(fields);
        if outgoing.set_status_code(response.status).is_err() {
            let _ = outgoing.set_status_code(500);
        }
        let Ok(body) = outgoing.body() else { return };
        ResponseOutparam::set(out, Ok(outgoing));
        {
            let Ok(stream) = body.write() else { return };
            for chunk in response.body.chunks(4096) {
                if stream.blocking_write_and_flush(chunk).is_err() {
                    return;
                }
            }
        }
        let _ = OutgoingBody::finish(body, None);
    }
}

/// Exports a function `fn(Request) -> Response` as the app's front.
#[macro_export]
macro_rules! front {
    ($handle:path) => {
        const _: () = {
            struct __WasmkeepFront;
            impl $crate::__wasip2::exports::http::incoming_handler::Guest for __WasmkeepFront {
                fn handle(
                    request: $crate::__wasip2::http::types::IncomingRequest,
                    out: $crate::__wasip2::http::types::ResponseOutparam,
                ) {
                    $crate::front::__private::handle($handle, request, out)
                }
            }
    $crate::__wasip2::http::proxy::export!(__WasmkeepFront with_types_in $crate::__wasip2);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_off_is_a_426_with_the_three_headers() {
        let r = hand_off("room", "lobby/main é", "/ws?user=ann");
        assert_eq!(r.status, 426);
        let h = |n: &str| r.headers.iter().filter(|(k, _)| k == n).map(|(_, v)| v.clone()).collect::<Vec<_>>();
        assert_eq!(h("x-wasmkeep-handoff-class"), [b"room".to_vec()]);
        assert_eq!(h("x-wasmkeep-handoff-name"), [b"lobby%2Fmain%20%C3%A9".to_vec()]);
        assert_eq!(h("x-wasmkeep-handoff-path"), [b"/ws?user=ann".to_vec()]);
    }
}
