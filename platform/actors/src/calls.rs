//! `actors.call` (DESIGN §3.7) and `calls.call-many` (seed 0025): an actor
//! calling others of its app. The checks run in their order, each
//! answering at once; a call then goes through the output gate and the
//! router, and waits at most until the caller's call deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmkeep_core::deadline::actor_call_deadline;
use wasmkeep_core::{Address, AppId, Caller, Origin, RawAddress, Refusal, header_range};
use wasmkeep_runtime::{CallError, Request, Response};

use crate::NodeInner;
use crate::event::EventError;
use crate::router;
use crate::storage_gate::EventHost;

pub(crate) async fn call(host: &mut EventHost, address: String, request: Request) -> Result<Response, CallError> {
    let callee = Address::parse(&address).map_err(|_| CallError::InvalidAddress)?;
    if request.body.len() as u64 > host.node.limits.body_bytes {
        return Err(CallError::TooLarge);
    }
    let caller = Caller::Actor(host.key.address.clone());
    if host.chain.is_reentrant(&caller, &callee) {
        return Err(CallError::Reentrant);
    }
    let deadline = deadline(host);
    if Instant::now() >= deadline {
        return Err(CallError::Timeout);
    }
    gate(host).await?;
    send(host, callee, request, deadline).await
}

/// `calls.call-many` (seed 0025): every entry is a call made by the code
/// above, all started at once under one deadline, answered in input order.
pub(crate) async fn call_many(host: &mut EventHost, calls: Vec<(String, Request)>) -> Vec<Result<Response, CallError>> {
    let limits = &host.node.limits;
    let n = calls.len();
    let all = |e: CallError| (0..n).map(|_| Err(e.clone())).collect::<Vec<_>>();
    // Whole-batch refusals: nothing is started.
    if n > limits.call_many_entries as usize {
        return all(CallError::Failed(format!(
            "too many calls: at most {} in one call-many",
            limits.call_many_entries
        )));
    }
    if calls.iter().map(|(_, r)| r.body.len() as u64).sum::<u64>() > limits.body_bytes {
        return all(CallError::TooLarge);
    }
    let deadline = deadline(host);
    let caller = Caller::Actor(host.key.address.clone());
    let mut results: Vec<Option<Result<Response, CallError>>> = (0..n).map(|_| None).collect();
    let mut started = Vec::new();
    for (i, (address, request)) in calls.into_iter().enumerate() {
        let Ok(callee) = Address::parse(&address) else {
            results[i] = Some(Err(CallError::InvalidAddress));
            continue;
        };
        if Instant::now() >= deadline {
            results[i] = Some(Err(CallError::Timeout));
        } else if host.chain.is_reentrant(&caller, &callee) {
            results[i] = Some(Err(CallError::Reentrant));
        } else {
            started.push((i, callee, request));
        }
    }
    if !started.is_empty()
        && let Err(e) = gate(host).await
    {
        for (i, _, _) in started.drain(..) {
            results[i] = Some(Err(e.clone()));
        }
    }
    // Siblings run concurrently; none is in another's chain.
    let mut running = tokio::task::JoinSet::new();
    for (i, callee, request) in started {
        let delivery = Delivery::new(host, callee, request);
        running.spawn(async move { (i, delivery.send(deadline).await) });
    }
    // Answers count against the batch's response budget as they arrive.
    let mut budget = host.node.limits.body_bytes;
    while let Some(joined) = running.join_next().await {
        let Ok((i, result)) = joined else { continue };
        results[i] = Some(match result {
            Ok(r) if r.body.len() as u64 > budget => Err(CallError::TooLarge),
            Ok(r) => {
                budget -= r.body.len() as u64;
                Ok(r)
            }
            Err(e) => Err(e),
        });
    }
    results.into_iter().map(|r| r.unwrap_or(Err(CallError::Failed("the call did not complete".into())))).collect()
}

/// The caller's call deadline, now.
fn deadline(host: &EventHost) -> Instant {
    let limits = &host.node.limits;
    actor_call_deadline(
        host.started,
        limits.wall_per_event(),
        Instant::now(),
        Duration::from_secs_f64(limits.call_limit_secs),
    )
}

/// The output gate: nothing leaves the actor before the writes made before
/// it are durable.
async fn gate(host: &mut EventHost) -> Result<(), CallError> {
    host.flush().await.map_err(|e| {
        tracing::warn!(actor = %host.key, "commit before a call failed: {e}");
        CallError::Failed("store unavailable".into())
    })
}

async fn send(host: &EventHost, callee: Address, request: Request, deadline: Instant) -> Result<Response, CallError> {
    Delivery::new(host, callee, request).send(deadline).await
}

/// One call on its way: everything it needs, owned, so a batch can run its
/// entries as tasks.
struct Delivery {
    node: Arc<NodeInner>,
    app: AppId,
    callee: Address,
    origin: Origin,
    request: Request,
}

impl Delivery {
    fn new(host: &EventHost, callee: Address, mut request: Request) -> Self {
        // The range is the host's: what the caller set of it goes.
        header_range::strip_pairs(&mut request.headers);
        let caller = Caller::Actor(host.key.address.clone());
        let origin = Origin::Inside { chain: host.chain.extended_by(&caller), caller };
        Self { node: host.node.clone(), app: host.key.app, callee, origin, request }
    }

    async fn send(self, deadline: Instant) -> Result<Response, CallError> {
        let target = RawAddress::from(&self.callee);
        let delivery = router::deliver(&self.node, self.app, target, self.origin, self.request);
        match tokio::time::timeout_at(deadline.into(), delivery).await {
            Err(_elapsed) => Err(CallError::Timeout),
            Ok(Ok(mut response)) => {
                header_range::strip_pairs(&mut response.headers);
                Ok(response)
            }
            Ok(Err(e)) => answer(e),
        }
    }
}

/// A callee's failure, as its caller sees it: what the callee itself did
/// wrong, or its queue being full, is `failed`; a refusal of admission is
/// the answer HTTP would give (the capacity `503` included).
fn answer(e: EventError) -> Result<Response, CallError> {
    let reason = match &e {
        EventError::Refused(Refusal::Overloaded) => "callee overloaded",
        EventError::Trapped => "the callee failed",
        EventError::Wall => "the callee's event ran past its wall",
        EventError::InvalidResponse => "the callee answered an invalid response",
        EventError::ShuttingDown => "the node is shutting down",
        EventError::Refused(_) => {
            let a = e.answer();
            let mut headers = vec![("content-type".to_owned(), b"text/plain; charset=utf-8".to_vec())];
            if let Some(secs) = a.retry_after {
                headers.push(("retry-after".to_owned(), secs.to_string().into_bytes()));
            }
            return Ok(Response { status: a.status, headers, body: a.text.into_bytes() });
        }
    };
    Err(CallError::Failed(reason.into()))
}
