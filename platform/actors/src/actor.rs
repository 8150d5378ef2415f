//! An actor's task: takes its events one at a time, in arrival order, and
//! hibernates when idle.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::Instrument;
use tracing::field::Empty;
use wasmkeep_core::metric_labels::EventOutcome;
use wasmkeep_core::placement::IfElsewhere;
use wasmkeep_core::placement::holding::{self, AtRetire};
use wasmkeep_core::response::check as check_response;
use wasmkeep_core::{
    ActorKey, Address, Chain, Envelope, EventError, Failure, MailboxKey, Origin, Refusal, close, head,
};
use wasmkeep_runtime::{EventAnswer, GuestEvent, GuestLabel};
use wasmkeep_storage::{Create, StoreError, Wake, WriteMark};
use wasmkeep_telemetry::traces::{self, TARGET};

use crate::NodeInner;
use crate::actor_host::{ActorEventHost, EventContext, Outcome};
use crate::admission::{Admitted, admit};
use crate::event::{Event, EventKind, RequestAnswer, SocketEvent, from_failure};
use crate::residence::Residence;

pub(crate) async fn run(node: Arc<NodeInner>, key: MailboxKey, mut rx: mpsc::Receiver<Event>) {
    // An actor this node woke before wakes again without a store write:
    // its epoch comes back with the tenure it was taken under, which
    // admission compares with the node's (a race of a keep with a tenure's
    // growth cannot make an old epoch look new).
    let (epoch, tenure) = match node.owned.take(&key) {
        Some((epoch, tenure)) => (Some(epoch), tenure),
        None => (None, node.tenure.load(std::sync::atomic::Ordering::Acquire)),
    };
    let mut residence = Residence { epoch, tenure, ..Residence::default() };
    loop {
        // An actor holding nothing has nothing to keep: it retires as soon
        // as its queue is empty. A resident one waits its idle time.
        // A draining node's actors finish what is queued, then hibernate.
        let next = if residence.lease.is_some() && !node.is_draining() {
            // A tenant's idle actor may be asked to hibernate early (the
            // pool is full and another tenant is under its share).
            let evicted = residence.tenant.as_ref().map(|t| (t, node.idle.park(t, &key)));
            let early = async {
                match &evicted {
                    Some((_, notify)) => notify.notified().await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                received = rx.recv() => Some(received),
                () = tokio::time::sleep(node.limits.idle()) => None,
                () = early => None,
                () = node.draining_started() => None,
            };
            if let Some((tenant, _)) = &evicted {
                node.idle.unpark(tenant, &key);
            }
            match next {
                Some(Some(event)) => Some(event),
                Some(None) => return,
                None => None,
            }
        } else {
            rx.try_recv().ok()
        };
        match next {
            Some(event) => {
                // The first event after the drain began finds its actor
                // given up: it, and every later one, goes to the next owner.
                if node.arrived_draining(event.arrived) {
                    give_up(&node, &mut residence).await;
                }
                handle(&node, &mut residence, event).await
            }
            None => {
                // Its writes are durable before a new task for the actor can
                // read them and answer.
                if let Err(e) = node.store.durable(residence.written).await {
                    tracing::error!(actor = ?key, "the actor's last writes could not be made durable: {e}");
                }
                // The epoch is kept before a new task for the actor can
                // start and look for it. A draining node keeps no epoch: it
                // releases the actor, so another node takes it at once.
                let draining = node.is_draining();
                let at_retire = || {
                    let current = node.tenure.load(std::sync::atomic::Ordering::Acquire);
                    holding::at_retire(residence.tenure, current, draining)
                };
                let keep = || {
                    if let (AtRetire::Keep, Some(epoch)) = (at_retire(), residence.epoch) {
                        node.owned.keep(&key, epoch, residence.tenure);
                    }
                };
                let held = residence.instance.is_some();
                if node.mailboxes.retire(&key, &rx, keep) {
                    if held && let Some(app) = node.app(key.app) {
                        app.metrics.hibernated();
                    }
                    if let (AtRetire::Release, Some(actor), Some(epoch)) =
                        (at_retire(), &residence.actor, residence.epoch)
                    {
                        node.release(actor, epoch).await;
                    }
                    return;
                }
            }
        }
    }
}

/// Hibernates the actor and releases it (a draining node), so that its
/// next event is admitted afresh: elsewhere.
async fn give_up(node: &NodeInner, residence: &mut Residence) {
    if let (Some(actor), Some(epoch)) = (residence.actor.clone(), residence.epoch.take()) {
        residence.instance = None;
        residence.lease = None;
        residence.share = None;
        node.release(&actor, epoch).await;
    }
}

async fn handle(node: &Arc<NodeInner>, residence: &mut Residence, event: Event) {
    let Event { envelope, kind, arrived, if_elsewhere } = event;
    node.last_events.note(|| envelope.mailbox(), &mut residence.noted);
    if let EventKind::Delete { reply } = kind {
        let _ = reply.send(delete(node, residence, &envelope).await);
        return;
    }
    let admitting = std::time::Instant::now();
    let admitted = admit(node, &envelope, &kind, residence, arrived).await;
    let admission = admitting.elapsed();
    // Another node owns the actor: a request its route sends on goes back
    // to it (its span and metrics are where it runs).
    let kind = match (admitted.as_ref().err(), kind, if_elsewhere) {
        (Some(Refusal::Elsewhere { owner }), EventKind::Request { request, reply }, IfElsewhere::HandBack) => {
            let event = Box::new((envelope, request));
            let _ = reply.send(RequestAnswer::Elsewhere { owner: owner.clone(), event });
            return;
        }
        (_, kind, _) => kind,
    };
    if let Err(refusal) = &admitted {
        node.metrics.refusals.inc(refusal.reason());
    }
    // The event's span starts once it is this node's to answer (one
    // handed on has its span where it runs).
    let span = event_span(&envelope, &kind, admitting.saturating_duration_since(arrived), admission);
    let run = |guest: GuestEvent| {
        async {
            match admitted {
                Ok(admitted) => {
                    let app = admitted.app.metrics.clone();
                    app.queued(admitting.saturating_duration_since(arrived).as_secs_f64());
                    app.admission_waited(admission.as_secs_f64());
                    let started = std::time::Instant::now();
                    let answer = execute(node, residence, admitted, &envelope, guest).await;
                    let outcome = answer.as_ref().err().map_or(EventOutcome::Ok, EventOutcome::from);
                    app.event(outcome, started.elapsed().as_secs_f64());
                    answer
                }
                Err(refusal) => {
                    if let Some(app) = node.app(envelope.app.id) {
                        app.metrics.refused(refusal.reason());
                    }
                    Err(EventError::from(refusal))
                }
            }
        }
        .instrument(span.clone())
    };
    // The caller may have gone; the event's effects stand regardless.
    match kind {
        EventKind::Request { mut request, reply } => {
            // An inside caller's event says who calls; the host sets this,
            // never a client (the edge removed the range) nor a guest.
            request.headers.extend(head::guest_head(&envelope));
            let answer = run(GuestEvent::Request(request)).await.and_then(|a| match a {
                EventAnswer::Response(response) => Ok(response),
                // A request is answered with a response; anything else is a
                // host bug, not the guest's to be told of.
                other => {
                    tracing::error!("a request was answered {other:?}");
                    Err(EventError::Trapped(String::new()))
                }
            });
            match &answer {
                Ok(response) => {
                    span.record("http.response.status_code", response.status);
                }
                Err(e) => traces::failed(&span, e.label()),
            }
            release(node, residence.written, answer, |answer| async move {
                let _ = reply.send(RequestAnswer::Done(answer));
            })
            .await;
        }
        EventKind::SocketOpen { conn, path, reply } => {
            // The client left before its open ran: the actor never hears
            // of the socket (ADR 0009).
            if reply.is_closed() {
                node.sockets.remove(conn);
                return;
            }
            let opened = run(GuestEvent::SocketOpen { conn, path }).await.map(|a| match a {
                EventAnswer::Opened(opened) => opened,
                other => Err(format!("an open answered {other:?}")),
            });
            let owner = node.clone();
            release(node, residence.written, opened, move |opened| async move {
                if let Err(unsent) = reply.send(opened) {
                    // The client left while the actor opened it: the socket
                    // goes, and an actor that accepted it hears it close, as
                    // its open was admitted.
                    owner.sockets.remove(conn);
                    if let Ok(Ok(())) = unsent {
                        owner.tell_closed(envelope, conn, close::LOST, String::new()).await;
                    }
                }
            })
            .await;
        }
        EventKind::Socket(SocketEvent::Message { conn, message }) => {
            if let Err(e) = run(GuestEvent::SocketMessage { conn, message }).await {
                tracing::debug!(%conn, "a socket message was not handled: {e}");
                // A socket its actor can no longer take closes.
                if let Some(close) = Failure::from(e).answer().close {
                    node.sockets.force_close(conn, close.code, close.reason);
                    // An actor still there (its message came too late)
                    // hears the close, as of any socket it did not close.
                    if close == close::OVERLOADED {
                        node.tell_closed(envelope, conn, close.code, close.reason.into()).await;
                    }
                }
            }
        }
        EventKind::Socket(SocketEvent::Close { conn, code, reason }) => {
            if let Err(e) = run(GuestEvent::SocketClose { conn, code, reason }).await {
                tracing::debug!(%conn, "a socket close was not handled: {e}");
            }
        }
        EventKind::Delete { .. } => unreachable!("a deletion is carried out before admission"),
    }
}

/// The span of a request event (kind server), a child of the context its
/// envelope carries; none for a socket's events (their spans are the
/// socket's, not the event's).
fn event_span(envelope: &Envelope, kind: &EventKind, queued: Duration, admission: Duration) -> tracing::Span {
    let EventKind::Request { request, .. } = kind else { return tracing::Span::none() };
    traces::child(&envelope.trace, || {
        tracing::info_span!(
        target: TARGET,
        parent: None,
        "actor.event",
        otel.kind = "server",
        wasmkeep.tenant = envelope.app.tenant.as_str(),
        wasmkeep.app = envelope.app.name.as_str(),
        wasmkeep.actor.class = envelope.target.class.as_str(),
        wasmkeep.actor.name = %String::from_utf8_lossy(&envelope.target.name),
        wasmkeep.caller = matches!(envelope.origin, Origin::Inside { .. }),
        http.request.method = request.method.as_str(),
        url.path = request.path.split('?').next().unwrap_or(""),
        http.response.status_code = Empty,
        wasmkeep.queue.wait_ms = queued.as_secs_f64() * 1000.0,
        wasmkeep.admission.wait_ms = admission.as_secs_f64() * 1000.0,
        wasmkeep.actor.woke = false,
        )
    })
}

/// Delivers an event's answer once the actor's commits up to `written` are
/// durable (the output gate across events: an answer may tell what the
/// actor read of its writes not yet synced). The actor's next event runs
/// meanwhile: the delivery waits on its own task, unless the writes are
/// durable already.
async fn release<T, F>(
    node: &Arc<NodeInner>,
    written: WriteMark,
    answer: Result<T, EventError>,
    deliver: impl FnOnce(Result<T, EventError>) -> F + Send + 'static,
) where
    T: Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    use futures_util::FutureExt;
    let store = node.store.clone();
    let mut durable = Box::pin(async move { store.durable(written).await });
    let gated = |durable: Result<(), StoreError>, answer: Result<T, EventError>| match durable {
        Ok(()) => answer,
        Err(e) => {
            tracing::error!("the store could not make an answer's writes durable: {e}");
            Err(Refusal::StoreUnavailable(e.to_string()).into())
        }
    };
    match (&mut durable).now_or_never() {
        Some(d) => deliver(gated(d, answer)).await,
        None => {
            let delivered = async move {
                let d = durable.await;
                deliver(gated(d, answer)).await;
            };
            tokio::spawn(delivered);
        }
    }
}

