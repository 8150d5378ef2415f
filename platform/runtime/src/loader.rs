//! One loader for every guest, actor or front: the store with its state
//! (the host, the log label, the app's egress), its limits and its wall,
//! and instantiation within that wall. What a guest is given is decided
//! here, once; the egress policy has this one site.

use std::time::Instant;

use wasmtime::Store;

use crate::EventFailure;
use crate::guest_log::GuestLabel;
use crate::host::{Egress, GuestConfig, GuestState};
use crate::share::GuestShare;
use crate::wall;

/// A guest's store, holding `host`, its wall ending at `ends`.
pub(crate) fn store<H: Send>(
    engine: &wasmtime::Engine,
    guest: &GuestConfig,
    host: H,
    label: GuestLabel,
    egress: Egress,
    share: GuestShare,
    ends: Instant,
) -> Store<GuestState<H>> {
    let mut store = wall::guest_store(engine, GuestState::new(host, label, guest, egress, share), ends);
    // What one host call (or an export's answer) may copy out of the guest:
    // aliased list elements are counted each time, so a list of a thousand
    // views of one buffer costs what a thousand buffers would.
    store.set_hostcall_fuel(usize::try_from(guest.host_call_bytes).unwrap_or(usize::MAX));
    store
}

/// The head of one call's request or answer, at most: what a call between
/// nodes may carry (the cluster's wire bound).
const CALL_HEAD_BYTES: u64 = 64 * 1024;

/// What one host call may lift from a guest under `limits`: twice the
/// largest body (a call's, a `call-many`'s together, a socket message, a
/// stored value, a batch of keys and values), so that a call over its
/// limit still reaches the host and is answered `too-large`
/// (docs/spec/calls.md §2 and §8), and the heads of a `call-many`'s
/// entries. wasmtime's default is 128 MiB; a guest aliasing one buffer from
/// every element of a list reached it on the node's threads, outside any
/// guest's CPU turn.
pub fn host_call_bytes(limits: &wasmkeep_core::Limits) -> u64 {
    let body = [
        limits.body_bytes,
        limits.socket_message_bytes,
        limits.storage_value_bytes,
        crate::host::keyvalue::BATCH_BYTES_MAX as u64,
    ]
    .into_iter()
    .max()
    .unwrap_or_default();
    2 * body + (u64::from(limits.call_many_entries) + 1) * CALL_HEAD_BYTES
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
        // The budget refused the instance's first memory: the node is full,
        // which a retry may find otherwise.
        Ok(Err(_)) if store.data().memory.refused_by_node => Err(EventFailure::NoMemory.logged(store)),
        Ok(Err(e)) => Err(EventFailure::from_trap(store, &e).logged(store)),
    }
}
