//! A node on a fresh SQLite store serving the test probe as class `probe`:
//! what the in-process scenarios measure.

use std::sync::Arc;

use wasmkeep_actors::{Node, NodeConfig, VersionSpec};
use wasmkeep_core::{Access, AppId, Limits};
use wasmkeep_storage::SqliteStore;

/// The node, its app, and the directory its store lives in (kept alive).
pub struct ProbeNode {
    pub node: Node,
    pub app: AppId,
    _data: tempfile::TempDir,
}

pub async fn start(limits: Limits, app_name: &str) -> Result<ProbeNode, String> {
    let probe = &wasmkeep_tests::guests().probe;
    start_with(limits, app_name, "probe", probe).await
}

/// A node serving `wasm` as class `class` (open).
pub async fn start_with(limits: Limits, app_name: &str, class: &str, wasm: &[u8]) -> Result<ProbeNode, String> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let store = SqliteStore::open(&data.path().join("store.db")).map_err(|e| e.to_string())?;
    let node = Node::new(
        NodeConfig {
            id: "bench".into(),
            limits,
            cache_dir: Some(wasmkeep_tests::cache_dir()),
            values: std::sync::Arc::new(wasmkeep_storage::ValueKey::generate()),
            egress_roots: Vec::new(),
            egress: wasmkeep_core::egress::EgressPolicy::Open,
        },
        Arc::new(store),
    )
    .map_err(|e| e.to_string())?;
    let spec = VersionSpec {
        front: None,
        classes: vec![wasmkeep_tests::class(class, Access::Open, wasm)],
        ..Default::default()
    };
    let app = node.deploy("bench", app_name, spec).await.map_err(|e| e.to_string())?.app;
    Ok(ProbeNode { node, app, _data: data })
}
