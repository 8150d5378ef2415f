//! `actors.call` (DESIGN §3.7) and `calls.call-many` (seed 0025), for
//! actors and fronts alike: the checks run in their order, each answering
//! at once; a call then passes the caller's gate and bounds, goes through
//! the router, and waits at most until the caller's call deadline. What
//! differs between an actor and a front is its [`CallSide`].

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use wasmkeep_core::budget::{ResponseBudget, content_length, is_bodyless};
use wasmkeep_core::{Address, AppId, Caller, Chain, Origin, RawAddress, Refusal, header_range};
use wasmkeep_runtime::{CallError, Request, Response};
use wasmkeep_scheduler::{FrontBusy, FrontWait};

use crate::NodeInner;
use crate::event::EventError;
use crate::mailbox::MailboxKey;
use crate::router;

/// A front call past the per-actor bound.
pub(crate) const FRONT_BUSY_ACTOR: &str = "front busy: too many front calls waiting on this actor";
/// A front call past the per-node bound.
pub(crate) const FRONT_BUSY_NODE: &str = "front busy: too many front calls waiting on this node";

/// Who makes a call: an actor's event or a front's request.
pub(crate) trait CallSide: Send {
    fn node(&self) -> &Arc<NodeInner>;
    fn app(&self) -> AppId;
    fn caller(&self) -> Caller;
    /// The actors waiting on the caller (a front is never in a chain).
    fn chain(&self) -> &Chain;
    /// The caller's call deadline for a call starting at `now`.
    fn deadline(&self, now: Instant) -> Instant;
    /// The output gate: what must be durable before a call leaves.
    fn gate(&mut self) -> impl Future<Output = Result<(), CallError>> + Send;
    /// The caller's bound on waiting calls: a front's per-actor and
    /// per-node bounds; none for an actor.
    fn hold(&self, _callee: &MailboxKey) -> Result<Option<FrontWait<MailboxKey>>, FrontBusy> {
        Ok(None)
    }
    /// Counts one call's outcome (a front's metrics).
    fn count(&self, _outcome: &Result<Response, CallError>) {}
}

pub(crate) async fn call<S: CallSide>(side: &mut S, address: String, request: Request) -> Result<Response, CallError> {
    let result = checked_call(side, address, request).await;
    side.count(&result);
    result
}

async fn checked_call<S: CallSide>(side: &mut S, address: String, request: Request) -> Result<Response, CallError> {
    let callee = Address::parse(&address).map_err(|_| CallError::InvalidAddress)?;
    if request.body.len() as u64 > side.node().limits.body_bytes {
        return Err(CallError::TooLarge);
    }
    if side.chain().is_reentrant(&side.caller(), &callee) {
        return Err(CallError::Reentrant);
    }
    let deadline = side.deadline(Instant::now());
    if Instant::now() >= deadline {
        return Err(CallError::Timeout);
    }
    side.gate().await?;
    let delivery = Delivery::new(side, callee, request);
    let wait = side.hold(&delivery.key()).map_err(busy)?;
    delivery.send(deadline, wait).await
}

