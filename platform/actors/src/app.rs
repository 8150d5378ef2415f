//! Apps, their active versions and values, as the node holds them.
//!
//! A version is immutable; activating one swaps one pointer, so every
//! event sees one whole version (the one active when it starts). The hosts
//! its components run with are parameters (`A` for actors, `F` for the
//! front): this file knows nothing of them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use wasmkeep_core::plan::Plan;
use wasmkeep_core::quota;
use wasmkeep_core::{Access, AppId, AppName, AppRef, ClassName, Limits, MailboxKey, TenantId};
use wasmkeep_runtime::{ActorComponent, ActorHost, Egress, FrontComponent, GuestHost};
use wasmkeep_scheduler::{Rates, Share, TenantRates};

/// A class of a version: its access level and its component.
pub struct Class<A: ActorHost> {
    pub name: ClassName,
    pub access: Access,
    pub component: Arc<ActorComponent<A>>,
}

/// An active version of an app.
pub struct Version<A: ActorHost, F: GuestHost> {
    pub number: i64,
    /// The front, which serves every path outside `/actor/`, if any.
    pub front: Option<Arc<FrontComponent<F>>>,
    pub classes: HashMap<String, Arc<Class<A>>>,
    pub required_values: Vec<String>,
}

impl<A: ActorHost, F: GuestHost> Version<A, F> {
    pub fn class(&self, name: &str) -> Option<&Arc<Class<A>>> {
        self.classes.get(name)
    }

    /// The first value this version requires that `values` lacks: while
    /// there is one, neither its actors nor its front run
    /// (docs/spec/actors-and-admission.md §5 and §8).
    pub fn missing_value(&self, values: &BTreeMap<String, String>) -> Option<&str> {
        self.required_values.iter().find(|v| !values.contains_key(*v)).map(String::as_str)
    }
}

/// One app of one tenant.
pub struct App<A: ActorHost, F: GuestHost> {
    /// Who it is: shared by the envelopes of its events.
    pub reference: Arc<AppRef>,
    /// `tenant/app`, as logs name it.
    pub label: Arc<str>,
    /// The outbound requests of its guests go out under this (its tenant's
    /// plan may narrow the node's policy and bound the rate).
    egress: RwLock<Egress>,
    /// What it used since the node started.
    pub usage: crate::usage::AppUsage,
    /// Its series of the node's metrics.
    pub metrics: wasmkeep_telemetry::AppMetrics,
    /// Its guests' outbound requests and bytes, kept across egress changes.
    pub egress_counts: Arc<wasmkeep_runtime::EgressCounts>,
    /// What its actors store.
    pub stored: Arc<crate::usage::StoredBytes>,
    /// The refusals its tenant's tail is told of.
    pub(crate) refusals_told: std::sync::Mutex<wasmkeep_core::quota::RefusalsTold>,
    active: RwLock<Option<Arc<Version<A, F>>>>,
    values: RwLock<Arc<BTreeMap<String, String>>>,
}

impl<A: ActorHost, F: GuestHost> App<A, F> {
    pub(crate) fn new(
        reference: AppRef,
        label: Arc<str>,
        values: BTreeMap<String, String>,
        egress: Egress,
        metrics: &wasmkeep_telemetry::Metrics,
    ) -> Self {
        let egress_counts = Arc::new(wasmkeep_runtime::EgressCounts::default());
        Self {
            metrics: metrics.app(reference.tenant.as_str(), reference.name.as_str()),
            egress: RwLock::new(egress.with_counts(egress_counts.clone())),
            egress_counts,
            usage: Default::default(),
            stored: Default::default(),
            refusals_told: Default::default(),
            label,
            reference: Arc::new(reference),
            active: RwLock::new(None),
            values: RwLock::new(Arc::new(values)),
        }
    }

    pub fn id(&self) -> AppId {
        self.reference.id
    }

