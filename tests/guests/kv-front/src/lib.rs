//! A front written for a host whose fronts have a key-value store.

use wasip2::http::types::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};

wit_bindgen::generate!({ path: "../../../platform/runtime/wit-standard/keyvalue@0.2.0-draft", world: "wasi:keyvalue/imports" });

struct KvFront;

impl wasip2::exports::http::incoming_handler::Guest for KvFront {
    fn handle(_request: IncomingRequest, out: ResponseOutparam) {
        let seen = wasi::keyvalue::store::open("").and_then(|b| b.get("k")).is_ok();
        let response = OutgoingResponse::new(Fields::new());
        let outgoing = response.body().unwrap();
        ResponseOutparam::set(out, Ok(response));
        {
            let stream = outgoing.write().unwrap();
            stream.blocking_write_and_flush(if seen { b"seen" } else { b"none" }).unwrap();
        }
        OutgoingBody::finish(outgoing, None).unwrap();
    }
}

wasip2::http::proxy::export!(KvFront with_types_in wasip2);
