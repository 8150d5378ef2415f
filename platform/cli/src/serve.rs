//! `wasmkeep serve`: the hosted service on one node. Tenants sign up and
//! deploy through the provisioning API; the public port reaches each
//! tenant's app by host name; everything persists in the data directory.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmkeep_actors::{Node, NodeConfig};
use wasmkeep_cluster::{ClusterDir, NodeId};
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::host::BaseDomain;
use wasmkeep_core::{AppName, AppRef, TenantId};
use wasmkeep_edge::{AppRouting, PublicPort, SignedHops};
use wasmkeep_storage::{Durability, POOL_SIZE, PostgresStore, SqliteStore, Store, TokenRecord, ValueKey};
use wasmkeep_telemetry::tenant_export::TenantExports;
use wasmkeep_tenants::api::{RateLimits, Service};
use wasmkeep_tenants::plans::Plans;
use wasmkeep_tenants::token::{Pepper, Scope, Secret, TokenHash};

use crate::config;
use crate::serve_config::{Plaintext, ServeArgs, ServeConfig};

/// How often the store is asked what the apps a commit changed now store
/// (`wasmkeep_storage_bytes`).
const STORAGE_MEASURE_INTERVAL: Duration = Duration::from_secs(5);

/// A secret of the data directory: read when there, else generated and
/// written readable by its owner only.
pub(crate) fn secret_file(path: &Path, make: impl FnOnce() -> Vec<u8>) -> Result<Vec<u8>, String> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let mode = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(format!("{}: readable by others (mode {:o}); chmod 600 it", path.display(), mode & 0o777));
            }
            Ok(bytes)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let bytes = make();
            write_private(path, &bytes)?;
            Ok(bytes)
        }
        Err(e) => Err(format!("{}: cannot read: {e}", path.display())),
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// The data directory, made (owner only) if missing.
fn data_dir(path: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(path).map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("{}: cannot restrict: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

/// The operator's token: `DIR/operator-token` of the cluster directory in
/// a cluster (every node registers the same), else made on first start
/// into `DATA/operator-token`; registered (again) if the store lacks it.
async fn operator_token(store: &dyn Store, pepper: &Pepper, secrets: &Secrets) -> Result<PathBuf, String> {
    let (path, secret) = match secrets {
        Secrets::Cluster(dir, cluster) => (dir.join("operator-token"), cluster.operator_token.clone()),
        Secrets::Data(data) => {
            let path = data.join("operator-token");
            let text = secret_file(&path, || format!("{}\n", Secret::generate().as_str()).into_bytes())?;
            (path.clone(), String::from_utf8(text).map_err(|_| format!("{}: not a token", path.display()))?)
        }
    };
    let hash = TokenHash::hash(pepper, secret.trim()).to_hex();
    if store.token_by_hash(&hash).await.map_err(|e| e.to_string())?.is_none() {
        let record = TokenRecord {
            id: "tok_operator".into(),
            tenant: None,
            scope: Scope::Admin.as_str().into(),
            hash,
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
        };
        // A token file replaced by hand replaces the registered one.
        store.revoke_token(None, &record.id).await.map_err(|e| e.to_string())?;
        store.add_token(&record).await.map_err(|e| e.to_string())?;
    }
    Ok(path)
}

/// Where the server's secrets (the tokens' pepper, the values' key, the
/// operator's token) come from: the data directory of a node alone, the
/// cluster directory shared by a cluster's nodes.
enum Secrets {
    Data(PathBuf),
    Cluster(PathBuf, Box<ClusterDir>),
}

impl Secrets {
    fn pepper(&self) -> Result<Pepper, String> {
        match self {
            Secrets::Data(data) => {
                let path = data.join("pepper");
                Pepper::from_bytes(&secret_file(&path, || Pepper::generate().as_bytes().to_vec())?)
                    .map_err(|e| format!("{}: {e}", path.display()))
            }
            Secrets::Cluster(dir, cluster) => {
                Pepper::from_bytes(&cluster.pepper).map_err(|e| format!("{}: {e}", dir.join("pepper").display()))
            }
        }
    }

    fn value_key(&self, configured: Option<&str>) -> Result<ValueKey, String> {
        match (configured, self) {
            (Some(hex_key), _) => hex::decode(hex_key.trim()).ok().and_then(|b| ValueKey::from_bytes(&b).ok()),
            (None, Secrets::Data(data)) => ValueKey::from_bytes(&secret_file(&data.join("value-key"), || {
                ValueKey::generate().as_bytes().to_vec()
            })?)
            .ok(),
            (None, Secrets::Cluster(_, cluster)) => ValueKey::from_bytes(&cluster.value_key).ok(),
        }
        .ok_or_else(|| "value_key: expected 64 hex digits (32 bytes)".into())
    }
}

/// Opens the store: PostgreSQL when a URL is given, else the embedded
/// SQLite store in the data directory.
async fn open_store(url: Option<&str>, data: &Path) -> Result<Arc<dyn Store>, String> {
    Ok(match url {
        Some(url) => Arc::new(PostgresStore::connect(url, POOL_SIZE).await.map_err(|e| format!("the store: {e}"))?),
        None => {
            let path = data.join("store.db");
            // An acknowledged write survives the machine losing power.
            Arc::new(
                SqliteStore::open_with(&path, Durability::PowerLoss).map_err(|e| format!("{}: {e}", path.display()))?,
            )
        }
    })
}

/// A node, alone or joined to a cluster.
struct Joined {
    node: Node,
    ready: wasmkeep_telemetry::Readiness,
    /// What answers signed hops (a node of a cluster).
    hops: Option<Arc<dyn SignedHops>>,
    membership: Option<Arc<wasmkeep_cluster::membership::Membership>>,
    transport: Option<Arc<wasmkeep_cluster::transport::Transport>>,
}

/// Makes this node one of a cluster: its QUIC port answers other nodes'
/// signed hops, its heartbeat goes into the store every second, events for
/// actors other nodes own go to them, and the apps the others deploy are
/// loaded here too. Answers the node, its readiness, and what answers
/// signed hops (for the public port too, under `--cluster-plaintext allow`).
async fn join_cluster(
    config: NodeConfig,
    store: Arc<dyn Store>,
    dir: &ClusterDir,
    listen: std::net::SocketAddr,
    advertise: Option<std::net::SocketAddr>,
    public_addr: std::net::SocketAddr,
    wait: Duration,
) -> Result<Joined, String> {
    use wasmkeep_cluster::membership::{Load, Membership, unix_ms};
    use wasmkeep_core::heartbeat::{Capabilities, Heartbeat, NodeState};
    let transport = Arc::new(wasmkeep_cluster::transport::Transport::bind(listen, dir)?);
    let pool = u64::from(config.limits.pool_instances);
    let body_limit = config.limits.body_bytes;
    let node_cell: Arc<std::sync::OnceLock<Node>> = Arc::new(std::sync::OnceLock::new());
    let me = Heartbeat {
        node: dir.node.to_string(),
        version: env!("CARGO_PKG_VERSION").into(),
        public_addr: public_addr.to_string(),
        cluster_addr: advertise.unwrap_or_else(|| transport.local_addr()).to_string(),
        started_ms: unix_ms(),
        sent_ms: unix_ms(),
        state: NodeState::Serving,
        resident: 0,
        pool,
        sockets: 0,
        capabilities: Capabilities::OURS,
    };
    let loaded = node_cell.clone();
    let load = move || Load { resident: loaded.get().map_or(0, |n| n.resident_actors() as u64), pool, sockets: 0 };
    let membership = Arc::new(Membership::new(store.clone(), me, wait, load));
    let peers =
        Arc::new(wasmkeep_cluster::peers::Peers::new(membership.clone(), transport.clone(), &dir.secret, body_limit));
    let node = Node::in_cluster(config, store.clone(), peers).map_err(|e| format!("starting the node: {e}"))?;
    let _ = node_cell.set(node.clone());
    let verifier = Arc::new(wasmkeep_cluster::signing::Verifier::new(&dir.secret));
    let hops = wasmkeep_cluster::hop_server::HopServer::new(node.clone(), verifier);
    let serving = transport.clone();
    let answering = hops.clone();
    tokio::spawn(async move { serving.serve(answering).await });
    membership.beat(unix_ms()).await.map_err(|e| format!("the first heartbeat: {e}"))?;
    membership.run();
    eprintln!("wasmkeep: node {} of a cluster, hops on {} (UDP)", dir.node, transport.local_addr());
    let ready = membership.clone();
    Ok(Joined {
        node,
        ready: Arc::new(move || ready.is_ready(unix_ms())),
        hops: Some(Arc::new(hops)),
        membership: Some(membership),
        transport: Some(transport),
    })
}

/// Follows, every second, what the provisioning API of another node
/// changed in the store: tenants' plans and suspensions, apps created,
/// activated or deleted, and apps' values.
async fn follow_control_plane(
    node: Node,
    store: Arc<dyn Store>,
    plans: Plans,
    exports: Option<Arc<TenantExports>>,
    mut exporting: ExportsSeen,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut tenants: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    loop {
        tick.tick().await;
        if let Err(e) = follow_once(&node, &*store, &plans, &mut tenants).await {
            tracing::warn!(error = %e, "the control plane could not be read");
        }
        if let Some(exports) = &exports
            && let Err(e) = follow_exports(&node, &*store, exports, &mut exporting).await
        {
            tracing::warn!(error = %e, "tenants' trace exports could not be read");
        }
    }
}

/// Each tenant's trace export as this node last put it in place: sealed,
/// as the store holds it.
type ExportsSeen = std::collections::BTreeMap<String, Vec<u8>>;

/// Puts in place the tenants' trace exports the store holds (set through
/// this node's API or another's), and takes away those it no longer does.
async fn follow_exports(
    node: &Node,
    store: &dyn Store,
    exports: &TenantExports,
    seen: &mut ExportsSeen,
) -> Result<(), String> {
    let stored = store.telemetry().await.map_err(|e| e.to_string())?;
    for gone in seen.keys().filter(|t| !stored.contains_key(*t)).cloned().collect::<Vec<_>>() {
        let _ = exports.set(&gone, None);
        seen.remove(&gone);
    }
    for (tenant, sealed) in stored {
        if seen.get(&tenant) == Some(&sealed) {
            continue;
        }
        let settings = node
            .open_telemetry(&tenant, &sealed)
            .and_then(|plain| serde_json::from_slice::<wasmkeep_telemetry::tenant_export::ExportSettings>(&plain).ok());
        match settings {
            Some(settings) => {
                if let Err(e) = exports.set(&tenant, Some(settings)) {
                    tracing::warn!(%tenant, "a tenant's trace export is no longer allowed: {e}");
                    let _ = exports.set(&tenant, None);
                }
            }
            None => tracing::warn!(%tenant, "a tenant's trace export does not open with this node's key"),
        }
        seen.insert(tenant, sealed);
    }
    Ok(())
}

async fn follow_once(
    node: &Node,
    store: &dyn Store,
    plans: &Plans,
    seen: &mut std::collections::HashMap<String, String>,
) -> Result<(), String> {
    for tenant in store.tenants().await.map_err(|e| e.to_string())? {
        // The store's suspension is put on the node every time (a set's
        // insert or removal), so the node holds what the store last said
        // whatever raced it; a plan, which rebuilds the tenant's limits,
        // only when it changed.
        if seen.get(&tenant.id) != Some(&tenant.plan) {
            apply_tenant(node, plans, &tenant);
            seen.insert(tenant.id.clone(), tenant.plan.clone());
        } else if let Ok(id) = TenantId::parse(&tenant.id) {
            node.set_suspended(&id, tenant.suspended);
        }
    }
    let apps = store.all_apps().await.map_err(|e| e.to_string())?;
    let stored: std::collections::HashSet<_> = apps.iter().map(|a| a.id).collect();
    for gone in node.app_ids().into_iter().filter(|id| !stored.contains(id)) {
        node.forget_app(gone);
    }
    for app in apps {
        if app.active.is_some() && node.active_version(app.id) != app.active {
            let (Ok(tenant), Ok(name)) = (TenantId::parse(&app.tenant), AppName::parse(&app.name)) else { continue };
            let reference = AppRef { id: app.id, tenant, name };
            if let Err(e) = node.restore(reference).await {
                tracing::warn!(app = %app.name, error = %e, "an app another node activated could not be loaded");
            }
        }
        node.reload_values(app.id).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Puts a stored tenant's plan and suspension on the node.
fn apply_tenant(node: &Node, plans: &Plans, tenant: &wasmkeep_storage::TenantRecord) {
    let Ok(id) = TenantId::parse(&tenant.id) else { return };
    match plans.get(&tenant.plan) {
        Some(plan) => node.set_tenant_plan(&id, Some(plan.clone())),
        None => tracing::warn!(tenant = %id, plan = %tenant.plan, "no such plan; the node's limits apply"),
    }
    node.set_suspended(&id, tenant.suspended);
}

/// Brings the store's tenants (plans, suspensions) and apps onto the node.
async fn restore(node: &Node, store: &dyn Store, plans: &Plans) -> Result<usize, String> {
    for tenant in store.tenants().await.map_err(|e| e.to_string())? {
        apply_tenant(node, plans, &tenant);
    }
    let apps = store.all_apps().await.map_err(|e| e.to_string())?;
    for app in &apps {
        let (Ok(tenant), Ok(name)) = (TenantId::parse(&app.tenant), AppName::parse(&app.name)) else { continue };
        let reference = AppRef { id: app.id, tenant, name };
        let shown = reference.to_string();
        node.restore(reference).await.map_err(|e| format!("loading {shown}: {e}"))?;
    }
    Ok(apps.len())
}

/// Ends on SIGTERM or Ctrl-C.
/// Drains a node of a cluster before it stops: its heartbeat says
/// `draining` (no `take`; `/readyz` answers 503) and the node gives its
/// actors and sockets to the others (`Node::drain`).
async fn drain(node: &Node, membership: &wasmkeep_cluster::membership::Membership) {
    use wasmkeep_cluster::membership::unix_ms;
    eprintln!("wasmkeep: draining");
    membership.start_draining();
    if let Err(e) = membership.beat(unix_ms()).await {
        tracing::warn!(error = %e, "the draining heartbeat could not be written");
    }
    node.drain(node.limits().shutdown_grace()).await;
    eprintln!("wasmkeep: drained");
}

async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

pub async fn run(args: ServeArgs, exports: Option<Arc<TenantExports>>) -> Result<(), String> {
    let cfg = ServeConfig::load(&args)?;
    let limits = config::limits(cfg.limits.as_deref())?;
    let base_domain = BaseDomain::parse(&cfg.base_domain).map_err(|e| format!("base_domain: {e}"))?;
    let plans = if cfg.plans_dir() == ServeConfig::default().plans && !cfg.plans_dir().is_dir() {
        // Run outside the repository with no plans given: the shipped ones.
        Plans::builtin(&cfg.default_plan)?
    } else {
        Plans::load(cfg.plans_dir(), &cfg.default_plan).map_err(|e| match cfg.plans_dir().is_dir() {
            true => e,
            false => {
                format!("{e} (copy policies/plans/ there, or leave `plans` unset for the built-in free and pro plans)")
            }
        })?
    };
    let signup = cfg.signup_mode();
    if signup == wasmkeep_tenants::api::SignupMode::Key && cfg.signup_key.as_deref().is_none_or(str::is_empty) {
        return Err("signup = \"key\" needs a signup_key (in the configuration or WASMKEEP_SIGNUP_KEY)".into());
    }
    let tls = cfg.tls()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let data = data_dir(&cfg.data)?;
    let node_id = match &cfg.cluster.node_id {
        Some(id) => NodeId::parse(id)?,
        None => NodeId::parse("serve")?,
    };
    let secrets = match &cfg.cluster.cluster_dir {
        Some(dir) => Secrets::Cluster(dir.clone(), Box::new(ClusterDir::load(dir, &node_id)?)),
        None => Secrets::Data(data.clone()),
    };
    let pepper = secrets.pepper()?;
    let value_key = secrets.value_key(cfg.value_key.as_deref())?;
    let egress_roots = match &cfg.egress_roots {
        Some(file) => std::fs::read(file).map_err(|e| format!("egress_roots: {}: {e}", file.display()))?,
        None => Vec::new(),
    };
    let store = open_store(cfg.cluster.store.as_deref(), &data).await?;
    let token_path = operator_token(&*store, &pepper, &secrets).await?;

    let public =
        tokio::net::TcpListener::bind(cfg.listen).await.map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    let public_addr = public.local_addr().map_err(|e| e.to_string())?;
    let config = NodeConfig {
        id: node_id.to_string(),
        limits,
        cache_dir: Some(data.join("cache")),
        egress: EgressPolicy::Public { allowed_hosts: None },
        values: Arc::new(value_key),
        egress_roots,
    };
    let Joined { node, ready, hops, membership, transport } = match (&secrets, cfg.cluster.cluster_listen) {
        (Secrets::Cluster(_, dir), Some(listen)) => {
            let advertise = cfg.cluster.cluster_advertise;
            let wait = Duration::from_secs(cfg.cluster.failover_wait_secs);
            join_cluster(config, store.clone(), dir, listen, advertise, public_addr, wait).await?
        }
        _ => {
            let node = Node::new(config, store.clone()).map_err(|e| format!("starting the node: {e}"))?;
            Joined { node, ready: wasmkeep_telemetry::always_ready(), hops: None, membership: None, transport: None }
        }
    };
    // A signed hop on the public port is a client's header, unless allowed.
    let hops = hops.filter(|_| cfg.cluster.cluster_plaintext == Plaintext::Allow);
    let apps = restore(&node, &*store, &plans).await?;
    let mut exporting = ExportsSeen::new();
    if let Some(exports) = &exports
        && let Err(e) = follow_exports(&node, &*store, exports, &mut exporting).await
    {
        tracing::warn!(error = %e, "tenants' trace exports could not be read");
    }
    if membership.is_some() {
        tokio::spawn(follow_control_plane(node.clone(), store.clone(), plans.clone(), exports.clone(), exporting));
    }

    let api = tokio::net::TcpListener::bind(cfg.api_listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.api_listen))?;
    let api_addr = api.local_addr().map_err(|e| e.to_string())?;
    if let Some(addr) = cfg.metrics_listen {
        let mut peers: Vec<Arc<dyn wasmkeep_telemetry::Source>> =
            membership.iter().map(|m| m.clone() as Arc<dyn wasmkeep_telemetry::Source>).collect();
        peers.extend(exports.iter().map(|e| e.clone() as Arc<dyn wasmkeep_telemetry::Source>));
        peers.extend(transport.iter().map(|t| t.clone() as Arc<dyn wasmkeep_telemetry::Source>));
        crate::config::serve_metrics(&node, peers, addr, ready).await?;
    }

    let drain_asked = Arc::new(tokio::sync::Notify::new());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let service = Arc::new(Service {
        node: node.clone(),
        store,
        plans,
        default_plan: cfg.default_plan.clone(),
        signup,
        signup_key: cfg.signup_key.as_deref().map(|k| TokenHash::hash(&pepper, k)),
        pepper,
        base_domain: base_domain.clone(),
        public_scheme: scheme.into(),
        public_port: Some(public_addr.port()).filter(|p| *p != if tls.is_some() { 443 } else { 80 }),
        limits: RateLimits::new(cfg.rates),
        started: wasmkeep_tenants::api::unix_now(),
        drain: drain_asked.clone(),
        stopping: stop_rx.clone(),
        exports,
        bodies: wasmkeep_tenants::api::BodyBudget::new(node.limits()),
    });
    let forget = service.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(60)).await;
            forget.limits.forget_idle();
            forget.node.forget_idle_rates();
            wasmkeep_tenants::api::usage::record(&forget).await;
        }
    });
    // What apps store, for the metrics: the apps a commit here changed,
    // asked of the store every few seconds.
    let measured = service.node.clone();
    tokio::spawn(async move {
        loop {
            measured.measure_storage().await;
            tokio::time::sleep(STORAGE_MEASURE_INTERVAL).await;
        }
    });
    let last_usage = service.clone();

    let descriptors = wasmkeep_listener::raise_descriptor_limit();
    let budget = node.limits().descriptor_budget(descriptors);
    let share = format!(
        "public port {}, API {}, metrics {}, guests' outbound {}, {} kept for the node",
        budget.public.connections,
        budget.api.connections,
        budget.metrics.connections,
        node.limits().egress_connections,
        wasmkeep_core::limits::DESCRIPTOR_RESERVE
    );
    tracing::info!("guest memory: {} MiB for all guests, shared by weight", node.guest_memory().budget() >> 20);
    if budget.fits {
        tracing::info!("descriptors: {descriptors} ({share})");
    } else {
        eprintln!(
            "wasmkeep: warning: {descriptors} descriptors do not hold {share}; raise `ulimit -n` or lower the bounds"
        );
    }
    eprintln!("wasmkeep: serving {apps} apps on {scheme}://{public_addr} as <app>.<tenant>.{base_domain}");
    eprintln!("wasmkeep: provisioning API on {scheme}://{api_addr}/v1 (sign-up: {signup:?})");
    eprintln!("wasmkeep: the operator's token is in {}", token_path.display());

    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let api_task = tokio::spawn(wasmkeep_tenants::api::serve(api, service, acceptor.clone(), stopped(stop_rx.clone())));
    let draining = node.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop_signal() => {}
            () = drain_asked.notified() => {}
        }
        if let Some(membership) = membership {
            drain(&draining, &membership).await;
        }
        eprintln!("wasmkeep: stopping");
        let _ = stop_tx.send(true);
    });
    let mut port =
        PublicPort::new(node, AppRouting::ByHost(base_domain)).trusting_traceparent(cfg.telemetry.trust_traceparent);
    if let Some(acceptor) = acceptor {
        port = port.with_tls(acceptor);
    }
    if let Some(hops) = hops {
        port = port.with_signed_hops(hops);
    }
    wasmkeep_edge::serve(public, port, stopped(stop_rx)).await.map_err(|e| format!("serving: {e}"))?;
    let _ = api_task.await;
    wasmkeep_tenants::api::usage::record(&last_usage).await;
    Ok(())
}
