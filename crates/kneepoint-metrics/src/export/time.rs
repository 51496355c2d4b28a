//! RFC 3339 timestamps without a date-time dependency.

/// Formats Unix nanoseconds as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC).
pub fn rfc3339(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let micros = (unix_ns % 1_000_000_000) / 1_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    let (y, m, d) = kneepoint_core::civil::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (UTC, as [`rfc3339`] writes it; a lower-case `t`
/// or `z`, or a space for the `T`, are accepted too) into Unix nanoseconds.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 20
        || !matches!(b[b.len() - 1], b'Z' | b'z')
        || !matches!(b[10], b'T' | b't' | b' ')
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 || y < 1970
    {
        return None;
    }
    let frac = &s[19..s.len() - 1];
    let nanos: u64 = match frac.strip_prefix('.') {
        None if frac.is_empty() => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|c| c.is_ascii_digit()) => {
            f.parse::<u64>().ok()? * 10u64.pow(9 - f.len() as u32)
        }
        _ => return None,
    };
    let days = kneepoint_core::civil::days_from_civil(y, m, d);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_round_trips() {
        for ns in [0u64, 1_764_619_932_500_000_000, 951_782_400_000_000_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ns)), Some(ns), "{}", rfc3339(ns));
        }
        assert_eq!(
            parse_rfc3339("2026-12-01T19:30:00Z"),
            Some(1_796_153_400_000_000_000)
        );
        for bad in [
            "2026-12-01T19:30:00",
            "2026-13-01T00:00:00Z",
            "x",
            "2026-12-01T19:30:00.Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000Z");
        // 2026-11-29T08:12:12.5Z
        assert_eq!(
            rfc3339(1_795_939_932_500_000_000),
            "2026-11-29T08:12:12.500000Z"
        );
        assert_eq!(
            rfc3339(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000Z"
        );
    }
}
