//! Predicted tensor-parallel speed-ups against published measurements (issue 58).
//! `cargo run -p kneepoint-fit --example tp_scaling`; the table and its sources are in
//! docs/recommend.md, the cases in `tests/support/tp_cases.rs` (the test
//! `tests/tp_scaling.rs` holds them within 20 %).

#[path = "../tests/support/tp_cases.rs"]
mod tp_cases;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("| model, GPU | TP | predicted tok/s | speed-up | published speed-up | gap | speed-up without all-reduces |");
    println!("|---|---|---|---|---|---|---|");
    for (label, tp, tps, ours, theirs, without) in tp_cases::rows()? {
        println!(
            "| {label} | {tp} | {tps:.0} | {ours:.2} | {theirs:.2} | {:+.1} % | {without:.2} |",
            (ours / theirs - 1.0) * 100.0
        );
    }
    Ok(())
}
