//! `wasmkeep dev`: build an app and serve it on one node with the
//! embedded store, redeploying it when it changes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmkeep_actors::{ClassSpec, Node, NodeConfig, VersionSpec};
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_edge::{AppRouting, PublicPort};
use wasmkeep_storage::{Durability, SqliteStore, ValueKey};

use crate::manifest::{self, Component, Manifest};
use crate::{build, config, reload};

/// The tenant `wasmkeep dev` runs apps as.
pub const DEV_TENANT: &str = "dev";

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// The app's directory, holding `wasmkeep.toml`.
    #[arg(default_value = ".")]
    pub app_dir: PathBuf,
    /// Where the public port listens.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The node's data directory (store, compiled components).
    /// Default: APP_DIR/.wasmkeep
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Sets an app value (repeatable).
    #[arg(long = "value", value_name = "NAME=VALUE", value_parser = parse_value)]
    pub values: Vec<(String, String)>,
    /// A TOML file of limits overriding policies/limits.toml's defaults.
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// Where the metrics listener serves `/metrics` (Prometheus) and
    /// `/healthz`. None unless given.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Sync every commit to disk, as `serve` does (an acknowledged write
    /// survives power loss); without it a commit survives the process.
    #[arg(long)]
    pub durable: bool,
    /// Redeploy only on SIGHUP, not when the app's sources change.
    #[arg(long)]
    pub no_watch: bool,
    /// Open connections the public port keeps, sockets included (over the
    /// limits file's `max_connections`; 0: the descriptor limit less 1,024).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u32>,
}

/// The components of an app, each project built once (an npm project
/// once per world it serves in).
#[derive(Default)]
struct Components {
    built: std::collections::BTreeMap<(PathBuf, build::World), PathBuf>,
}

impl Components {
    fn wasm(&mut self, component: &Component, world: build::World) -> Result<Vec<u8>, String> {
        let path = match component {
            Component::Wasm(path) => path.clone(),
            Component::Cargo(dir) | Component::Npm(dir) => {
                // A cargo project is one component whatever its world.
                let key =
                    (dir.clone(), if matches!(component, Component::Cargo(_)) { build::World::Actor } else { world });
                match self.built.get(&key) {
                    Some(path) => path.clone(),
                    None => {
                        let path = match component {
                            Component::Npm(dir) => build::npm_component(dir, world)?,
                            _ => build::cargo_component(dir)?,
                        };
                        self.built.insert(key, path.clone());
                        path
                    }
                }
            }
        };
        std::fs::read(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
    }
}

pub(crate) fn parse_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("`{s}` is not NAME=VALUE")),
    }
}

/// Builds every component the manifest names into a version.
pub fn version_spec(manifest: &Manifest, app_dir: &Path) -> Result<VersionSpec, String> {
    let mut components = Components::default();
    let all = manifest.front.iter().chain(manifest.classes.iter().map(|c| &c.component));
    if all.into_iter().any(|c| matches!(c, Component::Cargo(_))) {
        build::ensure_target(app_dir)?;
    }
    let front = manifest.front.as_ref().map(|c| components.wasm(c, build::World::Front)).transpose()?;
    let mut classes = Vec::new();
    for class in &manifest.classes {
        let wasm = components.wasm(&class.component, build::World::Actor)?;
        classes.push(ClassSpec { name: class.name.clone(), access: class.access, wasm: wasm.into() });
    }
    Ok(VersionSpec { front, classes, required_values: manifest.required_values.clone(), env: manifest.env.clone() })
}

pub async fn run(args: DevArgs) -> Result<(), String> {
    let sources = reload::fingerprint(&args.app_dir);
    let manifest = manifest::load(&args.app_dir)?;
    let mut limits = config::limits(args.limits.as_deref())?;
    if let Some(n) = args.max_connections {
        limits.max_connections = n;
    }
    let spec = version_spec(&manifest, &args.app_dir)?;
    let sources = reload::settled(sources, &args.app_dir);

    let data = args.data.clone().unwrap_or_else(|| args.app_dir.join(".wasmkeep"));
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: cannot create: {e}", data.display()))?;
    let durability = if args.durable { Durability::PowerLoss } else { Durability::Process };
    let store = SqliteStore::open_with(&data.join("store.db"), durability)
        .map_err(|e| format!("{}: {e}", data.join("store.db").display()))?;
    let key = crate::serve::secret_file(&data.join("value-key"), || ValueKey::generate().as_bytes().to_vec())?;
    let values =
        Arc::new(ValueKey::from_bytes(&key).map_err(|e| format!("{}: {e}", data.join("value-key").display()))?);
    let node = Node::new(
        NodeConfig {
            id: "dev".into(),
            limits,
            cache_dir: Some(data.join("cache")),
            egress: EgressPolicy::Open,
            values,
            egress_roots: Vec::new(),
        },
        Arc::new(store),
    )
    .map_err(|e| format!("starting the node: {e}"))?;

    eprintln!("wasmkeep: deploying {}", manifest.name);
    let deployed =
        node.deploy(DEV_TENANT, &manifest.name, spec).await.map_err(|e| format!("deploying {}: {e}", manifest.name))?;
    for (name, value) in &args.values {
        node.set_value(deployed.app, name, value).await.map_err(|e| format!("setting value {name}: {e}"))?;
    }

    if let Some(addr) = args.metrics_listen {
        crate::config::serve_metrics(&node, vec![], addr, wasmkeep_telemetry::always_ready()).await?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("wasmkeep: serving {} (version {}) on http://{addr}", manifest.name, deployed.version);
    if manifest.front.is_some() {
        eprintln!("  /  (the front: every path outside /actor/)");
    }
    for class in &manifest.classes {
        eprintln!("  /actor/{}/<name>/  ({})", class.name, class.access.as_str());
    }
    let watch = !args.no_watch;
    tokio::spawn(reload::run(node.clone(), args.app_dir.clone(), manifest.name.clone(), watch, sources));
    let port = PublicPort::new(node, AppRouting::Single(deployed.app));
    wasmkeep_edge::serve(listener, port, async {
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("wasmkeep: stopping");
    })
    .await
    .map_err(|e| format!("serving: {e}"))
}