    /// What its guests' outbound requests go out under now.
    pub fn egress(&self) -> Egress {
        self.egress.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set_egress(&self, egress: Egress) {
        *self.egress.write().unwrap_or_else(|p| p.into_inner()) = egress.with_counts(self.egress_counts.clone());
    }

    /// The version events start on now.
    pub fn active(&self) -> Option<Arc<Version<A, F>>> {
        self.active.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn activate(&self, version: Arc<Version<A, F>>) {
        *self.active.write().unwrap_or_else(|p| p.into_inner()) = Some(version);
    }

    /// The app's values now.
    pub fn values(&self) -> Arc<BTreeMap<String, String>> {
        self.values.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces every value for the next events, if they differ; answers
    /// whether they did.
    pub(crate) fn replace_values(&self, next: BTreeMap<String, String>) -> bool {
        let mut values = self.values.write().unwrap_or_else(|p| p.into_inner());
        if **values == next {
            return false;
        }
        *values = Arc::new(next);
        true
    }

    /// Sets (or, with `None`, removes) a value for the next events.
    pub(crate) fn set_value(&self, name: &str, value: Option<&str>) {
        let mut values = self.values.write().unwrap_or_else(|p| p.into_inner());
        let mut next = (**values).clone();
        match value {
            Some(value) => next.insert(name.to_owned(), value.to_owned()),
            None => next.remove(name),
        };
        *values = Arc::new(next);
    }
}

impl<A: ActorHost, F: GuestHost> Version<A, F> {
    /// The same version under the number the store gave it.
    pub(crate) fn numbered(self, number: i64) -> Self {
        Self { number, ..self }
    }
}

/// The node's apps, by id and by the names a host reaches them under, and
/// the tenants whose apps are suspended.
pub(crate) struct Apps<A: ActorHost, F: GuestHost> {
    by_id: HashMap<AppId, Arc<App<A, F>>>,
    by_name: HashMap<TenantId, HashMap<AppName, AppId>>,
    suspended: HashSet<TenantId>,
    /// Tenants with a plan: their limits, buckets and shares.
    tenants: HashMap<TenantId, Arc<Tenant>>,
}

/// A tenant with a plan, as the node holds it.
pub(crate) struct Tenant {
    pub id: TenantId,
    pub plan: Arc<Plan>,
    /// The node's limits as the plan lowers them.
    pub limits: Arc<Limits>,
    pub rates: TenantRates<MailboxKey>,
    /// Its actors resident on this node.
    pub residents: Share,
    /// Its open sockets on this node.
    pub sockets: Share,
    /// The front slots its requests hold now (counted, not capped: the
    /// share is weighed when the slots run out).
    pub front_slots: Share,
    /// Its requests at the public port now, and the body bytes they hold
    /// of the port's budget (counted; their shares are weighed as taken).
    pub requests: Share,
    pub body_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// Its guests' outbound connections open now (`egress_connections_per_tenant`).
    pub egress_open: Share,
}

impl<A: ActorHost, F: GuestHost> Default for Apps<A, F> {
    fn default() -> Self {
        Self { by_id: HashMap::new(), by_name: HashMap::new(), suspended: HashSet::new(), tenants: HashMap::new() }
    }
}

impl<A: ActorHost, F: GuestHost> Apps<A, F> {
    pub fn get(&self, id: AppId) -> Option<Arc<App<A, F>>> {
        self.by_id.get(&id).cloned()
    }

    pub fn named(&self, tenant: &TenantId, name: &AppName) -> Option<&Arc<App<A, F>>> {
        let id = self.by_name.get(tenant)?.get(name)?;
        self.by_id.get(id)
    }

    pub fn tenant(&self, tenant: &TenantId) -> Option<Arc<Tenant>> {
        self.tenants.get(tenant).cloned()
    }

    /// Gives `tenant` its plan (a new one resets its rates; what it holds
    /// stays counted), or takes it away (`None`: the node's limits, no
    /// quotas).
    pub fn set_plan(&mut self, tenant: &TenantId, plan: Option<(Arc<Plan>, Limits)>) {
        let Some((plan, limits)) = plan else {
            self.tenants.remove(tenant);
            return;
        };
        // What the tenant holds stays counted under the new caps.
        let (residents, sockets, front_slots, requests, body_bytes, egress_open) = match self.tenants.get(tenant) {
            Some(old) => {
                old.residents.set_cap(plan.resident_actors);
                old.sockets.set_cap(plan.sockets);
                let (slots, requests) = (old.front_slots.clone(), old.requests.clone());
                let (body_bytes, egress_open) = (old.body_bytes.clone(), old.egress_open.clone());
                (old.residents.clone(), old.sockets.clone(), slots, requests, body_bytes, egress_open)
            }
            None => (
                Share::new(plan.resident_actors),
                Share::new(plan.sockets),
                Share::new(u32::MAX),
                Share::new(u32::MAX),
                Arc::default(),
                Share::new(limits.egress_connections_per_tenant),
            ),
        };
        let rates = TenantRates::new(Rates {
            requests: plan.requests_per_second,
            request_burst: plan.request_burst,
            events_per_actor: plan.events_per_second_per_actor,
            creations: plan.actor_creations_per_second,
            egress: plan.egress_requests_per_second,
        });
        let limits = Arc::new(limits);
        let entry = Tenant {
            id: tenant.clone(),
            plan,
            limits,
            rates,
            residents,
            sockets,
            front_slots,
            requests,
            body_bytes,
            egress_open,
        };
        self.tenants.insert(tenant.clone(), Arc::new(entry));
    }

    /// The apps of `tenant`.
    pub fn of_tenant<'a>(&'a self, tenant: &'a TenantId) -> impl Iterator<Item = &'a Arc<App<A, F>>> + 'a {
        self.by_id.values().filter(move |a| &a.reference.tenant == tenant)
    }

    /// The weights of the tenants holding some of a thing now (`holds`),
    /// `tenant`'s own included: what every weighted share is reckoned
    /// against.
    fn holding_weight(&self, tenant: &Tenant, holds: impl Fn(&Tenant) -> bool) -> u32 {
        self.tenants
            .values()
            .filter(|t| holds(t) || t.id == tenant.id)
            .fold(0u32, |sum, t| sum.saturating_add(t.plan.weight))
    }

    /// `tenant`'s share of `size` things (pool instances, front slots) by
    /// the weights of the tenants holding some of them now (`held`).
    pub fn share_of(&self, tenant: &Tenant, size: usize, held: impl Fn(&Tenant) -> u32) -> u32 {
        let total = self.holding_weight(tenant, |t| held(t) > 0);
        quota::fair_share(u32::try_from(size).unwrap_or(u32::MAX), tenant.plan.weight, total)
    }

    /// `tenant`'s share of a node-wide bound of `size` that a newcomer must
    /// find room in (the port's requests in flight, its body bytes), by the
    /// weights of the tenants holding some now (`holds`).
    pub fn room_of(&self, tenant: &Tenant, size: u64, holds: impl Fn(&Tenant) -> bool) -> u64 {
        quota::share_with_room(size, tenant.plan.weight, self.holding_weight(tenant, holds))
    }

    /// Every tenant with a plan.
    pub fn tenants(&self) -> impl Iterator<Item = &Arc<Tenant>> {
        self.tenants.values()
    }

    pub fn is_suspended(&self, tenant: &TenantId) -> bool {
        self.suspended.contains(tenant)
    }

    pub fn set_suspended(&mut self, tenant: &TenantId, suspended: bool) {
        if suspended {
            self.suspended.insert(tenant.clone());
        } else {
            self.suspended.remove(tenant);
        }
    }

    /// The app `reference` names, made by `make` if this node has none.
    pub fn insert_with(&mut self, reference: AppRef, make: impl FnOnce(AppRef) -> Arc<App<A, F>>) -> Arc<App<A, F>> {
        if let Some(app) = self.by_id.get(&reference.id) {
            return app.clone();
        }
        let (tenant, name, id) = (reference.tenant.clone(), reference.name.clone(), reference.id);
        let app = make(reference);
        self.by_name.entry(tenant).or_default().insert(name, id);
        self.by_id.insert(id, app.clone());
        app
    }

    /// Every app's id.
    pub fn ids(&self) -> Vec<AppId> {
        self.by_id.keys().copied().collect()
    }

    /// Every app.
    pub fn all(&self) -> Vec<Arc<App<A, F>>> {
        self.by_id.values().cloned().collect()
    }

    pub fn remove(&mut self, id: AppId) {
        if let Some(app) = self.by_id.remove(&id) {
            let tenant = &app.reference.tenant;
            if let Some(names) = self.by_name.get_mut(tenant) {
                names.remove(&app.reference.name);
                if names.is_empty() {
                    self.by_name.remove(tenant);
                }
            }
        }
    }
}

/// What a deploy gives the node: the front's component if any, the classes
/// with their components, the values the app requires and the
/// environment its guests are given.
#[derive(Debug, Clone, Default)]
pub struct VersionSpec {
    pub front: Option<Vec<u8>>,
    pub classes: Vec<ClassSpec>,
    pub required_values: Vec<String>,
    /// Checked by `wasmkeep_core::environment::check` before it gets here.
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct ClassSpec {
    pub name: ClassName,
    pub access: Access,
    /// Shared by the classes of one component: a bundle's component is
    /// held (and compiled) once, however many classes name it.
    pub wasm: Arc<[u8]>,
}

/// A version's manifest as the store keeps it (components by hash apart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredManifest {
    #[serde(default)]
    pub front: bool,
    pub classes: Vec<StoredClass>,
    pub required_values: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredClass {
    pub name: String,
    pub access: String,
}
