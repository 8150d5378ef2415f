//! The envelope: who (the tenant and app), for which actor, from where (the
//! origin), until when (the deadline) and in which trace. It is built once
//! at each entry (the public port, a call, a call-many entry, a socket
//! event, a hand-off) and passed down; nothing below re-derives any of it.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::actor_key::{AppId, MailboxKey};
use crate::caller::Origin;
use crate::names::{AppName, RawAddress, TenantId};

/// An app of a tenant, as the node knows it: built once per app and
/// shared by every envelope of its events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AppRef {
    pub id: AppId,
    pub tenant: TenantId,
    pub name: AppName,
}

impl fmt::Display for AppRef {
    /// `tenant/app`, as logs and the head name it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.name)
    }
}

/// The W3C trace context a request came with, carried as it is until the
/// node starts its own spans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// A valid `traceparent`, if the request had one.
    pub parent: Option<String>,
    /// Its `tracestate`, only with a parent.
    pub state: Option<String>,
}

/// One event's envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub app: Arc<AppRef>,
    /// The actor, as the caller named it: admission validates it, in its
    /// order, where the actor lives.
    pub target: RawAddress,
    pub origin: Origin,
    /// When the caller stops waiting: an event not started by then never
    /// starts.
    pub deadline: Instant,
    pub trace: TraceContext,
}

impl Envelope {
    pub fn tenant(&self) -> &TenantId {
        &self.app.tenant
    }

    /// Whether the caller has stopped waiting at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// The mailbox the event goes to.
    pub fn mailbox(&self) -> MailboxKey {
        MailboxKey { app: self.app.id, address: self.target.clone() }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::caller::Origin;

    #[test]
    fn an_envelope_expires_at_its_deadline() {
        let t0 = Instant::now();
        let app = Arc::new(AppRef {
            id: AppId(7),
            tenant: TenantId::parse("acme").unwrap(),
            name: AppName::parse("shop").unwrap(),
        });
        let target = RawAddress::split("cart/u1").unwrap();
        let env = Envelope {
            app,
            target: target.clone(),
            origin: Origin::Outside,
            deadline: t0 + Duration::from_secs(1),
            trace: TraceContext::default(),
        };
        assert!(!env.expired(t0));
        assert!(!env.expired(t0 + Duration::from_millis(999)));
        assert!(env.expired(t0 + Duration::from_secs(1)));
        assert_eq!(env.tenant().as_str(), "acme");
        assert_eq!(env.app.to_string(), "acme/shop");
        assert_eq!(env.mailbox(), MailboxKey { app: AppId(7), address: target });
    }
}
