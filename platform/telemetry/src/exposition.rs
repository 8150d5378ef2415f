//! One scrape's exposition: the families of every source registered in a
//! `prometheus-client` registry made for the scrape, encoded in the
//! Prometheus text format (version 0.0.4). Long-lived families (counters,
//! histograms) are registered by handle, sharing their values; gauges that
//! describe the node now are read at scrape time into families of their
//! own.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

/// A sample's labels: names fixed by the family, values from a closed set
/// or the node's own tenants, apps and classes (never an actor's name).
pub type Labels = Vec<(&'static str, String)>;

/// The content type of what [`Exposition::finish`] writes.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// An exposition being written.
#[derive(Default)]
pub struct Exposition {
    registry: Registry,
}

/// `prometheus-client` ends each help with a full stop of its own.
fn help(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

impl Exposition {
    /// Adds a family; a counter's name is given with its `_total`.
    pub fn register(&mut self, name: &str, help_text: &str, metric: impl Metric) {
        self.registry.register(name.strip_suffix("_total").unwrap_or(name), help(help_text), metric);
    }

    /// A gauge family of counts read now: one sample per label set.
    pub fn gauge(&mut self, name: &str, help_text: &str, samples: impl IntoIterator<Item = (Labels, u64)>) {
        let family = Family::<Labels, Gauge>::default();
        for (labels, value) in samples {
            family.get_or_create(&labels).set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        self.registry.register(name, help(help_text), family);
    }

    /// A gauge family of measures (seconds, ratios) read now.
    pub fn gauge_f64(&mut self, name: &str, help_text: &str, samples: impl IntoIterator<Item = (Labels, f64)>) {
        let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (labels, value) in samples {
            family.get_or_create(&labels).set(value);
        }
        self.registry.register(name, help(help_text), family);
    }

    /// A counter family whose counts are kept elsewhere, read now; its
    /// name is given with its `_total`.
    pub fn counter(&mut self, name: &str, help_text: &str, samples: impl IntoIterator<Item = (Labels, u64)>) {
        let family = Family::<Labels, prometheus_client::metrics::counter::Counter>::default();
        for (labels, value) in samples {
            family.get_or_create(&labels).inc_by(value);
        }
        self.register(name, help_text, family);
    }

    pub fn finish(self) -> String {
        let mut text = String::new();
        // Writing to a String does not fail.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::default();
        e.gauge_f64("x", "an \"x\".", [(vec![("a", "q\"b\\c\nd".to_owned()), ("b", "2".to_owned())], 1.5)]);
        let text = e.finish();
        assert!(text.contains("# HELP x an \"x\".\n# TYPE x gauge\n"), "{text}");
        assert!(text.contains("x{a=\"q\\\"b\\\\c\\nd\",b=\"2\"} 1.5\n"), "{text}");
    }
}
