//! One loader for every guest, actor or front: the store with its state
//! (the host, the log label, the app's egress), its limits and its wall,
//! and instantiation within that wall. What a guest is given is decided
//! here, once; the egress policy has this one site.

use std::time::Instant;

use wasmtime::Store;

use crate::EventFailure;
use crate::cpu::CpuShare;
use crate::guest_log::GuestLabel;
use crate::host::{Egress, GuestConfig, GuestState};
use crate::wall;

/// A guest's store, holding `host`, its wall ending at `ends`.
pub(crate) fn store<H: Send>(
    engine: &wasmtime::Engine,
    guest: &GuestConfig,
    host: H,
    label: GuestLabel,
    egress: Egress,
    cpu: CpuShare,
    ends: Instant,
) -> Store<GuestState<H>> {
    wall::guest_store(engine, GuestState::new(host, label, guest, egress, cpu), ends)
}

/// What instantiating within the wall gave: the instance, or the failure
/// (logged, one line, here).
pub(crate) fn instantiated<H: Send, T>(
    store: &Store<GuestState<H>>,
    result: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, EventFailure> {
    match result {
        Ok(Ok(instance)) => Ok(instance),
        Err(_elapsed) => Err(EventFailure::Wall.logged(store)),
        Ok(Err(e)) => Err(EventFailure::from_trap(store, &e).logged(store)),
    }
}
