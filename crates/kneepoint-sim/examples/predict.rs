//! Prints the calibrated profile's closed-loop curve in model time (what a perfect client would
//! measure at ISL 1024 / OSL 256). `cargo run -p kneepoint-sim --example predict`
use kneepoint_sim::{predict_closed_loop, SeqSpec, SimProfile};

fn pct(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn main() {
    let p = SimProfile::calibrated();
    let spec = SeqSpec {
        prompt_tokens: 1024,
        output_tokens: 256,
    };
    println!("concurrency  tok/s   ttft_p95_ms  e2e_p50_ms  e2e_p99_ms");
    for c in [16, 32, 64, 128, 256, 320, 512, 1024] {
        let r = predict_closed_loop(&p, c, 1024.max(c * 4), spec);
        println!(
            "{c:>11}  {:>6.0}  {:>11.0}  {:>10.0}  {:>10.0}",
            r.output_tokens_per_s,
            pct(&r.ttft_ms, 0.95),
            pct(&r.latency_ms, 0.5),
            pct(&r.latency_ms, 0.99)
        );
    }
}
