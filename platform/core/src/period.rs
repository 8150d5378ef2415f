//! Usage periods: UTC calendar months, named `YYYY-MM`.

/// The period holding unix second `unix`.
pub fn of(unix: i64) -> String {
    let (year, month, _) = civil(unix.div_euclid(86_400));
    format!("{year:04}-{month:02}")
}

/// The first unix second of `period`; `None` when it is not `YYYY-MM`.
pub fn start(period: &str) -> Option<i64> {
    let (year, month) = period.split_once('-')?;
    if year.len() != 4 || month.len() != 2 || !(year.bytes().chain(month.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, month): (i64, u32) = (year.parse().ok()?, month.parse().ok()?);
    (1..=12).contains(&month).then(|| days(year, month) * 86_400)
}

/// Days since 1970-01-01 of the first of `month` in `year` (proleptic
/// Gregorian; H. Hinnant's `days_from_civil`).
fn days(year: i64, month: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of day `z` since 1970-01-01 (UTC, the proleptic
/// Gregorian calendar).
pub fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_and_their_first_seconds() {
        assert_eq!(of(0), "1970-01");
        // 2026-11-30T23:59:59Z and the second after it.
        assert_eq!(of(1_796_083_199), "2026-11");
        assert_eq!(of(1_796_083_200), "2026-12");
        assert_eq!(start("2026-12"), Some(1_796_083_200));
        assert_eq!(start("2024-03"), Some(1_709_251_200));
        assert_eq!(of(1_709_251_199), "2024-02");
        for bad in ["2026-13", "2026-00", "26-01", "2026-1", "2026_01", "abcd-01", "2026-01-01", ""] {
            assert_eq!(start(bad), None, "{bad}");
        }
        // Every month's first second is in it, the one before in the last.
        for year in [1999, 2000, 2024, 2100] {
            for month in 1..=12u32 {
                let p = format!("{year:04}-{month:02}");
                let s = start(&p).unwrap();
                assert_eq!(of(s), p);
                assert_ne!(of(s - 1), p);
            }
        }
    }
}
