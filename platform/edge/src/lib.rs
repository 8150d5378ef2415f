//! The public HTTP port of a node. A connection passes the listener
//! (`wasmkeep-listener`: its ticket, within the bounds in all and per
//! client, and the connection's watchdog); a request passes small layers,
//! each in its own file: the edge (the `Host`, the app, the client's
//! headers of the host's range dropped), the body (paced, budgeted,
//! limited), the route (`/actor/...` or the front, each its own file), and
//! the error layer, the one place where failures become HTTP answers.

mod actor_route;
mod body;
mod edge;
mod error;
mod front_route;
mod request_span;
mod server;
mod socket_conn;
mod socket_route;

pub use edge::AppRouting;
pub use error::{render, render_whole};
pub use server::{PublicPort, serve};
pub use socket_route::open_relayed;

/// A body's failure, whatever produced it.
pub use wasmkeep_listener::BoxError;

/// The answers of this port: whole (an actor's, an error) or streamed (a
/// front's).
pub type HttpResponse = http::Response<http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, BoxError>>;

/// Signed hops that reach the public port (`--cluster-plaintext allow`):
/// the cluster answers them, as on its own port.
pub trait SignedHops: Send + Sync + 'static {
    /// Answers `request`, a request carrying a signature: a hop this node
    /// believes, or refuses. An upgrade whose signature is not believed is
    /// given back, to be served as any client's (docs/spec/sockets.md §15).
    #[allow(clippy::result_large_err)]
    fn answer(
        &self,
        request: http::Request<hyper::body::Incoming>,
    ) -> Result<wasmkeep_actors::Answering<'_, HttpResponse>, http::Request<hyper::body::Incoming>>;
}

fn boxed_error(e: impl Into<BoxError>) -> BoxError {
    e.into()
}

/// A whole body.
pub fn full(bytes: impl Into<bytes::Bytes>) -> http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, BoxError> {
    use http_body_util::BodyExt;
    http_body_util::Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}
