//! The actor runtime of a node: apps and their versions, the router and
//! mailboxes, admission, events, the actor's host (its storage gate) and
//! hibernation.

mod actor;
mod actor_host;
mod admission;
mod app;
mod calls;
mod event;
mod front;
mod mailbox;
mod metrics;
mod residence;
mod router;
mod sockets;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::{
    AppId, AppName, AppRef, Envelope, Limits, MailboxKey, NameError, Origin, RawAddress, Refusal, TenantId,
    TraceContext, deadline,
};
use wasmkeep_runtime::{EngineConfig, Runtime};
use wasmkeep_scheduler::{FrontWaits, InstancePool};
use wasmkeep_sockets::{Registry, SocketLimits};
use wasmkeep_storage::Store;
use wasmkeep_telemetry::Metrics;

pub use actor_host::ActorEventHost;
pub use app::{ClassSpec, VersionSpec};
pub use event::{EventKind, SocketEvent};
pub use front::FrontHost;
pub use router::{Answering, Router};
pub use sockets::SocketOpenError;
pub use wasmkeep_core::{EventError, FrontError};
pub use wasmkeep_runtime::SocketMessage;
pub use wasmkeep_runtime::{ClientBodyError, FrontBody, FrontRun};
pub use wasmkeep_runtime::{Request, Response};
pub use wasmkeep_sockets::{ConnId, OpenRefusal, Outgoing, SocketQueue};

use app::{StoredClass, StoredManifest};
use mailbox::Mailboxes;
use router::LocalRouter;

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
    #[error("{0}")]
    Name(NameError),
    #[error("store: {0}")]
    Store(#[from] wasmkeep_storage::StoreError),
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
    /// The node's limits: what an event runs under unless its tenant's
    /// plan says otherwise (`limits_for`).
    pub limits: Arc<Limits>,
    /// Where each actor lives: every path asks it.
    pub router: Box<dyn Router>,
    pub runtime: Runtime<ActorEventHost, FrontHost>,
    pub store: Arc<dyn Store>,
    /// The instances actors may hold.
    pub pool: InstancePool,
    /// The instances front requests may hold.
    pub front_slots: InstancePool,
    /// The calls fronts have waiting, per callee and in all.
    pub front_waits: FrontWaits<MailboxKey>,
    pub metrics: Arc<Metrics>,
    apps: RwLock<HashMap<AppId, Arc<App>>>,
    pub mailboxes: Mailboxes,
    /// Every open socket of the node, with the envelope its events carry.
    pub sockets: Registry<MailboxKey, Envelope>,
    /// The owner epochs of actors this node woke and that hibernated since.
    pub owned: residence::Owned,
}

