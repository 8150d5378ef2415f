//! The node's metrics, in the Prometheus text format, and the listener
//! that serves them (`/metrics`, `/healthz`, `/readyz`); and its traces
//! (`traces`: the request path's spans over OTLP); and guests' logs
//! (`logs`: their lines as records, kept and tailed; `log_export`: as
//! OTLP logs).
//!
//! Metrics are `prometheus-client` families, encoded in the Prometheus
//! text format. Their labels are closed sets of values (the enums of
//! `wasmkeep_core::metric_labels`, so a value outside its family does not
//! compile) or the node's own tenants, apps and classes, never a name a
//! client chooses, so a client can never grow the exposition. Gauges that describe the node's state
//! now (queue depths, resident actors) are read at scrape time from a
//! [`Source`].

mod exposition;
pub mod log_export;
pub mod logs;
mod metrics;
pub mod otlp;
mod server;
pub mod tenant_export;
pub mod traces;

pub use exposition::{CONTENT_TYPE, Exposition, Labels};
pub use metrics::{AppMetrics, CounterFamily, Metrics, SecondsFamily, TenantCounters};
pub use server::{Readiness, always_ready, serve};

/// Something that writes metrics at scrape time.
pub trait Source: Send + Sync {
    fn collect(&self, out: &mut Exposition);
}

/// Renders every source, in order, as one exposition.
pub fn render(sources: &[&dyn Source]) -> String {
    let mut out = Exposition::default();
    for source in sources {
        source.collect(&mut out);
    }
    out.finish()
}
