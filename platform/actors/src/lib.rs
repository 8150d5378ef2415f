//! The actor runtime of a node: apps and their versions, the router and
//! mailboxes, admission, events, the actor's host (its storage gate) and
//! hibernation.

mod actor;
mod actor_host;
mod admission;
mod app;
mod calls;
mod clock;
mod drain;
mod event;
mod front;
mod mailbox;
mod metrics;
mod port_share;
mod remote;
mod residence;
mod router;
mod sockets;
mod usage;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::plan::Plan;
use wasmkeep_core::quota::{self, Quota};
use wasmkeep_core::{
    Access, AppId, AppName, AppRef, ClassName, Envelope, Limits, MailboxKey, NameError, Origin, RawAddress, Refusal,
    RefusalReason, TenantId, TraceContext, deadline,
};
use wasmkeep_runtime::{Egress, EngineConfig, GuestShare, Runtime};
use wasmkeep_scheduler::{CompileOwner, FrontWaits, IdleActors, InstancePool};
use wasmkeep_sockets::{Registry, SocketLimits};
use wasmkeep_storage::{Store, StoredVersion, UsageCounts, ValueSeal, value_context};
use wasmkeep_telemetry::Metrics;
use wasmkeep_telemetry::logs::{GuestLogs, LogRates};

pub use actor_host::ActorEventHost;
pub use app::{ClassSpec, VersionSpec};
pub use front::FrontHost;
pub use port_share::RequestPlace;
pub use remote::{Answering, HopFailure, RelayStream, Relayed, Remote, SocketRequest};
pub use sockets::{Opened, SocketOpenError};
pub use usage::AppUsage;
pub use wasmkeep_core::{EventError, FrontError};
pub use wasmkeep_runtime::SocketMessage;
pub use wasmkeep_runtime::{ClientBodyError, FrontBody, FrontRun};
pub use wasmkeep_runtime::{Request, Response};
pub use wasmkeep_sockets::{ConnId, OpenRefusal, Outgoing, SocketQueue};

use app::{StoredClass, StoredManifest};
use event::EventKind;
use mailbox::Mailboxes;
use wasmkeep_core::placement::Entry;

/// An app as this node runs it.
pub type App = app::App<ActorEventHost, FrontHost>;
/// A version of an app, its components built for this node's hosts.
pub type Version = app::Version<ActorEventHost, FrontHost>;
/// A class of a version.
pub type Class = app::Class<ActorEventHost>;

/// How a node is set up.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The node's id, recorded as the owner of the actors it wakes.
    pub id: String,
    pub limits: Limits,
    /// Where compiled components are cached; none to compile every time.
    pub cache_dir: Option<PathBuf>,
    /// Where the apps' guests may send outbound HTTP (`Open` for `dev`).
    pub egress: EgressPolicy,
    /// Seals app values before they reach the store.
    pub values: Arc<dyn ValueSeal>,
    /// Roots (PEM) the apps' outbound HTTPS trusts besides the Mozilla
    /// ones: an operator's private CA.
    pub egress_roots: Vec<u8>,
}

/// A deploy that could not be made. One line, naming what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum DeployFailure {
    #[error("front: {0}")]
    Front(wasmkeep_runtime::DeployError),
    #[error("class {class}: {error}")]
    Component { class: String, error: wasmkeep_runtime::DeployError },
    #[error("class {0} is named twice")]
    DuplicateClass(String),
    #[error("{classes} classes: a version has at most {most} (classes_per_version)")]
    TooManyClasses { classes: usize, most: u32 },
    /// The tenant's compiles are queued as far as they may be.
    #[error("{0}")]
    CompilesFull(#[from] wasmkeep_scheduler::CompilesFull),
    #[error("{0}")]
    Name(NameError),
    #[error("no version {0}")]
    NoSuchVersion(i64),
    /// A stored version the node cannot load (the store was altered).
    #[error("stored {0}")]
    Stored(String),
    #[error("store: {0}")]
    Store(#[from] wasmkeep_storage::StoreError),
}

/// A version's compiled front, if any, and its distinct actor components.
type CompiledVersion = (
    Option<Arc<wasmkeep_runtime::FrontComponent<FrontHost>>>,
    Vec<Arc<wasmkeep_runtime::ActorComponent<ActorEventHost>>>,
);

/// A tenant's bound on its guests' outbound requests.
struct TenantEgress {
    tenant: Arc<app::Tenant>,
    /// The node's outbound connections open now (`egress_connections`).
    node_open: wasmkeep_scheduler::Share,
    metrics: Arc<Metrics>,
}

impl wasmkeep_runtime::EgressQuota for TenantEgress {
    fn take(&self) -> bool {
        let taken = self.tenant.rates.egress().is_ok();
        if !taken {
            self.metrics.quota_refusals.inc(self.tenant.id.as_str(), Quota::Egress);
        }
        taken
    }

    fn open(&self) -> Option<Box<dyn Send + Sync>> {
        let tenant = self.tenant.egress_open.take()?;
        let node = self.node_open.take()?;
        Some(Box::new((tenant, node)))
    }
}

/// What an app used since the node started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// What it used and the store has not been told yet: requests, actor
    /// events, its guests' (actors' and front's) CPU and wall time,
    /// outbound requests and the bytes of their answers' bodies.
    pub counts: UsageCounts,
    /// Its open sockets now.
    pub sockets: usize,
}