impl NodeInner {
    pub(crate) fn app(&self, id: AppId) -> Option<Arc<App>> {
        self.apps.read().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    /// The limits an event of `app` runs under: resolved here, once per
    /// event (admission, a front request). Today every tenant has the
    /// node's; the hosted service puts the tenant's plan here.
    pub(crate) fn limits_for(&self, _app: &AppRef) -> Arc<Limits> {
        self.limits.clone()
    }

    /// The deadline of an event of `app` whose caller sets none (a client
    /// at `/actor/`, a socket's open or message, an embedder): the call
    /// limit from now.
    pub(crate) fn uncalled_deadline(&self, app: &AppRef) -> Instant {
        deadline::event_deadline(Instant::now(), self.limits_for(app).call_limit())
    }
}

impl Node {
    pub fn new(config: NodeConfig, store: Arc<dyn Store>) -> anyhow::Result<Self> {
        config.limits.validate()?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let engine = EngineConfig {
            instances: config.limits.pool_instances,
            memory_bytes: config.limits.memory_bytes,
            busy_guests: config.limits.busy_guests(cores),
        };
        let runtime = Runtime::new(&engine, config.cache_dir.clone())?;
        Ok(Self(Arc::new_cyclic(|node| NodeInner {
            id: config.id,
            egress: Arc::new(config.egress),
            router: Box::new(LocalRouter { node: node.clone() }),
            pool: InstancePool::new(config.limits.actor_instances() as usize),
            front_slots: InstancePool::new(config.limits.front_slots as usize),
            front_waits: FrontWaits::new(
                config.limits.front_calls_per_actor() as usize,
                config.limits.front_calls_per_node() as usize,
            ),
            metrics: Arc::new(Metrics::default()),
            sockets: Registry::new(SocketLimits {
                per_actor: config.limits.sockets_per_actor as usize,
                per_node: config.limits.sockets_per_node as usize,
                message_bytes: config.limits.socket_message_bytes,
                queue_bytes: config.limits.socket_queue_bytes,
            }),
            mailboxes: Mailboxes::new(config.limits.queue_per_actor as usize),
            owned: residence::Owned::default(),
            limits: Arc::new(config.limits),
            runtime,
            store,
            apps: RwLock::new(HashMap::new()),
        })))
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

    /// Who app `id` is, as envelopes name it.
    pub fn app_ref(&self, id: AppId) -> Option<Arc<AppRef>> {
        self.0.app(id).map(|app| app.reference.clone())
    }

    /// The node's counters.
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
        let inner = &self.0;
        let tenant = TenantId::parse(tenant).map_err(DeployFailure::Name)?;
        let app_name = AppName::parse(app_name).map_err(DeployFailure::Name)?;
        let mut seen = HashSet::new();
        if let Some(dup) = spec.classes.iter().find(|c| !seen.insert(c.name.clone())) {
            return Err(DeployFailure::DuplicateClass(dup.name.to_string()));
        }
        let mut classes = HashMap::new();
        let mut hashes = BTreeMap::new();
        let front = match &spec.front {
            Some(wasm) => {
                let component = inner.runtime.load_front(wasm).map_err(DeployFailure::Front)?;
                inner.store.put_component(component.hash(), wasm).await?;
                // Class names start with a letter: no clash.
                hashes.insert(FRONT_KEY.to_owned(), component.hash().to_owned());
                Some(Arc::new(component))
            }
            None => None,
        };
        for c in &spec.classes {
            let component = inner
                .runtime
                .load_actor(&c.wasm)
                .map_err(|error| DeployFailure::Component { class: c.name.to_string(), error })?;
            inner.store.put_component(component.hash(), &c.wasm).await?;
            hashes.insert(c.name.to_string(), component.hash().to_owned());
            let class = Class { name: c.name.clone(), access: c.access, component: Arc::new(component) };
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
        };
        let manifest_json = serde_json::to_string(&manifest).expect("a manifest serializes");

        let app_id = inner.store.ensure_app(tenant.as_str(), app_name.as_str()).await?;
        let active = inner.store.active_version(app_id).await?;
        let (number, new) = match active {
            Some(v)
                if v.components == hashes
                    && serde_json::from_str::<StoredManifest>(&v.manifest).ok() == Some(manifest) =>
            {
                (v.number, false)
            }
            _ => {
                let n = inner.store.add_version(app_id, &manifest_json, &hashes).await?;
                inner.store.activate(app_id, n).await?;
                (n, true)
            }
        };
        let app = self.app_entry(AppRef { id: app_id, tenant, name: app_name }).await?;
        // A class the version removes closes its sockets (DESIGN §3.4).
        let removed = |k: &MailboxKey| k.app == app_id && !classes.contains_key(&k.address.class);
        let close = wasmkeep_core::close::CLASS_REMOVED;
        inner.sockets.close_where(removed, close.code, close.reason);
        app.activate(Arc::new(Version { number, front, classes, required_values: spec.required_values }));
        Ok(Deployed { app: app_id, version: number, new })
    }

    async fn app_entry(&self, reference: AppRef) -> Result<Arc<App>, DeployFailure> {
        if let Some(app) = self.0.app(reference.id) {
            return Ok(app);
        }
        let values = self.0.store.values(reference.id).await?;
        let mut apps = self.0.apps.write().unwrap_or_else(|p| p.into_inner());
        let egress = self.0.egress.clone();
        Ok(apps.entry(reference.id).or_insert_with(|| Arc::new(App::new(reference, values, egress))).clone())
    }

    /// Sets one of the app's values, in the store and for the next events.
    pub async fn set_value(&self, app: AppId, name: &str, value: &str) -> anyhow::Result<()> {
        let entry = self.0.app(app).ok_or_else(|| anyhow::anyhow!("no app {app} on this node"))?;
        self.0.store.set_value(app, name, value).await?;
        entry.set_value(name, value);
        Ok(())
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
        self.0.router.request(envelope, request).await
    }
}
