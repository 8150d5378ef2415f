//! The test front. Each path is one behaviour; see `tests/front.rs`.

use std::time::Duration;

use serde_json::json;
use wasmkeep_sdk::front::{Request, Response, hand_off, is_websocket, values};

fn param(req: &Request, name: &str) -> String {
    req.query_param(name).unwrap_or_default()
}

fn handle(req: Request) -> Response {
    let segments = req.segments().unwrap_or_default();
    if let [first, class, name] = segments.as_slice()
        && first == "ws"
    {
        // Hands the socket to `class/name`, its open seeing `path`.
        let path = req.query_param("path").unwrap_or_else(|| "/ws".into());
        return hand_off(class, name, &path);
    }
    match (req.method(), req.path()) {
        ("GET", "/is-websocket") => Response::text(200, is_websocket(&req).to_string()),
        ("GET", "/broken") => {
            let ok = hand_off("internal", "room", "/ws");
            let keep = |skip: &str| {
                let mut r = Response::text(426, "broken");
                for (n, v) in ok.headers.iter().filter(|(n, _)| n != skip) {
                    r = r.header(n, v);
                }
                r
            };
            match param(&req, "which").as_str() {
                "missing" => keep("x-wasmkeep-handoff-path"),
                "repeated" => keep("").append_header("x-wasmkeep-handoff-class", "internal"),
                "badname" => keep("x-wasmkeep-handoff-name").header("x-wasmkeep-handoff-name", "%FF"),
                "badescape" => keep("x-wasmkeep-handoff-name").header("x-wasmkeep-handoff-name", "a%zz"),
                "fragment" => keep("x-wasmkeep-handoff-path").header("x-wasmkeep-handoff-path", "/a?b=1#frag"),
                _ => keep("x-wasmkeep-handoff-path").header("x-wasmkeep-handoff-path", "no-slash"),
            }
        }
        ("GET", "/relay") => {
            // Copies an upstream's answer headers onto its own answer.
            let fetched = fetch::get(&param(&req, "url"));
            let mut r = Response::text(200, "relayed");
            for h in fetched["headers"].as_array().into_iter().flatten() {
                r = r.append_header(h[0].as_str().unwrap_or(""), h[1].as_str().unwrap_or(""));
            }
            r
        }
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
        ("GET", "/spin") => calling::spin(&req),
        ("GET", "/touch") => {
            // Writes every page of `kib` KiB of fresh heap: what a front
            // building a large answer or list touches.
            let mut heap = vec![0u8; param(&req, "kib").parse::<usize>().unwrap_or(0) << 10];
            heap.iter_mut().step_by(4096).for_each(|b| *b = std::hint::black_box(1));
            Response::text(200, format!("{}", heap.iter().map(|b| u64::from(*b)).sum::<u64>()))
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
        ("GET", "/fetch") => {
            Response::json(200, &fetch::send(&param(&req, "url"), &param(&req, "headers"), &param(&req, "trailers")))
        }
        ("GET", "/status") => Response::empty(param(&req, "code").parse().unwrap_or(200)),
        _ => Response::not_found(),
    }
}

wasmkeep_sdk::front!(handle);
