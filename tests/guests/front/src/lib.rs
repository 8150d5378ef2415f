//! The test front. Each path is one behaviour; see `tests/front.rs`.

use std::time::Duration;

use serde_json::json;
use wasmkeep_sdk::front::{Request, Response, values};

fn param(req: &Request, name: &str) -> String {
    req.query_param(name).unwrap_or_default()
}

fn handle(req: Request) -> Response {
    match (req.method(), req.path()) {
        ("GET", "/") => Response::text(200, "front"),
        ("GET", "/hello") => Response::text(200, "hello"),
        ("GET" | "POST", "/echo") => Response::json(
            200,
            &json!({
                "method": req.method(),
                "uri": req.uri,
                "headers": req.headers.iter().map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned())).collect::<Vec<_>>(),
                "body": String::from_utf8_lossy(&req.body),
            }),
        ),
        ("GET", "/leak") => Response::text(200, "leaky")
            .header("x-wasmkeep-caller", "forged/by/front")
            .header("X-Wasmkeep-Upgrade", "yes")
            .header("x-kept", "1"),
        ("GET", "/call") => Response::json(200, &calling::call(&req)),
        ("GET", "/many") => calling::many(&req),
        ("GET", "/sleep") => {
            std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
            Response::text(200, "slept")
        }
        ("GET", "/loop") => {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        ("GET", "/trap") => panic!("the front traps on purpose"),
        ("GET", "/value") => match values::get(&param(&req, "name")) {
            Some(v) => Response::text(200, v),
            None => Response::not_found(),
        },
        ("GET", "/fetch") => Response::json(200, &fetch::get(&param(&req, "url"))),
        ("GET", "/status") => Response::empty(param(&req, "code").parse().unwrap_or(200)),
        _ => Response::not_found(),
    }
}

wasmkeep_sdk::front!(handle);