/// What a node knows of an actor now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActorState {
    /// It has a task (resident, or about to hibernate).
    pub awake: bool,
    pub sockets: usize,
    /// Unix seconds of its last event, when this node ran it since it started.
    pub last_event: Option<u64>,
}

/// A version built from a spec, before it has a number.
struct Built {
    app: AppRef,
    manifest: String,
    hashes: BTreeMap<String, String>,
    version: Version,
}

/// The front's entry among a version's component hashes.
const FRONT_KEY: &str = "_front";

/// What a deploy made active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployed {
    pub app: AppId,
    pub version: i64,
    /// False when the spec was the active version already.
    pub new: bool,
}

/// One node's actor runtime. Cheap to clone.
#[derive(Clone)]
pub struct Node(Arc<NodeInner>);

pub(crate) struct NodeInner {
    pub id: String,
    /// The apps' egress policy (a tenant's plan will narrow it).
    pub egress: Arc<EgressPolicy>,
    /// The apps' outbound HTTPS configuration.
    egress_tls: Arc<rustls::ClientConfig>,
    /// The node's limits: what an event runs under unless its tenant's
    /// plan says otherwise (`limits_for`).
    pub limits: Arc<Limits>,
    /// Where each actor lives: every path asks it.
    pub router: router::Router,
    pub runtime: Runtime<ActorEventHost, FrontHost>,
    /// One compile at a time (`Node::compile`).
    /// The compile threads, shared by tenant.
    compiles: wasmkeep_scheduler::Compiles,
    pub store: Arc<dyn Store>,
    /// The instances actors may hold.
    pub pool: InstancePool,
    /// The instances front requests may hold.
    pub front_slots: InstancePool,
    /// The calls fronts have waiting, per callee and in all.
    pub front_waits: FrontWaits<MailboxKey>,
    pub metrics: Arc<Metrics>,
    /// Guests' stdout and stderr, a record per line.
    pub logs: Arc<GuestLogs>,
    apps: RwLock<app::Apps<ActorEventHost, FrontHost>>,
    values: Arc<dyn ValueSeal>,
    pub mailboxes: Mailboxes,
    /// Every open socket of the node, with the envelope its events carry.
    pub sockets: Registry<MailboxKey, sockets::SocketOwner>,
    /// The owner epochs of actors this node woke and that hibernated since.
    pub owned: residence::Owned,
    /// The tenure the kept epochs belong to (`Remote::tenure`).
    pub tenure: std::sync::atomic::AtomicU64,
    /// When actors this node ran last had an event.
    pub last_events: residence::LastEvents,
    /// Since when the node drains, if it does (`drain.rs`).
    pub draining: tokio::sync::watch::Sender<Option<Instant>>,
    /// Resident actors waiting for an event, per tenant with a plan.
    pub idle: IdleActors<TenantId, MailboxKey>,
    /// Guests' outbound connections open now, across the node.
    pub(crate) egress_open: wasmkeep_scheduler::Share,
}

impl NodeInner {
    /// This node's tenure now; when it grew, the kept epochs (of the older
    /// one) are forgotten first.
    pub(crate) fn current_tenure(&self) -> u64 {
        use std::sync::atomic::Ordering;
        let now = self.router.tenure();
        if self.tenure.fetch_max(now, Ordering::AcqRel) < now {
            tracing::warn!("this node may have been declared dead: its actors are taken afresh");
            self.owned.clear();
        }
        now
    }

    pub(crate) fn app(&self, id: AppId) -> Option<Arc<App>> {
        self.apps.read().unwrap_or_else(|p| p.into_inner()).get(id)
    }

    /// The limits an event of `app` runs under: resolved here, once per
    /// event (admission, a front request): its tenant's plan's, or the
    /// node's.
    pub(crate) fn limits_for(&self, app: &AppRef) -> Arc<Limits> {
        self.tenant(app).map_or_else(|| self.limits.clone(), |t| t.limits.clone())
    }

    /// Whose guests `app`'s are at the CPU gate and in the memory budget,
    /// their weight, and their plan's memory limit.
    pub(crate) fn guest_share(&self, app: &AppRef) -> GuestShare {
        match self.tenant(app) {
            Some(tenant) => GuestShare {
                tenant: Arc::from(tenant.id.as_str()),
                weight: tenant.plan.weight,
                memory_bytes: Some(tenant.limits.memory_bytes),
            },
            None => GuestShare::default(),
        }
    }

    /// Room in the guests' memory budget for a new instance of `share`
    /// taking `bytes` as it starts, made by hibernating idle actors by the
    /// tenants' shares (`MemoryBudget::room`); none by `until` is `503`.
    pub(crate) async fn memory_room(&self, share: &GuestShare, bytes: u64, until: Instant) -> Result<(), Refusal> {
        if self.runtime.memory().room(share, bytes, until).await { Ok(()) } else { Err(Refusal::Capacity) }
    }

    /// The app's tenant, when it has a plan (a hosted node's tenants).
    pub(crate) fn tenant(&self, app: &AppRef) -> Option<Arc<app::Tenant>> {
        self.apps.read().unwrap_or_else(|p| p.into_inner()).tenant(&app.tenant)
    }

