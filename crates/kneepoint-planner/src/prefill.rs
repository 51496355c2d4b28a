//! Length sweeps: the (input, output) length pairs a sweep over prompt lengths runs, and the
//! prefill rate fitted to how TTFT grows with the prompt.
//!
//! At a low, fixed concurrency a request's TTFT is a fixed cost (network, scheduling, the first
//! engine step's base) plus its prompt's prefill, which grows with the prompt: the slope of TTFT
//! against input tokens is the time per prefilled token, its inverse the prefill rate. The fit
//! is a straight line through each length's median TTFT (the median, so that a pause of the
//! client or a neighbour's burst does not tilt it); its 90 % interval comes from redrawing each
//! length's requests with replacement (a stratified bootstrap: every length keeps its count) and
//! fitting again. Chunked prefill makes the curve a staircase past the engine's token budget
//! (each chunk adds a step's fixed cost): the rate is then the average over the lengths run.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::Error;

/// One level of a length sweep: the prompt and output lengths it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LengthPoint {
    /// Input (prompt) tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
}

impl LengthPoint {
    /// The level's folder name: `isl_1024_osl_128`.
    pub fn dir(&self) -> String {
        format!("isl_{}_osl_{}", self.isl, self.osl)
    }
}

/// The pairs a length sweep runs: lists of the same length pair up in order (`--isl 128,1024
/// --osl 64,256`: 128/64, 1024/256); a single value goes with every value of the other list.
/// Refuses lists of different lengths, a zero input length, and a repeated pair.
pub fn length_points(isl: &[u32], osl: &[u32]) -> Result<Vec<LengthPoint>, Error> {
    let bad = |reason: String| Error::InvalidLengths { reason };
    let n = isl.len().max(osl.len());
    if isl.is_empty() || osl.is_empty() {
        return Err(bad("a length sweep needs input and output lengths".into()));
    }
    if isl.len() != n && isl.len() != 1 || osl.len() != n && osl.len() != 1 {
        return Err(bad(format!(
            "{} input lengths and {} output lengths: give lists of the same length (they pair up in order) or one value for either",
            isl.len(),
            osl.len()
        )));
    }
    let at = |v: &[u32], i: usize| if v.len() == 1 { v[0] } else { v[i] };
    let mut out: Vec<LengthPoint> = Vec::with_capacity(n);
    for i in 0..n {
        let p = LengthPoint {
            isl: at(isl, i),
            osl: at(osl, i),
        };
        if p.isl == 0 {
            return Err(bad("input lengths must be at least 1 token".into()));
        }
        if out.contains(&p) {
            return Err(bad(format!("{} is given twice", p.dir())));
        }
        out.push(p);
    }
    Ok(out)
}

/// One length's requests: their input tokens (the mean, as measured) and TTFTs.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthSample {
    /// Mean input tokens of the length's requests.
    pub input_tokens: f64,
    /// Each successful request's TTFT, ms.
    pub ttft_ms: Vec<f64>,
}

/// The prefill rate fitted to TTFT against input length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillFit {
    /// Prompt tokens prefilled per second (the inverse of the slope); `None` when TTFT did not
    /// grow with the prompt (no prefill cost could be seen).
    pub rate_tokens_per_s: Option<f64>,
    /// The rate's 90 % interval, `[low, high]`; `None` when some redraws saw no growth.
    pub rate_interval: Option<[f64; 2]>,
    /// The slope: ms of TTFT per 1,000 prompt tokens.
    pub ms_per_1k_tokens: f64,
    /// TTFT at zero prompt tokens (the fixed part), ms.
    pub intercept_ms: f64,
    /// How much of the spread of the lengths' median TTFTs the line explains (0–1).
    pub r_squared: f64,
    /// The lengths fitted.
    pub lengths: usize,
    /// The requests behind the fit.
    pub requests: usize,
}

/// Redraws behind the interval.
pub const PREFILL_DRAWS: usize = 400;

