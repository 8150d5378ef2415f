//! The app's front: every request outside `/actor/`.
//!
//! - `GET /` says what the app does;
//! - `GET /visits/<name>` counts one more visit on the counter `<name>`
//!   and answers the count. The counter class is internal: only this
//!   front reaches it, never a client through `/actor/`.

use wasmkeep_sdk::front::{Request, Response, actors};

fn handle(req: Request) -> Response {
    let Some(segments) = req.segments() else {
        return Response::text(400, "the path is not UTF-8 once decoded\n");
    };
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (req.method(), segments.as_slice()) {
        ("GET", [""]) => Response::text(200, "hello: GET /visits/<name> counts the visits of <name>\n"),
        ("GET", ["visits", name]) if !name.is_empty() => {
            match actors::call(&format!("counter/{name}"), Request::get("/")) {
                Ok(answer) => answer,
                Err(e) => Response::text(502, format!("the counter did not answer: {e:?}\n")),
            }
        }
        _ => Response::not_found(),
    }
}

wasmkeep_sdk::front!(handle);
