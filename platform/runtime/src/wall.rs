//! A guest's wall: how long an event or a front request may run. The
//! epoch check cuts a computing guest; a timer cuts one waiting in a host
//! call. Both end in the same failure.

use std::time::Instant;

use wasmtime::Store;

use crate::host::GuestState;

/// A new store for one guest instance: its limits, its epoch callback, and
/// a wall that ends at `ends`, running from instantiation on.
pub(crate) fn guest_store<H: Send>(
    engine: &wasmtime::Engine,
    state: GuestState<H>,
    ends: Instant,
) -> Store<GuestState<H>> {
    let mut store = Store::new(engine, state);
    store.limiter_async(|s| &mut s.memory);
    arm(&mut store);
    start(&mut store, ends);
    store
}

/// Sets the store's epoch callback: past the wall, trap; before it, yield
/// at each tick, and take turns once CPU-bound (`cpu`), so that a long
/// computation shares the node's cores.
fn arm<H: Send>(store: &mut Store<GuestState<H>>) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let state = ctx.data_mut();
        match state.wall_ends {
            Some(end) if Instant::now() >= end => {
                state.wall_exceeded = true;
                Err(wasmtime::format_err!("the wall ended"))
            }
            _ => Ok(state.cpu.tick()),
        }
    });
}

/// Starts a wall that ends at `ends`.
pub(crate) fn start<H: Send>(store: &mut Store<GuestState<H>>, ends: Instant) {
    let data = store.data_mut();
    data.wall_ends = Some(ends);
    data.wall_exceeded = false;
    data.cpu.reset();
    store.set_epoch_deadline(1);
}

/// Ends the wall: the guest waits for its next event.
pub(crate) fn stop<H: Send>(store: &mut Store<GuestState<H>>) {
    store.data_mut().wall_ends = None;
}

/// The timer for a guest blocked in a host call past `ends`; a computing
/// guest is cut by the epoch check first.
pub(crate) fn timer(ends: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(ends + crate::TICK * 2)
}

/// Why an event or a front request produced no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventFailure {
    /// The guest trapped (a panic, a memory bomb, a host refusal): why, on
    /// one line. Once [`logged`](Self::logged), as its tenant reads it in
    /// its tail (a panic's message and place, out of memory), which is
    /// what its caller is told.
    Trap(String),
    /// The guest ran past its wall and was cut.
    Wall,
    /// The node's guest memory (or the tenant's share of it) had no room
    /// for a new instance: a refusal to retry, not the guest's fault.
    NoMemory,
}

impl EventFailure {
    /// Tells a trap caused by the wall from any other; a trap's text is its
    /// cause alone, on one line (not the wasm backtrace).
    pub(crate) fn from_trap<H>(store: &Store<GuestState<H>>, e: &wasmtime::Error) -> Self {
        if store.data().wall_exceeded {
            Self::Wall
        } else {
            Self::Trap(e.root_cause().to_string().lines().next().unwrap_or_default().to_owned())
        }
    }

    /// Logs this failure of the store's guest, as one line with its
    /// output, where it happens; returns it, a trap with its tenant's text.
    pub(crate) fn logged<H>(self, store: &Store<GuestState<H>>) -> Self {
        let told = self.log(store);
        match self {
            Self::Trap(_) => Self::Trap(told),
            other => other,
        }
    }

    /// Logs it, to the node and to its tenant's tail; the tenant's line.
    fn log<H>(&self, store: &Store<GuestState<H>>) -> String {
        let data = store.data();
        let (kind, detail) = match self {
            Self::Wall => (crate::guest_log::FailureKind::Wall, ""),
            Self::NoMemory => {
                (crate::guest_log::FailureKind::Trap, "the node's memory for guests had no room for a new instance")
            }
            Self::Trap(detail) => (crate::guest_log::FailureKind::Trap, detail.as_str()),
        };
        data.output.end();
        let output = data.output.take();
        let memory = &data.memory;
        let out_of_memory = (memory.refused_at_limit || memory.refused_by_node).then(|| match memory.refused_by_node {
            true => "the node's memory for guests was full".to_owned(),
            false => format!("the instance's limit is {} MiB", memory.limit() >> 20),
        });
        // The tenant's record of it, in its tail, with the event's trace.
        let told = crate::guest_log::tenant_line(kind, detail, output.as_deref(), out_of_memory.as_deref());
        data.output.fail(&told);
        crate::guest_log::failure(&data.label, kind, detail, output);
        told
    }
}

/// Ends the output of an event that went well: its last line, if it left
/// one unfinished, is a record; what was kept for a failure's line goes.
pub(crate) fn log_output<H>(store: &Store<GuestState<H>>) {
    let data = store.data();
    data.output.end();
    let _ = data.output.take();
}
