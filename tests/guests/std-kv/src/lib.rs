//! An actor whose storage is `wasi:keyvalue`, as a component written for
//! wasmCloud (`0.2.0-draft`) or Spin (`0.2.0-draft2`) keeps it. The SDK
//! only exports its events and, at `/storage`, reads what the store holds
//! the way a wasmkeep actor would. Every path takes `v=draft|draft2`.
//!
//! - `/open?store=S`: whether the store opens (`ok` or the error);
//! - `/set?key=K&value=V`, `/get?key=K` (404 when absent), `/exists`,
//!   `/delete`; `/big?mb=N` sets an N MiB value;
//! - `/fill?n=N`: keys `k00000`… set with `set-many`, 100 a batch;
//! - `/keys`: every key by `list-keys`, following cursors: the pages' sizes
//!   and the keys' count, first and last (`start=N`: from offset N, draft);
//! - `/get-many?key=K&n=N`: K named N times in one `get-many`: how many came;
//! - `/incr?key=K&by=N`: the counter after the increment;
//! - `/batch`: `set-many`, `get-many`, `delete-many` on keys `a`, `b`;
//! - `/cas` (draft2): a swap that holds and one that fails;
//! - `/trap?key=K`: sets K to `trapped`, then traps;
//! - `/hold?n=N`: opens N buckets and holds them all (the host's handle
//!   limit traps past it); `/cas-hold?n=N` (draft2) holds N compare-and-swap
//!   handles: how many it got, then the error that stopped it;
//! - `/storage?key=K`: K as `wasmkeep:actor/storage` reads it;
//! - `/env`: the environment, `NAME=VALUE` lines; `/config?key=K`: K by
//!   `wasi:config/store@0.2.0-rc.1`.

use serde_json::{Value, json};
use wasmkeep_sdk::{Actor, Request, Response, storage};

mod config {
    wit_bindgen::generate!({ path: "../../../platform/runtime/wit-standard/config@0.2.0-rc.1", world: "wasi:config/imports" });
}

mod draft {
    wit_bindgen::generate!({
        path: "../../../platform/runtime/wit-standard/keyvalue@0.2.0-draft",
        world: "wasi:keyvalue/imports",
    });
}
mod draft2 {
    wit_bindgen::generate!({
        path: "../../../platform/runtime/wit-standard/keyvalue@0.2.0-draft2",
        world: "wasi:keyvalue/imports",
    });
}

#[derive(Default)]
struct StdKv;

fn param(req: &Request, name: &str) -> String {
    req.query_param(name).unwrap_or_default()
}

fn shown<E: std::fmt::Debug>(e: E) -> Response {
    Response::text(500, format!("{e:?}"))
}

/// The operations both versions have, on module `$v`.
macro_rules! common {
    ($v:ident, $req:expr, $path:expr, $cursor:expr, $start:expr) => {{
        use $v::wasi::keyvalue::{batch, store};
        let req = $req;
        let key = param(req, "key");
        if $path == "/open" {
            return match store::open(&param(req, "store")) {
                Ok(_) => Response::text(200, "ok"),
                Err(e) => shown(e),
            };
        }
        let bucket = match store::open("") {
            Ok(b) => b,
            Err(e) => return shown(e),
        };
        match $path {
            "/set" => match bucket.set(&key, param(req, "value").as_bytes()) {
                Ok(()) => Response::text(200, "set"),
                Err(e) => shown(e),
            },
            "/big" => {
                let mb: usize = param(req, "mb").parse().unwrap_or(1);
                match bucket.set("big", &vec![7u8; mb << 20]) {
                    Ok(()) => Response::text(200, "set"),
                    Err(e) => shown(e),
                }
            }
            "/get" => match bucket.get(&key) {
                Ok(Some(v)) => Response::text(200, String::from_utf8_lossy(&v).into_owned()),
                Ok(None) => Response::text(404, "absent"),
                Err(e) => shown(e),
            },
            "/exists" => match bucket.exists(&key) {
                Ok(b) => Response::text(200, b.to_string()),
                Err(e) => shown(e),
            },
            "/delete" => match bucket.delete(&key) {
                Ok(()) => Response::text(200, "deleted"),
                Err(e) => shown(e),
            },
            "/fill" => {
                let n: usize = param(req, "n").parse().unwrap_or(0);
                let keys: Vec<String> = (0..n).map(|i| format!("k{i:05}")).collect();
                for chunk in keys.chunks(100) {
                    let pairs: Vec<(String, Vec<u8>)> = chunk.iter().map(|k| (k.clone(), b"v".to_vec())).collect();
                    if let Err(e) = batch::set_many(&bucket, &pairs) {
                        return shown(e);
                    }
                }
                Response::text(200, n.to_string())
            }
            "/keys" => {
                let mut pages = Vec::new();
                let mut all: Vec<String> = Vec::new();
                let mut cursor = $start(req);
                loop {
                    let page = match bucket.list_keys(cursor.as_ref().map($cursor)) {
                        Ok(p) => p,
                        Err(e) => return shown(e),
                    };
                    pages.push(page.keys.len());
                    all.extend(page.keys);
                    match page.cursor {
                        Some(c) if pages.len() < 100 => cursor = Some(c),
                        _ => break,
                    }
                }
                Response::json(
                    200,
                    &json!({"pages": pages, "count": all.len(), "first": all.first(), "last": all.last()}),
                )
            }
            "/get-many" => {
                let keys = vec![key.clone(); param(req, "n").parse().unwrap_or(1)];
                match batch::get_many(&bucket, &keys) {
                    Ok(got) => Response::text(200, got.iter().flatten().count().to_string()),
                    Err(e) => shown(e),
                }
            }
            "/batch" => {
                let pairs = vec![("a".to_string(), b"1".to_vec()), ("b".to_string(), b"2".to_vec())];
                let steps: Result<Value, store::Error> = (|| {
                    batch::set_many(&bucket, &pairs)?;
                    let got = batch::get_many(&bucket, &["a".into(), "missing".into(), "b".into()])?;
                    batch::delete_many(&bucket, &["a".into(), "missing".into()])?;
                    let got: Vec<Value> = got
                        .into_iter()
                        .map(|e| match e {
                            Some((k, v)) => json!([k, String::from_utf8_lossy(&v)]),
                            None => Value::Null,
                        })
                        .collect();
                    Ok(json!({"got": got, "a": bucket.exists("a")?, "b": bucket.exists("b")?}))
                })();
                match steps {
                    Ok(v) => Response::json(200, &v),
                    Err(e) => shown(e),
                }
            }
            "/trap" => {
                bucket.set(&key, b"trapped").unwrap();
                panic!("std-kv traps after a write on purpose");
            }
            _ => Response::text(404, "no such path"),
        }
    }};
}

