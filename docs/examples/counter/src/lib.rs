//! A counter per actor name.
//!
//! - `GET /actor/counter/<name>/` adds one and answers the new count;
//! - `GET /actor/counter/<name>/peek` answers it without adding;
//! - `DELETE /actor/counter/<name>/` deletes the counter.

use wasmkeep_sdk::{Actor, Request, Response, storage};

#[derive(Default)]
struct Counter;

fn count() -> Result<u64, storage::StorageError> {
    Ok(storage::get_json("count")?.unwrap_or(0))
}

impl Actor for Counter {
    fn on_request(&mut self, req: Request) -> Response {
        let answer = match (req.method(), req.path()) {
            ("GET", "/") => count().and_then(|n| {
                storage::set_json("count", &(n + 1))?;
                Ok(Response::text(200, (n + 1).to_string()))
            }),
            ("GET", "/peek") => count().map(|n| Response::text(200, n.to_string())),
            ("DELETE", "/") => {
                wasmkeep_sdk::delete_self();
                Ok(Response::empty(204))
            }
            _ => Ok(Response::not_found()),
        };
        answer.unwrap_or_else(|e| Response::text(503, e.to_string()))
    }
}

wasmkeep_sdk::actor!(Counter);
