//! A TCP listener that expects its clients to misbehave. Every connection
//! takes a ticket within the listener's bound and the bound per client
//! address (`accept`), past either a fast `503`; each connection is
//! watched (`connection`): a head must come whole in time and fit, an idle
//! connection closes, and one where nothing progresses while answers wait
//! on the client is dropped. Only requests (heads, body bytes) and answers
//! (bytes written) progress: an HTTP/2 PING keeps nothing open. The public
//! port, the provisioning API and the metrics listener each serve through
//! one, each within its own share of the process's descriptors
//! (`Limits::descriptor_budget`).

mod accept;
mod connection;
mod per_client;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body::Body;
use hyper::body::Incoming;
use tokio::net::TcpListener;
use wasmkeep_core::connection::ConnectionTimes;
use wasmkeep_core::limits::Bound;

pub use accept::raise_descriptor_limit;
pub use connection::{Holding, InFlight};
pub use per_client::{PerClient, Place};

/// A body's failure, whatever produced it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a listener answers each request with: any `Fn(request, peer)`
/// giving a future of the answer.
pub trait Handler: Send + Sync + 'static {
    type Body: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static;
    type Answer: Future<Output = http::Response<Self::Body>> + Send + 'static;

    fn handle(&self, request: http::Request<Incoming>, peer: SocketAddr) -> Self::Answer;
}

impl<F, A, B> Handler for F
where
    F: Fn(http::Request<Incoming>, SocketAddr) -> A + Send + Sync + 'static,
    A: Future<Output = http::Response<B>> + Send + 'static,
    B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    type Body = B;
    type Answer = A;

    fn handle(&self, request: http::Request<Incoming>, peer: SocketAddr) -> A {
        self(request, peer)
    }
}

/// A listener's rules.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Its name in the log (`public port`, `provisioning API`, `metrics`).
    pub name: &'static str,
    /// Connections in all and per client address.
    pub bound: Bound,
    /// When a connection is closed (`core::connection`). Where answers may
    /// wait (`answers_may_wait`), a request may take its time until its
    /// answer is ready, and an answer for as long as its body waits on
    /// itself (a log tail waiting for lines: such a body says so by being
    /// pending); an answer waiting on its client (its bytes not taken)
    /// is dropped when nothing progresses for `keepalive_idle`.
    pub times: ConnectionTimes,
    /// A request head, in bytes.
    pub head_bytes: u32,
}

/// What every connection of one listener shares.
pub(crate) struct Shared<S> {
    name: &'static str,
    tls: Option<tokio_rustls::TlsAcceptor>,
    times: ConnectionTimes,
    http: hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    handler: S,
}

/// Serves `handler` on `listener` under `rules` (over TLS when `tls` is
/// given: HTTP/2 or HTTP/1.1 by ALPN) until `shutdown` completes; then
/// stops accepting. Connections being served go on to their end.
pub async fn serve<S: Handler>(
    listener: TcpListener,
    rules: Rules,
    tls: Option<tokio_rustls::TlsAcceptor>,
    handler: S,
    shutdown: impl Future<Output = ()>,
) {
    let shared = Arc::new(Shared {
        name: rules.name,
        tls,
        times: rules.times,
        http: connection::builder(rules.head_bytes),
        handler,
    });
    let tickets = accept::Tickets::new(rules.bound);
    accept::accept_loop(rules.name, listener, tickets, shutdown, move |stream, peer, ticket| {
        connection::serve(shared.clone(), stream, peer, ticket)
    })
    .await;
}
