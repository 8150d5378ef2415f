//! The clock placement's decisions are made at (`core::placement` reads
//! none): a monotonic instant for deadlines, unix milliseconds for
//! heartbeats.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wasmkeep_core::placement::Now;

pub(crate) fn now() -> Now {
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    Now { at: Instant::now(), unix_ms }
}
