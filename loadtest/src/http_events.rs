//! One actor's events per second over HTTP, each with a storage write:
//! `wasmkeep dev` serving the counter example (a real process, a real
//! SQLite file), loaded by keep-alive HTTP/1.1 connections from this one.

use std::process::Command;
use std::time::Duration;

use crate::{flag, load, stats};

pub fn run(args: &[String]) -> Result<(), String> {
    let secs: f64 = flag(args, "--secs", 5.0)?;
    let conns: usize = flag(args, "--conns", 32)?;
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut command = Command::new(load::wasmkeep_bin()?);
    command.args(["dev", "docs/examples/counter", "--listen", "127.0.0.1:0", "--data"]).arg(data.path());
    // `--durable`: every commit synced, as `serve` runs.
    let durable = args.iter().any(|a| a == "--durable");
    if durable {
        command.arg("--durable");
    }
    command.current_dir(load::repo());
    let server = load::spawn(command, load::wasmkeep_addr)?;

    // The client gets one thread; the server keeps the other core.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let run = rt.block_on(load::run(&server.addr, "/actor/counter/bench/", conns, Duration::from_secs_f64(secs)))?;
    println!(
        "http-events: one actor, a storage write per event{}, {conns} connections, {secs} s: {:.0} events/s, {} errors; latency {}",
        if durable { " synced" } else { "" },
        run.per_sec(),
        run.errors,
        stats::summarize(run.samples)
    );
    Ok(())
}