    /// What `app`'s guests' outbound requests go out under: the node's
    /// policy, narrowed to its tenant's plan's allowed hosts on a node that
    /// allows public addresses only, and its plan's rate.
    pub(crate) fn egress_for(&self, app: &AppRef, label: &Arc<str>) -> Egress {
        let Some(tenant) = self.tenant(app) else {
            return Egress::for_app(label.clone(), self.egress.clone(), self.egress_tls.clone());
        };
        let policy = match (&*self.egress, &tenant.plan.allowed_hosts) {
            (EgressPolicy::Public { .. }, Some(hosts)) => {
                // Checked when the plans were loaded; one that does not parse allows nothing.
                let patterns = hosts.iter().filter_map(|h| wasmkeep_core::egress::HostPattern::parse(h)).collect();
                Arc::new(EgressPolicy::Public { allowed_hosts: Some(patterns) })
            }
            _ => self.egress.clone(),
        };
        let quota =
            Arc::new(TenantEgress { tenant, node_open: self.egress_open.clone(), metrics: self.metrics.clone() });
        Egress::for_app(label.clone(), policy, self.egress_tls.clone()).with_quota(quota)
    }

    /// The pool is full and `requester` (holding its share ticket for the
    /// actor it wakes) needs an instance. Under its share of the pool (by
    /// the weights of the tenants using the node), the tenant furthest over
    /// its share gives up its longest idle actor; at or over its share, the
    /// requester gives up one of its own, or is refused now (`503`).
    pub(crate) fn make_room(&self, requester: &app::Tenant) -> Result<(), Refusal> {
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        let residents = |t: &app::Tenant| t.residents.held();
        let share = |t: &app::Tenant| apps.share_of(t, self.pool.size(), residents);
        // Its ticket for the actor it wakes is held already.
        if residents(requester).saturating_sub(1) < share(requester) {
            let over = |t: &&Arc<app::Tenant>| residents(t) > share(t) && self.idle.has_idle(&t.id);
            if let Some(victim) = apps.tenants().filter(over).max_by_key(|t| residents(t) - share(t)) {
                self.idle.evict_oldest(&victim.id);
            }
            return Ok(());
        }
        if self.idle.evict_oldest(&requester.id) { Ok(()) } else { Err(Refusal::Capacity) }
    }

    /// A refusal of an event of `envelope`'s, as a `failure` record in its
    /// tenant's tail.
    pub(crate) fn tail_refusal(&self, envelope: &wasmkeep_core::Envelope, refusal: &Refusal) {
        let target = &envelope.target;
        let actor = (target.class.as_str(), String::from_utf8_lossy(&target.name));
        self.tail_refusal_of(&envelope.app, Some(actor), refusal, &envelope.trace);
    }

    /// A refusal of `app`'s event or request (of an actor, or of the app
    /// before it reached one), as a `failure` record in its tenant's tail,
    /// in the refused request's trace: one a second for the app, saying
    /// how many went untold before it, so that a client flooding past a
    /// quota floods neither the tail nor the app's share of its lines.
    fn tail_refusal_of(
        &self,
        app: &AppRef,
        actor: Option<(&str, Cow<'_, str>)>,
        refusal: &Refusal,
        trace: &TraceContext,
    ) {
        let told = {
            let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
            let Some(entry) = apps.get(app.id) else { return };
            entry.refusals_told.lock().unwrap_or_else(|p| p.into_inner()).tell(Instant::now())
        };
        let Some(untold) = told else { return };
        let who = wasmkeep_telemetry::logs::GuestWho {
            tenant: app.tenant.as_str().into(),
            app: app.name.as_str().into(),
            class: actor.as_ref().map(|(class, _)| (*class).into()),
            name: actor.map(|(_, name)| name.into()),
        };
        let more = match untold {
            0 => String::new(),
            n => format!(" ({n} more refused since the last record)"),
        };
        let line = format!("refused: {refusal}{more}");
        let stream = wasmkeep_telemetry::logs::Stream::Failure;
        self.logs.line(&who, stream, line.as_bytes(), trace.parent.as_deref());
    }

    /// The refusal of `tenant`'s event or request for `quota`, counted.
    pub(crate) fn over_quota(&self, tenant: &TenantId, quota: Quota, wait: std::time::Duration) -> Refusal {
        self.metrics.quota_refusals.inc(tenant.as_str(), quota);
        Refusal::Quota { quota, retry_after: quota::retry_after_secs(wait) }
    }

    /// The deadline of an event of `app` whose caller sets none (a client
    /// at `/actor/`, a socket's open or message, an embedder): the call
    /// limit from now.
    pub(crate) fn uncalled_deadline(&self, app: &AppRef) -> Instant {
        deadline::event_deadline(Instant::now(), self.limits_for(app).call_limit())
    }
}

impl wasmkeep_runtime::MemoryRelief for NodeInner {
    fn hibernate_idle(&self, tenant: &str) -> bool {
        let apps = self.apps.read().unwrap_or_else(|p| p.into_inner());
        apps.tenants().find(|t| t.id.as_str() == tenant).is_some_and(|t| self.idle.evict_oldest(&t.id))
    }
}

impl Node {
    pub fn new(config: NodeConfig, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        Self::start(config, store, None)
    }

    /// A node of a cluster: actors are taken against their owners'
    /// liveness, and events for actors owned elsewhere go to their owners
    /// through `remote`.
    pub fn in_cluster(config: NodeConfig, store: Arc<dyn Store>, remote: Arc<dyn Remote>) -> anyhow::Result<Self> {
        Self::start(config, store, Some(remote))
    }

