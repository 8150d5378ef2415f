//! Admission (docs/spec/actors-and-admission.md §5): runs on the actor's
//! task before every event, so each event is judged by the version active
//! when it starts. The rules and their order are `core::admission`'s; this
//! file asks the store and the pool between them, and resolves once the
//! limits the event runs under.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use wasmkeep_core::admission::{Before, Name, before_store, capacity_wait, no_capacity};
use wasmkeep_core::placement::holding;
use wasmkeep_core::placement::take::{TakeBy, owned_elsewhere, take_by, taken_here, while_draining};
use wasmkeep_core::quota::Quota;
use wasmkeep_core::{ActorKey, Address, Envelope, Limits, Refusal};
use wasmkeep_storage::{Create, Epoch, Take, Wake};

use crate::app::Tenant;
use crate::event::EventKind;
use crate::residence::Residence;
use crate::{App, Class, NodeInner};

/// What an admitted event runs with.
pub(crate) struct Admitted {
    pub app: Arc<App>,
    pub class: Arc<Class>,
    pub actor: ActorKey,
    pub epoch: Epoch,
    pub values: Arc<BTreeMap<String, String>>,
    /// The limits the event runs under: its tenant's plan's, or the node's.
    pub limits: Arc<Limits>,
}

/// The actor's epoch from the store. An actor the caller may create is
/// created only within its tenant's creations per second and the actors
/// its plan lets it keep: the store is asked first whether it exists, so
/// waking an existing actor never spends a creation, and counts what the
/// tenant keeps in the transaction that creates it. A creation its bound
/// refuses has spent its rate all the same: the rate bounds the store's
/// work, refused or not.
async fn wake_or_create(
    node: &NodeInner,
    actor: &ActorKey,
    create: bool,
    tenant: Option<&Tenant>,
) -> Result<Epoch, Refusal> {
    let Some(tenant) = tenant.filter(|_| create) else {
        // Not to be created, or without a tenant's quotas: asked once.
        let create = if create { Create::ANY } else { Create::No };
        return match take(node, actor, create).await? {
            Wake::Owned { epoch, .. } => Ok(epoch),
            Wake::Missing | Wake::Full => Err(Refusal::NoSuchActor),
        };
    };
    if let Wake::Owned { epoch, .. } = take(node, actor, Create::No).await? {
        return Ok(epoch);
    }
    tenant.rates.creation().map_err(|w| node.over_quota(&tenant.id, Quota::Creations, w))?;
    match take(node, actor, Create::Within(tenant.plan.actors)).await? {
        Wake::Owned { epoch, .. } => Ok(epoch),
        Wake::Missing => Err(Refusal::NoSuchActor),
        // Waiting frees no place: no `Retry-After` (`Quota::passes`).
        Wake::Full => Err(node.over_quota(&tenant.id, Quota::Actors, std::time::Duration::ZERO)),
    }
}

/// Takes the actor for this node, as `core::placement::take` says: alone,
/// by waking it; in a cluster, by a compare-and-set against its owner's
/// liveness, so that an actor another live node owns is refused
/// [`Refusal::Elsewhere`] (and noted as its); while draining, not at all.
pub(crate) async fn take(node: &NodeInner, actor: &ActorKey, create: Create) -> Result<Wake, Refusal> {
    let unavailable = |e: wasmkeep_storage::StoreError| Refusal::StoreUnavailable(e.to_string());
    let members = node.router.members();
    let now_ms = crate::clock::now().unix_ms;
    let key = wasmkeep_core::MailboxKey::of(actor);
    match take_by(node.is_draining(), node.router.is_current(), &members, now_ms) {
        TakeBy::Wake => node.store.wake(actor, create, &node.id).await.map_err(unavailable),
        TakeBy::NotCurrent => Err(Refusal::StoreUnavailable("this node's heartbeat is not current".into())),
        TakeBy::AskOwner => {
            let owner = node.store.owner(actor).await.map_err(unavailable)?;
            let (note, refusal) = while_draining(owner.as_deref(), &key, &members, now_ms);
            node.router.note(&key, note);
            Err(refusal)
        }
        TakeBy::CompareAndSet { dead_before_ms } => {
            match node.store.take(actor, create, &node.id, dead_before_ms).await.map_err(unavailable)? {
                Take::Owned { epoch, created } => {
                    node.router.note(&key, taken_here());
                    Ok(Wake::Owned { epoch, created })
                }
                Take::Missing => Ok(Wake::Missing),
                Take::Full => Ok(Wake::Full),
                Take::Elsewhere { owner } => {
                    let (note, refusal) = owned_elsewhere(owner);
                    node.router.note(&key, note);
                    Err(refusal)
                }
            }
        }
    }
}

