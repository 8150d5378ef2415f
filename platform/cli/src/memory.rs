//! Giving memory back after a burst. glibc's allocator raises its mmap
//! threshold each time a large block is freed, so that later large blocks
//! (request bodies, answers, guest buffers) come from its heaps, which it
//! keeps: a burst of 15 MiB bodies left the node near its peak for good.
//! A fixed threshold keeps large blocks mmapped (unmapped on free), and a
//! trim now and then returns the heaps' free pages.

use std::time::Duration;

/// Blocks at least this large are mmapped, and unmapped when freed.
const MMAP_THRESHOLD: i32 = 256 * 1024;
/// How often the heaps' free pages are returned.
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// Sets the allocator up; call first thing, before other threads start.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets glibc's allocator parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Returns free heap pages to the system now and then, on a thread of its
/// own (a trim holds the allocator's locks for a moment).
pub fn start_trimming() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    std::thread::Builder::new()
        .name("wasmkeep-trim".into())
        .spawn(|| {
            loop {
                std::thread::sleep(TRIM_EVERY);
                // SAFETY: `malloc_trim` only returns free pages.
                unsafe {
                    libc::malloc_trim(0);
                }
            }
        })
        .expect("spawning the trim thread");
}