/// `calls.call-many` (seed 0025): every entry is a call checked as above,
/// all started at once under one deadline, answered in input order.
pub(crate) async fn call_many<S: CallSide>(
    side: &mut S,
    calls: Vec<(String, Request)>,
) -> Vec<Result<Response, CallError>> {
    let limits = &side.node().limits;
    let n = calls.len();
    // Whole-batch refusals: nothing is started, and a front counts the
    // batch once, however long its list.
    let refusal = if n > limits.call_many_entries as usize {
        Some(CallError::Failed(format!("too many calls: at most {} in one call-many", limits.call_many_entries)))
    } else if calls.iter().map(|(_, r)| r.body.len() as u64).sum::<u64>() > limits.body_bytes {
        Some(CallError::TooLarge)
    } else {
        None
    };
    if let Some(e) = refusal {
        side.count(&Err(e.clone()));
        return (0..n).map(|_| Err(e.clone())).collect();
    }

    let deadline = side.deadline(Instant::now());
    let caller = side.caller();
    let mut results: Vec<Option<Result<Response, CallError>>> = (0..n).map(|_| None).collect();
    let mut checked = Vec::new();
    for (i, (address, request)) in calls.into_iter().enumerate() {
        let Ok(callee) = Address::parse(&address) else {
            results[i] = Some(Err(CallError::InvalidAddress));
            continue;
        };
        if Instant::now() >= deadline {
            results[i] = Some(Err(CallError::Timeout));
        } else if side.chain().is_reentrant(&caller, &callee) {
            results[i] = Some(Err(CallError::Reentrant));
        } else {
            checked.push((i, callee, request));
        }
    }
    if !checked.is_empty()
        && let Err(e) = side.gate().await
    {
        for (i, _, _) in checked.drain(..) {
            results[i] = Some(Err(e.clone()));
        }
    }
    // Siblings run concurrently; none is in another's chain. Each holds
    // its place under the caller's bounds while it waits.
    let mut running = tokio::task::JoinSet::new();
    for (i, callee, request) in checked {
        let delivery = Delivery::new(side, callee, request);
        let method = delivery.request.method.clone();
        match side.hold(&delivery.key()) {
            Ok(wait) => {
                running.spawn(async move { (i, method, delivery.send(deadline, wait).await) });
            }
            Err(b) => results[i] = Some(Err(busy(b))),
        }
    }
    // Answers count against the batch's response budget as they arrive
    // (here, whole: a local callee's answer is one piece).
    let mut budget = ResponseBudget::new(side.node().limits.body_bytes);
    while let Some(joined) = running.join_next().await {
        let Ok((i, method, result)) = joined else { continue };
        results[i] = Some(match result {
            Ok(r) => {
                let bodyless = is_bodyless(&method, r.status);
                if budget.take_whole(content_length(&r.headers), bodyless, r.body.len() as u64) {
                    Ok(r)
                } else {
                    Err(CallError::TooLarge)
                }
            }
            Err(e) => Err(e),
        });
    }
    let results: Vec<_> =
        results.into_iter().map(|r| r.unwrap_or(Err(CallError::Failed("the call did not complete".into())))).collect();
    for r in &results {
        side.count(r);
    }
    results
}

fn busy(b: FrontBusy) -> CallError {
    CallError::Failed(match b {
        FrontBusy::Actor => FRONT_BUSY_ACTOR.into(),
        FrontBusy::Node => FRONT_BUSY_NODE.into(),
    })
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
    fn new<S: CallSide>(side: &S, callee: Address, mut request: Request) -> Self {
        // The range is the host's: what the caller set of it goes.
        header_range::strip_pairs(&mut request.headers);
        let caller = side.caller();
        let origin = Origin::Inside { chain: side.chain().extended_by(&caller), caller };
        Self { node: side.node().clone(), app: side.app(), callee, origin, request }
    }

    fn key(&self) -> MailboxKey {
        MailboxKey { app: self.app, address: RawAddress::from(&self.callee) }
    }

    /// Sends the call and waits for its answer until `deadline`; `_wait`,
    /// the caller's place under its bounds, ends with it.
    async fn send(self, deadline: Instant, _wait: Option<FrontWait<MailboxKey>>) -> Result<Response, CallError> {
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
        EventError::AnswerTooLarge(_) => return Err(CallError::TooLarge),
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

/// How a front's call is counted in `wasmkeep_front_calls_total`.
pub(crate) fn outcome(result: &Result<Response, CallError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(CallError::InvalidAddress) => "invalid_address",
        Err(CallError::TooLarge) => "too_large",
        Err(CallError::Timeout) => "timeout",
        Err(CallError::Reentrant) => "reentrant",
        Err(CallError::Failed(reason)) if reason == FRONT_BUSY_ACTOR || reason == FRONT_BUSY_NODE => "busy",
        Err(CallError::Failed(_)) => "failed",
    }
}
