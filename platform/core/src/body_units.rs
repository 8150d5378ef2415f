//! Request bodies held in a budget of bytes, counted in KiB units (a
//! semaphore's permits are `u32`s): the public port's and the API's. A
//! body holds the units its bytes fill, rounded up once for the whole
//! body, never once per frame: a body sent a byte a frame holds about what
//! its bytes are, not a unit for each.

/// One unit of a body budget.
pub const UNIT: u64 = 1024;

/// A budget of `bytes` in units: at least one, at most what a semaphore
/// counts.
pub fn capacity(bytes: u64) -> u32 {
    (bytes / UNIT).clamp(1, u64::from(u32::MAX)) as u32
}

/// The units a body holding `held` units takes more so that it holds
/// `bytes` in all.
pub fn more(held: u64, bytes: u64) -> u64 {
    bytes.div_ceil(UNIT).saturating_sub(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_holds_its_bytes_rounded_once() {
        // A thousand one-byte frames: one unit, taken by the first.
        let mut held = 0;
        let mut taken = Vec::new();
        for received in 1..=1000 {
            let m = more(held, received);
            held += m;
            taken.push(m);
        }
        assert_eq!(held, 1);
        assert_eq!(taken.iter().filter(|&&m| m > 0).count(), 1);
        assert_eq!(more(1, 1025), 1);
        assert_eq!(more(3, 1025), 0, "a reservation covers what comes");
        assert_eq!(more(0, 0), 0);
    }

    #[test]
    fn capacities() {
        assert_eq!(capacity(0), 1);
        assert_eq!(capacity(256 << 20), 262_144);
        assert_eq!(capacity(u64::MAX), u32::MAX);
    }
}
