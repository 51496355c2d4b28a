//! Issue 32, item 5: the default job's levels are short (a lead-in wave and two measured
//! waves, the server kept loaded) yet steady. Checked in the simulator's virtual time, against
//! the engine model's long runs: what a perfect client would measure, with no wall clock.

use kneepoint_config::{default_level_counts, DEFAULT_CONCURRENCY};
use kneepoint_sim::{predict_closed_loop, Prediction, SeqSpec, SimProfile};

const SPEC: SeqSpec = SeqSpec {
    prompt_tokens: 1024,
    output_tokens: 256,
};

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// TTFT p50, p95 and end-to-end p50, p99 (ms) of the requests sent in `sent` (by index).
fn figures(p: &Prediction, sent: std::ops::Range<u32>) -> [f64; 4] {
    let (mut ttft, mut e2e) = (Vec::new(), Vec::new());
    for (t, i) in p.timeline_ms.iter().zip(&p.sent_index) {
        if sent.contains(i) {
            ttft.push(t[1] - t[0]);
            e2e.push(t[2] - t[0]);
        }
    }
    [
        quantile(ttft.clone(), 0.5),
        quantile(ttft, 0.95),
        quantile(e2e.clone(), 0.5),
        quantile(e2e, 0.99),
    ]
}

#[test]
fn the_default_levels_are_steady_in_virtual_time() {
    let profile = SimProfile::calibrated();
    for c in DEFAULT_CONCURRENCY {
        let (lead, measured) = default_level_counts(c);
        // Fillers beyond the last measured request's end change nothing before it: two waves
        // of them are more than the level ever sends.
        let short = predict_closed_loop(&profile, c, lead + measured + 2 * c, SPEC);
        let got = figures(&short, lead..lead + measured);
        // The long run: 16 waves, the first four and the drain left out.
        let n = 16 * c;
        let long = predict_closed_loop(&profile, c, n, SPEC);
        let want = figures(&long, 4 * c..n - c);
        for (k, name) in ["TTFT p50", "TTFT p95", "e2e p50", "e2e p99"]
            .iter()
            .enumerate()
        {
            let off = (got[k] - want[k]).abs() / want[k];
            assert!(
                off < 0.05,
                "concurrency {c}: {name} {:.1} ms, long run {:.1} ms",
                got[k],
                want[k]
            );
        }
        // Throughput: the measured starts' rate against Little's law over the long run.
        let starts: Vec<u64> = short
            .timeline_ms
            .iter()
            .zip(&short.sent_index)
            .filter(|(_, i)| (lead..lead + measured).contains(*i))
            .map(|(t, _)| (t[0] * 1e6) as u64)
            .collect();
        let d = kneepoint_metrics::loaded_duration_s(&starts, c).expect("more starts than slots");
        let rate = f64::from(measured) / d;
        let e2e: Vec<f64> = long
            .timeline_ms
            .iter()
            .zip(&long.sent_index)
            .filter(|(_, i)| (4 * c..n - c).contains(*i))
            .map(|(t, _)| (t[2] - t[0]) / 1000.0)
            .collect();
        let little = f64::from(c) / (e2e.iter().sum::<f64>() / e2e.len() as f64);
        assert!(
            (rate - little).abs() / little < 0.03,
            "concurrency {c}: {rate:.2} req/s from the starts, {little:.2} in the long run"
        );
        if c == 256 {
            // What the counts replace: four waves, no lead-in, the last wave draining. The
            // first wave's burst of prefills is the TTFT tail.
            let old = predict_closed_loop(&profile, c, 4 * c, SPEC);
            let tail = figures(&old, 0..4 * c)[1];
            assert!(tail > 5.0 * want[1], "{tail:.0} vs {:.0} ms", want[1]);
        }
        eprintln!(
            "c={c}: lead-in {lead}, measured {measured}: {got:.1?} vs {want:.1?}; {rate:.2} vs {little:.2} req/s"
        );
    }
}
