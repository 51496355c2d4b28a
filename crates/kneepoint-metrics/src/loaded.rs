//! The rate of a closed-loop level kept loaded, from the starts of its measured requests.

/// The duration over which a closed-loop level kept loaded at `concurrency` should count its
/// rates, from its measured requests' starts (`starts_ns`, any order, one per measured
/// request): the time its `M` measured requests take at the completion rate they ran under.
///
/// In a saturated closed loop every start after the first `c` (one per slot) follows one
/// completion, so the starts after the `c`-th come at the completion rate. The window runs
/// from the `c`-th start over `k` whole generations of `c` starts (`k = ⌊(M − c) / c⌋`), so
/// it is right even when requests run in lock-step waves (counting from the first start would
/// read twice the rate of a two-wave level, and a window of a wave and a half would be off by a
/// fifth). The duration is `M` over that rate: a level's `requests / duration` is then the
/// server's request rate at this load, not diluted by the lead-in and fillers that ran beside
/// the measured requests. `None` when there are fewer than `2c` starts, or the window is empty:
/// Little's law (`c / mean latency`) is then the estimate.
pub fn loaded_duration_s(starts_ns: &[u64], concurrency: u32) -> Option<f64> {
    let c = concurrency as usize;
    let m = starts_ns.len();
    if c == 0 || m < 2 * c {
        return None;
    }
    let mut sorted = starts_ns.to_vec();
    sorted.sort_unstable();
    let n = c * ((m - c) / c);
    let window_ns = sorted[c - 1 + n].saturating_sub(sorted[c - 1]);
    if window_ns == 0 {
        return None;
    }
    let rate_per_s = n as f64 / (window_ns as f64 / 1e9);
    Some(m as f64 / rate_per_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts spread evenly at 100 per second: any window reads 100 per second.
    #[test]
    fn smooth_starts_give_their_rate() {
        let starts: Vec<u64> = (0..400).map(|i| i * 10_000_000).collect();
        let d = loaded_duration_s(&starts, 50).unwrap();
        assert!((400.0 / d - 100.0).abs() < 1e-9, "{d}");
    }

    /// Lock-step waves of 64 every second (each wave's starts within 50 ms): 64 per second,
    /// where first-to-last would read about 128 for two waves.
    #[test]
    fn lock_step_waves_give_one_wave_per_period() {
        let mut starts = Vec::new();
        for wave in 0..2u64 {
            for k in 0..64u64 {
                starts.push(wave * 1_000_000_000 + k * 50_000_000 / 64);
            }
        }
        let d = loaded_duration_s(&starts, 64).unwrap();
        assert!((128.0 / d - 64.0).abs() < 0.01, "{}", 128.0 / d);
        let naive = 127.0 / ((starts[127] - starts[0]) as f64 / 1e9);
        assert!(naive > 120.0, "{naive}");
    }

    /// Two and a half lock-step waves of 100 (lead-in aside): whole waves only, so 100 per
    /// second, where the window to the last start would read 78.
    #[test]
    fn a_partial_last_wave_is_left_out() {
        let mut starts = Vec::new();
        for wave in 0..3u64 {
            let n = if wave == 2 { 56 } else { 100 };
            for k in 0..n {
                starts.push(wave * 1_000_000_000 + k * 10_000_000 / 100);
            }
        }
        let d = loaded_duration_s(&starts, 100).unwrap();
        let rate = starts.len() as f64 / d;
        assert!((rate - 100.0).abs() < 1.0, "{rate}");
    }

    #[test]
    fn too_few_starts_leave_the_span() {
        assert_eq!(loaded_duration_s(&[1, 2, 3], 3), None);
        assert_eq!(loaded_duration_s(&[1, 2, 3, 4, 5], 3), None);
        assert_eq!(loaded_duration_s(&[5, 5, 5, 5], 2), None);
        assert_eq!(loaded_duration_s(&[1, 2, 3], 0), None);
    }
}
