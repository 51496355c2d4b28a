//! Stage 1 from the command line: `kneepoint plan`'s table for the articles' model, and
//! `--sim-profile predicted`, whose simulator runs the prediction's step costs (checked in the
//! simulator's virtual time against the analytic curve, and against the articles' measured
//! 2.8k output tokens/s at 256 concurrent).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{Cli, Command, SweepSettings, Target};

const NEMOTRON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../kneepoint-fit/configs/nemotron-3-nano-30b-a3b.json"
);

#[test]
fn plan_prints_what_fits_where_with_the_reason_when_not() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("plan.json");
    let cli = Cli::try_parse_from([
        "kneepoint",
        "plan",
        "--model",
        NEMOTRON,
        "--isl",
        "1024",
        "--osl",
        "256",
        "--instances",
        "ml.g6e.xlarge,ml.g6e.12xlarge,ml.g7e.2xlarge",
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-batched-tokens",
        "4096",
        "--json",
        json.to_str().unwrap(),
    ])
    .unwrap();
    let Command::Plan(args) = cli.command else {
        panic!("not plan")
    };
    let plan = kneepoint_cli::plan(&args).unwrap();
    // the engine-settings group reaches stage 1 (issue 58 part 1)
    assert_eq!(plan.settings.max_num_batched_tokens, 4096);
    assert_eq!(plan.settings.gpu_memory_utilization, 0.85);
    let text = kneepoint_cli::plan_table(&plan);
    assert!(
        text.contains("ml.g6e.xlarge") && text.contains("does not fit: the weights need 58.8 GiB"),
        "{text}"
    );
    let g7e = plan.chosen("ml.g7e.2xlarge").unwrap();
    assert_eq!(g7e.fit.max_concurrency, 256);
    assert_eq!(g7e.prediction.as_ref().unwrap().knee, Some(256));
    kneepoint_cli::run(cli_again(&json)).unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // One row per instance type and degree: ml.g6e.xlarge and ml.g7e.2xlarge have one GPU.
    assert_eq!(saved["rows"].as_array().unwrap().len(), 2);
    assert_eq!(saved["rows"][0]["fit"]["fits"], false);
    // An unknown instance type names the ones the catalog has.
    let cli = Cli::try_parse_from([
        "kneepoint",
        "plan",
        "--model",
        NEMOTRON,
        "--instances",
        "ml.nope",
    ])
    .unwrap();
    let err = kneepoint_cli::run(cli).unwrap_err().to_string();
    assert!(
        err.contains("ml.nope") && err.contains("ml.g7e.2xlarge"),
        "{err}"
    );
}

fn cli_again(json: &std::path::Path) -> Cli {
    Cli::try_parse_from([
        "kneepoint",
        "plan",
        "--model",
        NEMOTRON,
        "--instances",
        "ml.g6e.xlarge,ml.g7e.2xlarge",
        "--json",
        json.to_str().unwrap(),
    ])
    .unwrap()
}

#[test]
fn the_predicted_profile_runs_the_prediction_in_the_simulator() {
    let cli = Cli::try_parse_from([
        "kneepoint",
        "sweep",
        "--sim-profile",
        "predicted",
        "--model-config",
        NEMOTRON,
        "--instance",
        "ml.g7e.2xlarge",
        "--gpu-memory-utilization",
        "0.85",
    ])
    .unwrap();
    let Command::Sweep(a) = cli.command else {
        panic!("not a sweep")
    };
    let s = SweepSettings::resolve(&a).unwrap();
    let Target::Simulator { profile: p, .. } = &s.common.target else {
        panic!("not the simulator")
    };
    assert_eq!(p.name, "predicted");
    assert_eq!(p.max_num_seqs, 256);
    assert!(p.experts.is_some() && p.model.contains("ml.g7e.2xlarge"));
    let spec = kneepoint_sim::SeqSpec {
        prompt_tokens: 1024,
        output_tokens: 256,
    };
    let mut virtual_tput = Vec::new();
    for c in [16u32, 256, 512] {
        let mut q = p.clone();
        q.jitter = 0.0;
        let run = kneepoint_sim::predict_closed_loop(&q, c, 4 * c.max(64), spec);
        virtual_tput.push(run.output_tokens_per_s);
    }
    // The articles measured 492.5 and 2823.4 tokens/s at 16 and 256 concurrent, flat beyond.
    let [at16, at256, at512] = virtual_tput[..] else {
        panic!("three levels")
    };
    eprintln!("virtual output tok/s at 16, 256, 512: {virtual_tput:?}");
    assert!((at16 / 492.5 - 1.0).abs() < 0.3, "{virtual_tput:?}");
    assert!((at256 / 2823.4 - 1.0).abs() < 0.3, "{virtual_tput:?}");
    assert!(
        (at512 / at256 - 1.0).abs() < 0.1,
        "flat past the knee: {virtual_tput:?}"
    );
    // Without a model config the profile is refused with what to give.
    let cli = Cli::try_parse_from(["kneepoint", "sweep", "--sim-profile", "predicted"]).unwrap();
    let Command::Sweep(a) = cli.command else {
        panic!("not a sweep")
    };
    let err = SweepSettings::resolve(&a).unwrap_err().to_string();
    assert!(err.contains("--model-config"), "{err}");
}
