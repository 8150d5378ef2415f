//! Waking a hibernated actor that holds 100 keys: the first event after
//! hibernation, through the node (mailbox, admission, store, pool,
//! instantiation, the event), without HTTP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmkeep_actors::{Node, NodeConfig, Request, VersionSpec};
use wasmkeep_core::{Access, Limits, RawAddress};
use wasmkeep_storage::SqliteStore;

use crate::{flag, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 300)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move {
        let data = tempfile::tempdir().map_err(|e| e.to_string())?;
        let store = SqliteStore::open(&data.path().join("store.db")).map_err(|e| e.to_string())?;
        let limits = Limits { idle_secs: 0.01, ..Limits::default() };
        let node = Node::new(
            NodeConfig { id: "bench".into(), limits, cache_dir: Some(wasmkeep_tests::cache_dir()) },
            Arc::new(store),
        )
        .map_err(|e| e.to_string())?;
        let probe = wasmkeep_tests::guests().probe.clone();
        let spec = VersionSpec {
            classes: vec![wasmkeep_tests::class("probe", Access::Open, &probe)],
            required_values: vec![],
        };
        let app = node.deploy("bench", "wake", spec).await.map_err(|e| e.to_string())?.app;
        let target = RawAddress::split("probe/room").unwrap();
        let get = |path: &str| Request { method: "GET".into(), path: path.into(), headers: vec![], body: vec![] };
        let post = |path: &str| Request { method: "POST".into(), path: path.into(), headers: vec![], body: vec![] };

        // 100 keys, then the counted key.
        node.request(app, target.clone(), true, post("/fill?n=99")).await.map_err(|e| e.to_string())?;
        node.request(app, target.clone(), true, get("/count")).await.map_err(|e| e.to_string())?;

        let mut wake = Vec::with_capacity(n);
        let mut resident = Vec::with_capacity(n);
        for _ in 0..n {
            wait_hibernated(&node).await?;
            let t = Instant::now();
            let r = node.request(app, target.clone(), true, get("/peek")).await.map_err(|e| e.to_string())?;
            wake.push(t.elapsed());
            assert_eq!(r.status, 200);
            // The same event on the now-resident actor, for comparison.
            let t = Instant::now();
            node.request(app, target.clone(), true, get("/peek")).await.map_err(|e| e.to_string())?;
            resident.push(t.elapsed());
        }
        let wake = stats::summarize(wake);
        let resident = stats::summarize(resident);
        println!("wake: a hibernated actor holding 100 keys, first event (GET /peek, one read): {wake}");
        println!("wake: the same event on the resident actor: {resident}");
        println!("wake: waking adds {:.1}µs at p50", (wake.p50.as_secs_f64() - resident.p50.as_secs_f64()) * 1e6);
        Ok(())
    })
}

async fn wait_hibernated(node: &Node) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.resident_actors() > 0 || node.awake_actors() > 0 {
        if Instant::now() > deadline {
            return Err("the actor did not hibernate".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}
