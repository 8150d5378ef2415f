use wasip2::http::{outgoing_handler, types};
use wasmkeep_sdk::{Actor, Request, Response};

#[derive(Default)]
struct UsesHttp;

impl Actor for UsesHttp {
    fn on_request(&mut self, _request: Request) -> Response {
        let outgoing = types::OutgoingRequest::new(types::Fields::new());
        let sent = outgoing_handler::handle(outgoing, None).is_ok();
        Response::text(200, sent.to_string())
    }
}

wasmkeep_sdk::actor!(UsesHttp);
