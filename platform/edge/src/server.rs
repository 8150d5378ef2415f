//! The port: accepts connections (`listener`), serves each (`connection`)
//! and passes each request through the layers.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use hyper::body::Incoming;
use tokio::net::TcpListener;
use wasmkeep_actors::Node;
use wasmkeep_core::handoff::is_websocket_upgrade;
use wasmkeep_core::path::parse_actor_path;
use wasmkeep_core::{Failure, Limits, Origin, Refusal, TraceContext, head};

use crate::body::{BodyBudget, Held, Paced};
use crate::socket_route::Route;
use crate::{AppRouting, HttpResponse, SignedHops, actor_route, body, edge, front_route, request_span, socket_route};
use wasmkeep_listener::{PerClient, Rules};

/// What the public port serves, and what its clients share.
pub struct PublicPort {
    node: Node,
    routing: AppRouting,
    limits: Arc<Limits>,
    budget: BodyBudget,
    /// Each client's share of the front slots, when it is less than all.
    client_slots: Option<PerClient>,
    /// Requests being answered now: a stopping node waits for them.
    in_flight: Arc<AtomicUsize>,
    /// TLS, when the port serves HTTPS.
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Who answers signed hops here (`--cluster-plaintext allow`); without
    /// it a signature is a client's header, removed with the range.
    hops: Option<Arc<dyn SignedHops>>,
    /// Whether a client's `traceparent` is taken (`request_span`).
    trust_traceparent: bool,
}

/// One request in flight, counted while it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl PublicPort {
    pub fn new(node: Node, routing: AppRouting) -> Self {
        let limits = Arc::new(node.limits().clone());
        Self {
            budget: BodyBudget::new(&limits),
            client_slots: limits.front_slots_for_one_client().map(PerClient::new),
            node,
            routing,
            limits,
            in_flight: Arc::default(),
            tls: None,
            hops: None,
            trust_traceparent: true,
        }
    }

    /// The same port serving HTTPS (HTTP/2 or HTTP/1.1 by ALPN).
    pub fn with_tls(self, tls: tokio_rustls::TlsAcceptor) -> Self {
        Self { tls: Some(tls), ..self }
    }

    /// Whether a client's `traceparent` makes its request part of the
    /// client's trace (the default), or is ignored.
    pub fn trusting_traceparent(self, trust: bool) -> Self {
        Self { trust_traceparent: trust, ..self }
    }

    /// The same port reading signed hops too (`--cluster-plaintext allow`).
    pub fn with_signed_hops(self, hops: Arc<dyn SignedHops>) -> Self {
        Self { hops: Some(hops), ..self }
    }

    pub(crate) async fn handle(&self, request: http::Request<Incoming>, client: IpAddr) -> HttpResponse {
        let _in_flight = InFlight::new(&self.in_flight);
        let (span, trace) = request_span::open(&request, self.trust_traceparent);
        // Not entered: every span below names its parent, and entering the
        // request's span at each poll of a front that yields often costs
        // what a trace that is not sampled should not.
        let answer = match self.route(request, client, &span, trace).await {
            Ok(answer) => answer,
            Err(failure) => {
                request_span::failed(&span, &failure);
                crate::error::render(failure)
            }
        };
        request_span::answered(&span, answer.status());
        answer
    }

    async fn route(
        &self,
        request: http::Request<Incoming>,
        client: IpAddr,
        span: &tracing::Span,
        trace: TraceContext,
    ) -> Result<HttpResponse, Failure> {
        let request = match &self.hops {
            Some(hops) if request.headers().contains_key(head::INTERNAL) => match hops.answer(request) {
                Ok(answering) => return Ok(answering.await),
                Err(outside) => outside,
            },
            _ => request,
        };
        let (mut parts, incoming) = request.into_parts();
        edge::check_host(&parts)?;
        edge::strip_client_headers(&mut parts);
        let app = self.routing.app_for(&parts, &self.node)?;
        request_span::routed(span, &app);
        // The tenant's place among its requests, held until the answer.
        let request_place = self.node.admit_request(&app, &trace)?;
        let target = match parse_actor_path(parts.uri.path(), parts.uri.query()) {
            None => {
                let request = http::Request::from_parts(parts, incoming);
                let port = front_route::FrontPort {
                    node: &self.node,
                    limits: &self.limits,
                    budget: &self.budget,
                    client_slots: self.client_slots.as_ref(),
                };
                return front_route::handle(port, &app, trace, client, request, request_place).await;
            }
            Some(parsed) => parsed.map_err(|e| Failure::from(Refusal::InvalidName(e)))?,
        };
        if is_websocket_upgrade(&parts.method, &parts.headers) {
            let envelope = self.node.envelope(&app, target.address, Origin::Outside, trace);
            let request = http::Request::from_parts(parts, incoming);
            return socket_route::upgrade(&self.node, envelope, target.rest, request, Route::Anywhere).await;
        }
        // The body's share of the node's budget is held until the answer.
        let held = Held::new(request_place);
        let paced = Paced::new(incoming, self.limits.clone(), &self.budget, held.clone());
        let body = body::read(paced, self.limits.body_bytes).await?;
        let envelope = self.node.envelope(&app, target.address, Origin::Outside, trace);
        let answer = actor_route::handle(&self.node, envelope, target.rest, &parts, body).await;
        drop(held);
        answer
    }
}

/// Serves `port` on `listener` until `shutdown` completes; then stops
/// accepting and waits for the requests in flight (at most the longest any
/// may take). Upgraded sockets are not requests: they close with the node.
pub async fn serve(
    listener: TcpListener,
    mut port: PublicPort,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let limits = port.limits.clone();
    let budget = limits.descriptor_budget(wasmkeep_listener::raise_descriptor_limit());
    let rules = Rules {
        name: "public port",
        bound: budget.public,
        times: limits.connection_times(),
        head_bytes: limits.head_bytes,
    };
    let tls = port.tls.take();
    let in_flight = port.in_flight.clone();
    let port = Arc::new(port);
    let handler = move |request, peer: SocketAddr| {
        let port = port.clone();
        async move { port.handle(request, peer.ip()).await }
    };
    wasmkeep_listener::serve(listener, rules, tls, handler, shutdown).await;
    let grace = tokio::time::Instant::now() + limits.shutdown_grace();
    while in_flight.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < grace {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(())
}
