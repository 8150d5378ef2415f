use wasmkeep_sdk::bindings::wasmkeep::actor::calls;
use wasmkeep_sdk::{Actor, Request, Response};

#[derive(Default)]
struct UsesCalls;

impl Actor for UsesCalls {
    fn on_request(&mut self, _request: Request) -> Response {
        let answers = calls::call_many(&[]);
        Response::text(200, answers.len().to_string())
    }
}

wasmkeep_sdk::actor!(UsesCalls);
