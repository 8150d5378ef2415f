//! A front that knows nothing of wasmkeep: `wasi:http` for its requests,
//! `wasi:config/store` at the version each other host speaks for its
//! settings, `std::env` (`wasi:cli/environment`) for its environment.
//!
//! `/env` answers `NAME=VALUE` lines; `/config/{rc1,draft,spin}?key=K`
//! the value of K (404 when unset); `/config-all/{rc1,draft,spin}` every
//! `key=value`, one a line.

use wasip2::http::types::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};

mod rc1 {
    wit_bindgen::generate!({ path: "../../../platform/runtime/wit-standard/config@0.2.0-rc.1", world: "wasi:config/imports" });
}
mod draft {
    wit_bindgen::generate!({ path: "../../../platform/runtime/wit-standard/config@0.2.0-draft", world: "wasi:config/imports" });
}
mod spin {
    wit_bindgen::generate!({
        path: "../../../platform/runtime/wit-standard/config@0.2.0-draft-2024-09-27",
        world: "wasi:config/imports",
    });
}

struct StdFront;

fn answer(out: ResponseOutparam, status: u16, body: &str) {
    let response = OutgoingResponse::new(Fields::new());
    let _ = response.set_status_code(status);
    let outgoing = response.body().unwrap();
    ResponseOutparam::set(out, Ok(response));
    {
        let stream = outgoing.write().unwrap();
        stream.blocking_write_and_flush(body.as_bytes()).unwrap();
    }
    OutgoingBody::finish(outgoing, None).unwrap();
}

fn lines(pairs: Vec<(String, String)>) -> String {
    pairs.into_iter().map(|(k, v)| format!("{k}={v}\n")).collect()
}

/// One value by key, at `version`; `Err` is the host's error, shown.
fn get(version: &str, key: &str) -> Option<Result<Option<String>, String>> {
    Some(match version {
        "rc1" => rc1::wasi::config::store::get(key).map_err(|e| format!("{e:?}")),
        "draft" => draft::wasi::config::store::get(key).map_err(|e| format!("{e:?}")),
        "spin" => spin::wasi::config::store::get(key).map_err(|e| format!("{e:?}")),
        _ => return None,
    })
}

fn get_all(version: &str) -> Option<Result<Vec<(String, String)>, String>> {
    Some(match version {
        "rc1" => rc1::wasi::config::store::get_all().map_err(|e| format!("{e:?}")),
        "draft" => draft::wasi::config::store::get_all().map_err(|e| format!("{e:?}")),
        "spin" => spin::wasi::config::store::get_all().map_err(|e| format!("{e:?}")),
        _ => return None,
    })
}

impl wasip2::exports::http::incoming_handler::Guest for StdFront {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path_and_query = request.path_with_query().unwrap_or_default();
        let (path, query) = path_and_query.split_once('?').unwrap_or((&path_and_query, ""));
        let key = query.strip_prefix("key=").unwrap_or_default();
        let mut parts = path.trim_start_matches('/').splitn(2, '/');
        match (parts.next().unwrap_or_default(), parts.next().unwrap_or_default()) {
            ("env", _) => {
                let mut vars: Vec<(String, String)> = std::env::vars().collect();
                vars.sort();
                answer(out, 200, &lines(vars))
            }
            ("config", version) => match get(version, key) {
                Some(Ok(Some(value))) => answer(out, 200, &value),
                Some(Ok(None)) => answer(out, 404, "unset"),
                Some(Err(e)) => answer(out, 500, &e),
                None => answer(out, 404, "no such version"),
            },
            ("config-all", version) => match get_all(version) {
                Some(Ok(mut all)) => {
                    all.sort();
                    answer(out, 200, &lines(all))
                }
                Some(Err(e)) => answer(out, 500, &e),
                None => answer(out, 404, "no such version"),
            },
            _ => answer(out, 404, "no such path"),
        }
    }
}

wasip2::http::proxy::export!(StdFront with_types_in wasip2);
