//! Guests share the node's cores with its I/O (accepts, sockets, the
//! store) and with each other. At every epoch tick a running guest yields
//! to the scheduler, behind the I/O that is ready; a guest still computing
//! after [`BUSY_AFTER_TICKS`] ticks of one event is CPU-bound, and from
//! then on starts each tick's slice only with a turn of the node's CPU
//! gate: a few turns (one fewer than the cores, by default), taken in
//! arrival order, each ended by the next tick. So CPU-bound guests, however many, use at most the gate's
//! cores, and a short event or the node's I/O never waits behind them for
//! more than a tick. The wall still cuts each at its end.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::UpdateDeadline;

/// Ticks of one event a guest may compute through before it is CPU-bound.
pub(crate) const BUSY_AFTER_TICKS: u32 = 2;

/// The node's turns for CPU-bound guests. A turn lasts until the next
/// tick, whatever its guest does meanwhile: a guest blocked in a host call
/// (a call, a sleep) holds none for longer.
#[derive(Clone)]
pub(crate) struct CpuGate {
    turns: Arc<Semaphore>,
    given: Arc<Mutex<Vec<OwnedSemaphorePermit>>>,
}

impl CpuGate {
    pub(crate) fn new(turns: usize) -> Self {
        Self { turns: Arc::new(Semaphore::new(turns.max(1))), given: Arc::default() }
    }

    /// Turns free now.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.turns.available_permits()
    }

    /// Ends every turn given (the epoch thread, at each tick).
    pub(crate) fn end_turns(&self) {
        self.given.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Waits for a turn, in arrival order.
    async fn take_turn(self) {
        if let Ok(turn) = self.turns.clone().acquire_owned().await {
            self.given.lock().unwrap_or_else(|p| p.into_inner()).push(turn);
        }
    }
}

/// One guest's standing: how many ticks it computed through in this event.
pub(crate) struct CpuTurn {
    gate: CpuGate,
    ticks: u32,
}

impl CpuTurn {
    pub(crate) fn new(gate: CpuGate) -> Self {
        Self { gate, ticks: 0 }
    }

    /// An event begins: the guest is not CPU-bound.
    pub(crate) fn reset(&mut self) {
        self.ticks = 0;
    }

    /// At a tick: yield behind the ready I/O, and once CPU-bound, wait for
    /// a turn first.
    pub(crate) fn tick(&mut self) -> UpdateDeadline {
        self.ticks = self.ticks.saturating_add(1);
        if self.ticks < BUSY_AFTER_TICKS {
            return UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()));
        }
        let gate = self.gate.clone();
        UpdateDeadline::YieldCustom(
            1,
            Box::pin(async move {
                tokio::task::yield_now().await;
                gate.take_turn().await;
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yielded(d: UpdateDeadline) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        match d {
            UpdateDeadline::YieldCustom(1, f) => f,
            _ => panic!("a tick yields"),
        }
    }

    #[tokio::test]
    async fn busy_guests_take_turns_that_end_at_the_next_tick() {
        let gate = CpuGate::new(1);
        let mut a = CpuTurn::new(gate.clone());
        let mut b = CpuTurn::new(gate.clone());
        // The first tick of an event only yields.
        yielded(a.tick()).await;
        yielded(b.tick()).await;
        assert_eq!(gate.free(), 1);
        // From the second on, a guest runs on a turn.
        yielded(a.tick()).await;
        assert_eq!(gate.free(), 0);
        let waiting = tokio::spawn(yielded(b.tick()));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "b waits while a holds the turn");
        // The tick ends a's turn (whether a computes or waits in a host
        // call), and b, first in line, gets it.
        gate.end_turns();
        waiting.await.unwrap();
        assert_eq!(gate.free(), 0);
        let a_waits = tokio::spawn(yielded(a.tick()));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!a_waits.is_finished());
        gate.end_turns();
        a_waits.await.unwrap();
        gate.end_turns();
        assert_eq!(gate.free(), 1);
        // A new event starts afresh.
        a.reset();
        yielded(a.tick()).await;
        assert_eq!(gate.free(), 1);
    }
}
