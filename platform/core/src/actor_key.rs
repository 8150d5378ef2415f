//! Which actor, of which app.

use std::fmt;

use crate::names::{Address, RawAddress};

/// An app's id in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(pub i64);

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One actor of one app: the key of its mailbox, its ownership record and
/// its storage namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorKey {
    pub app: AppId,
    pub address: Address,
}

impl fmt::Display for ActorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "app {} {}", self.app, self.address)
    }
}

/// A mailbox's key: the app and the address as the caller gave it.
/// Admission validates the address, in its own order, for every event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MailboxKey {
    pub app: AppId,
    pub address: RawAddress,
}

impl MailboxKey {
    /// The mailbox of an actor whose address is validated.
    pub fn of(actor: &ActorKey) -> Self {
        Self { app: actor.app, address: RawAddress::from(&actor.address) }
    }
}
