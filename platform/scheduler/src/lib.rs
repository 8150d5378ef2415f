//! Allocation of the node's pool instances, the front's bounds and the
//! compile threads.
//!
//! The wasmtime pool has a fixed number of instance slots; an actor holds
//! one while it is resident. [`InstancePool`] hands them out so that
//! instantiation never meets a full pool: an event that finds none free
//! waits up to the admission wait, then is refused (capacity `503`).

mod compiles;
mod front_waits;
mod idle;
mod rates;
mod shares;

use std::sync::Arc;
use std::time::Duration;

pub use compiles::{CompileOwner, Compiles, CompilesFull};
pub use front_waits::{FrontBusy, FrontWait, FrontWaits};
pub use idle::IdleActors;
pub use rates::{Rates, TenantRates};
pub use shares::{Share, ShareTicket};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Instances of the pool set aside for one use: the ones actors may hold
/// (the pool less the front's slots), or the front's slots.
#[derive(Clone)]
pub struct InstancePool {
    slots: Arc<Semaphore>,
    size: usize,
}

/// One pool instance, held by a resident actor (dropped when it
/// hibernates) or by a front request (dropped when its instance ends).
#[derive(Debug)]
pub struct InstanceLease {
    _permit: OwnedSemaphorePermit,
}

impl InstancePool {
    pub fn new(size: usize) -> Self {
        Self { slots: Arc::new(Semaphore::new(size)), size }
    }

    /// An instance, waiting at most `wait` for one to be free.
    pub async fn lease(&self, wait: Duration) -> Option<InstanceLease> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Some(InstanceLease { _permit: permit });
        }
        match tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(InstanceLease { _permit: permit }),
            _ => None,
        }
    }

    /// An instance if one is free now.
    pub fn try_lease(&self) -> Option<InstanceLease> {
        self.slots.clone().try_acquire_owned().ok().map(|permit| InstanceLease { _permit: permit })
    }

    /// Instances leased now.
    pub fn in_use(&self) -> usize {
        self.size - self.slots.available_permits()
    }

    pub fn size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_for_a_free_instance_then_gives_up() {
        let pool = InstancePool::new(1);
        let first = pool.lease(Duration::ZERO).await.expect("a free instance");
        assert_eq!(pool.in_use(), 1);
        let start = tokio::time::Instant::now();
        assert!(pool.lease(Duration::from_secs(5)).await.is_none());
        assert_eq!(start.elapsed(), Duration::from_secs(5));

        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.lease(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(first);
        assert!(waiter.await.unwrap().is_some());
        assert_eq!(pool.in_use(), 0);
    }
}
