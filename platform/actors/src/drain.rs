//! Draining (docs/spec/cluster.md §9): a node leaving the cluster on
//! purpose takes no new actors (admission sends their events to their
//! owner, or to a node that takes actors), closes its sockets with 1012 so
//! their clients reconnect to another node (each actor hears its sockets
//! close), lets every awake actor finish what is queued and hibernate, and
//! releases each actor it owned, so another node takes it at once instead
//! of after the failover wait.

use std::time::{Duration, Instant};

use wasmkeep_core::placement::{Note, holding};
use wasmkeep_core::{ActorKey, MailboxKey, close};
use wasmkeep_storage::Epoch;

use crate::{Node, NodeInner};

/// How many owned actors are read from the store at a time.
const PAGE: usize = 1000;

impl NodeInner {
    pub(crate) fn is_draining(&self) -> bool {
        self.draining.borrow().is_some()
    }

    /// Whether an event that arrived at `arrived` came after the drain
    /// began: its actor is given up first, and it goes to the next owner.
    pub(crate) fn arrived_draining(&self, arrived: Instant) -> bool {
        holding::gives_up(arrived, *self.draining.borrow())
    }

    /// Completes once the node drains.
    pub(crate) async fn draining_started(&self) {
        let mut draining = self.draining.subscribe();
        let _ = draining.wait_for(Option::is_some).await;
    }

    /// Gives `actor` up in the store (a draining node, after it hibernated).
    pub(crate) async fn release(&self, actor: &ActorKey, epoch: Epoch) {
        match self.store.release(actor, epoch).await {
            Ok(true) => self.router.note(&MailboxKey::of(actor), Note::Forget),
            Ok(false) => tracing::debug!(%actor, "another node took the actor before its release"),
            Err(e) => tracing::warn!(%actor, "the actor could not be released: {e}"),
        }
    }
}

impl Node {
    async fn close_sockets_for_drain(&self) {
        let node = &self.0;
        let going = close::DRAINING;
        for conn in node.sockets.all() {
            let opened = node.sockets.get(conn).map(|(_, owner)| owner.envelope);
            node.sockets.force_close(conn, going.code, going.reason);
            if let Some(opened) = opened {
                node.tell_closed(opened, conn, going.code, going.reason.into()).await;
            }
        }
    }

    /// Whether the node is draining.
    pub fn is_draining(&self) -> bool {
        self.0.is_draining()
    }

    /// Drains the node: answers once every awake actor hibernated (or
    /// `grace` passed) and every actor it owned was released. Events keep
    /// arriving meanwhile: they go to their actors' new owners.
    pub async fn drain(&self, grace: Duration) {
        let node = &self.0;
        // The close events are queued before the drain begins: each actor
        // runs what was queued before it, then hibernates. (Sockets opened
        // meanwhile close after; their actors may have moved already.)
        self.close_sockets_for_drain().await;
        node.draining.send_replace(Some(Instant::now()));
        self.close_sockets_for_drain().await;
        let ends = Instant::now() + grace;
        while node.mailboxes.len() > 0 && Instant::now() < ends {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if node.mailboxes.len() > 0 {
            tracing::warn!(awake = node.mailboxes.len(), "actors still awake at the end of the drain");
        }
        // Hibernated earlier: their kept epochs, released.
        let mut after: Option<ActorKey> = None;
        loop {
            let page = match node.store.owned_by(&node.id, after.as_ref(), PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!("the actors this node owns could not be read: {e}");
                    break;
                }
            };
            for actor in &page {
                if let Some((epoch, _)) = node.owned.take(&MailboxKey::of(actor)) {
                    node.release(actor, epoch).await;
                }
            }
            if page.len() < PAGE {
                break;
            }
            after = page.last().cloned();
        }
    }
}
