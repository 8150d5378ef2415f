//! A front on `wasi:http` itself, for what a whole-body SDK cannot show:
//! `/trailers` answers the names of the request's trailers; `/drip?ms=N`
//! streams a body 1 KiB every N ms, never ending (`&len=1` declares a
//! Content-Length of 1 MiB); `/upload` reads the whole body and answers its
//! length. `/alias?n=N&kib=K` asks the host to copy N header values that
//! all alias one K KiB buffer (through the canonical ABI, as a hostile
//! guest would: it need not hold what it asks the host to copy);
//! `&via=set` through `fields.set`, `&via=call` as the headers of an
//! `actors.call`.

use std::time::Duration;

// The type of `wasmkeep:actor/actors`, for the raw import below.
wit_bindgen::generate!({
    inline: "package test:raw-front; world imports { import wasmkeep:actor/actors@0.2.0; }",
    path: "../../../wit",
    generate_all,
});

use wasip2::http::types::{Fields, IncomingBody, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};
use wasip2::io::streams::StreamError;

struct RawFront;

fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == name).map(|(_, v)| v.to_owned()))
}

fn answer(out: ResponseOutparam, status: u16, headers: &[(&str, String)], body: &[u8]) {
    let fields = Fields::new();
    for (n, v) in headers {
        let _ = fields.append(n, v.as_bytes());
    }
    let response = OutgoingResponse::new(fields);
    let _ = response.set_status_code(status);
    let outgoing = response.body().unwrap();
    ResponseOutparam::set(out, Ok(response));
    {
        let stream = outgoing.write().unwrap();
        for chunk in body.chunks(4096) {
            stream.blocking_write_and_flush(chunk).unwrap();
        }
    }
    OutgoingBody::finish(outgoing, None).unwrap();
}

/// Reads the body whole; its length and its trailers' names.
fn read_all(request: IncomingRequest) -> (u64, Vec<String>) {
    let body = request.consume().unwrap();
    let mut len = 0u64;
    {
        let stream = body.stream().unwrap();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => len += chunk.len() as u64,
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(_)) => return (len, vec!["<failed>".into()]),
            }
        }
    }
    let trailers = IncomingBody::finish(body);
    trailers.subscribe().block();
    let names = match trailers.get() {
        Some(Ok(Ok(Some(t)))) => t.entries().into_iter().map(|(n, _)| n).collect(),
        _ => vec![],
    };
    (len, names)
}

/// `n` header entries, each `x-alias: <the buffer>`, the buffer `kib` KiB
/// once in the guest's memory, given to the host `via` `fields.from-list`,
/// `fields.set` (the values alone) or `actors.call` (a request's headers):
/// what the host answered.
fn alias(n: usize, kib: usize, via: &str) -> String {
    #[link(wasm_import_module = "wasi:http/types@0.2.12")]
    unsafe extern "C" {
        #[link_name = "[static]fields.from-list"]
        fn from_list(entries: *mut u8, len: usize, ret: *mut u8);
        #[link_name = "[method]fields.set"]
        fn set(fields: i32, name: *const u8, name_len: usize, values: *mut u8, len: usize, ret: *mut u8);
    }
    #[link(wasm_import_module = "wasmkeep:actor/actors@0.2.0")]
    unsafe extern "C" {
        #[link_name = "call"]
        fn call(
            address: *const u8,
            address_len: usize,
            method: *const u8,
            method_len: usize,
            path: *const u8,
            path_len: usize,
            headers: *mut u8,
            headers_len: usize,
            body: *const u8,
            body_len: usize,
            ret: *mut u8,
        );
    }
    let value = vec![b'a'; kib << 10];
    let name = b"x-alias";
    let mut ret = [0u32; 16];
    match via {
        "set" => {
            let mut values: Vec<[usize; 2]> = (0..n).map(|_| [value.as_ptr() as usize, value.len()]).collect();
            let fields = Fields::new();
            let handle = fields.handle() as i32;
            unsafe { set(handle, name.as_ptr(), name.len(), values.as_mut_ptr().cast(), n, ret.as_mut_ptr().cast()) };
        }
        "call" => {
            // Each entry is (name pointer, name length, value pointer, value length).
            let mut entries: Vec<[usize; 4]> =
                (0..n).map(|_| [name.as_ptr() as usize, name.len(), value.as_ptr() as usize, value.len()]).collect();
            let (address, method, path) = (b"probe/a", b"GET", b"/ping");
            unsafe {
                call(
                    address.as_ptr(),
                    address.len(),
                    method.as_ptr(),
                    method.len(),
                    path.as_ptr(),
                    path.len(),
                    entries.as_mut_ptr().cast(),
                    n,
                    [].as_ptr(),
                    0,
                    ret.as_mut_ptr().cast(),
                )
            };
            return match ret[0] & 0xff {
                0 => "called".to_owned(),
                _ => format!("call-error {}", ret[1] & 0xff),
            };
        }
        _ => {
            let mut entries: Vec<[usize; 4]> =
                (0..n).map(|_| [name.as_ptr() as usize, name.len(), value.as_ptr() as usize, value.len()]).collect();
            unsafe { from_list(entries.as_mut_ptr().cast(), n, ret.as_mut_ptr().cast()) };
        }
    }
    match ret[0] & 0xff {
        0 => "fields".to_owned(),
        _ => format!("header-error {}", ret[1] & 0xff),
    }
}

impl wasip2::exports::http::incoming_handler::Guest for RawFront {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let uri = request.path_with_query().unwrap_or_default();
        let (path, query) = uri.split_once('?').unwrap_or((&uri, ""));
        match path {
            "/trailers" => {
                let (_, names) = read_all(request);
                answer(out, 200, &[], names.join(",").as_bytes());
            }
            "/upload" => {
                let (len, _) = read_all(request);
                answer(out, 200, &[], len.to_string().as_bytes());
            }
            "/drip" => {
                let ms: u64 = param(query, "ms").and_then(|v| v.parse().ok()).unwrap_or(100);
                let headers = match param(query, "len") {
                    Some(_) => vec![("content-length", (1u64 << 20).to_string())],
                    None => vec![],
                };
                let fields = Fields::new();
                for (n, v) in &headers {
                    let _ = fields.append(n, v.as_bytes());
                }
                let response = OutgoingResponse::new(fields);
                let outgoing = response.body().unwrap();
                ResponseOutparam::set(out, Ok(response));
                let stream = outgoing.write().unwrap();
                let chunk = [b'd'; 1024];
                loop {
                    if stream.blocking_write_and_flush(&chunk).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(ms));
                }
            }
            "/alias" => {
                let n = param(query, "n").and_then(|v| v.parse().ok()).unwrap_or(1);
                let kib = param(query, "kib").and_then(|v| v.parse().ok()).unwrap_or(1);
                let via = param(query, "via").unwrap_or_default();
                answer(out, 200, &[], alias(n, kib, &via).as_bytes());
            }
            _ => answer(out, 404, &[], b"no such path"),
        }
    }
}

wasip2::http::proxy::export!(RawFront with_types_in wasip2);
