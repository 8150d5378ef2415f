//! What the actor runtime reports at scrape time: the node's counters and
//! histograms, its guests' dropped log lines, and its state now: events
//! queued per actor class, resident actors and open sockets per app, the
//! pool's and the front slots' use.

use std::collections::BTreeMap;

use wasmkeep_core::AppId;
use wasmkeep_telemetry::{Exposition, Labels, Source};

use crate::Node;

impl Source for Node {
    fn collect(&self, out: &mut Exposition) {
        self.0.metrics.collect(out);
        self.0.logs.collect(out);
        // Only apps (and classes of an active version) the node holds are
        // reported: a client naming ones that do not exist cannot grow the
        // exposition.
        let names =
            |id: AppId| self.0.app(id).map(|app| (app.reference.tenant.to_string(), app.reference.name.to_string()));
        let mut depth: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        let mut resident: BTreeMap<(String, String), u64> = BTreeMap::new();
        for (key, queued) in self.0.mailboxes.queued() {
            let Some(app) = self.0.app(key.app) else { continue };
            let r = &app.reference;
            *resident.entry((r.tenant.to_string(), r.name.to_string())).or_default() += 1;
            if app.active().is_some_and(|v| v.class(&key.address.class).is_some()) {
                *depth.entry((r.tenant.to_string(), r.name.to_string(), key.address.class.clone())).or_default() +=
                    queued as u64;
            }
        }
        let mut sockets: BTreeMap<AppId, u64> = BTreeMap::new();
        for conn in self.0.sockets.all() {
            if let Some((key, _)) = self.0.sockets.get(conn) {
                *sockets.entry(key.app).or_default() += 1;
            }
        }
        let app_labels = |(tenant, app): (String, String)| -> Labels { vec![("tenant", tenant), ("app", app)] };
        out.gauge(
            "wasmkeep_actor_queue_depth",
            "Events queued for actors of a class, not yet running.",
            depth
                .into_iter()
                .map(|((tenant, app, class), n)| (vec![("tenant", tenant), ("app", app), ("class", class)], n)),
        );
        out.gauge(
            "wasmkeep_resident_actors",
            "Actors with a task on this node (resident, or about to hibernate), by tenant and app.",
            resident.into_iter().map(|(k, n)| (app_labels(k), n)),
        );
        let memory = self.0.runtime.memory();
        out.gauge(
            "wasmkeep_guest_memory_bytes",
            "Linear memory the guests of a tenant hold on this node, charged against the guests' budget.",
            memory.held_by_tenants().into_iter().map(|(tenant, n)| (vec![("tenant", tenant.to_string())], n)),
        );
        out.gauge(
            "wasmkeep_guest_memory_budget_bytes",
            "What all guests of this node may hold together (guest_memory_bytes less what the front slots keep mapped between requests); tenants share it by weight.",
            [(Labels::new(), memory.budget())],
        );
        let (fronts, actors) = self.0.runtime.memory_kept();
        out.gauge(
            "wasmkeep_pool_kept_bytes",
            "Memory the pools keep mapped in slots no instance is in, for the next instance there: the front slots' is reserved out of the guests' budget (front_memory_kept_bytes a memory).",
            [(vec![("pool", "fronts".to_owned())], fronts), (vec![("pool", "actors".to_owned())], actors)],
        );
        out.gauge(
            "wasmkeep_open_sockets",
            "WebSockets open on this node's actors, by tenant and app.",
            sockets.into_iter().filter_map(|(id, n)| Some((app_labels(names(id)?), n))),
        );
        // Each app's stored bytes and outbound traffic, for the apps this
        // node holds (a cluster's nodes all report the store's figure for
        // storage: aggregate it with max, not sum).
        let apps = self.0.apps.read().unwrap_or_else(|p| p.into_inner()).all();
        let per_app = |value: &dyn Fn(&crate::App) -> Option<u64>| -> Vec<(Labels, u64)> {
            let mut rows: Vec<(Labels, u64)> = apps
                .iter()
                .filter_map(|app| {
                    let r = &app.reference;
                    Some((app_labels((r.tenant.to_string(), r.name.to_string())), value(app)?))
                })
                .collect();
            rows.sort();
            rows
        };
        out.gauge(
            "wasmkeep_storage_bytes",
            "Bytes of keys and values an app's actors store, as the store last counted them (within seconds of a commit on this node), by tenant and app.",
            per_app(&|app| app.stored.get()),
        );
        out.counter(
            "wasmkeep_egress_requests_total",
            "Outbound HTTP requests of an app's guests, by tenant and app.",
            per_app(&|app| Some(app.egress_counts.totals().0)),
        );
        out.counter(
            "wasmkeep_egress_bytes_total",
            "Bytes of the answers' bodies to an app's guests' outbound requests, by tenant and app.",
            per_app(&|app| Some(app.egress_counts.totals().1)),
        );
        let pool = &self.0.pool;
        let slots = &self.0.front_slots;
        out.gauge(
            "wasmkeep_pool_instances",
            "The pool's actor instances: in use, and its size.",
            [
                (vec![("state", "in_use".to_owned())], pool.in_use() as u64),
                (vec![("state", "size".to_owned())], pool.size() as u64),
            ],
        );
        out.gauge(
            "wasmkeep_front_slots",
            "Front slots: in use, and how many there are.",
            [
                (vec![("state", "in_use".to_owned())], slots.in_use() as u64),
                (vec![("state", "size".to_owned())], slots.size() as u64),
            ],
        );
    }
}
