//! What the cross-crate tests share: the guest components (built once per
//! test run), a node on a real port with a real SQLite store, and a real
//! HTTP client.

pub mod cluster;
pub mod otlp;
pub mod typescript;

pub use typescript::ts_guests;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::oneshot;
use wasmkeep_actors::{ClassSpec, Node, NodeConfig, VersionSpec};
use wasmkeep_core::egress::EgressPolicy;
use wasmkeep_core::{Access, AppId, ClassName, Limits};
use wasmkeep_edge::{AppRouting, PublicPort};
use wasmkeep_storage::{SqliteStore, Store};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The guest components under `tests/guests`, built for `wasm32-wasip2`
/// once per test process (cargo makes a second process wait and reuse).
pub struct Guests {
    pub probe: Vec<u8>,
    /// The test front (world `front`).
    pub front: Vec<u8>,
    /// A front answering `hello` that imports only WASI.
    pub hello_front: Vec<u8>,
    pub uses_calls: Vec<u8>,
    pub uses_http: Vec<u8>,
    /// A front on `wasi:http` itself: trailers, slow streamed answers.
    pub raw_front: Vec<u8>,
    /// A front of standard interfaces only: `wasi:config`, environment.
    pub std_front: Vec<u8>,
    /// An actor whose storage is `wasi:keyvalue` (both versions).
    pub std_kv: Vec<u8>,
    /// A front importing `wasi:keyvalue`: refused.
    pub kv_front: Vec<u8>,
}

/// A component that takes a while to compile (`funcs` functions of a few
/// hundred instructions each), unlike any other: `seed` is in its code. It
/// exports nothing an actor needs, so a node compiles it, then refuses it:
/// the compile's cost is what a heavy upload makes every deploy pay.
pub fn slow_to_compile(seed: u32, funcs: usize) -> Vec<u8> {
    let mut text = String::from("(component (core module\n");
    for f in 0..funcs {
        text.push_str(&format!("(func (export \"f{f}\") (param i32) (result i32) local.get 0\n"));
        for i in 0..100 {
            text.push_str(&format!("i32.const {} i32.add i32.const 3 i32.mul\n", seed + i));
        }
        text.push_str(")\n");
    }
    text.push_str("))");
    wat::parse_str(&text).expect("the generated component parses")
}

pub fn guests() -> &'static Guests {
    static GUESTS: OnceLock<Guests> = OnceLock::new();
    GUESTS.get_or_init(|| {
        let dir = repo().join("tests/guests");
        let target = dir.join("target");
        // A toolchain installed before the repository listed the target
        // lacks it; adding it is quick when it is there already.
        let _ = Command::new("rustup").args(["target", "add", "wasm32-wasip2"]).current_dir(&dir).output();
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--quiet"])
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .expect("running cargo for the guests");
        assert!(status.success(), "building tests/guests failed");
        let read = |name: &str| {
            let path = target.join("wasm32-wasip2/release").join(format!("{name}.wasm"));
            std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        Guests {
            probe: read("probe"),
            front: read("front"),
            hello_front: read("hello_front"),
            uses_calls: read("uses_calls"),
            uses_http: read("uses_http"),
            raw_front: read("raw_front"),
            std_front: read("std_front"),
            std_kv: read("std_kv"),
            kv_front: read("kv_front"),
        }
    })
}

/// Where compiled components are cached across tests and runs.
pub fn cache_dir() -> PathBuf {
    repo().join("target/wasmkeep-test-cache")
}

/// Limits small enough for tests to reach.
pub fn test_limits() -> Limits {
    // One client (the tests, on loopback) may hold every slot.
    Limits { pool_instances: 40, front_slots: 4, front_slots_per_client: u32::MAX, ..Limits::default() }
}

/// A class to deploy: name, access, component bytes.
pub fn class(name: &str, access: Access, wasm: &[u8]) -> ClassSpec {
    ClassSpec { name: ClassName::parse(name).unwrap(), access, wasm: wasm.into() }
}

/// The probe under the three access levels, as classes `open`, `existing`
/// and `internal`.
pub fn probe_classes() -> Vec<ClassSpec> {
    let probe = &guests().probe;
    vec![
        class("open", Access::Open, probe),
        class("existing", Access::Existing, probe),
        class("internal", Access::Internal, probe),
    ]
}

/// A node serving the probe as one `open` class, named `open`.
pub async fn open_probe_node(limits: Limits) -> TestNode {
    let spec =
        VersionSpec { front: None, classes: vec![class("open", Access::Open, &guests().probe)], ..Default::default() };
    TestNode::start(limits, spec).await
}

