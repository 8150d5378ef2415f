//! The shop's front: every request outside `/actor/`.
//!
//! - `GET /page/<user>` gathers the user's cart, profile and
//!   recommendations with one `call_many` (the three run at once) and
//!   answers `{"cart": …, "profile": …, "recommendations": …}`;
//! - `POST /cart/<user>` adds the JSON item in the body to the cart with
//!   one call, and answers the cart.
//!
//! `<user>` is percent-encoded in the URL and decoded here: the address
//! of an actor is `class/name` with the name as it is.

use serde_json::{Value, json};
use wasmkeep_sdk::front::{Request, Response, actors, calls};

fn handle(req: Request) -> Response {
    let Some(segments) = req.segments() else {
        return Response::text(400, "the path is not UTF-8 once decoded\n");
    };
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (req.method(), segments.as_slice()) {
        ("GET", ["page", user]) if !user.is_empty() => page(user),
        ("POST", ["cart", user]) if !user.is_empty() => add_to_cart(user, &req),
        ("GET", [""]) => Response::text(200, "shop: GET /page/<user>, POST /cart/<user> with a JSON item\n"),
        _ => Response::not_found(),
    }
}

fn page(user: &str) -> Response {
    let parts = ["cart", "profile", "recommendations"];
    let addresses: Vec<String> = parts.iter().map(|class| format!("{class}/{user}")).collect();
    let batch: Vec<(&str, Request)> = addresses.iter().map(|a| (a.as_str(), Request::get("/"))).collect();
    let mut page = serde_json::Map::new();
    // One answer per entry, in input order; one failing part does not
    // take the page down.
    for (part, answer) in parts.iter().zip(calls::call_many(&batch)) {
        let value = match answer {
            Ok(r) if r.status == 200 => serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            Ok(r) => json!({ "error": format!("status {}", r.status) }),
            Err(e) => json!({ "error": format!("{e:?}") }),
        };
        page.insert(part.to_string(), value);
    }
    Response::json(200, &page)
}

fn add_to_cart(user: &str, req: &Request) -> Response {
    if req.json::<Value>().is_err() {
        return Response::text(400, "the body must be a JSON item, e.g. {\"sku\": \"tea\", \"qty\": 1}\n");
    }
    let call = Request::post("/", req.body.clone()).with_header("content-type", "application/json");
    match actors::call(&format!("cart/{user}"), call) {
        Ok(answer) => answer,
        Err(e) => Response::text(502, format!("the cart did not answer: {e:?}\n")),
    }
}

wasmkeep_sdk::front!(handle);
