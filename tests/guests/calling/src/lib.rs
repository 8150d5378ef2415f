//! `/call`, `/many` and `/spin` for any guest: what was asked is in the
//! query, what came back is answered as JSON or text, so tests read actors
//! and fronts the same way.

use serde_json::{Value, json};
use wasmkeep_sdk::actors::CallError;
use wasmkeep_sdk::{Request, Response};

fn param(req: &Request, name: &str) -> String {
    req.query_param(name).unwrap_or_default()
}

fn error(e: CallError) -> Value {
    match e {
        CallError::Failed(reason) => json!({ "error": "failed", "reason": reason }),
        e => json!({ "error": format!("{e:?}").trim_start_matches("CallError::") }),
    }
}

/// One call to `to` at `path` with a body of `mb` MiB (and a forged
/// `x-wasmkeep-caller`, which the host must drop).
pub fn call(req: &Request) -> Value {
    let body = vec![b'x'; param(req, "mb").parse::<usize>().unwrap_or(0) << 20];
    let path = req.query_param("path").unwrap_or_else(|| "/peek".into());
    let answer = wasmkeep_sdk::actors::call(
        &param(req, "to"),
        Request {
            method: "GET".into(),
            uri: path,
            headers: vec![("x-wasmkeep-caller".into(), b"forged".to_vec())],
            body,
        },
    );
    match answer {
        Ok(r) => json!({
            "status": r.status,
            "headers": r.headers.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            "body": String::from_utf8_lossy(&r.body),
        }),
        Err(e) => error(e),
    }
}

/// The calls of `many`, made one after another: answers how many were
/// answered `200`.
pub fn sequential(req: &Request) -> Value {
    let to = param(req, "to");
    let path = req.query_param("path").unwrap_or_else(|| "/peek".into());
    let ok = to
        .split(',')
        .filter(|t| !t.is_empty())
        .filter(|t| wasmkeep_sdk::actors::call(t, Request::get(path.clone())).is_ok_and(|r| r.status == 200))
        .count();
    json!({ "ok": ok })
}

/// One call-many: to each of `to` (comma separated) at the matching entry
/// of `paths` (`|` separated) or at `path`, with the matching method of
/// `methods` (`|` separated; `GET` otherwise), each with a body of `mb`
/// MiB; started `after` milliseconds into the event.
pub fn many(req: &Request) -> Response {
    std::thread::sleep(std::time::Duration::from_millis(param(req, "after").parse().unwrap_or(0)));
    let methods = param(req, "methods");
    let methods: Vec<&str> = methods.split('|').collect();
    let to = param(req, "to");
    let targets: Vec<&str> = if to.is_empty() { vec![] } else { to.split(',').collect() };
    let paths = param(req, "paths");
    let paths: Vec<&str> = paths.split('|').collect();
    let path = req.query_param("path").unwrap_or_else(|| "/peek".into());
    let mb = param(req, "mb").parse::<usize>().unwrap_or(0);
    let entries: Vec<(&str, Request)> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let p = paths.get(i).filter(|p| !p.is_empty()).map(|p| p.to_string()).unwrap_or(path.clone());
            let method = methods.get(i).filter(|m| !m.is_empty()).copied().unwrap_or("GET").to_owned();
            (*t, Request { method, uri: p, headers: vec![], body: vec![b'x'; mb << 20] })
        })
        .collect();
    let out: Vec<_> = wasmkeep_sdk::calls::call_many(&entries)
        .into_iter()
        .map(|a| match a {
            Ok(r) => json!({ "status": r.status, "len": r.body.len(),
                "body": String::from_utf8_lossy(&r.body[..r.body.len().min(200)]) }),
            Err(e) => error(e),
        })
        .collect();
    Response::json(200, &out)
}

/// Computes `n` rounds, however long it waits for the CPU meanwhile.
pub fn spin(req: &Request) -> Response {
    let n: u64 = param(req, "n").parse().unwrap_or(0);
    let mut x: u64 = 1;
    for _ in 0..n {
        x = std::hint::black_box(x ^ (x << 13) ^ (x >> 7));
    }
    Response::text(200, x.to_string())
}
