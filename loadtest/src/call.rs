//! Same-node `actors.call` round trip, guest to guest: an actor times, in
//! its own clock, calls to another actor whose event answers at once
//! (`GET /ping`). Through the node: the callee's mailbox, admission, the
//! event, the storage gate, and the answer back.

use wasmkeep_actors::Request;
use wasmkeep_core::{Limits, Origin, RawAddress};

use crate::{flag, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 2000)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let body = async move {
        let probe_node = crate::probe_node::start(Limits::default(), "call").await?;
        let (node, app) = (&probe_node.node, probe_node.app);
        let get = |path: String| Request { method: "GET".into(), path, headers: vec![], body: vec![] };
        // Warm both actors, then measure.
        node.request_to(app, RawAddress::split("probe/callee").unwrap(), Origin::Outside, get("/ping".into()))
            .await
            .map_err(|e| e.to_string())?;
        let caller = RawAddress::split("probe/caller").unwrap();
        let r = node
            .request_to(app, caller, Origin::Outside, get(format!("/call-bench?to=probe/callee&n={n}")))
            .await
            .map_err(|e| e.to_string())?;
        let nanos: Vec<u64> = String::from_utf8_lossy(&r.body)
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter_map(|v| v.parse().ok())
            .collect();
        if nanos.len() != n {
            return Err(format!("the caller answered {} samples: {}", nanos.len(), String::from_utf8_lossy(&r.body)));
        }
        let samples = nanos.into_iter().map(std::time::Duration::from_nanos).collect();
        println!("call: actors.call round trip, guest to guest, same node: {}", stats::summarize(samples));
        Ok(())
    };
    rt.block_on(async { tokio::spawn(body).await.map_err(|e| e.to_string())? })
}
