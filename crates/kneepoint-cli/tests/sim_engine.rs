//! `kneepoint sim serve --model-config ... --instance ...`: one engine of a model on an
//! instance with vLLM's settings, as stage-1 sizing predicts it (issue 49 part 4).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../kneepoint-fit/configs/gpt-oss-20b.json"
);

/// The serve's first two lines (the listening line and the engine line), then it is stopped;
/// or its error when it refused to start.
fn serve(extra: &[&str]) -> Result<(String, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kneepoint"))
        .args(["sim", "serve", "--port", "0", "--model-config", MODEL])
        .args(["--instance", "ml.g6e.12xlarge"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut first, mut engine) = (String::new(), String::new());
    out.read_line(&mut first).unwrap();
    if first.is_empty() {
        let o = child.wait_with_output().unwrap();
        assert!(!o.status.success());
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    out.read_line(&mut engine).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    Ok((first, engine))
}

/// The `KV cache N tokens` figure of an engine line.
fn kv_tokens(engine: &str) -> u64 {
    engine
        .split("KV cache ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no KV figure in {engine:?}"))
}

#[test]
fn the_engine_follows_its_settings_and_refuses_what_vllm_would_not_start() {
    let (first, auto) = serve(&["--tensor-parallel-size", "4", "--max-num-seqs", "128"]).unwrap();
    assert!(
        first.contains("gpt-oss-20b on ml.g6e.12xlarge (predicted)"),
        "{first}"
    );
    assert!(
        auto.contains("max_num_seqs 128, max_num_batched_tokens 8192"),
        "{auto}"
    );
    // fp8 holds a token in half the bytes: about twice the tokens in the same memory
    let (_, fp8) = serve(&[
        "--tensor-parallel-size",
        "4",
        "--max-num-seqs",
        "128",
        "--kv-cache-dtype",
        "fp8",
        "--max-num-batched-tokens",
        "2048",
    ])
    .unwrap();
    let ratio = kv_tokens(&fp8) as f64 / kv_tokens(&auto) as f64;
    assert!((1.9..=2.1).contains(&ratio), "{auto} / {fp8}");
    assert!(fp8.contains("max_num_batched_tokens 2048"), "{fp8}");
    // one GPU of the four: one replica of four, less cache than four GPUs give
    let (first1, one) = serve(&["--tensor-parallel-size", "1"]).unwrap();
    assert!(first1.contains("one of its 4 replicas"), "{first1}");
    assert!(kv_tokens(&one) < kv_tokens(&auto), "{one} vs {auto}");
    // what vLLM would refuse to start is refused, with the fit's reason
    let e = serve(&["--tensor-parallel-size", "3"]).unwrap_err();
    assert!(e.contains("does not divide the 64 attention heads"), "{e}");
    let e = serve(&[
        "--tensor-parallel-size",
        "1",
        "--gpu-memory-utilization",
        "0.1",
    ])
    .unwrap_err();
    assert!(e.contains("does not fit on ml.g6e.12xlarge"), "{e}");
    let e = serve(&["--profile", "fast"]).unwrap_err();
    assert!(e.contains("give one"), "{e}");
}

/// `sim serve ARGS`'s standard error when it refuses to start; a server that starts is
/// stopped and fails the test. On Unix it runs under a 3 GB address-space limit, so that a
/// file read without a cap fails fast instead of taking the machine's memory.
fn refusal(args: &[&str]) -> String {
    let bin = env!("CARGO_BIN_EXE_kneepoint");
    let mut command = if cfg!(unix) {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("ulimit -v 3145728; exec \"$0\" sim serve --port 0 \"$@\"")
            .arg(bin);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(["sim", "serve", "--port", "0"]);
        c
    };
    let mut child = command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    if !first.is_empty() {
        child.kill().unwrap();
        child.wait().unwrap();
        panic!("{args:?} started: {first}");
    }
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "{args:?}");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Issue 57 items 19 and 20a: a time scale the engine cannot sleep (`1e300` panicked its
/// thread while /health still answered) and a zero token budget (refused as `max_num_seqs`)
/// are refused before the server starts, naming the setting.
#[test]
fn settings_the_engine_cannot_run_are_refused_naming_them() {
    let e = refusal(&["--time-scale", "1e300"]);
    assert!(e.contains("time_scale"), "{e}");
    assert!(e.contains("between 0.001 and 1000"), "{e}");
    let e = refusal(&[
        "--model-config",
        MODEL,
        "--instance",
        "ml.g6e.12xlarge",
        "--max-num-batched-tokens",
        "0",
    ]);
    assert!(e.contains("invalid max_num_batched_tokens"), "{e}");
    assert!(!e.contains("max_num_seqs"), "{e}");
}

/// Issue 58 part 1: `sim serve`, `plan` and the matrix share one group of engine settings;
/// a setting of the predicted engine without a model to predict is refused, naming it.
#[test]
fn engine_settings_without_a_model_are_refused_naming_them() {
    let e = refusal(&["--kv-cache-dtype", "fp8"]);
    assert!(e.contains("--kv-cache-dtype needs --model-config"), "{e}");
    let e = refusal(&["--tensor-parallel-size", "2"]);
    assert!(
        e.contains("--tensor-parallel-size needs --model-config"),
        "{e}"
    );
    // the old spelling still reads, and a bad dtype is named as in plan
    let e = refusal(&[
        "--model-config",
        MODEL,
        "--instance",
        "ml.g6e.12xlarge",
        "--tensor-parallel",
        "1",
        "--kv-cache-dtype",
        "int3",
    ]);
    assert!(e.contains("--kv-cache-dtype must be auto or fp8"), "{e}");
}

/// Issue 57 item 11: `/dev/zero` as the model config or the instance catalog is refused at
/// its 16 MiB cap, quickly (it grew to 4.2 GB in 8 s).
#[cfg(unix)]
#[test]
fn dev_zero_as_a_settings_file_is_refused_at_its_cap() {
    let start = std::time::Instant::now();
    let e = refusal(&[
        "--model-config",
        "/dev/zero",
        "--instance",
        "ml.g6e.12xlarge",
    ]);
    assert!(e.contains("/dev/zero"), "{e}");
    assert!(e.contains("larger than 16 MiB, the most read"), "{e}");
    let e = refusal(&[
        "--model-config",
        MODEL,
        "--instance",
        "ml.g6e.12xlarge",
        "--instance-catalog",
        "/dev/zero",
    ]);
    assert!(e.contains("instance catalog /dev/zero"), "{e}");
    assert!(e.contains("larger than 16 MiB, the most read"), "{e}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
}
