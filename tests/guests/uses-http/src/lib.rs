//! A test actor making an outbound request: `GET /?url=http://...`
//! answers what the upstream sent, as the guest received it; `headers`
//! and `trailers` (`name: value` lines) go with the request.

use wasmkeep_sdk::{Actor, Request, Response};

#[derive(Default)]
struct UsesHttp;

impl Actor for UsesHttp {
    fn on_request(&mut self, request: Request) -> Response {
        let param = |name| request.query_param(name).unwrap_or_default();
        Response::json(200, &fetch::send(&param("url"), &param("headers"), &param("trailers")))
    }
}

wasmkeep_sdk::actor!(UsesHttp);
