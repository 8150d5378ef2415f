//! Guests share the node's cores with its I/O (accepts, sockets, the
//! store) and with each other. At every epoch tick a running guest yields
//! to the scheduler, behind the I/O that is ready; a guest still computing
//! after [`BUSY_AFTER_TICKS`] ticks of one event is CPU-bound, and from
//! then on runs only while it holds a turn of the node's CPU gate: a few
//! turns (one fewer than the cores, by default), taken in arrival order,
//! one tick each. So CPU-bound guests, however many, use at most the gate's
//! cores, and a short event or the node's I/O never waits behind them for
//! more than a tick. The wall still cuts each at its end.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::UpdateDeadline;

/// Ticks of one event a guest may compute through before it is CPU-bound.
pub const BUSY_AFTER_TICKS: u32 = 2;

/// The node's turns for CPU-bound guests.
#[derive(Clone)]
pub struct CpuGate(Arc<Semaphore>);

impl CpuGate {
    pub fn new(turns: usize) -> Self {
        Self(Arc::new(Semaphore::new(turns.max(1))))
    }

    /// Turns free now.
    pub fn free(&self) -> usize {
        self.0.available_permits()
    }
}

/// One guest's standing: ticks it computed through in this event, and the
/// turn it holds, if it holds one.
pub(crate) struct CpuTurn {
    gate: CpuGate,
    ticks: u32,
    held: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
}

impl CpuTurn {
    pub(crate) fn new(gate: CpuGate) -> Self {
        Self { gate, ticks: 0, held: Arc::default() }
    }

    /// An event begins or ends: the guest is not CPU-bound, and holds no
    /// turn, between events.
    pub(crate) fn reset(&mut self) {
        self.ticks = 0;
        self.held.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// At a tick: yield behind the ready I/O, and once CPU-bound, give
    /// the turn back and wait for the next one.
    pub(crate) fn tick(&mut self) -> UpdateDeadline {
        self.ticks = self.ticks.saturating_add(1);
        if self.ticks < BUSY_AFTER_TICKS {
            return UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()));
        }
        let held = self.held.clone();
        held.lock().unwrap_or_else(|p| p.into_inner()).take();
        let gate = self.gate.0.clone();
        UpdateDeadline::YieldCustom(
            1,
            Box::pin(async move {
                tokio::task::yield_now().await;
                if let Ok(turn) = gate.acquire_owned().await {
                    *held.lock().unwrap_or_else(|p| p.into_inner()) = Some(turn);
                }
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_busy_guest_takes_turns_and_gives_them_back() {
        let gate = CpuGate::new(1);
        let mut a = CpuTurn::new(gate.clone());
        let mut b = CpuTurn::new(gate.clone());
        // The first tick only yields.
        let UpdateDeadline::YieldCustom(1, f) = a.tick() else { panic!() };
        f.await;
        assert_eq!(gate.free(), 1);
        // Then it takes a turn, and holds it until its next tick.
        let UpdateDeadline::YieldCustom(1, f) = a.tick() else { panic!() };
        f.await;
        assert_eq!(gate.free(), 0);
        b.tick();
        let UpdateDeadline::YieldCustom(1, waits) = b.tick() else { panic!() };
        let waiting = tokio::spawn(waits);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "b waits while a holds the turn");
        // a's next tick gives the turn back; b gets it before a again.
        let UpdateDeadline::YieldCustom(1, a_next) = a.tick() else { panic!() };
        waiting.await.unwrap();
        assert_eq!(gate.free(), 0, "b holds it");
        let a_waits = tokio::spawn(a_next);
        tokio::task::yield_now().await;
        assert!(!a_waits.is_finished());
        // An event's end gives the turn back.
        b.reset();
        a_waits.await.unwrap();
        a.reset();
        assert_eq!(gate.free(), 1);
    }
}
