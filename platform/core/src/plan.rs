//! A tenant's plan: its quotas, its weight against other tenants on a
//! shared node, and the node limits it lowers. Plans are TOML files in
//! `policies/plans/`; this module is their meaning, pure.

use serde::{Deserialize, Serialize};

use crate::Limits;

/// One plan, as its file states it. Every quota is required: a plan file
/// says what its tenants get, not what a default happens to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The tenant's share of a node's pool instances, front slots, sockets
    /// and guest CPU, against the weights of the other tenants there.
    pub weight: u32,
    /// Apps the tenant may have.
    pub apps: u32,
    /// Versions kept per app; the oldest inactive ones go past it.
    pub versions_kept: u32,
    /// Bytes of one upload (a version's bundle).
    pub upload_bytes: u64,
    /// Requests per second to all the tenant's apps, and the burst over it.
    pub requests_per_second: u32,
    pub request_burst: u32,
    /// Events per second to one actor.
    pub events_per_second_per_actor: u32,
    /// Actors of the tenant resident on one node at once.
    pub resident_actors: u32,
    /// Actors the tenant's apps may create per second.
    pub actor_creations_per_second: u32,
    /// Actors the tenant keeps, across all its apps: created and not yet
    /// deleted (a deleted actor gives its place back at once).
    pub actors: u64,
    /// Open sockets of the tenant on one node.
    pub sockets: u32,
    /// Stored bytes (keys and values) of one actor, and of all the tenant's.
    pub storage_bytes_per_actor: u64,
    pub storage_bytes: u64,
    /// Outbound requests per second of the tenant's guests.
    pub egress_requests_per_second: u32,
    /// Hosts the tenant's guests may reach (`*.example.com` for a
    /// domain's subdomains); absent: any public host.
    #[serde(default)]
    pub allowed_hosts: Option<Vec<String>>,
    /// Node limits this plan lowers.
    #[serde(default)]
    pub limits: PlanLimits,
}

/// The node limits a plan may lower. A value above the node's is the
/// node's: a plan never raises a limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanLimits {
    pub wall_per_event_secs: Option<f64>,
    pub front_wall_secs: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub body_bytes: Option<u64>,
    pub socket_message_bytes: Option<u64>,
    pub storage_value_bytes: Option<u64>,
}

impl Plan {
    /// The limits an event of this plan's tenant runs under on a node
    /// whose own limits are `node`.
    pub fn limits(&self, node: &Limits) -> Limits {
        let l = &self.limits;
        let lower_f = |plan: Option<f64>, node: f64| plan.map_or(node, |p| p.min(node));
        let lower = |plan: Option<u64>, node: u64| plan.map_or(node, |p| p.min(node));
        // A node bound of 0 is none.
        let lower_bound = |plan: u64, node: u64| if node == 0 { plan } else { plan.min(node) };
        Limits {
            wall_per_event_secs: lower_f(l.wall_per_event_secs, node.wall_per_event_secs),
            front_wall_secs: lower_f(l.front_wall_secs, node.front_wall_secs),
            memory_bytes: lower(l.memory_bytes, node.memory_bytes),
            body_bytes: lower(l.body_bytes, node.body_bytes),
            socket_message_bytes: lower(l.socket_message_bytes, node.socket_message_bytes),
            storage_value_bytes: lower(l.storage_value_bytes, node.storage_value_bytes),
            storage_actor_bytes: lower_bound(self.storage_bytes_per_actor, node.storage_actor_bytes),
            storage_tenant_bytes: lower_bound(self.storage_bytes, node.storage_tenant_bytes),
            ..node.clone()
        }
    }

    /// Checks what the file cannot say by its types.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("weight", self.weight as u64),
            ("apps", self.apps as u64),
            ("versions_kept", self.versions_kept as u64),
            ("upload_bytes", self.upload_bytes),
            ("requests_per_second", self.requests_per_second as u64),
            ("request_burst", self.request_burst as u64),
            ("events_per_second_per_actor", self.events_per_second_per_actor as u64),
            ("resident_actors", self.resident_actors as u64),
            ("actor_creations_per_second", self.actor_creations_per_second as u64),
            ("actors", self.actors),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        if let Some(bad) = self.allowed_hosts.iter().flatten().find(|h| crate::egress::HostPattern::parse(h).is_none())
        {
            return Err(format!("allowed_hosts: `{bad}` is not a host name or `*.domain`"));
        }
        let l = &self.limits;
        for (name, v) in [("wall_per_event_secs", l.wall_per_event_secs), ("front_wall_secs", l.front_wall_secs)] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(format!("limits.{name} must be a positive number of seconds"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            weight: 1,
            apps: 3,
            versions_kept: 10,
            upload_bytes: 1 << 20,
            requests_per_second: 10,
            request_burst: 20,
            events_per_second_per_actor: 5,
            resident_actors: 100,
            actor_creations_per_second: 10,
            actors: 1000,
            sockets: 100,
            storage_bytes_per_actor: 1 << 20,
            storage_bytes: 1 << 30,
            egress_requests_per_second: 5,
            allowed_hosts: None,
            limits: PlanLimits::default(),
        }
    }

    #[test]
    fn a_plan_lowers_limits_and_never_raises_them() {
        let node = Limits::default();
        let l = plan().limits(&node);
        assert_eq!((l.storage_actor_bytes, l.storage_tenant_bytes), (1 << 20, 1 << 30));
        assert_eq!(Limits { storage_actor_bytes: 0, storage_tenant_bytes: 0, ..l }, node);
        let bounded = Limits { storage_actor_bytes: 1000, storage_tenant_bytes: 1 << 40, ..node.clone() };
        let l = plan().limits(&bounded);
        assert_eq!((l.storage_actor_bytes, l.storage_tenant_bytes), (1000, 1 << 30));
        let mut p = plan();
        p.limits = PlanLimits {
            wall_per_event_secs: Some(5.0),
            front_wall_secs: Some(1e9),
            memory_bytes: Some(1 << 20),
            body_bytes: Some(u64::MAX),
            socket_message_bytes: Some(1024),
            storage_value_bytes: Some(10),
        };
        let l = p.limits(&node);
        assert_eq!(l.wall_per_event_secs, 5.0);
        assert_eq!(l.front_wall_secs, node.front_wall_secs);
        assert_eq!(l.memory_bytes, 1 << 20);
        assert_eq!(l.body_bytes, node.body_bytes);
        assert_eq!((l.socket_message_bytes, l.storage_value_bytes), (1024, 10));
        assert_eq!(l.pool_instances, node.pool_instances);
        l.validate().unwrap();
    }

    #[test]
    fn validation_names_the_field() {
        plan().validate().unwrap();
        let mut p = plan();
        p.apps = 0;
        assert_eq!(p.validate().unwrap_err(), "apps must be at least 1");
        let mut p = plan();
        p.actors = 0;
        assert_eq!(p.validate().unwrap_err(), "actors must be at least 1");
        let mut p = plan();
        p.allowed_hosts = Some(vec!["api.example.com".into(), "*.example.org".into(), "http://x".into()]);
        assert_eq!(p.validate().unwrap_err(), "allowed_hosts: `http://x` is not a host name or `*.domain`");
        let mut p = plan();
        p.limits.wall_per_event_secs = Some(f64::NAN);
        assert!(p.validate().unwrap_err().starts_with("limits.wall_per_event_secs"));
    }

    #[test]
    fn the_plan_files_load() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/plans");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let plan: Plan = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            plan.validate().unwrap();
            names.push(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
        names.sort();
        assert_eq!(names, ["free", "pro"]);
    }
}
