//! The test actor. Each path is one behaviour; see `tests/`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use wasmkeep_sdk::bindings::wasmkeep::actor::sockets;
use wasmkeep_sdk::{Actor, Request, Response, storage, values};

/// Events this instance has run: lost at hibernation, unlike storage.
#[derive(Default)]
struct Probe {
    events: u64,
}

fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros()
}

fn param(req: &Request, name: &str) -> String {
    req.query_param(name).unwrap_or_default()
}

fn count() -> u64 {
    storage::get_json("count").unwrap().unwrap_or(0)
}

impl Actor for Probe {
    fn on_request(&mut self, req: Request) -> Response {
        self.events += 1;
        match (req.method(), req.path()) {
            ("GET", "/count") => {
                let n = count() + 1;
                storage::set_json("count", &n).unwrap();
                Response::json(200, &json!({ "count": n, "events": self.events }))
            }
            ("GET", "/peek") => Response::json(200, &json!({ "count": count(), "events": self.events })),
            ("GET", "/trap-after-write") => {
                storage::set_json("count", &(count() + 100)).unwrap();
                panic!("the probe traps on purpose");
            }
            ("GET", "/loop") => {
                storage::set_json("count", &(count() + 100)).unwrap();
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            ("GET", "/spin") => calling::spin(&req),
            ("GET", "/membomb") => {
                storage::set_json("count", &(count() + 100)).unwrap();
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            ("GET", "/alloc") => {
                // Holds `mb` MiB at once (for `ms` more), then answers.
                let mb: usize = param(&req, "mb").parse().unwrap_or(1);
                let block = vec![7u8; mb << 20];
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
                Response::text(200, std::hint::black_box(&block).len().to_string())
            }
            ("GET", "/hold") => {
                // Takes up to `mb` MiB while the host grants its memory (in
                // MiB blocks, then 64 KiB ones to fill what is left);
                // holds it `ms`; answers the KiB held.
                let most = param(&req, "mb").parse::<usize>().unwrap_or(1) << 20;
                let mut held: Vec<Vec<u8>> = Vec::with_capacity(most >> 16);
                let mut bytes = 0;
                for block in [1 << 20, 1 << 16] {
                    while bytes + block <= most {
                        let mut taken = Vec::new();
                        if taken.try_reserve_exact(block).is_err() {
                            break;
                        }
                        taken.resize(block, 7u8);
                        held.push(taken);
                        bytes += block;
                    }
                }
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
                std::hint::black_box(&held);
                Response::text(200, (bytes >> 10).to_string())
            }
            ("GET", "/sleep") => {
                // Blocked in a host call (a WASI poll), after a write.
                storage::set_json("count", &(count() + 100)).unwrap();
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
                Response::text(200, "slept")
            }
            ("GET", "/call") => {
                // A call after a write of its own (and `pause=ms`, a
                // pause before it); `then=trap` traps after it.
                storage::set_json("count", &(count() + 1)).unwrap();
                std::thread::sleep(Duration::from_millis(param(&req, "pause").parse().unwrap_or(0)));
                let answer = calling::call(&req);
                if param(&req, "then") == "trap" {
                    panic!("the probe traps after its call");
                }
                Response::json(200, &answer)
            }
            ("GET", "/many") => calling::many(&req),
            ("GET", "/sequential") => Response::json(200, &calling::sequential(&req)),
            ("GET", "/call-bench") => {
                // `n` calls to `to`, each timed inside the guest: the round
                // trip guest to guest, in nanoseconds.
                let to = param(&req, "to");
                let n: usize = param(&req, "n").parse().unwrap_or(100);
                let mut nanos = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = std::time::Instant::now();
                    let r = wasmkeep_sdk::actors::call(&to, Request::get("/ping"));
                    nanos.push(t.elapsed().as_nanos() as u64);
                    assert!(r.is_ok_and(|r| r.status == 200));
                }
                Response::json(200, &nanos)
            }
            ("GET", "/ping") => Response::empty(200),
            ("GET", "/blob") => {
                Response::empty(200).body(vec![b'b'; param(&req, "mb").parse::<usize>().unwrap_or(0) << 20])
            }
            ("GET", "/whoami") => {
                let h = |n: &str| req.header(n).map(str::to_owned);
                Response::json(
                    200,
                    &json!({
                        "caller": h("x-wasmkeep-caller"),
                        "chain": h("x-wasmkeep-chain"),
                        "app": h("x-wasmkeep-app"),
                        "callers": req.headers.iter().filter(|(n, _)| n == "x-wasmkeep-caller").count(),
                    }),
                )
            }
            ("GET", "/sockets") => Response::json(200, &sockets::list()),
            ("GET", "/send") => Response::text(200, format!("{:?}", sockets::send_text(1, "hi"))),
            ("GET", "/") => Response::json(200, &json!({ "uri": req.uri })),
            ("GET", "/interval") => {
                // Records when this event ran, under a key of its own.
                let start = now_us();
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(20)));
                let end = now_us();
                storage::set(&format!("iv/{start:040}"), format!("{start}-{end}")).unwrap();
                Response::text(200, "ok")
            }
            ("GET", "/intervals") => {
                let all = storage::list_all("iv/").unwrap();
                let ivs: Vec<String> = all.into_iter().map(|(_, v)| String::from_utf8(v).unwrap()).collect();
                Response::json(200, &ivs)
            }
            ("GET", "/append") => {
                let mut log: Vec<String> = storage::get_json("log").unwrap().unwrap_or_default();
                log.push(param(&req, "seq"));
                storage::set_json("log", &log).unwrap();
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
                Response::json(200, &log)
            }
            // Lines on stdout and stderr: `text` (`times` over), `err`, a
            // line of `long` bytes, and `tail` left unfinished.
            ("GET", "/print") => {
                for i in 0..param(&req, "times").parse().unwrap_or(1) {
                    println!("{} {i}", param(&req, "text"));
                }
                let err = param(&req, "err");
                if !err.is_empty() {
                    eprintln!("{err}");
                }
                let long: usize = param(&req, "long").parse().unwrap_or(0);
                if long > 0 {
                    println!("{}", "x".repeat(long));
                }
                print!("{}", param(&req, "tail"));
                use std::io::Write;
                let _ = std::io::stdout().flush();
                Response::empty(200)
            }
            ("GET", "/log") => {
                Response::json(200, &storage::get_json::<Vec<String>>("log").unwrap().unwrap_or_default())
            }
            ("GET", "/headers") => {
                let names: Vec<&str> = req.headers.iter().map(|(n, _)| n.as_str()).collect();
                Response::json(200, &names)
            }
            ("GET", "/value") => match values::get(&param(&req, "name")) {
                Some(v) => Response::text(200, v),
                None => Response::text(404, "no such value"),
            },
            ("GET", "/address") => Response::text(200, wasmkeep_sdk::address()),
            ("POST", "/slow-echo") => {
                // Holds the request (and its body) for `ms`, then answers.
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
                Response::json(200, &json!({ "body_len": req.body.len() }))
            }
            ("GET", "/echo") | ("POST", "/echo") => {
                Response::json(200, &json!({ "method": req.method(), "uri": req.uri, "body_len": req.body.len() }))
            }
            ("PUT", "/kv") => match storage::set(&param(&req, "key"), &req.body) {
                Ok(()) => Response::empty(204),
                Err(e) => Response::text(400, e.to_string()),
            },
            ("PUT", "/kv-then-wait") => {
                // Writes, then holds the event `ms` before it commits.
                let set = storage::set(&param(&req, "key"), &req.body);
                std::thread::sleep(Duration::from_millis(param(&req, "ms").parse().unwrap_or(0)));
                match set {
                    Ok(()) => Response::empty(204),
                    Err(e) => Response::text(400, e.to_string()),
                }
            }
            ("GET", "/kv") => match storage::get(&param(&req, "key")) {
                Ok(Some(v)) => Response::empty(200).body(v),
                Ok(None) => Response::text(404, "no such key"),
                Err(e) => Response::text(400, e.to_string()),
            },
            ("DELETE", "/kv") => {
                storage::delete(&param(&req, "key")).unwrap();
                Response::empty(204)
            }
            ("GET", "/list") => {
                let cursor = req.query_param("cursor");
                let page =
                    storage::list(&param(&req, "prefix"), cursor.as_deref(), param(&req, "limit").parse().unwrap_or(0))
                        .unwrap();
                let keys: Vec<&str> = page.entries.iter().map(|(k, _)| k.as_str()).collect();
                Response::json(200, &json!({ "keys": keys, "cursor": page.cursor }))
            }
            ("POST", "/fill") => {
                // Writes n keys `k/0000`.. in one event.
                let n: u32 = param(&req, "n").parse().unwrap_or(0);
                for i in 0..n {
                    storage::set(&format!("k/{i:04}"), i.to_string()).unwrap();
                }
                Response::empty(204)
            }
            ("POST", "/clear") => {
                storage::delete_all().unwrap();
                Response::empty(204)
            }
            ("DELETE", "/") => {
                wasmkeep_sdk::delete_self();
                Response::empty(204)
            }
            ("GET", "/framing") => Response::text(200, "abc")
                .header("content-length", "99")
                .header("transfer-encoding", "chunked")
                .header("connection", "close")
                .header("x-wasmkeep-caller", "forged/by/actor"),
            (_, "/answer") => {
                // An answer of `status` with `kb` KiB of body, declaring
                // `cl` as its Content-Length when given.
                let body = vec![b'a'; param(&req, "kb").parse::<usize>().unwrap_or(0) << 10];
                let answer = Response::empty(param(&req, "status").parse().unwrap_or(200)).body(body);
                match req.query_param("cl") {
                    Some(cl) => answer.header("content-length", cl),
                    None => answer,
                }
            }
            ("GET", "/opened") => {
                Response::json(200, &storage::get_json::<Vec<String>>("opened").unwrap().unwrap_or_default())
            }
            ("GET", "/flood-error") => Response::json(200, &storage::get_json::<String>("flood-error").unwrap()),
            ("GET", "/closes") => {
                Response::json(200, &storage::get_json::<Vec<String>>("closes").unwrap().unwrap_or_default())
            }
            ("GET", "/status") => {
                storage::set_json("count", &(count() + 100)).unwrap();
                Response::empty(param(&req, "code").parse().unwrap_or(200))
            }
            _ => Response::not_found(),
        }
    }

    fn on_websocket_open(&mut self, conn: u64, path: String) -> Result<(), String> {
        if path.contains("refuse") {
            return Err(format!("refused by the probe at {path}"));
        }
        if let Some(ms) = path.split_once("slowopen=").and_then(|(_, ms)| ms.split('&').next()?.parse().ok()) {
            // An open that takes its time: the client may leave meanwhile.
            std::thread::sleep(Duration::from_millis(ms));
        }
        if path.contains("quiet") {
            // Benchmarks open thousands: no record, no welcome.
            return Ok(());
        }
        let mut opened: Vec<String> = storage::get_json("opened").unwrap().unwrap_or_default();
        opened.push(format!("{conn} {path}"));
        storage::set_json("opened", &opened).unwrap();
        if path.contains("greet") {
            sockets::send_text(conn, "welcome").unwrap();
        }
        if path.contains("flood") {
            // Before the 101 nothing drains the queue: it fills.
            let block = "f".repeat(1000);
            let error = loop {
                if let Err(e) = sockets::send_text(conn, &block) {
                    break format!("{e:?}");
                }
            };
            storage::set_json("flood-error", &error).unwrap();
        }
        Ok(())
    }

    fn on_websocket_message(&mut self, conn: u64, message: wasmkeep_sdk::Message) {
        let text = match message {
            wasmkeep_sdk::Message::Text(t) => t,
            wasmkeep_sdk::Message::Binary(b) => {
                sockets::send_binary(conn, &b).unwrap();
                return;
            }
        };
        let (verb, rest) = text.split_once(':').unwrap_or((text.as_str(), ""));
        match verb {
            "echo" => sockets::send_text(conn, rest).unwrap(),
            "whoami" => sockets::send_text(conn, &format!("{conn} events={}", self.events)).unwrap(),
            "all" => {
                for other in sockets::list() {
                    sockets::send_text(other, rest).unwrap();
                }
            }
            "close" => sockets::close(conn, 4000, rest).unwrap(),
            "big" => {
                let r = sockets::send_text(conn, &"x".repeat(rest.parse().unwrap_or(0)));
                sockets::send_text(conn, &format!("{r:?}")).unwrap();
            }
            "trap" => panic!("the probe traps on a message"),
            "delete" => wasmkeep_sdk::delete_self(),
            "slowdelete" => {
                // Messages sent meanwhile wait in the mailbox, behind it.
                std::thread::sleep(Duration::from_millis(300));
                wasmkeep_sdk::delete_self();
            }
            _ => sockets::send_text(conn, &format!("unknown: {text}")).unwrap(),
        }
        self.events += 1;
    }

    fn on_websocket_close(&mut self, conn: u64, code: u16, reason: String) {
        let mut closes: Vec<String> = storage::get_json("closes").unwrap().unwrap_or_default();
        closes.push(format!("{conn} {code} {reason}"));
        storage::set_json("closes", &closes).unwrap();
    }
}

wasmkeep_sdk::actor!(Probe);