/// A node serving one app on a real port, its store in a directory of its
/// own (kept for a restart with [`TestNode::restart`]).
pub struct TestNode {
    pub node: Node,
    pub app: AppId,
    pub url: String,
    pub client: reqwest::Client,
    pub data: Arc<tempfile::TempDir>,
    limits: Limits,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl TestNode {
    pub async fn start(limits: Limits, spec: VersionSpec) -> Self {
        Self::start_in(Arc::new(tempfile::tempdir().unwrap()), limits, spec).await
    }

    async fn start_in(data: Arc<tempfile::TempDir>, limits: Limits, spec: VersionSpec) -> Self {
        let store = Arc::new(SqliteStore::open(&data.path().join("store.db")).unwrap());
        Self::start_with(data, store, limits, spec).await
    }

    /// A node on `store`, for tests that put something between the node
    /// and its store.
    pub async fn start_with(
        data: Arc<tempfile::TempDir>,
        store: Arc<dyn Store>,
        limits: Limits,
        spec: VersionSpec,
    ) -> Self {
        Self::start_configured(data, store, limits, spec, EgressPolicy::Open, Vec::new()).await
    }

    /// A node whose apps' outbound HTTP follows `egress`.
    pub async fn start_with_egress(limits: Limits, spec: VersionSpec, egress: EgressPolicy) -> Self {
        let data = Arc::new(tempfile::tempdir().unwrap());
        let store = Arc::new(SqliteStore::open(&data.path().join("store.db")).unwrap());
        Self::start_configured(data, store, limits, spec, egress, Vec::new()).await
    }

    /// A node whose apps' outbound HTTPS also trusts the roots in `pem`.
    pub async fn start_with_egress_roots(limits: Limits, spec: VersionSpec, pem: Vec<u8>) -> Self {
        let data = Arc::new(tempfile::tempdir().unwrap());
        let store = Arc::new(SqliteStore::open(&data.path().join("store.db")).unwrap());
        Self::start_configured(data, store, limits, spec, EgressPolicy::Open, pem).await
    }

    async fn start_configured(
        data: Arc<tempfile::TempDir>,
        store: Arc<dyn Store>,
        limits: Limits,
        spec: VersionSpec,
        egress: EgressPolicy,
        egress_roots: Vec<u8>,
    ) -> Self {
        let values = Arc::new(wasmkeep_storage::ValueKey::generate());
        let config = NodeConfig {
            id: "test".into(),
            limits: limits.clone(),
            cache_dir: Some(cache_dir()),
            egress,
            values,
            egress_roots,
        };
        let node = Node::new(config, store).unwrap();
        let app = node.deploy("t", "app", spec).await.unwrap().app;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel();
        let port = PublicPort::new(node.clone(), AppRouting::Single(app));
        let served = tokio::spawn(async move {
            wasmkeep_edge::serve(listener, port, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self { node, app, url, client: reqwest::Client::new(), data, limits, stop: Some(stop), served: Some(served) }
    }

    /// Stops this node and starts a new one on the same data directory.
    pub async fn restart(mut self, spec: VersionSpec) -> Self {
        self.shutdown().await;
        Self::start_in(self.data.clone(), self.limits.clone(), spec).await
    }

    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            let _ = served.await;
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.send(self.client.get(format!("{}{path}", self.url))).await
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let r = request.timeout(Duration::from_secs(60)).send().await.expect("the node answers");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.text().await.unwrap();
        Answer { status, headers, body }
    }
}

/// An HTTP answer, read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Percent-encodes what a query value must not hold raw.
pub fn enc(s: &str) -> String {
    s.replace('%', "%25").replace('?', "%3F").replace('&', "%26").replace('=', "%3D").replace('|', "%7C")
}

/// Waits until `cond` holds, checking every 10 ms, for at most `limit`.
/// `node`'s metrics listener, as `serve` runs it, on a port of its own:
/// its base URL (`/metrics` is below it).
pub async fn metrics_listener(node: &wasmkeep_actors::Node) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let sources: Vec<std::sync::Arc<dyn wasmkeep_telemetry::Source>> = vec![std::sync::Arc::new(node.clone())];
    let limits = node.limits().clone();
    let ready = wasmkeep_telemetry::always_ready();
    tokio::spawn(
        async move { wasmkeep_telemetry::serve(listener, &limits, sources, ready, std::future::pending()).await },
    );
    url
}

pub async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// Whether the first intervals the probe actors `actors` recorded
/// (`/interval`, read back at `/intervals`) all overlap: their latest start
/// before their earliest end.
pub async fn intervals_overlap(n: &TestNode, actors: &[&str]) -> Result<(), String> {
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for t in actors {
        let iv = n.get(&format!("/actor/{t}/intervals")).await.json();
        let (s, e) = iv[0].as_str().unwrap().split_once('-').unwrap();
        starts.push(s.parse::<u128>().unwrap());
        ends.push(e.parse::<u128>().unwrap());
    }
    match starts.iter().max() < ends.iter().min() {
        true => Ok(()),
        false => Err(format!("starts {starts:?} ends {ends:?}")),
    }
}

/// A WebSocket upgrade sent by hand on a raw connection, which is dropped
/// after `leave_after`, whatever the node answered by then.
pub async fn upgrade_and_leave(n: &TestNode, path: &str, leave_after: Duration) {
    use tokio::io::AsyncWriteExt;
    let addr = n.url.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nupgrade: websocket\r\nconnection: upgrade\r\n\
         sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(leave_after).await;
    drop(tcp);
}

/// The envelope of an event a test sends straight to the node (as the
/// port would): it waits at most the call limit.
pub fn envelope(n: &TestNode, target: &str, origin: wasmkeep_core::Origin) -> wasmkeep_core::Envelope {
    let app = n.node.app_ref(n.app).expect("the test app is deployed");
    n.node.envelope(&app, wasmkeep_core::RawAddress::split(target).unwrap(), origin, Default::default())
}