/// Admits one event of `envelope`, arrived at `arrived`, creating the
/// actor only if this kind of event may create it. `residence` is what
/// the actor already holds: a resident actor is known to exist, its name
/// is checked, and it holds a pool instance.
pub(crate) async fn admit(
    node: &NodeInner,
    envelope: &Envelope,
    kind: &EventKind,
    residence: &mut Residence,
    arrived: Instant,
) -> Result<Admitted, Refusal> {
    let admitted = admit_event(node, envelope, kind, residence, arrived).await;
    if let Err(refusal @ Refusal::Quota { .. }) = &admitted {
        // The tenant sees why in its tail, with the refused event's trace.
        node.tail_refusal(envelope, refusal);
    }
    admitted
}

async fn admit_event(
    node: &NodeInner,
    envelope: &Envelope,
    kind: &EventKind,
    residence: &mut Residence,
    arrived: Instant,
) -> Result<Admitted, Refusal> {
    let app = node.app(envelope.app.id).ok_or(Refusal::NoSuchApp)?;
    let version = app.active().ok_or(Refusal::NoSuchClass)?;
    let class = version.class(&envelope.target.class).cloned();
    let values = app.values();
    let missing_value = version.missing_value(&values);
    let wake = before_store(Before {
        now: Instant::now(),
        deadline: envelope.deadline,
        class: class.as_ref().map(|c| c.access),
        name: match &residence.name {
            Some(checked) => Name::Checked(checked),
            None => Name::Raw(&envelope.target),
        },
        outside: envelope.origin.is_outside(),
        missing_value,
        may_create: kind.may_create(),
    })?;
    if residence.name.is_none() {
        residence.name = Some(wake.name.clone());
    }
    let class = class.expect("a class that passed admission exists");
    // Existence: a resident actor exists; otherwise the store answers.
    let actor = ActorKey { app: app.id(), address: Address::new(class.name.clone(), wake.name) };
    let tenant = node.tenant(&envelope.app);
    // An epoch of an older tenure may be another node's now: taken afresh,
    // and the instance (whose memory may hold what that node changed) goes.
    let tenure = node.current_tenure();
    if !holding::still_holds(residence.tenure, tenure) {
        residence.epoch = None;
        residence.instance = None;
        residence.tenure = tenure;
    }
    let epoch = match residence.epoch {
        Some(epoch) => epoch,
        None => *residence.epoch.insert(wake_or_create(node, &actor, wake.create, tenant.as_deref()).await?),
    };
    residence.actor.get_or_insert_with(|| actor.clone());
    let limits = tenant.as_ref().map_or_else(|| node.limits.clone(), |t| t.limits.clone());
    // Quotas: the actor's events per second (a socket's message or close
    // is the socket's traffic, bounded by its own limits), and the
    // tenant's share of resident actors.
    if let Some(tenant) = &tenant {
        if matches!(kind, EventKind::Request { .. } | EventKind::SocketOpen { .. }) {
            tenant.rates.event(&envelope.mailbox()).map_err(|w| node.over_quota(&tenant.id, Quota::ActorEvents, w))?;
        }
        if residence.share.is_none() {
            let ticket = tenant.residents.take();
            let full = || node.over_quota(&tenant.id, Quota::ResidentActors, std::time::Duration::from_secs(1));
            residence.share = Some(ticket.ok_or_else(full)?);
            residence.tenant = Some(tenant.id.clone());
        }
    }
    // Capacity: a pool instance within the admission wait from the event's
    // arrival, and never past its deadline. When the pool is full, the
    // scheduler makes room by the tenants' shares (a tenant at its share
    // makes room from its own idle actors or is refused now, never queueing
    // ahead of the others).
    if residence.lease.is_none() {
        if let Some(lease) = node.pool.try_lease() {
            residence.lease = Some(lease);
        } else if let Some(tenant) = &tenant {
            node.make_room(tenant)?;
        }
    }
    if residence.lease.is_none() {
        let now = Instant::now();
        let wait = capacity_wait(arrived, limits.admission_wait(), envelope.deadline, now);
        match node.pool.lease(wait).await {
            Some(lease) => residence.lease = Some(lease),
            None => return Err(no_capacity(Instant::now(), envelope.deadline)),
        }
    }
    // Memory: a new instance needs room in the guests' budget for its
    // first memory, made by the tenants' shares as the pool's is.
    if residence.instance.is_none() {
        let now = Instant::now();
        let until = now + capacity_wait(arrived, limits.admission_wait(), envelope.deadline, now);
        let share = node.guest_share(&envelope.app);
        if let Err(refusal) = node.memory_room(&share, class.component.initial_memory(), until).await {
            return Err(if refusal == Refusal::Capacity {
                no_capacity(Instant::now(), envelope.deadline)
            } else {
                refusal
            });
        }
    }
    Ok(Admitted { app, class, actor, epoch, values, limits })
}
