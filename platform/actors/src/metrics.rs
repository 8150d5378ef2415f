//! What the actor runtime reports at scrape time: the node's counters and
//! the events queued per actor class.

use std::collections::BTreeMap;

use wasmkeep_telemetry::{Exposition, Source};

use crate::Node;

impl Source for Node {
    fn collect(&self, out: &mut Exposition) {
        self.0.metrics.collect(out);
        self.0.logs.collect(out);
        // Only classes of an active version are reported: a client naming
        // classes that do not exist cannot grow the exposition.
        let mut depth: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        for (key, queued) in self.0.mailboxes.queued() {
            let Some(app) = self.0.app(key.app) else { continue };
            if app.active().is_some_and(|v| v.class(&key.address.class).is_some()) {
                let r = &app.reference;
                *depth.entry((r.tenant.to_string(), r.name.to_string(), key.address.class.clone())).or_default() +=
                    queued as u64;
            }
        }
        out.family("wasmkeep_actor_queue_depth", "Events queued for actors of a class, not yet running.", "gauge");
        for ((tenant, app, class), n) in depth {
            out.sample(
                "wasmkeep_actor_queue_depth",
                &[("tenant", &tenant), ("app", &app), ("class", &class)],
                n as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_quota_family_names_every_quota() {
        let labels: Vec<_> = wasmkeep_core::quota::Quota::ALL.iter().map(|q| q.label()).collect();
        assert_eq!(labels, wasmkeep_telemetry::QUOTAS);
    }
}
