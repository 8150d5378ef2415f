//! Whose guest a store holds: its tenant, its weight against the other
//! tenants of the node, and its own memory limit. The CPU gate gives turns
//! by it (`cpu`), the memory budget charges by it (`memory`).

use std::sync::Arc;

/// While several tenants' guests wait for CPU turns or hold memory, they
/// share by weight (a tenant of weight 3 gets three turns to another's
/// one, and three times the memory); each tenant's guests in arrival
/// order.
#[derive(Debug, Clone)]
pub struct GuestShare {
    pub tenant: Arc<str>,
    pub weight: u32,
    /// The guest's linear memory limit, when its plan lowers the node's.
    pub memory_bytes: Option<u64>,
}

impl GuestShare {
    /// The node's own guests (no tenant): one weight among the tenants'
    /// at the CPU gate, and the memory budget alone (no share of it).
    pub fn is_node(&self) -> bool {
        self.tenant.is_empty()
    }
}

impl Default for GuestShare {
    fn default() -> Self {
        Self { tenant: Arc::from(""), weight: 1, memory_bytes: None }
    }
}