    fn start(config: NodeConfig, store: Arc<dyn Store>, remote: Option<Arc<dyn Remote>>) -> anyhow::Result<Self> {
        config.limits.validate()?;
        let logs = Arc::new(
            GuestLogs::new(LogRates {
                per_actor: config.limits.log_lines_per_actor_per_second,
                per_app: config.limits.log_lines_per_app_per_second,
            })
            .with_tail_bounds(wasmkeep_telemetry::logs::TailBounds {
                node: config.limits.log_tails as usize,
                per_tenant: config.limits.log_tails_per_tenant as usize,
            }),
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let compiles = wasmkeep_scheduler::Compiles::new(
            config.limits.compile_threads(cores),
            config.limits.compiles_queued_per_tenant as usize,
        );
        let engine = EngineConfig::new(&config.limits, cores, logs.clone());
        let runtime = Runtime::new(&engine, config.cache_dir.clone())?;
        let egress_tls =
            wasmkeep_runtime::egress_tls::client_config(&config.egress_roots).map_err(anyhow::Error::msg)?;
        let inner = Arc::new_cyclic(|node| NodeInner {
            id: config.id.clone(),
            egress: Arc::new(config.egress),
            egress_tls,
            router: router::Router::new(node.clone(), &config.id, remote),
            pool: InstancePool::new(config.limits.actor_instances() as usize),
            front_slots: InstancePool::new(config.limits.front_slots as usize),
            front_waits: FrontWaits::new(
                config.limits.front_calls_per_actor() as usize,
                config.limits.front_calls_per_node() as usize,
            ),
            metrics: Arc::new(Metrics::default()),
            logs,
            sockets: Registry::new(SocketLimits {
                per_actor: config.limits.sockets_per_actor as usize,
                per_node: config.limits.sockets_per_node as usize,
                message_bytes: config.limits.socket_message_bytes,
                queue_bytes: config.limits.socket_queue_bytes,
            }),
            mailboxes: Mailboxes::new(config.limits.queue_per_actor as usize),
            owned: residence::Owned::default(),
            tenure: std::sync::atomic::AtomicU64::new(0),
            last_events: residence::LastEvents::default(),
            draining: tokio::sync::watch::Sender::new(None),
            idle: IdleActors::default(),
            egress_open: wasmkeep_scheduler::Share::new(config.limits.egress_connections),
            limits: Arc::new(config.limits),
            runtime,
            compiles,
            store,
            apps: RwLock::new(app::Apps::default()),
            values: config.values,
        });
        // Memory is made room in by hibernating idle actors (`memory_room`).
        let node: std::sync::Weak<NodeInner> = Arc::downgrade(&inner);
        inner.runtime.memory().set_relief(node);
        Ok(Self(inner))
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    pub fn app(&self, id: AppId) -> Option<Arc<App>> {
        self.0.app(id)
    }

    /// The limits an event of `app` runs under.
    pub fn limits_for(&self, app: &AppRef) -> Arc<Limits> {
        self.0.limits_for(app)
    }

    /// The envelope of an event that enters here with no caller's deadline
    /// (the public port, a hand-off, an embedder): it waits at most the
    /// call limit from now.
    pub fn envelope(&self, app: &Arc<AppRef>, target: RawAddress, origin: Origin, trace: TraceContext) -> Envelope {
        Envelope { app: app.clone(), target, origin, deadline: self.0.uncalled_deadline(app), trace }
    }

    /// This node's id.
    pub fn id(&self) -> &str {
        &self.0.id
    }

    /// Who app `id` is, as envelopes name it.
    pub fn app_ref(&self, id: AppId) -> Option<Arc<AppRef>> {
        self.0.app(id).map(|app| app.reference.clone())
    }

    /// The node's counters.
    /// `plain` sealed as tenant `tenant`'s trace export, for the store.
    pub fn seal_telemetry(&self, tenant: &str, plain: &[u8]) -> Vec<u8> {
        self.0.values.seal(&wasmkeep_storage::telemetry_context(tenant), plain)
    }

    /// Tenant `tenant`'s trace export as the store holds it, opened; none
    /// when it does not open (moved from another tenant, another key).
    pub fn open_telemetry(&self, tenant: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        self.0.values.open(&wasmkeep_storage::telemetry_context(tenant), sealed)
    }

    /// Guests' log records: kept, and tailed by the provisioning API.
    pub fn guest_logs(&self) -> &Arc<GuestLogs> {
        &self.0.logs
    }

    /// The records of the other nodes of the cluster that `filter` wants,
    /// sent to `to` ([`Remote::tail`]); how many nodes were asked.
    pub fn tail_others(
        &self,
        filter: wasmkeep_telemetry::logs::LogFilter,
        follow: bool,
        to: tokio::sync::mpsc::Sender<wasmkeep_telemetry::logs::TailItem>,
    ) -> usize {
        self.0.router.tail(filter, follow, to)
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// Front requests holding a slot now.
    pub fn front_slots_in_use(&self) -> usize {
        self.0.front_slots.in_use()
    }

    /// Calls the node's fronts have waiting now.
    pub fn front_calls_waiting(&self) -> usize {
        self.0.front_waits.waiting()
    }

    /// The budget all guests' memories share (`guest_memory_bytes`).
    pub fn guest_memory(&self) -> &wasmkeep_runtime::MemoryBudget {
        self.0.runtime.memory()
    }

    /// Actors holding a pool instance now.
    pub fn resident_actors(&self) -> usize {
        self.0.pool.in_use()
    }

    /// Actors with a task now (awake or about to hibernate).
    pub fn awake_actors(&self) -> usize {
        self.0.mailboxes.len()
    }

    /// Builds a version from `spec`, stores it and makes it active (unless
    /// it is the active version already). Events that start after this
    /// returns run on it.
    pub async fn deploy(&self, tenant: &str, app_name: &str, spec: VersionSpec) -> Result<Deployed, DeployFailure> {
        let built = self.build(tenant, app_name, spec).await?;
        let active = self.0.store.active_version(built.app.id).await?;
        let same = |v: &StoredVersion| {
            v.components == built.hashes
                && serde_json::from_str::<StoredManifest>(&v.manifest).ok()
                    == serde_json::from_str::<StoredManifest>(&built.manifest).ok()
        };
        if let Some(v) = active.filter(same) {
            let app = self.app_entry(built.app).await?;
            if app.active().is_none_or(|a| a.number != v.number) {
                self.switch(&app, Arc::new(built.version.numbered(v.number)));
            }
            return Ok(Deployed { app: app.id(), version: v.number, new: false });
        }
        let app_id = built.app.id;
        let number = self.0.store.add_version(app_id, &built.manifest, &built.hashes).await?;
        self.0.store.activate(app_id, number).await?;
        let app = self.app_entry(built.app).await?;
        self.switch(&app, Arc::new(built.version.numbered(number)));
        Ok(Deployed { app: app_id, version: number, new: true })
    }

    /// Checks and compiles `spec` and stores it as a new version of the
    /// app (created if missing), without activating it. Nothing is stored
    /// when a component is refused.
    pub async fn add_version(
        &self,
        tenant: &str,
        app_name: &str,
        spec: VersionSpec,
    ) -> Result<Deployed, DeployFailure> {
        let built = self.build(tenant, app_name, spec).await?;
        let number = self.0.store.add_version(built.app.id, &built.manifest, &built.hashes).await?;
        Ok(Deployed { app: built.app.id, version: number, new: true })
    }

    /// Makes stored version `number` of `app` the active one (an older one
    /// too): the deploy rules of docs/spec/actors-and-admission.md §7.
    pub async fn activate(&self, app: &AppRef, number: i64) -> Result<(), DeployFailure> {
        let stored = self.0.store.version(app.id, number).await?.ok_or(DeployFailure::NoSuchVersion(number))?;
        let version = self.load(&app.tenant, &stored).await?;
        self.0.store.activate(app.id, number).await?;
        let entry = self.app_entry(app.clone()).await?;
        self.switch(&entry, Arc::new(version));
        Ok(())
    }

    /// Brings a stored app onto this node as the store has it (a node's
    /// start): its values, and its active version if it has one.
    pub async fn restore(&self, app: AppRef) -> Result<(), DeployFailure> {
        let active = self.0.store.active_version(app.id).await?;
        let tenant = app.tenant.clone();
        let entry = self.app_entry(app).await?;
        if let Some(stored) = active {
            let version = self.load(&tenant, &stored).await?;
            self.switch(&entry, Arc::new(version));
        }
        Ok(())
    }

    /// The number of `app`'s version this node runs, if it has the app and
    /// one is active.
    pub fn active_version(&self, app: AppId) -> Option<i64> {
        self.0.app(app)?.active().map(|v| v.number)
    }

    /// Deletes an app: its sockets close, its events are refused from now
    /// on, and its versions, values, actors and their storage leave the store.
    pub async fn delete_app(&self, app: AppId) -> Result<(), DeployFailure> {
        self.forget_app(app);
        self.0.store.delete_app(app).await?;
        Ok(())
    }

    /// Forgets an app another node deleted: its sockets here close, and its
    /// events are refused from now on.
    pub fn forget_app(&self, app: AppId) {
        if let Some(entry) = self.0.app(app) {
            self.0.metrics.forget_app(entry.reference.tenant.as_str(), entry.reference.name.as_str());
        }
        self.0.apps.write().unwrap_or_else(|p| p.into_inner()).remove(app);
        let gone = wasmkeep_core::close::ACTOR_GONE;
        self.0.sockets.close_where(|k: &MailboxKey| k.app == app, gone.code, gone.reason);
    }

    /// The apps this node has loaded.
    pub fn app_ids(&self) -> Vec<AppId> {
        self.0.apps.read().unwrap_or_else(|p| p.into_inner()).ids()
    }

    /// Reads `app`'s values from the store again (another node may have
    /// set or removed one); answers whether they changed here.
    pub async fn reload_values(&self, app: AppId) -> Result<bool, DeployFailure> {
        let Some(entry) = self.0.app(app) else { return Ok(false) };
        let values = self.open_values(&entry.reference).await?;
        Ok(entry.replace_values(values))
    }

    /// `app`'s values as the store has them, opened.
    async fn open_values(&self, reference: &AppRef) -> Result<BTreeMap<String, String>, DeployFailure> {
        let mut values = BTreeMap::new();
        for (name, sealed) in self.0.store.values(reference.id).await? {
            match self.0.values.open(&value_context(reference.id, &name), &sealed) {
                Some(plain) => {
                    values.insert(name, String::from_utf8_lossy(&plain).into_owned());
                }
                // Sealed under another key: the app sees it unset, and
                // setting it again mends it.
                None => tracing::warn!(app = %reference, value = %name, "a value does not open with this key"),
            }
        }
        Ok(values)
    }

    /// The app a hosted node's public port reaches under `tenant`'s name.
    pub fn app_named(&self, tenant: &TenantId, app: &AppName) -> Result<Arc<AppRef>, Refusal> {
        let apps = self.0.apps.read().unwrap_or_else(|p| p.into_inner());
        let found = apps.named(tenant, app).ok_or(Refusal::NoSuchApp)?;
        if apps.is_suspended(tenant) {
            return Err(Refusal::Suspended);
        }
        Ok(found.reference.clone())
    }

    /// Suspends or resumes a tenant: a suspended tenant's apps are refused
    /// at the port (`503`); nothing of theirs is deleted.
    pub fn set_suspended(&self, tenant: &TenantId, suspended: bool) {
        self.0.apps.write().unwrap_or_else(|p| p.into_inner()).set_suspended(tenant, suspended);
    }

    /// Puts `tenant` on `plan` from its next request and event on: its
    /// limits (the node's as the plan lowers them) and its quotas. `None`:
    /// the node's limits and no quotas (`dev`).
    pub fn set_tenant_plan(&self, tenant: &TenantId, plan: Option<Arc<Plan>>) {
        let plan = plan.map(|p| {
            let limits = p.limits(&self.0.limits);
            (p, limits)
        });
        self.0.apps.write().unwrap_or_else(|p| p.into_inner()).set_plan(tenant, plan);
        // Its apps' outbound requests follow the new plan from now on.
        let apps = self.0.apps.read().unwrap_or_else(|p| p.into_inner());
        for app in apps.of_tenant(tenant) {
            app.set_egress(self.0.egress_for(&app.reference, &app.label));
        }
    }

    /// Takes one of the tenant's requests (the public port, once it routed
    /// a request to the app): its requests-per-second quota (a refusal is
    /// in the tenant's tail, in the request's `trace`), then its share of
    /// the port's requests in flight, held by the answer's place.
    pub fn admit_request(&self, app: &AppRef, trace: &TraceContext) -> Result<RequestPlace, Refusal> {
        let tenant = {
            let apps = self.0.apps.read().unwrap_or_else(|p| p.into_inner());
            if let Some(entry) = apps.get(app.id) {
                entry.usage.request();
                entry.metrics.request();
            }
            apps.tenant(&app.tenant)
        };
        let Some(tenant) = tenant else { return Ok(RequestPlace::unshared()) };
        tenant.rates.request().map_err(|wait| {
            let refusal = self.0.over_quota(&tenant.id, Quota::Requests, wait);
            self.0.tail_refusal_of(app, None, &refusal, trace);
            refusal
        })?;
        RequestPlace::take(&self.0, tenant).ok_or_else(|| {
            self.0.metrics.refusals.inc(RefusalReason::TenantBusy);
            Refusal::TenantBusy
        })
    }

    /// Asks the store what each app stores, for the apps never measured
    /// and those a commit on this node changed since the last time (called
    /// now and then, off the request path; `wasmkeep_storage_bytes`).
    pub async fn measure_storage(&self) {
        let apps = self.0.apps.read().unwrap_or_else(|p| p.into_inner()).all();
        for app in apps {
            if !app.stored.take_stale() {
                continue;
            }
            match self.0.store.app_bytes(app.reference.id).await {
                Ok(bytes) => app.stored.measured(bytes),
                // Asked again next time.
                Err(_) => app.stored.changed(),
            }
        }
    }

    /// Forgets idle actors' rate buckets (called now and then).
    pub fn forget_idle_rates(&self) {
        let apps = self.0.apps.read().unwrap_or_else(|p| p.into_inner());
        for tenant in apps.tenants() {
            tenant.rates.forget_idle();
        }
    }

    /// Compiles a version's components (or loads them from the compiled
    /// cache): its front's, if any, and each distinct actor component once
    /// (`actors`, each with the first class naming it, for the error).
    /// They compile on one of the node's compile threads in one turn of
    /// `tenant`'s: a compile takes seconds (a JavaScript component about
    /// 7 s), an async worker held that long would delay every request on
    /// it, and the turns keep one tenant's uploads from stalling another's
    /// deploys for more than the compile running when it came
    /// (`scheduler::Compiles`, ADR 0026). The bytes compiled are what the
    /// turn costs its tenant.
    async fn compile_version(
        &self,
        tenant: &TenantId,
        front: Option<Vec<u8>>,
        actors: Vec<(String, Arc<[u8]>)>,
        env: BTreeMap<String, String>,
    ) -> Result<CompiledVersion, DeployFailure> {
        let owner = match self.0.apps.read().unwrap_or_else(|p| p.into_inner()).tenant(tenant) {
            Some(t) => CompileOwner { tenant: Arc::from(t.id.as_str()), weight: t.plan.weight },
            None => CompileOwner::default(),
        };
        let bytes = front.as_ref().map_or(0, Vec::len) + actors.iter().map(|(_, wasm)| wasm.len()).sum::<usize>();
        let inner = self.0.clone();
        let compile = move || -> Result<CompiledVersion, DeployFailure> {
            let r = &inner.runtime;
            let front = front.map(|wasm| r.load_front(&wasm, &env).map_err(DeployFailure::Front)).transpose()?;
            let mut compiled = Vec::with_capacity(actors.len());
            for (class, wasm) in &actors {
                let component = r
                    .load_actor(wasm, &env)
                    .map_err(|error| DeployFailure::Component { class: class.clone(), error })?;
                compiled.push(Arc::new(component));
            }
            Ok((front.map(Arc::new), compiled))
        };
        self.0.compiles.run(&owner, bytes as u64, compile).await?
    }

    /// Checks, compiles and stores the components of `spec`.
    async fn build(&self, tenant: &str, app_name: &str, spec: VersionSpec) -> Result<Built, DeployFailure> {
        let inner = &self.0;
        let tenant = TenantId::parse(tenant).map_err(DeployFailure::Name)?;
        let app_name = AppName::parse(app_name).map_err(DeployFailure::Name)?;
        let mut seen = HashSet::new();
        if let Some(dup) = spec.classes.iter().find(|c| !seen.insert(c.name.clone())) {
            return Err(DeployFailure::DuplicateClass(dup.name.to_string()));
        }
        let most = inner.limits.classes_per_version;
        if spec.classes.len() > most as usize {
            return Err(DeployFailure::TooManyClasses { classes: spec.classes.len(), most });
        }
        // Each distinct component is compiled once, whatever the number of
        // classes naming it, and every one is checked before any is stored.
        // Classes sharing one buffer (a bundle's component) are matched by
        // pointer, so that only distinct buffers are hashed here, on the
        // upload's task: at most the upload's bytes.
        let mut distinct: Vec<(String, Arc<[u8]>)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let of_class: Vec<usize> = spec
            .classes
            .iter()
            .map(|c| {
                if let Some(i) = distinct.iter().position(|(_, wasm)| Arc::ptr_eq(wasm, &c.wasm)) {
                    return i;
                }
                *index.entry(wasmkeep_runtime::component_hash(&c.wasm)).or_insert_with(|| {
                    distinct.push((c.name.to_string(), c.wasm.clone()));
                    distinct.len() - 1
                })
            })
            .collect();
        let (front, compiled) =
            self.compile_version(&tenant, spec.front.clone(), distinct.clone(), spec.env.clone()).await?;
        for ((_, wasm), component) in distinct.iter().zip(&compiled) {
            inner.store.put_component(component.hash(), wasm).await?;
        }
        let mut hashes = BTreeMap::new();
        if let (Some(component), Some(wasm)) = (&front, &spec.front) {
            inner.store.put_component(component.hash(), wasm).await?;
            // Class names start with a letter: no clash.
            hashes.insert(FRONT_KEY.to_owned(), component.hash().to_owned());
        }
        let mut classes = HashMap::new();
        for (c, i) in spec.classes.iter().zip(of_class) {
            let component = compiled[i].clone();
            hashes.insert(c.name.to_string(), component.hash().to_owned());
            let class = Class { name: c.name.clone(), access: c.access, component };
            classes.insert(c.name.to_string(), Arc::new(class));
        }
        let manifest = StoredManifest {
            front: front.is_some(),
            classes: spec
                .classes
                .iter()
                .map(|c| StoredClass { name: c.name.to_string(), access: c.access.as_str().to_owned() })
                .collect(),
            required_values: spec.required_values.clone(),
            env: spec.env.clone(),
        };
        let manifest = serde_json::to_string(&manifest).expect("a manifest serializes");
        let id = inner.store.ensure_app(tenant.as_str(), app_name.as_str()).await?;
        Ok(Built {
            app: AppRef { id, tenant, name: app_name },
            manifest,
            hashes,
            version: Version { number: 0, front, classes, required_values: spec.required_values },
        })
    }

    /// A stored version, its components read from the store and compiled
    /// (a hit in the component cache when this node compiled them before).
    async fn load(&self, tenant: &TenantId, stored: &StoredVersion) -> Result<Version, DeployFailure> {
        let inner = &self.0;
        let manifest: StoredManifest = serde_json::from_str(&stored.manifest)
            .map_err(|e| DeployFailure::Stored(format!("version {}: manifest: {e}", stored.number)))?;
        let bytes = async |role: &str| -> Result<Vec<u8>, DeployFailure> {
            let missing = || DeployFailure::Stored(format!("version {}: no component for {role}", stored.number));
            let hash = stored.components.get(role).ok_or_else(missing)?;
            inner.store.component(hash).await?.ok_or_else(missing)
        };
        let front = match manifest.front {
            true => Some(bytes(FRONT_KEY).await?),
            false => None,
        };
        let mut distinct: Vec<(String, Arc<[u8]>)> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut of_class = Vec::with_capacity(manifest.classes.len());
        for c in &manifest.classes {
            let hash = stored.components.get(&c.name).map(String::as_str).unwrap_or_default();
            let i = match index.get(hash) {
                Some(i) => *i,
                None => {
                    distinct.push((c.name.clone(), bytes(&c.name).await?.into()));
                    index.insert(hash, distinct.len() - 1);
                    distinct.len() - 1
                }
            };
            of_class.push(i);
        }
        let (front, compiled) = self.compile_version(tenant, front, distinct, manifest.env.clone()).await?;
        let mut classes = HashMap::new();
        for (c, i) in manifest.classes.iter().zip(of_class) {
            let stored_class =
                |e: String| DeployFailure::Stored(format!("version {}: class {}: {e}", stored.number, c.name));
            let name = ClassName::parse(&c.name).map_err(|e| stored_class(e.to_string()))?;
            let access = Access::parse(&c.access).ok_or_else(|| stored_class(format!("access {}", c.access)))?;
            classes.insert(c.name.clone(), Arc::new(Class { name, access, component: compiled[i].clone() }));
        }
        Ok(Version { number: stored.number, front, classes, required_values: manifest.required_values })
    }

    /// Makes `version` the app's active one. A class it removes closes
    /// its sockets (docs/spec/actors-and-admission.md §7); a class it makes
    /// internal closes its outside sockets at their next event (admission's
    /// early rule).
    fn switch(&self, app: &App, version: Arc<Version>) {
        let id = app.id();
        let removed = |k: &MailboxKey| k.app == id && !version.classes.contains_key(&k.address.class);
        let close = wasmkeep_core::close::CLASS_REMOVED;
        self.0.sockets.close_where(removed, close.code, close.reason);
        app.activate(version);
    }

    async fn app_entry(&self, reference: AppRef) -> Result<Arc<App>, DeployFailure> {
        if let Some(app) = self.0.app(reference.id) {
            return Ok(app);
        }
        let values = self.open_values(&reference).await?;
        let label: Arc<str> = reference.to_string().into();
        let egress = self.0.egress_for(&reference, &label);
        let mut apps = self.0.apps.write().unwrap_or_else(|p| p.into_inner());
        let metrics = &self.0.metrics;
        Ok(apps.insert_with(reference, |reference| Arc::new(App::new(reference, label, values, egress, metrics))))
    }

    /// Sets one of the app's values, in the store (sealed) and for the
    /// next events.
    pub async fn set_value(&self, app: AppId, name: &str, value: &str) -> anyhow::Result<()> {
        let entry = self.0.app(app).ok_or_else(|| anyhow::anyhow!("no app {app} on this node"))?;
        let sealed = self.0.values.seal(&value_context(app, name), value.as_bytes());
        self.0.store.set_value(app, name, &sealed).await?;
        entry.set_value(name, Some(value));
        Ok(())
    }

    /// Removes one of the app's values; answers whether it was set.
    pub async fn delete_value(&self, app: AppId, name: &str) -> anyhow::Result<bool> {
        let entry = self.0.app(app).ok_or_else(|| anyhow::anyhow!("no app {app} on this node"))?;
        let was = self.0.store.delete_value(app, name).await?;
        entry.set_value(name, None);
        Ok(was)
    }

    /// Deletes the actor at `target` of `app` (the control plane), between
    /// its events, as its own `delete-self` would: its sockets close, its
    /// storage goes.
    pub async fn delete_actor(&self, app: &Arc<AppRef>, target: RawAddress) -> Result<(), EventError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let envelope = self.envelope(app, target, Origin::Outside, TraceContext::default());
        self.0.router.post(envelope, EventKind::Delete { reply })?;
        answer.await.unwrap_or(Err(EventError::ShuttingDown))
    }

    /// What this node knows of an actor now: whether it is awake, its open
    /// sockets, when it last had an event (unix seconds; unknown for an
    /// actor this node has not run since it started).
    pub fn actor_state(&self, key: &MailboxKey) -> ActorState {
        ActorState {
            awake: self.0.mailboxes.contains(key),
            sockets: self.0.sockets.list(key).len(),
            last_event: self.0.last_events.get(key),
        }
    }

    /// What app `id` used since this node started, and its open sockets.
    pub fn usage(&self, id: AppId) -> Option<Usage> {
        let app = self.0.app(id)?;
        let get = AppUsage::get;
        let (egress_requests, egress_bytes) = app.egress_counts.unrecorded();
        let counts = UsageCounts {
            requests: get(&app.usage.requests),
            events: get(&app.usage.events),
            cpu_micros: get(&app.usage.cpu_micros),
            wall_micros: get(&app.usage.wall_micros),
            egress_requests,
            egress_bytes,
        };
        Some(Usage { counts, sockets: self.0.sockets.count_where(|k| k.app == id) })
    }

    /// Takes `told` off the app's counts once the store has added it (what
    /// was counted meanwhile stays for the next time).
    pub fn usage_told(&self, id: AppId, told: &UsageCounts) {
        let Some(app) = self.0.app(id) else { return };
        let take = |counter: &std::sync::atomic::AtomicU64, n: u64| {
            counter.fetch_sub(
                n.min(counter.load(std::sync::atomic::Ordering::Relaxed)),
                std::sync::atomic::Ordering::Relaxed,
            );
        };
        take(&app.usage.requests, told.requests);
        take(&app.usage.events, told.events);
        take(&app.usage.cpu_micros, told.cpu_micros);
        take(&app.usage.wall_micros, told.wall_micros);
        app.egress_counts.recorded(told.egress_requests, told.egress_bytes);
    }

    /// The entry of an embedder (a benchmark, a test, a tool): builds the
    /// envelope of a request to `target` from `origin`, waiting at most
    /// the call limit, and delivers it.
    pub async fn request_to(
        &self,
        app: AppId,
        target: RawAddress,
        origin: Origin,
        request: Request,
    ) -> Result<Response, EventError> {
        let app = self.app_ref(app).ok_or(EventError::Refused(Refusal::NoSuchApp))?;
        self.request(self.envelope(&app, target, origin, TraceContext::default()), request).await
    }

    /// Delivers a request event to the actor its envelope names, through
    /// the router, and waits for its answer.
    pub async fn request(&self, envelope: Envelope, request: Request) -> Result<Response, EventError> {
        self.0.router.request(Entry::Request, envelope, request).await
    }

    /// Runs a request event another node sent here: on this node, or
    /// answered [`Refusal::Elsewhere`] when another node owns the actor
    /// (its sender follows that; a hop is never sent on).
    pub async fn request_forwarded(&self, envelope: Envelope, request: Request) -> Result<Response, EventError> {
        self.0.router.request(Entry::Hopped, envelope, request).await
    }
}
