//! The node's metrics, in the Prometheus text format, and the listener
//! that serves them (`/metrics`, `/healthz`, `/readyz`); and its traces
//! (`traces`: the request path's spans over OTLP); and guests' logs
//! (`logs`: their lines as records, kept and tailed).
//!
//! Counters are fixed families with a closed set of label values, so a
//! client can never grow the exposition. Gauges that describe the node's
//! state now (queue depths) are read at scrape time from a [`Source`].

mod exposition;
pub mod logs;
mod server;
pub mod traces;

use std::sync::atomic::{AtomicU64, Ordering};

pub use exposition::Exposition;
pub use server::{Readiness, always_ready, serve};

/// A counter family with one label and a closed set of values.
pub struct CounterFamily {
    name: &'static str,
    help: &'static str,
    label: &'static str,
    values: &'static [&'static str],
    counts: Box<[AtomicU64]>,
}

impl CounterFamily {
    pub fn new(name: &'static str, help: &'static str, label: &'static str, values: &'static [&'static str]) -> Self {
        Self { name, help, label, values, counts: values.iter().map(|_| AtomicU64::new(0)).collect() }
    }

    /// Adds one to the counter labelled `value`, which must be one of the
    /// family's values.
    pub fn inc(&self, value: &str) {
        match self.values.iter().position(|v| *v == value) {
            Some(i) => {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
            }
            None => debug_assert!(false, "{} has no {}={value}", self.name, self.label),
        }
    }

    /// The count labelled `value` now.
    pub fn get(&self, value: &str) -> u64 {
        self.values.iter().position(|v| *v == value).map_or(0, |i| self.counts[i].load(Ordering::Relaxed))
    }

    fn write(&self, out: &mut Exposition) {
        out.family(self.name, self.help, "counter");
        for (value, count) in self.values.iter().zip(self.counts.iter()) {
            out.sample(self.name, &[(self.label, value)], count.load(Ordering::Relaxed) as f64);
        }
    }
}

/// A counter family per tenant and reason: the tenants are the node's
/// accounts (made by sign-up, bounded by the operator), the reasons a
/// closed set.
pub struct TenantCounters {
    name: &'static str,
    help: &'static str,
    label: &'static str,
    values: &'static [&'static str],
    counts: std::sync::Mutex<std::collections::BTreeMap<(String, usize), u64>>,
}

impl TenantCounters {
    pub fn new(name: &'static str, help: &'static str, label: &'static str, values: &'static [&'static str]) -> Self {
        Self { name, help, label, values, counts: Default::default() }
    }

    /// Adds one to `tenant`'s counter labelled `value`, one of the family's.
    pub fn inc(&self, tenant: &str, value: &str) {
        match self.values.iter().position(|v| *v == value) {
            Some(i) => {
                *self.counts.lock().unwrap_or_else(|p| p.into_inner()).entry((tenant.to_owned(), i)).or_default() += 1
            }
            None => debug_assert!(false, "{} has no {}={value}", self.name, self.label),
        }
    }

    pub fn get(&self, tenant: &str, value: &str) -> u64 {
        let Some(i) = self.values.iter().position(|v| *v == value) else { return 0 };
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).get(&(tenant.to_owned(), i)).copied().unwrap_or(0)
    }

    fn write(&self, out: &mut Exposition) {
        out.family(self.name, self.help, "counter");
        for ((tenant, i), count) in self.counts.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            out.sample(self.name, &[("tenant", tenant), (self.label, self.values[*i])], *count as f64);
        }
    }
}

/// The quotas of a plan, as `wasmkeep_quota_refusals_total` names them
/// (`core::quota::Quota::label`).
pub const QUOTAS: &[&str] = &[
    "requests_per_second",
    "events_per_second_per_actor",
    "actor_creations_per_second",
    "resident_actors",
    "sockets",
    "egress_requests_per_second",
    "storage_bytes_per_actor",
    "storage_bytes",
];

/// The outcomes of a front request.
pub const FRONT_REQUEST_OUTCOMES: &[&str] = &["ok", "guest_error", "busy", "timeout", "handoff", "no_front"];
/// The outcomes of a front's call (each entry of a batch is one).
pub const FRONT_CALL_OUTCOMES: &[&str] =
    &["ok", "invalid_address", "too_large", "timeout", "reentrant", "busy", "failed"];
/// Why admission refused an event (`deadline`: the caller had stopped
/// waiting before the event could start; it never started).
pub const REFUSAL_REASONS: &[&str] = &[
    "no_such_app",
    "suspended",
    "no_such_class",
    "invalid_name",
    "internal",
    "value_missing",
    "no_such_actor",
    "overloaded",
    "capacity",
    "deadline",
    "quota",
    "tenant_busy",
    "store_unavailable",
    "elsewhere",
];
/// What a node forwards to another node.
pub const FORWARD_KINDS: &[&str] = &["call", "request", "upgrade", "handoff"];
/// What a node sends on after another node said the actor is elsewhere.
pub const REROUTE_KINDS: &[&str] = &["call", "request"];

/// The node's counters.
pub struct Metrics {
    pub front_requests: CounterFamily,
    pub front_calls: CounterFamily,
    pub forwards: CounterFamily,
    pub reroutes: CounterFamily,
    pub refusals: CounterFamily,
    pub quota_refusals: TenantCounters,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            front_requests: CounterFamily::new(
                "wasmkeep_front_requests_total",
                "Requests served by apps' fronts, by outcome.",
                "outcome",
                FRONT_REQUEST_OUTCOMES,
            ),
            front_calls: CounterFamily::new(
                "wasmkeep_front_calls_total",
                "Calls made by fronts (each call-many entry counts), by outcome.",
                "outcome",
                FRONT_CALL_OUTCOMES,
            ),
            forwards: CounterFamily::new(
                "wasmkeep_forwards_total",
                "Calls, requests, upgrades and hand-offs forwarded to another node, by kind.",
                "kind",
                FORWARD_KINDS,
            ),
            reroutes: CounterFamily::new(
                "wasmkeep_reroutes_total",
                "Events sent on after the node they went to answered that another node owns the actor.",
                "kind",
                REROUTE_KINDS,
            ),
            refusals: CounterFamily::new(
                "wasmkeep_refusals_total",
                "Events admission refused, by reason.",
                "reason",
                REFUSAL_REASONS,
            ),
            quota_refusals: TenantCounters::new(
                "wasmkeep_quota_refusals_total",
                "Requests and events refused for a tenant's quota, by tenant and quota.",
                "quota",
                QUOTAS,
            ),
        }
    }
}

impl Source for Metrics {
    fn collect(&self, out: &mut Exposition) {
        self.front_requests.write(out);
        self.front_calls.write(out);
        self.forwards.write(out);
        self.reroutes.write(out);
        self.refusals.write(out);
        self.quota_refusals.write(out);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_value_is_present_from_the_start() {
        let m = Metrics::default();
        m.front_requests.inc("ok");
        m.front_requests.inc("ok");
        m.front_calls.inc("busy");
        let text = render(&[&m]);
        assert!(text.contains("# TYPE wasmkeep_front_requests_total counter\n"));
        assert!(text.contains("wasmkeep_front_requests_total{outcome=\"ok\"} 2\n"));
        assert!(text.contains("wasmkeep_front_requests_total{outcome=\"busy\"} 0\n"));
        assert!(text.contains("wasmkeep_front_calls_total{outcome=\"busy\"} 1\n"));
        assert!(text.contains("wasmkeep_forwards_total{kind=\"call\"} 0\n"));
        assert_eq!(m.front_requests.get("ok"), 2);
    }
}