/// Deletes the actor `envelope` names, between its events: its storage
/// goes, its sockets close without close events, its epoch is forgotten.
async fn delete(node: &Arc<NodeInner>, residence: &mut Residence, envelope: &Envelope) -> Result<(), EventError> {
    let app = node.app(envelope.app.id).ok_or(Refusal::NoSuchApp)?;
    let version = app.active().ok_or(Refusal::NoSuchClass)?;
    let class = version.class(&envelope.target.class).ok_or(Refusal::NoSuchClass)?;
    let name = envelope.target.actor_name().map_err(Refusal::InvalidName)?;
    let actor = ActorKey { app: app.id(), address: Address::new(class.name.clone(), name) };
    let unavailable = |e: wasmkeep_storage::StoreError| Refusal::StoreUnavailable(e.to_string());
    let epoch = match residence.epoch.take() {
        Some(epoch) => epoch,
        None => match crate::admission::take(node, &actor, Create::No).await? {
            Wake::Owned { epoch, .. } => epoch,
            Wake::Missing | Wake::Full => return Err(Refusal::NoSuchActor.into()),
        },
    };
    residence.instance = None;
    node.store.delete_actor(&actor, epoch).await.map_err(unavailable)?;
    let deleted = close::ACTOR_DELETED;
    node.sockets.close_all(&MailboxKey::of(&actor), deleted.code, deleted.reason);
    node.last_events.forget(&envelope.mailbox());
    Ok(())
}

