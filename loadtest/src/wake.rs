//! Waking a hibernated actor that holds 100 keys: the first event after
//! hibernation, through the node (mailbox task, admission with an owner
//! epoch taken in SQLite, a pool lease, instantiation, the event), without
//! HTTP.
//!
//! Two measures: back to back, waking one hibernated actor after another
//! (the host's cost, with the CPU busy as under load), and one actor woken
//! after an idle pause (what a lone request meets: cold caches, an idle CPU
//! waking up). The raw instantiation figures of `instantiate --gap-ms`
//! show how much of the second is the machine's rather than the host's.

use std::time::{Duration, Instant};

use wasmkeep_actors::{Node, Request};
use wasmkeep_core::{Limits, RawAddress};

use crate::{flag, stats};

fn get(path: &str) -> Request {
    Request { method: "GET".into(), path: path.into(), headers: vec![], body: vec![] }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 500)?;
    let threads: usize = flag(args, "--threads", 2)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().unwrap();
    // On a worker thread, as a request is: block_on's own thread is not
    // one, and a hop to a worker would be counted as the host's.
    let body = async move {
        let probe_node = crate::probe_node::start(Limits { idle_secs: 0.2, ..Limits::default() }, "wake").await?;
        let (node, app) = (&probe_node.node, probe_node.app);
        let actor = |i: usize| RawAddress::split(&format!("probe/room-{i}")).unwrap();
        let fill = Request { method: "POST".into(), path: "/fill?n=99".into(), headers: vec![], body: vec![] };

        // n actors of 100 keys each (99 filled, plus `count`).
        for i in 0..n {
            node.request_to(app, actor(i), wasmkeep_core::Origin::Outside, fill.clone())
                .await
                .map_err(|e| e.to_string())?;
            node.request_to(app, actor(i), wasmkeep_core::Origin::Outside, get("/count"))
                .await
                .map_err(|e| e.to_string())?;
        }
        wait_hibernated(node).await?;

        let mut back_to_back = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            let r = node
                .request_to(app, actor(i), wasmkeep_core::Origin::Outside, get("/peek"))
                .await
                .map_err(|e| e.to_string())?;
            back_to_back.push(t.elapsed());
            assert_eq!(r.status, 200);
        }
        let mut resident = Vec::with_capacity(n);
        for i in 0..n {
            let t = Instant::now();
            node.request_to(app, actor(i), wasmkeep_core::Origin::Outside, get("/peek"))
                .await
                .map_err(|e| e.to_string())?;
            resident.push(t.elapsed());
        }
        wait_hibernated(node).await?;
        let mut lone = Vec::new();
        for i in 0..n.min(100) {
            wait_hibernated(node).await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
            let t = Instant::now();
            node.request_to(app, actor(i), wasmkeep_core::Origin::Outside, get("/peek"))
                .await
                .map_err(|e| e.to_string())?;
            lone.push(t.elapsed());
        }

        println!(
            "wake: {n} hibernated actors of 100 keys, woken back to back (GET /peek, one read): {}",
            stats::summarize(back_to_back)
        );
        println!("wake: the same event on the resident actors: {}", stats::summarize(resident));
        println!("wake: a lone actor woken after a 10 ms pause: {}", stats::summarize(lone));
        Ok(())
    };
    rt.block_on(async { tokio::spawn(body).await.map_err(|e| e.to_string())? })
}

async fn wait_hibernated(node: &Node) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.resident_actors() > 0 || node.awake_actors() > 0 {
        if Instant::now() > deadline {
            return Err("the actors did not hibernate".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}
