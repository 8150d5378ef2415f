//! A test actor making an outbound request: `GET /?url=http://...`
//! answers what the upstream sent, as the guest received it.

use wasmkeep_sdk::{Actor, Request, Response};

#[derive(Default)]
struct UsesHttp;

impl Actor for UsesHttp {
    fn on_request(&mut self, request: Request) -> Response {
        Response::json(200, &fetch::get(&request.query_param("url").unwrap_or_default()))
    }
}

wasmkeep_sdk::actor!(UsesHttp);
