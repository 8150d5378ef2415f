//! The public HTTP port of a node. A request passes small layers, each in
//! its own file: the edge (find the app, drop the client's `x-wasmkeep-`
//! headers), the body limit, the route (`/actor/...` or the front), and
//! the error layer, the one place where failures become HTTP answers.

mod actor_route;
mod body;
mod edge;
mod error;
mod server;

pub use edge::AppRouting;
pub use server::{PublicPort, serve};

/// The answers of this port.
pub type HttpResponse = http::Response<http_body_util::Full<bytes::Bytes>>;