fn cas(req: &Request) -> Response {
    use draft2::wasi::keyvalue::atomics::{self, Cas, CasError};
    use draft2::wasi::keyvalue::store;
    let key = param(req, "key");
    let steps: Result<Value, String> = (|| {
        let e = |e: store::Error| format!("{e:?}");
        let bucket = store::open("default").map_err(e)?;
        bucket.set(&key, b"1").map_err(e)?;
        let held = Cas::new(&bucket, &key).map_err(e)?;
        let seen = held.current().map_err(e)?;
        let first = atomics::swap(held, b"2").is_ok();
        let stale = Cas::new(&bucket, &key).map_err(e)?;
        bucket.set(&key, b"3").map_err(e)?;
        let retry = match atomics::swap(stale, b"4") {
            Err(CasError::CasFailed(again)) => again,
            other => return Err(format!("a stale swap gave {other:?}")),
        };
        let now = retry.current().map_err(e)?;
        let second = atomics::swap(retry, b"5").is_ok();
        let last = bucket.get(&key).map_err(e)?;
        let text = |v: Option<Vec<u8>>| v.map(|v| String::from_utf8_lossy(&v).into_owned());
        Ok(json!({"seen": text(seen), "first": first, "failed_saw": text(now), "second": second, "last": text(last)}))
    })();
    match steps {
        Ok(v) => Response::json(200, &v),
        Err(e) => Response::text(500, e),
    }
}

impl Actor for StdKv {
    fn on_request(&mut self, req: Request) -> Response {
        let path = req.path().to_owned();
        let version = param(&req, "v");
        match (version.as_str(), path.as_str()) {
            (_, "/storage") => match storage::get(&param(&req, "key")) {
                Ok(Some(v)) => Response::text(200, String::from_utf8_lossy(&v).into_owned()),
                Ok(None) => Response::text(404, "absent"),
                Err(e) => shown(e),
            },
            (_, "/env") => {
                let mut vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}\n")).collect();
                vars.sort();
                Response::text(200, vars.concat())
            }
            (_, "/config") => match config::wasi::config::store::get(&param(&req, "key")) {
                Ok(Some(v)) => Response::text(200, v),
                Ok(None) => Response::text(404, "unset"),
                Err(e) => shown(e),
            },
            ("draft", "/incr") => {
                let bucket = draft::wasi::keyvalue::store::open("").unwrap();
                let by: u64 = param(&req, "by").parse().unwrap_or(1);
                match draft::wasi::keyvalue::atomics::increment(&bucket, &param(&req, "key"), by) {
                    Ok(n) => Response::text(200, n.to_string()),
                    Err(e) => shown(e),
                }
            }
            ("draft2", "/incr") => {
                let bucket = draft2::wasi::keyvalue::store::open("").unwrap();
                let by: i64 = param(&req, "by").parse().unwrap_or(1);
                match draft2::wasi::keyvalue::atomics::increment(&bucket, &param(&req, "key"), by) {
                    Ok(n) => Response::text(200, n.to_string()),
                    Err(e) => shown(e),
                }
            }
            ("draft2", "/cas") => cas(&req),
            ("draft", "/hold") => {
                let n: usize = param(&req, "n").parse().unwrap_or(0);
                let held: Vec<_> = (0..n).map(|_| draft::wasi::keyvalue::store::open("").unwrap()).collect();
                Response::text(200, held.len().to_string())
            }
            ("draft2", "/cas-hold") => {
                use draft2::wasi::keyvalue::{atomics::Cas, store};
                let bucket = store::open("").unwrap();
                let mut held = Vec::new();
                for _ in 0..param(&req, "n").parse().unwrap_or(0) {
                    match Cas::new(&bucket, "k") {
                        Ok(cas) => held.push(cas),
                        Err(e) => return Response::text(200, format!("{} then {e:?}", held.len())),
                    }
                }
                drop(held);
                // Dropped, they are free again.
                let again = Cas::new(&bucket, "k").is_ok();
                Response::text(200, format!("{} then again {again}", param(&req, "n")))
            }
            ("draft", p) => common!(draft, &req, p, |c: &u64| *c, |r: &Request| param(r, "start").parse::<u64>().ok()),
            ("draft2", p) => common!(draft2, &req, p, |c: &String| c.as_str(), |_: &Request| None::<String>),
            _ => Response::text(404, "v must be draft or draft2"),
        }
    }
}

wasmkeep_sdk::actor!(StdKv);
