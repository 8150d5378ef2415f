//! A trivial front: every request answers `hello`.

use wasmkeep_sdk::front::{Request, Response};

fn handle(_req: Request) -> Response {
    Response::text(200, "hello")
}

wasmkeep_sdk::front!(handle);
