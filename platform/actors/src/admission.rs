//! Admission: DESIGN §3.3, in its order, in this one function. It runs on
//! the actor's task before every event, so each event is judged by the
//! version active when it starts.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::Instant;
use wasmkeep_core::{ActorKey, Address, Refusal};
use wasmkeep_storage::{Epoch, Wake};

use crate::NodeInner;
use crate::actor::Residence;
use crate::app::{App, Class};
use crate::mailbox::MailboxKey;

/// What an admitted event runs with.
pub(crate) struct Admitted {
    pub app: Arc<App>,
    pub class: Arc<Class>,
    pub actor: ActorKey,
    pub epoch: Epoch,
    pub values: Arc<BTreeMap<String, String>>,
}

/// Admits one event for the actor at `key`, from an outside caller or not,
/// creating the actor only if the event `may_create` it.
/// `residence` is what the actor already holds: a resident actor is known
/// to exist and holds a pool instance.
pub(crate) async fn admit(
    node: &NodeInner,
    key: &MailboxKey,
    residence: &mut Residence,
    outside: bool,
    may_create: bool,
    arrived: Instant,
) -> Result<Admitted, Refusal> {
    let app = node.app(key.app).ok_or(Refusal::NoSuchApp)?;
    // 1. The class is one of the active version's.
    let version = app.active().ok_or(Refusal::NoSuchClass)?;
    let class = version.class(&key.address.class).ok_or(Refusal::NoSuchClass)?.clone();
    // 2. The name is valid.
    let name = key.address.actor_name().map_err(Refusal::InvalidName)?;
    // 3. The early rule.
    if class.access.refuses_early(outside) {
        return Err(Refusal::Internal);
    }
    // 4. The app's required values are set.
    let values = app.values();
    if let Some(missing) = version.required_values.iter().find(|v| !values.contains_key(*v)) {
        return Err(Refusal::ValueMissing(missing.clone()));
    }
    // 5. Existence: a resident actor exists; otherwise the store answers,
    //    creating the actor for a caller that may create it.
    let actor = ActorKey { app: key.app, address: Address::new(class.name.clone(), name) };
    let epoch = match residence.epoch {
        Some(epoch) => epoch,
        None => match node.store.wake(&actor, may_create && class.access.creates(outside), &node.id).await {
            Ok(Wake::Owned { epoch, .. }) => *residence.epoch.insert(epoch),
            Ok(Wake::Missing) => return Err(Refusal::NoSuchActor),
            Err(e) => return Err(Refusal::StoreUnavailable(e.to_string())),
        },
    };
    // 6. Quotas: tenants' plans come with the control plane.
    // 7. Capacity: a pool instance within the admission wait, counted
    //    from the event's arrival.
    if residence.lease.is_none() {
        let wait = (arrived + node.limits.admission_wait()).saturating_duration_since(Instant::now());
        residence.lease = Some(node.pool.lease(wait).await.ok_or(Refusal::Capacity)?);
    }
    Ok(Admitted { app, class, actor, epoch, values })
}
