//! `calls.call-many` of 16 callees each waiting 20 ms (a guest sleep: a
//! host wait, no CPU), against one such call and against the same 16
//! calls made one after another, all from one actor on one node.

use std::time::{Duration, Instant};

use wasmkeep_actors::Request;
use wasmkeep_core::{Limits, Origin, RawAddress};

use crate::{flag, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let n: usize = flag(args, "--n", 20)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let body = async move {
        let probe_node = crate::probe_node::start(Limits::default(), "call-many").await?;
        let (node, app) = (&probe_node.node, probe_node.app);
        let callees: Vec<String> = (0..16).map(|i| format!("probe/c{i}")).collect();
        let to = callees.join(",");
        let sleep = "path=/sleep%3Fms%3D20";
        let shapes = [
            ("one call", format!("/call?to=probe/c0&{sleep}")),
            ("call_many of 16", format!("/many?to={to}&{sleep}")),
            ("16 calls in a row", format!("/sequential?to={to}&{sleep}")),
        ];
        let time = |path: String| async move {
            let get = Request { method: "GET".into(), path, headers: vec![], body: vec![] };
            let t = Instant::now();
            let r = node
                .request_to(app, RawAddress::split("probe/caller").unwrap(), Origin::Outside, get)
                .await
                .map_err(|e| e.to_string())?;
            if r.status != 200 {
                return Err(format!("the caller answered {}", r.status));
            }
            Ok::<_, String>((t.elapsed(), r.body))
        };
        // Wake every callee first: waking is not what is measured.
        let (_, body) = time(shapes[1].1.clone()).await?;
        let woken = String::from_utf8_lossy(&body).matches("\"status\":200").count();
        if woken != 16 {
            return Err(format!("warming answered {woken} of 16: {}", String::from_utf8_lossy(&body)));
        }
        let mut p50 = Vec::new();
        println!("call-many: callees each waiting 20 ms, {n} samples of each, one run");
        for (name, path) in &shapes {
            let mut samples = Vec::new();
            for _ in 0..n {
                samples.push(time(path.clone()).await?.0);
            }
            let s = stats::summarize(samples);
            println!("  {name:18} {s}");
            p50.push(s.p50);
        }
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "  call_many of 16 / one call: {:.2}x; 16 in a row / call_many of 16: {:.1}x (p50s)",
            ratio(p50[1], p50[0]),
            ratio(p50[2], p50[1])
        );
        Ok(())
    };
    rt.block_on(async { tokio::spawn(body).await.map_err(|e| e.to_string())? })
}
