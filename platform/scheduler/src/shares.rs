//! A bound on what one tenant holds at once on the node (resident
//! actors, sockets): tickets taken without waiting, given back on drop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// One tenant's bound on one kind of thing it holds.
#[derive(Debug, Clone)]
pub struct Share {
    held: Arc<AtomicU32>,
    cap: Arc<AtomicU32>,
}

/// One held thing; dropping it gives it back.
#[derive(Debug)]
pub struct ShareTicket {
    held: Arc<AtomicU32>,
}

impl Share {
    pub fn new(cap: u32) -> Self {
        Self { held: Arc::new(AtomicU32::new(0)), cap: Arc::new(AtomicU32::new(cap)) }
    }

    /// A ticket, unless the tenant holds its cap already.
    pub fn take(&self) -> Option<ShareTicket> {
        let cap = self.cap.load(Ordering::Relaxed);
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| (held < cap).then_some(held + 1))
            .ok()
            .map(|_| ShareTicket { held: self.held.clone() })
    }

    /// A new cap (a plan changed); what is held above it stays until let go.
    pub fn set_cap(&self, cap: u32) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    pub fn held(&self) -> u32 {
        self.held.load(Ordering::Relaxed)
    }
}

impl Drop for ShareTicket {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_up_to_the_cap_and_back_on_drop() {
        let share = Share::new(2);
        let a = share.take().unwrap();
        let _b = share.take().unwrap();
        assert!(share.take().is_none());
        drop(a);
        let c = share.take().unwrap();
        share.set_cap(1);
        assert!(share.take().is_none());
        drop(c);
        assert_eq!(share.held(), 1);
        assert!(share.take().is_none());
    }
}
