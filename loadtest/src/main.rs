//! wasmkeep's benchmarks. Figures go to `loadtest/RESULTS.md` with the
//! command that made them; compare ratios measured in one run, never
//! absolute times across runs (the machines are shared).
//!
//! ```sh
//! cargo build --release -p wasmkeep -p wasmkeep-loadtest
//! target/release/wasmkeep-loadtest http-events   # one actor, a write per event, over HTTP
//! target/release/wasmkeep-loadtest wake          # waking a hibernated actor holding 100 keys
//! target/release/wasmkeep-loadtest instantiate   # the host's cost over raw instantiation
//! target/release/wasmkeep-loadtest call          # actors.call round trip, guest to guest
//! target/release/wasmkeep-loadtest call-many     # 16 callees at once vs one, vs 16 in a row
//! target/release/wasmkeep-loadtest front         # a trivial front vs wasmtime serve vs hyper
//! target/release/wasmkeep-loadtest sockets-broadcast  # 64 bytes to a room's 1,000 sockets vs the raw floor
//! target/release/wasmkeep-loadtest sockets-memory     # node RSS per parked socket over 10,000
//! target/release/wasmkeep-loadtest isolation          # an actor's p99 alone vs beside 2 and 4 looping guests
//! target/release/wasmkeep-loadtest memory-burst       # node RSS before, at and after 64 bodies of 15 MiB
//! target/release/wasmkeep-loadtest fairness           # a quiet tenant's p99 alone vs beside a noisy one
//! target/release/wasmkeep-loadtest fairness --burst   # the same, the noisy requests twenty at once
//! target/release/wasmkeep-loadtest cluster-call       # actors.call to another node vs the same node vs raw QUIC
//! target/release/wasmkeep-loadtest cluster-call-many  # 16 callees over three nodes at once vs one
//! target/release/wasmkeep-loadtest tracing-cost       # http-events and front with traces off, on, sampled
//! target/release/wasmkeep-loadtest cluster-broadcast  # a room's sockets relayed through other nodes vs direct
//! target/release/wasmkeep-loadtest shared-node        # a quiet tenant beside memory, aliasing and upload neighbours
//! ```

mod call;
mod call_many;
mod cluster_broadcast;
mod cluster_call;
mod fairness;
mod front;
mod http_events;
mod instantiate;
mod isolation;
mod languages;
mod load;
mod memory_burst;
mod probe_node;
mod probe_process;
mod serve_process;
mod shared_node;
mod sockets;
mod stats;
mod tracing_cost;
mod wake;

use std::process::ExitCode;

fn main() -> ExitCode {
    // As the `wasmkeep` binary does: error values (wasmtime makes one for
    // every store it drops) capture no backtrace, even with `RUST_BACKTRACE`
    // set, so the in-process node and its floors are measured as it runs.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: the first thing `main` does; no other thread exists yet.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (scenario, rest) = match args.split_first() {
        Some((s, rest)) => (s.as_str(), rest),
        None => ("", &[][..]),
    };
    let result =
        match scenario {
            "http-events" => http_events::run(rest),
            "wake" => wake::run(rest),
            "instantiate" => instantiate::run(rest),
            "call" => call::run(rest),
            "call-many" => call_many::run(rest),
            "front" => front::run(rest),
            "hello-server" => front::hello_server(),
        "sockets-broadcast" => sockets::broadcast(rest),
        "sockets-memory" => sockets::memory(rest),
        "isolation" => isolation::run(rest),
        "fairness" => fairness::run(rest),
        "memory-burst" => memory_burst::run(rest),
        "cluster-call" => cluster_call::call(rest),
        "cluster-call-many" => cluster_call::call_many(rest),
        "cluster-broadcast" => cluster_broadcast::run(rest),
        "tracing-cost" => tracing_cost::run(rest),
        "languages" => languages::run(rest),
        "shared-node" => shared_node::run(rest),
            _ => Err("usage: wasmkeep-loadtest http-events|wake|instantiate|call|call-many|front|sockets-broadcast|sockets-memory|isolation|fairness|memory-burst|cluster-call|cluster-call-many|cluster-broadcast|tracing-cost|languages|shared-node [--flag value]..."
                .to_string()),
        };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasmkeep-loadtest: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--name value` from `args`, parsed, or `default`.
pub fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .ok_or_else(|| format!("{name} needs a value"))?
            .parse()
            .map_err(|_| format!("{name}: not a valid value")),
    }
}
