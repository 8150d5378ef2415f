//! An actor's task: takes its events one at a time, in arrival order, and
//! hibernates when idle.

use std::sync::Arc;

use tokio::sync::mpsc;
use wasmkeep_runtime::{ActorInstance, EventAnswer, EventFailure, GuestEvent, GuestLabel};
use wasmkeep_scheduler::InstanceLease;
use wasmkeep_storage::Epoch;

use crate::NodeInner;
use crate::admission::{Admitted, admit};
use crate::event::{Event, EventError, EventKind};
use crate::mailbox::MailboxKey;
use crate::storage_gate::{EventHost, Outcome};
use wasmkeep_core::response::check as check_response;
use wasmkeep_core::{Chain, Origin, Refusal};

/// What an awake actor holds between events. Dropping it hibernates the
/// actor: the instance goes back to the pool, storage stays.
#[derive(Default)]
pub(crate) struct Residence {
    /// Its live instance, if one is running. Declared before `lease`: the
    /// instance leaves the pool before its lease is handed to another.
    pub instance: Option<ActorInstance<EventHost>>,
    /// The owner epoch, once the actor is known to exist.
    pub epoch: Option<Epoch>,
    /// The pool instance it may use.
    pub lease: Option<InstanceLease>,
}

pub(crate) async fn run(node: Arc<NodeInner>, key: MailboxKey, mut rx: mpsc::Receiver<Event>) {
    let mut residence = Residence::default();
    loop {
        // An actor holding nothing has nothing to keep: it retires as soon
        // as its queue is empty. A resident one waits its idle time.
        let next = if residence.lease.is_some() {
            match tokio::time::timeout(node.limits.idle(), rx.recv()).await {
                Ok(Some(event)) => Some(event),
                Ok(None) => return,
                Err(_idle) => None,
            }
        } else {
            rx.try_recv().ok()
        };
        match next {
            Some(event) => handle(&node, &key, &mut residence, event).await,
            None if node.mailboxes.retire(&key, &rx) => return,
            None => {}
        }
    }
}

async fn handle(node: &Arc<NodeInner>, key: &MailboxKey, residence: &mut Residence, event: Event) {
    let Event { origin, kind, arrived } = event;
    // A socket's close is admitted as its open was.
    let origin_of_open = matches!(kind, EventKind::SocketOpen { .. }).then(|| origin.clone());
    let admitted = admit(node, key, residence, origin.is_outside(), kind.may_create(), arrived).await;
    let run = |guest: GuestEvent| async {
        match admitted {
            Ok(admitted) => execute(node, residence, admitted, origin, guest).await,
            Err(refusal) => Err(EventError::from(refusal)),
        }
    };
    // The caller may have gone; the event's effects stand regardless.
    match kind {
        EventKind::Request { request, reply } => {
            let _ = reply.send(run(GuestEvent::Request(request)).await.and_then(|a| match a {
                EventAnswer::Response(response) => Ok(response),
                // A request is answered with a response; anything else is a host bug.
                other => Err(EventError::from(EventFailure::Trap(format!("a request answered {other:?}")))),
            }));
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
            if let Err(unsent) = reply.send(opened) {
                // The client left while the actor opened it: the socket
                // goes, and an actor that accepted it hears it close.
                node.sockets.remove(conn);
                if let (Ok(Ok(())), Some(origin)) = (unsent, origin_of_open) {
                    let close = EventKind::SocketClose { conn, code: 1006, reason: String::new() };
                    let _ = crate::router::post(node, key.app, key.address.clone(), origin, close);
                }
            }
        }
        EventKind::SocketMessage { conn, message } => {
            if let Err(e) = run(GuestEvent::SocketMessage { conn, message }).await {
                tracing::debug!(%conn, "a socket message was not handled: {e}");
                // A socket its actor can no longer take (a deploy made the
                // class internal or removed it; the actor is gone) closes.
                let (code, reason) = match e {
                    EventError::Refused(Refusal::Internal) => (1008, "the class is internal"),
                    EventError::Refused(Refusal::NoSuchClass) => (1001, "the class was removed"),
                    EventError::Refused(Refusal::NoSuchActor) => (1000, "the actor no longer exists"),
                    _ => return,
                };
                node.sockets.force_close(conn, code, reason);
            }
        }
        EventKind::SocketClose { conn, code, reason } => {
            if let Err(e) = run(GuestEvent::SocketClose { conn, code, reason }).await {
                tracing::debug!(%conn, "a socket close was not handled: {e}");
            }
        }
    }
}

async fn execute(
    node: &Arc<NodeInner>,
    residence: &mut Residence,
    admitted: Admitted,
    origin: Origin,
    mut event: GuestEvent,
) -> Result<EventAnswer, EventError> {
    let Admitted { class, actor, epoch, values, app } = admitted;
    // One wall for the event, instantiation included.
    let started = std::time::Instant::now();
    let ends = started + node.limits.wall_per_event();
    // An inside caller's event says who calls; the host sets these, never
    // a client (the edge removed the range) nor a guest.
    let chain = match (origin, &mut event) {
        (Origin::Inside { caller, chain }, GuestEvent::Request(request)) => {
            request.headers.push(("x-wasmkeep-caller".into(), caller.header(&app.tenant).into_bytes()));
            request.headers.push(("x-wasmkeep-chain".into(), chain.header().into_bytes()));
            request.headers.push(("x-wasmkeep-app".into(), format!("{}/{}", app.tenant, app.name).into_bytes()));
            chain
        }
        // A socket's events carry no request and no chain.
        _ => Chain::new(),
    };
    // Each event runs on the active version's code: after a deploy the
    // old instance goes, and the next event starts a new one.
    if residence.instance.as_ref().is_some_and(|i| !Arc::ptr_eq(i.component(), &class.component)) {
        residence.instance = None;
    }
    let instance = match &mut residence.instance {
        Some(instance) => instance,
        slot @ None => {
            let host = EventHost::new(node.clone(), actor.clone(), epoch);
            let label = GuestLabel { app: app.label.clone(), guest: actor.address.to_string().into() };
            let instance = class.component.instantiate(host, label, ends).await.map_err(EventError::from)?;
            slot.insert(instance)
        }
    };
    instance.host_mut().begin(epoch, values, started, chain);
    let answer = instance.run(&event, ends).await;
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
                if response.body.len() as u64 > node.limits.body_bytes {
                    residence.instance = None;
                    return Err(EventError::AnswerTooLarge(node.limits.body_bytes));
                }
            }
            match instance.host_mut().finish().await {
                Ok(Outcome::Kept) => Ok(answer),
                Ok(Outcome::Deleted) => {
                    // It no longer exists: the next event is admitted afresh,
                    // and its sockets close without close events (DESIGN §3.4).
                    residence.epoch = None;
                    residence.instance = None;
                    node.sockets.close_all(&MailboxKey::of(&actor), 1000, "the actor was deleted");
                    Ok(answer)
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
            Err(EventError::from(failure))
        }
    }
}
