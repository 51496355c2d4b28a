//! Issue 48: every flag and file key is taken as before. The `--help` of every subcommand and
//! the resolved settings of a set of command lines and files (flags alone, files alone, both,
//! and ones the code refuses, with its message) are compared with a saved copy in
//! `tests/fixtures/settings/`. A change to how settings are read shows here as a diff to
//! review; `KNEEPOINT_BLESS=1 cargo test -p kneepoint-cli --test settings_snapshot` rewrites
//! the copy after a deliberate change.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use kneepoint_cli::{Cli, Command, SearchSettings, SweepSettings};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/settings")
}

/// `text` against the saved `name`, or saved when blessing.
fn check(name: &str, text: &str) {
    let path = fixtures().join(name);
    if std::env::var_os("KNEEPOINT_BLESS").is_some() {
        std::fs::create_dir_all(fixtures()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let saved = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (KNEEPOINT_BLESS=1 writes it)", path.display()));
    if saved != text {
        let first = saved
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(saved.lines().count().min(text.lines().count()));
        panic!(
            "{name} differs from the saved copy at line {}:\n  saved: {:?}\n  now:   {:?}\n\
             (review the change; KNEEPOINT_BLESS=1 rewrites the copy)",
            first + 1,
            saved.lines().nth(first).unwrap_or("<end>"),
            text.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

/// The long help of `cmd` and of every subcommand below it, each under its path.
fn helps(cmd: &mut clap::Command, path: &str, out: &mut String) {
    let path = format!("{path} {}", cmd.get_name()).trim().to_owned();
    out.push_str(&format!("===== {path}\n{}\n", cmd.render_long_help()));
    for sub in cmd.get_subcommands_mut() {
        helps(sub, &path, out);
    }
}

#[test]
fn every_subcommands_help_is_as_saved() {
    let mut cmd = Cli::command().term_width(100);
    cmd.build();
    let mut out = String::new();
    helps(&mut cmd, "", &mut out);
    check("help.txt", &out);
}

/// A settings file used by the cases below, every section a sweep or search reads.
const FILE: &str = r#"
artifact_dir = "from-file"

[endpoint]
url = "http://127.0.0.1:9/v1"
model = "file-model"
type = "completions"
headers = { "X-Team" = "b" }

[workload]
prompt_input_tokens_mean = 300
prompt_input_tokens_stddev = 30
output_tokens_mean = 40
seed = 5
shared_prefix_tokens = 64

[load]
ramp_up_s = 2.0
early_stop_width = 0.1

[runs]
num_runs = 2
confidence_level = 0.9

[sweep_params]
concurrency = [4, 16]
request_count = 64
warmup_request_count = 8

[search_params]
ttft_sla_ms = 800
tpot_sla_ms = 60
concurrency_min = 2
concurrency_max = 128
search_max_iterations = 6

[fleet]
peak_concurrency = 1000
headroom = 0.2
"#;

/// A second file: a SageMaker endpoint and the client options of `[endpoint]`.
const SAGEMAKER_FILE: &str = r#"
artifact_dir = "from-file"

[endpoint]
sagemaker_endpoint = "file-endpoint"
region = "eu-west-1"
endpoint_url = "http://127.0.0.1:9"
body_format = "tgi"
payload_codec = "jsonlines"
inference_component = "ic-1"
target_variant = "blue"
custom_attributes = "team=a"
target_container_hostname = "c1"
target_model = "m.tar.gz"
session_id = "s-1"
inference_id = "i-1"
aws_profile = "bench"
request_timeout_s = 30
idle_timeout_s = 5
extra_body = { temperature = 0.5 }
"#;

/// A third: an OpenAI endpoint's client options in the file.
const CLIENT_FILE: &str = r#"
[endpoint]
url = "http://127.0.0.1:9/v1"
path = "/v2/generate"
insecure_skip_verify = true
http2 = true
proxy = "none"
source_addrs = "127.0.0.2-127.0.0.3"
request_id_header = "x-trace"
request_id_format = "integer"
max_tokens_field = "max_completion_tokens"
response_timeout_s = 9
first_token_timeout_s = 8

[output]
archive = true
s3 = "s3://bucket/runs"
s3_endpoint_url = "http://127.0.0.1:9"
s3_region = "eu-central-1"
"#;

/// A fourth: every search key and another fleet peak.
const SEARCH_FILE: &str = r#"
artifact_dir = "from-file"

[search_params]
search_recipe = "max-goodput-under-slo"
e2e_sla_ms = 20000
error_rate_sla = 0.02
slas = ["time_to_first_token:p99:lt:3000"]
concurrency_min = 4
concurrency_max = 512
search_max_iterations = 8
search_initial_points = 64
request_count = 48
precision = 0.1
sla_by_confidence = true
confirm_margin = 0.1
attainment = 0.95

[runs]
num_runs = 2

[load]
goodput = "time_to_first_token:900"

[fleet]
peak_rps = 40
headroom = 0.3
"#;

/// A fifth: the built-in simulator's section.
const SIM_FILE: &str = r#"
artifact_dir = "from-file"

[simulator]
profile = "fast"
time_scale = 2.5
seed = 9
slowdown = 1.5
jitter = 0.1
drift = 0.01
degrade = 0.001
protocol = "sagemaker"
reasoning_share = 0.25
faults = { rate = 0.1, kinds = ["http_500"] }

[sweep_params]
concurrency = [2, 8]
request_count = [100, 200]
lead_in_request_count = 64
"#;

/// A sixth: stage-1 sizing's `[model]` for the predicted simulator (`{configs}` is the
/// repository's model configs).
const MODEL_FILE: &str = r#"
artifact_dir = "from-file"

[simulator]
profile = "predicted"

[model]
config = "{configs}/gpt-oss-20b.json"
instance = "ml.g6e.12xlarge"
tensor_parallel = 2
gpu_memory_utilization = 0.85
kv_cache_dtype = "fp8"
max_num_seqs = 128
reserve_gib = 3.0
step_overhead_ms = 2.5
bandwidth_efficiency = 0.7
compute_efficiency = 0.4
"#;

/// The repository's model configs (crates/kneepoint-fit/configs).
fn configs() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kneepoint-fit/configs")
        .display()
        .to_string()
}

/// A seventh: a choice the code does not know, refused at its key.
const BAD_FILE: &str = r#"
[simulator]
protocol = "grpc"
"#;

/// Command lines (after `kneepoint`); `{file}` is [`FILE`] written to disk, `{sagemaker}`
/// [`SAGEMAKER_FILE`], `{client}` [`CLIENT_FILE`].
const CASES: &[&str] = &[
    "sweep",
    "sweep --concurrency 8,32 --request-count 100,200 --isl 512 --isl-stddev 50 --osl 128 --seed 7",
    "sweep --num-runs 3 --confidence-level 0.9 --converge-on time_to_first_token_p95",
    "sweep --url http://127.0.0.1:9/v1 --model m --endpoint-type completions --streaming false --header X-Team:a",
    "sweep --request-rate 2,4 --arrival gamma --burstiness 0.5 --max-in-flight 64",
    "sweep --duration-s 30 --grace-s 5 --warmup-duration-s 2",
    "sweep --isl 128,256 --osl 32",
    "sweep --shared-prefix-tokens 200 --shared-prefix-pool 4",
    "sweep --sim-profile fast --sim-time-scale 3 --ttft-sla-ms 400 --peak-concurrency 500",
    "sweep --config {file}",
    "sweep --config {file} --concurrency 2 --isl 100 --num-runs 1 --url http://127.0.0.1:10/v1",
    "sweep --concurrency 0",
    "sweep --request-rate 0",
    "sweep --grace-s 3",
    "search --ttft-sla-ms 500 --tpot-sla-ms 50 --concurrency-min 1 --concurrency-max 256",
    "search --config {file}",
    "search --config {file} --e2e-sla-ms 9000 --search-max-iterations 4",
    "search --sla time_to_first_token:p95:lt:300 --sla-by-confidence --num-runs 3",
    "search",
    "sweep --config {sagemaker}",
    "sweep --config {sagemaker} --sagemaker-body chat --region us-east-2 --payload-codec sse",
    "sweep --sagemaker-endpoint ep --region us-east-1 --sagemaker-body tgi --payload-codec jsonlines --inference-component ic --target-variant v1 --custom-attributes a=b --aws-profile p",
    "sweep --config {client}",
    "sweep --config {client} --proxy http://127.0.0.1:3128 --endpoint-path /v1/x --request-id-header none",
    "sweep --url http://127.0.0.1:9/v1 --url http://127.0.0.1:10/v1 --model m1,m2 --route-by round-robin",
    "sweep --url http://127.0.0.1:9/v1 --insecure --http2 --source-addrs 127.0.0.2 --request-timeout-s 30 --extra-body {\"temperature\":0.5}",
    "sweep --url http://127.0.0.1:9/v1 --route-by sticky",
    "search --config {search}",
    "search --config {search} --objective sla --concurrency-max 64 --precision 0.2",
    "sweep --config {search}",
    "sweep --config {search} --peak-rps 10 --headroom 0.1",
    "sweep --config {sim}",
    "sweep --config {sim} --sim-profile calibrated --sim-time-scale 1 --sim-jitter 0 --sim-protocol openai --sim-fault-rate 0.2 --sim-faults stall --sim-stall-ms 50",
    "sweep --sim-slowdown 2 --sim-drift 0.2 --sim-degrade 0.01 --sim-reasoning-share 0.5",
    "sweep --config {sim} --lead-in 0 --request-count 50",
    "sweep --config {sim} --lead-in 0 --warmup-requests 5",
    "sweep --lead-in 300 --concurrency 4,16",
    "search --ttft-sla-ms 900 --request-count 64 --warmup-requests 2",
    "sweep --url http://127.0.0.1:9/v1 --shard 1/4 --request-count 100 --warmup-requests 8 --seed 3",
    "sweep --url http://127.0.0.1:9/v1 --shard 0/2 --request-rate 4,8 --max-in-flight 8",
    "sweep --shard 0/2",
    "sweep --url http://127.0.0.1:9/v1 --retries 2 --retry-backoff-ms 100 --allow-missing-finish-reason --trust-server-usage --records-in-memory 1000 --inputs-limit 10 --exact-percentiles --records-zstd",
    "search --config {bad}",
    "sweep --config {bad}",
    "sweep --config {client} --s3-region us-west-2 --s3-part-size-mib 8 --output-s3 s3://other/x",
    "sweep --archive --s3-endpoint-url http://127.0.0.1:10",
    "sweep --config {model}",
    "sweep --config {model} --tensor-parallel 4 --kv-cache-dtype auto --max-num-seqs 256 --weights bf16",
    "sweep --sim-profile predicted --model-config {configs}/gpt-oss-20b.json --instance ml.g6e.xlarge",
];

/// A refusal with its causes.
fn refusal(e: &dyn std::error::Error) -> String {
    let mut out = format!("refused: {e}");
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out
}

/// The resolved settings of one case, or the refusal.
fn resolved(case: &str, tmp: &Path) -> String {
    let line = [
        "file",
        "sagemaker",
        "client",
        "search",
        "sim",
        "model",
        "bad",
    ]
    .iter()
    .fold(case.to_owned(), |l, f| {
        l.replace(
            &format!("{{{f}}}"),
            tmp.join(format!("{f}.toml")).to_str().unwrap(),
        )
    });
    let line = line.replace("{configs}", &configs());
    let mut argv = vec!["kneepoint".to_owned()];
    argv.extend(line.split(' ').map(str::to_owned));
    if !case.contains("{file}")
        && !case.contains("{client}")
        && !case.contains("{sagemaker}")
        && !case.contains("{search}")
        && !case.contains("{sim}")
        && !case.contains("{model}")
        && !case.contains("{bad}")
    {
        argv.extend([
            "--artifact-dir".to_owned(),
            tmp.join("out").display().to_string(),
        ]);
    }
    let text = match Cli::try_parse_from(&argv) {
        Err(e) => format!(
            "refused by the flags: {}",
            e.to_string().lines().next().unwrap_or("")
        ),
        Ok(cli) => match cli.command {
            Command::Sweep(a) => match SweepSettings::resolve(&a) {
                Ok(s) => format!("{s:#?}"),
                Err(e) => refusal(&e),
            },
            Command::Search(a) => match SearchSettings::resolve(&a) {
                Ok(s) => format!("{s:#?}"),
                Err(e) => refusal(&e),
            },
            _ => panic!("only sweeps and searches here"),
        },
    };
    let text = text.replace(tmp.to_str().unwrap(), "<tmp>");
    undated(&text.replace(&configs(), "<configs>"))
}

/// The default artifact folder's time stamp (`sweep-20261206T090357Z`) as `sweep-<time>`.
fn undated(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("artifacts/") {
        let (head, tail) = rest.split_at(i + "artifacts/".len());
        out.push_str(head);
        let name_end = tail.find('-').map_or(0, |d| d + 1);
        let stamp = tail.get(name_end..name_end + 16).unwrap_or("");
        let dated = stamp.len() == 16 && stamp.as_bytes()[8] == b'T' && stamp.ends_with('Z');
        if dated {
            out.push_str(&tail[..name_end]);
            out.push_str("<time>");
            rest = &tail[name_end + 16..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn resolved_settings_are_as_saved() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("file", FILE),
        ("sagemaker", SAGEMAKER_FILE),
        ("client", CLIENT_FILE),
        ("search", SEARCH_FILE),
        ("sim", SIM_FILE),
        ("model", MODEL_FILE),
        ("bad", BAD_FILE),
    ] {
        let text = text.replace("{configs}", &configs());
        std::fs::write(tmp.path().join(format!("{name}.toml")), text).unwrap();
    }
    let mut out = String::new();
    for case in CASES {
        let once = resolved(case, tmp.path());
        // the same twice: nothing in it depends on the run (an address, a clock)
        assert_eq!(once, resolved(case, tmp.path()), "{case}");
        out.push_str(&format!("===== {case}\n{once}\n"));
    }
    check("resolved.txt", &out);
}
