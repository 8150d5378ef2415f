//! A user's profile (internal): `GET /` answers `{"user": …, "views": …}`,
//! counting the pages shown to the user.

use serde_json::json;
use wasmkeep_sdk::{Actor, Request, Response, storage};

#[derive(Default)]
struct Profile;

impl Actor for Profile {
    fn on_request(&mut self, _req: Request) -> Response {
        let views = storage::get_json::<u64>("views").map(|v| v.unwrap_or(0) + 1);
        let answer = views.and_then(|views| {
            storage::set_json("views", &views)?;
            Ok(Response::json(200, &json!({ "user": wasmkeep_sdk::name(), "views": views })))
        });
        answer.unwrap_or_else(|e| Response::text(503, e.to_string()))
    }
}

wasmkeep_sdk::actor!(Profile);
