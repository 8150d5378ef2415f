//! A tenant's share of the public port: its requests in flight and the body
//! bytes they buffer, each a weighted share (with room kept for a tenant
//! yet to come) of the node's bound. One tenant's flood of requests or slow
//! bodies is then refused as its own, and never waits ahead of another's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use wasmkeep_scheduler::ShareTicket;

use crate::NodeInner;
use crate::app::Tenant;

/// One request at the public port, held until it is answered (its body's
/// bytes until they are let go): its tenant's place among the tenant's
/// requests in flight. A node's own apps (no plan) hold nothing.
pub struct RequestPlace {
    held: Option<Held>,
}

struct Held {
    node: Arc<NodeInner>,
    tenant: Arc<Tenant>,
    _ticket: ShareTicket,
    /// The bytes of the tenant's body budget this request holds.
    body: AtomicU64,
}

impl RequestPlace {
    /// The place of a request of a node's own app.
    pub fn unshared() -> Self {
        Self { held: None }
    }

    /// A place among `tenant`'s requests, unless it holds its share of the
    /// node's `requests_in_flight`.
    pub(crate) fn take(node: &Arc<NodeInner>, tenant: Arc<Tenant>) -> Option<Self> {
        let room = {
            let apps = node.apps.read().unwrap_or_else(|p| p.into_inner());
            apps.room_of(&tenant, u64::from(node.limits.requests_in_flight), |t| t.requests.held() > 0)
        };
        if u64::from(tenant.requests.held()) >= room {
            return None;
        }
        let ticket = tenant.requests.take()?;
        Some(Self { held: Some(Held { node: node.clone(), tenant, _ticket: ticket, body: AtomicU64::new(0) }) })
    }

    /// Takes `bytes` more of the tenant's share of the node's `budget` of
    /// buffered body bytes; false when the tenant's bodies hold their share.
    pub fn take_body(&self, bytes: u64, budget: u64) -> bool {
        let Some(held) = &self.held else { return true };
        let room = {
            let apps = held.node.apps.read().unwrap_or_else(|p| p.into_inner());
            apps.room_of(&held.tenant, budget, |t| t.body_bytes.load(Ordering::Relaxed) > 0)
        };
        let taken = held
            .tenant
            .body_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(bytes).filter(|after| *after <= room)
            })
            .is_ok();
        if taken {
            held.body.fetch_add(bytes, Ordering::AcqRel);
        }
        taken
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.tenant.body_bytes.fetch_sub(*self.body.get_mut(), Ordering::AcqRel);
    }
}
