//! A user's cart (internal: only the front reaches it).
//!
//! - `GET /` answers the items, a JSON list;
//! - `POST /` adds the JSON item in the body and answers the items.

use serde_json::Value;
use wasmkeep_sdk::{Actor, Request, Response, storage};

#[derive(Default)]
struct Cart;

impl Actor for Cart {
    fn on_request(&mut self, req: Request) -> Response {
        let items = storage::get_json::<Vec<Value>>("items");
        let answer = match req.method() {
            "GET" => items.map(|items| Response::json(200, &items.unwrap_or_default())),
            "POST" => match req.json::<Value>() {
                Ok(item) => items.and_then(|items| {
                    let mut items = items.unwrap_or_default();
                    items.push(item);
                    storage::set_json("items", &items)?;
                    Ok(Response::json(200, &items))
                }),
                Err(e) => Ok(Response::text(400, format!("not a JSON item: {e}"))),
            },
            _ => Ok(Response::text(405, "GET or POST")),
        };
        answer.unwrap_or_else(|e| Response::text(503, e.to_string()))
    }
}

wasmkeep_sdk::actor!(Cart);
