//! The node's configuration: `policies/limits.toml` (built in), then
//! `--limits FILE`, then `WASMKEEP_LIMITS__<NAME>` environment variables;
//! and the metrics listener both `dev` and `serve` start from it.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use wasmkeep_core::Limits;

/// The default limits as the policy file states them.
const POLICY: &str = include_str!("../../../policies/limits.toml");

/// The limits in force, checked.
pub fn limits(file: Option<&Path>) -> Result<Limits, String> {
    let mut figment = Figment::from(Serialized::defaults(Limits::default())).merge(Toml::string(POLICY));
    if let Some(file) = file {
        if !file.is_file() {
            return Err(format!("{}: no such limits file", file.display()));
        }
        figment = figment.merge(Toml::file(file));
    }
    let limits: Limits = figment
        .merge(Env::prefixed("WASMKEEP_LIMITS__"))
        .extract()
        .map_err(|e| format!("limits: {}", one_line(&e.to_string())))?;
    limits.validate().map_err(|e| e.to_string())?;
    Ok(limits)
}

/// Serves the node's `/metrics`, `/healthz` and `/readyz` on `addr`, and
/// says where.
pub async fn serve_metrics(
    node: &wasmkeep_actors::Node,
    more: Vec<std::sync::Arc<dyn wasmkeep_telemetry::Source>>,
    addr: std::net::SocketAddr,
    ready: wasmkeep_telemetry::Readiness,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("wasmkeep: metrics on http://{addr}/metrics");
    let mut sources: Vec<std::sync::Arc<dyn wasmkeep_telemetry::Source>> = vec![std::sync::Arc::new(node.clone())];
    sources.extend(more);
    let limits = node.limits().clone();
    tokio::spawn(
        async move { wasmkeep_telemetry::serve(listener, &limits, sources, ready, std::future::pending()).await },
    );
    Ok(())
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_file_states_the_defaults() {
        // The file is complete: every limit is in it, equal to the code's.
        let parsed: Limits = toml::from_str(POLICY).unwrap();
        assert_eq!(parsed, Limits::default());
        let table: toml::Table = toml::from_str(POLICY).unwrap();
        let fields = toml::Table::try_from(Limits::default()).unwrap();
        assert_eq!(table.keys().collect::<Vec<_>>(), fields.keys().collect::<Vec<_>>());
    }

    #[test]
    fn the_ops_example_loads() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/limits.example.toml");
        let l = limits(Some(&file)).unwrap();
        assert_eq!((l.idle_secs, l.pool_instances), (2.0, 4000));
        assert_eq!(l.queue_per_actor, Limits::default().queue_per_actor);
    }
}
