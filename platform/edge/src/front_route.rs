//! Every path outside `/actor/`: the app's front
//! (docs/spec/actors-and-admission.md §8). The request reaches the front as
//! the client sent it, less the host's header range (removed at the edge);
//! the front's answer loses the range too, from its headers and its
//! trailers, on its way out.
//!
//! A WebSocket upgrade is kept aside and marked with the head's upgrade
//! mark (docs/spec/sockets.md §5–§7); the front's answer to it may hand the
//! socket to an actor with the three hand-off headers, honoured on a marked
//! request only.

use std::net::IpAddr;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use wasmkeep_core::handoff::{is_websocket_upgrade, upgrade_headers};
use wasmkeep_core::metric_labels::FrontRequestOutcome;
use wasmkeep_core::{AppRef, FrontError, TraceContext, head};

use tracing::field::Empty;
use wasmkeep_telemetry::traces::{self, TARGET};

use crate::body::{self, BodyBudget, Held, Holding, Paced};
use crate::{HttpResponse, boxed_error, socket_route};
use wasmkeep_core::{Failure, PortError};

/// What a front's request takes from its port.
pub(crate) struct FrontPort<'p> {
    pub node: &'p wasmkeep_actors::Node,
    pub limits: &'p Arc<wasmkeep_core::Limits>,
    pub budget: &'p BodyBudget,
    /// Each client's share of the front slots, when it is less than all.
    pub client_slots: Option<&'p wasmkeep_listener::PerClient>,
}

pub(crate) async fn handle(
    port: FrontPort<'_>,
    app: &Arc<AppRef>,
    trace: TraceContext,
    client: IpAddr,
    mut request: http::Request<Incoming>,
    request_place: wasmkeep_actors::RequestPlace,
) -> Result<HttpResponse, Failure> {
    let node = port.node;
    let span = traces::child(&trace, || {
        tracing::info_span!(
            target: TARGET,
            parent: None,
            "front",
            wasmkeep.tenant = app.tenant.as_str(),
            wasmkeep.app = app.name.as_str(),
            wasmkeep.front.outcome = Empty,
        )
    });
    let trace = traces::carried(&span, &trace);
    let count = |outcome: FrontRequestOutcome| {
        node.metrics().front_requests.inc(outcome);
        span.record("wasmkeep.front.outcome", outcome.as_str());
        if !matches!(outcome, FrontRequestOutcome::Ok | FrontRequestOutcome::Handoff) {
            traces::failed(&span, outcome.as_str());
        }
    };
    // A request in origin form names its host only in `Host`; the front
    // reads its authority from there.
    if request.uri().authority().is_none() && !request.headers().contains_key(http::header::HOST) {
        return Err(Failure::Port(PortError::NoHost));
    }
    // An upgrade is kept aside, its client's headers with it, and marked.
    let upgrade = is_websocket_upgrade(request.method(), request.headers()).then(|| {
        let client_headers = upgrade_headers(request.headers());
        (hyper::upgrade::on(&mut request), client_headers)
    });
    if upgrade.is_some() {
        let mark = (HeaderName::from_static(head::UPGRADE), HeaderValue::from_static(head::UPGRADE_WEBSOCKET));
        request.headers_mut().insert(mark.0, mark.1);
    }
    // A small body is read before the request takes a slot; the client's
    // share of the slots is taken before the node's.
    let held = Held::new(request_place);
    let (parts, incoming) = request.into_parts();
    let paced = Paced::new(incoming, port.limits.clone(), port.budget, held.clone());
    let request = http::Request::from_parts(parts, body::prefetch(paced, port.limits.front_body_prefetch_bytes).await?);
    let place = match port.client_slots {
        Some(shares) => match shares.take(client) {
            Some(place) => Some(place),
            None => {
                count(FrontRequestOutcome::Busy);
                return Err(Failure::Front(FrontError::Busy));
            }
        },
        None => None,
    };
    // The client's share goes with the node's slot, however long the
    // instance outlives its answer.
    let served = node.serve_front(app, trace.clone(), request, Box::new(place)).await;
    let (response, run) = match served {
        Ok(answer) => answer,
        Err(e) => {
            count(outcome(&e));
            return Err(e.into());
        }
    };
    if let Some((on_upgrade, client_headers)) = upgrade
        && let Some(handoff) = head::read_handoff(response.headers())
    {
        // The answer's head is the decision: the instance stops here.
        run.stop();
        return match handoff {
            Ok(handoff) => {
                count(FrontRequestOutcome::Handoff);
                socket_route::hand_off(node, app, trace, handoff, on_upgrade, client_headers).await
            }
            Err(broken) => {
                tracing::info!(app = %app, "the front's hand-off is broken: {broken}");
                count(FrontRequestOutcome::GuestError);
                Err(Failure::Front(FrontError::Trapped))
            }
        };
    }
    count(FrontRequestOutcome::Ok);
    let (mut parts, body) = response.into_parts();
    head::strip(&mut parts.headers);
    let body = body.map_err(boxed_error).map_frame(head::strip_trailers).boxed_unsync();
    // The body's bytes are held while the front writes its answer.
    Ok(http::Response::from_parts(parts, Holding::boxed(body, Box::new(held))))
}

/// How a front request that got no answer is counted in
/// `wasmkeep_front_requests_total`.
fn outcome(e: &FrontError) -> FrontRequestOutcome {
    match e {
        FrontError::Trapped => FrontRequestOutcome::GuestError,
        FrontError::Busy => FrontRequestOutcome::Busy,
        FrontError::Wall => FrontRequestOutcome::Timeout,
        FrontError::NoFront | FrontError::NoSuchApp => FrontRequestOutcome::NoFront,
        FrontError::ValueMissing(_) => FrontRequestOutcome::ValueMissing,
    }
}