async fn execute(
    node: &Arc<NodeInner>,
    residence: &mut Residence,
    admitted: Admitted,
    envelope: &Envelope,
    event: GuestEvent,
) -> Result<EventAnswer, EventError> {
    let Admitted { class, actor, epoch, values, app, limits } = admitted;
    // One wall for the event, instantiation included.
    let started = std::time::Instant::now();
    let ends = started + limits.wall_per_event();
    // A socket's events carry no request and no chain.
    let chain = match (&envelope.origin, &event) {
        (Origin::Inside { chain, .. }, GuestEvent::Request(_)) => chain.clone(),
        _ => Chain::new(),
    };
    // Each event runs on the active version's code: after a deploy the
    // old instance goes, and the next event starts a new one.
    if residence.instance.as_ref().is_some_and(|i| !Arc::ptr_eq(i.component(), &class.component)) {
        residence.instance = None;
    }
    let last_commit = residence.written;
    let context = EventContext {
        epoch,
        values,
        started,
        chain,
        limits: limits.clone(),
        // What the event calls is a child of its span.
        trace: traces::carried(&tracing::Span::current(), &envelope.trace),
        last_commit,
    };
    let instance = match &mut residence.instance {
        Some(instance) => {
            instance.host_mut().begin(context);
            instance
        }
        slot @ None => {
            tracing::Span::current().record("wasmkeep.actor.woke", true);
            app.metrics.woke();
            let host =
                ActorEventHost::new(node.clone(), envelope.app.clone(), app.stored.clone(), actor.clone(), context);
            let label = GuestLabel::actor(&envelope.app, &actor.address);
            let share = node.guest_share(&envelope.app);
            let instance =
                class.component.instantiate(host, label, app.egress(), share, ends).await.map_err(from_failure)?;
            slot.insert(instance)
        }
    };
    let answer = app.usage.event(Some(&app.metrics), instance.run(&event, ends)).await;
    // Commits before its effects stand however the event ends.
    residence.written = instance.host().gate.last_commit;
    // A commit before an effect failed (the epoch fenced, the store down):
    // however the event ends, the epoch goes with the instance, and the
    // next event wakes the actor afresh.
    if instance.host().gate.is_broken() {
        residence.epoch = None;
    }
    match answer {
        Ok(answer) => {
            if let EventAnswer::Response(response) = &answer {
                // Not deliverable: its writes are dropped, like a trap's.
                if let Err(invalid) = check_response(response.status, &response.headers) {
                    tracing::info!(%actor, "invalid answer: {invalid}");
                    residence.instance = None;
                    return Err(EventError::InvalidResponse);
                }
                // The body limit bounds answers as it bounds requests.
                if response.body.len() as u64 > limits.body_bytes {
                    residence.instance = None;
                    return Err(EventError::AnswerTooLarge(limits.body_bytes));
                }
            }
            let finished = instance.host_mut().finish().await;
            residence.written = instance.host().gate.last_commit;
            match finished {
                Ok(Outcome::Kept) => Ok(answer),
                Ok(Outcome::Deleted) => {
                    // It no longer exists: the next event is admitted afresh,
                    // and its sockets close without close events
                    // (docs/spec/actors-and-admission.md §6).
                    residence.epoch = None;
                    residence.instance = None;
                    let deleted = close::ACTOR_DELETED;
                    node.sockets.close_all(&MailboxKey::of(&actor), deleted.code, deleted.reason);
                    Ok(answer)
                }
                Err(StoreError::OverBudget(over)) => {
                    // Another of the tenant's actors took the room since the
                    // event's writes were checked: nothing of it is stored,
                    // and its answer does not leave. The instance goes (its
                    // memory may hold what was not stored); the epoch stays.
                    residence.instance = None;
                    let tenant = &envelope.app.tenant;
                    Err(node.over_quota(tenant, crate::actor_host::over_quota(&over), Duration::ZERO).into())
                }
                Err(e) => {
                    // Fenced or failed: the instance and its owner epoch go,
                    // and the next event is admitted (and woken) afresh.
                    tracing::warn!(%actor, "commit failed: {e}");
                    residence.epoch = None;
                    residence.instance = None;
                    Err(Refusal::StoreUnavailable(e.to_string()).into())
                }
            }
        }
        Err(failure) => {
            // Its writes are dropped with the instance.
            residence.instance = None;
            // The runtime logged it, one line, where it happened.
            Err(from_failure(failure))
        }
    }
}