fn median(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Least squares through `(x, y)`: (slope, intercept, r²).
fn line(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = if syy > 0.0 {
        (sxy * sxy / (sxx * syy)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    Some((slope, my - slope * mx, r2))
}

/// Fits the prefill rate to `samples` (lengths without a TTFT are left out). `None` with fewer
/// than two distinct input lengths. Deterministic: the same samples give the same interval.
pub fn fit_prefill(samples: &[LengthSample]) -> Option<PrefillFit> {
    let used: Vec<&LengthSample> = samples
        .iter()
        .filter(|s| s.input_tokens.is_finite() && s.ttft_ms.iter().any(|v| v.is_finite()))
        .collect();
    let clean: Vec<Vec<f64>> = used
        .iter()
        .map(|s| {
            s.ttft_ms
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .collect()
        })
        .collect();
    let points: Vec<(f64, f64)> = used
        .iter()
        .zip(&clean)
        .map(|(s, t)| (s.input_tokens, median(&mut t.clone())))
        .collect();
    let (slope, intercept, r2) = line(&points)?;
    let rate = |slope: f64| (slope > 0.0).then(|| 1000.0 / slope);
    let mut rng = StdRng::seed_from_u64(0x7072_6566);
    let mut slopes = Vec::with_capacity(PREFILL_DRAWS);
    let mut drawn = Vec::new();
    for _ in 0..PREFILL_DRAWS {
        let redrawn: Vec<(f64, f64)> = points
            .iter()
            .zip(&clean)
            .map(|(p, t)| {
                drawn.clear();
                drawn.extend((0..t.len()).map(|_| t[rng.random_range(0..t.len())]));
                (p.0, median(&mut drawn))
            })
            .collect();
        if let Some((s, _, _)) = line(&redrawn) {
            slopes.push(s);
        }
    }
    slopes.sort_unstable_by(f64::total_cmp);
    let q = |p: f64| slopes[((slopes.len() - 1) as f64 * p).round() as usize];
    let interval = (!slopes.is_empty())
        .then(|| (rate(q(0.95)), rate(q(0.05))))
        .and_then(|(lo, hi)| Some([lo?, hi?]));
    Some(PrefillFit {
        rate_tokens_per_s: rate(slope),
        rate_interval: interval,
        ms_per_1k_tokens: slope * 1000.0,
        intercept_ms: intercept,
        r_squared: r2,
        lengths: points.len(),
        requests: clean.iter().map(Vec::len).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_pair_up_and_a_single_value_goes_with_each() {
        let p = length_points(&[128, 1024], &[64, 256]).unwrap();
        assert_eq!(
            p[1],
            LengthPoint {
                isl: 1024,
                osl: 256
            }
        );
        let p = length_points(&[128, 1024, 4096], &[16]).unwrap();
        assert_eq!(p.iter().map(|p| p.osl).collect::<Vec<_>>(), [16, 16, 16]);
        assert_eq!(p[2].dir(), "isl_4096_osl_16");
        for (isl, osl, says) in [
            (vec![1, 2, 3], vec![1, 2], "same length"),
            (vec![0, 5], vec![1], "at least 1 token"),
            (vec![5, 5], vec![1], "twice"),
            (vec![], vec![1], "needs input"),
        ] {
            let e = length_points(&isl, &osl).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    /// TTFT = 20 ms + ISL / 50,000 tokens/s, each request ±5 % (a fixed pattern): the fit
    /// finds 50,000 and its interval holds it.
    #[test]
    fn the_fit_recovers_a_known_prefill_rate() {
        let samples: Vec<LengthSample> = [128.0, 1024.0, 4096.0, 8192.0]
            .iter()
            .map(|&isl| LengthSample {
                input_tokens: isl,
                ttft_ms: (0..40)
                    .map(|i| (20.0 + isl / 50.0) * (1.0 + 0.05 * ((i * 7 % 11) as f64 - 5.0) / 5.0))
                    .collect(),
            })
            .collect();
        let f = fit_prefill(&samples).unwrap();
        let rate = f.rate_tokens_per_s.unwrap();
        assert!((rate / 50_000.0 - 1.0).abs() < 0.02, "{f:?}");
        let [lo, hi] = f.rate_interval.unwrap();
        assert!(
            lo <= 50_000.0 && 50_000.0 <= hi && lo < rate && rate < hi,
            "{f:?}"
        );
        assert!(
            (f.intercept_ms - 20.0).abs() < 2.0 && f.r_squared > 0.99,
            "{f:?}"
        );
        assert_eq!((f.lengths, f.requests), (4, 160));
        assert_eq!(fit_prefill(&samples), Some(f), "deterministic");
    }

    #[test]
    fn flat_or_single_length_ttft_has_no_rate() {
        let flat = |isl: f64| LengthSample {
            input_tokens: isl,
            ttft_ms: vec![30.0, 31.0, 29.0],
        };
        let f = fit_prefill(&[flat(100.0), flat(1000.0)]).unwrap();
        assert_eq!(f.rate_tokens_per_s, None);
        assert_eq!(fit_prefill(&[flat(100.0)]), None);
        assert_eq!(fit_prefill(&[flat(100.0), flat(100.0)]), None);
        let empty = LengthSample {
            input_tokens: 5000.0,
            ttft_ms: vec![f64::NAN],
        };
        assert_eq!(fit_prefill(&[flat(100.0), empty]), None);
    }
}
