//! The kernel's slice for the node's threads. Linux (6.12 and later)
//! runs a thread for a slice of its own choosing before another ready
//! thread of the same priority gets the core; the default, 0.75 ms times
//! a factor for the cores, is what a request that became ready on a
//! worker waits behind each other worker busy on the same core. A short
//! slice lets a quiet tenant's request through busy neighbours' guests
//! sooner, at the cost of more switches between them.

/// The slice the node's worker threads ask for.
pub const SLICE: std::time::Duration = std::time::Duration::from_micros(250);

/// Asks the kernel for [`SLICE`] on the calling thread, at the node's
/// priority; threads it starts later inherit both.
pub fn shorten() {
    set(0, SLICE);
}

/// Runs the calling thread at `nice` in slices of `slice`. A kernel
/// without custom slices keeps its own (the thread runs the same, less
/// promptly).
pub fn set(nice: i32, slice: std::time::Duration) {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr`, its first version (56 bytes).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime: u64,
            deadline: u64,
            period: u64,
            util_min: u32,
            util_max: u32,
        }
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            flags: 0,
            nice,
            priority: 0,
            runtime: slice.as_nanos() as u64,
            deadline: 0,
            period: 0,
            util_min: 0,
            util_max: 0,
        };
        // SAFETY: `sched_setattr` reads `attr`, which outlives the call;
        // pid 0 is the calling thread.
        unsafe {
            libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0);
        }
    }
}

/// The running kernel's release as (major, minor), `(0, 0)` when unread.
pub(crate) fn kernel() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut version = release.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u32>().ok());
    (version.next().unwrap_or(0), version.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    /// The calling thread's slice as the kernel reports it, where it does.
    fn slice_now() -> Option<u64> {
        let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
        let line = sched.lines().find(|l| l.trim_start().starts_with("se.slice"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    #[test]
    fn a_thread_started_after_shortening_runs_in_short_slices() {
        std::thread::spawn(|| {
            // Custom slices came with Linux 6.12.
            let (major, minor) = super::kernel();
            if slice_now().is_none() || (major, minor) < (6, 12) {
                eprintln!("skipped: kernel {major}.{minor} has no custom slices to report");
                return;
            }
            super::shorten();
            let after = slice_now();
            assert_eq!(after, Some(super::SLICE.as_nanos() as u64));
            // What the node relies on: threads started later inherit it.
            let child = std::thread::spawn(slice_now).join().unwrap();
            assert_eq!(child, Some(super::SLICE.as_nanos() as u64));
        })
        .join()
        .unwrap();
    }
}
