//! Recommendations for a user (internal): `GET /` answers three items of
//! the catalogue, picked by the user's name, a JSON list.

use wasmkeep_sdk::{Actor, Request, Response};

const CATALOGUE: [&str; 8] = ["tea", "mug", "kettle", "honey", "biscuits", "teapot", "strainer", "cosy"];

#[derive(Default)]
struct Recommendations;

impl Actor for Recommendations {
    fn on_request(&mut self, _req: Request) -> Response {
        let seed = wasmkeep_sdk::name().bytes().fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
        let picks: Vec<&str> = (0..3).map(|i| CATALOGUE[(seed + i * 3) % CATALOGUE.len()]).collect();
        Response::json(200, &picks)
    }
}

wasmkeep_sdk::actor!(Recommendations);
