//! Config files with SageMaker's names, flag precedence, and clear errors for bad input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clap::Parser;
use kneepoint_cli::{Cli, Command, Protocol, SweepSettings, Target};
use kneepoint_workload::LengthDist;

fn resolve(args: &[&str]) -> anyhow::Result<SweepSettings> {
    let mut v = vec!["kneepoint", "sweep"];
    v.extend_from_slice(args);
    let cli = Cli::try_parse_from(v)?;
    let Command::Sweep(a) = cli.command else {
        panic!()
    };
    Ok(SweepSettings::resolve(&a)?)
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn sagemaker_names_in_toml() {
    let d = tempfile::tempdir().unwrap();
    let f = write(
        &d,
        "c.toml",
        r#"
[endpoint]
url = "http://127.0.0.1:9"
model = "nemotron"
type = "completions"
headers = { "X-Team" = "infra" }

[workload]
tokenizer = "nvidia/some-model"
streaming = true
prompt_input_tokens_mean = 512
prompt_input_tokens_stddev = 20
output_tokens_mean = 128

[sweep_params]
concurrency = [64, 256, 1024]
request_count = 1024
"#,
    );
    let s = resolve(&["--config", &f]).unwrap();
    let levels: Vec<(u32, u32)> = s
        .plan
        .levels()
        .iter()
        .map(|l| (l.concurrency, l.request_count))
        .collect();
    assert_eq!(levels, vec![(64, 1024), (256, 1024), (1024, 1024)]);
    assert!(matches!(
        s.common.target,
        Target::Endpoint(Protocol::OpenAi { .. })
    ));
    assert_eq!(openai(&s).model, "nemotron");
    assert_eq!(openai(&s).url(), "http://127.0.0.1:9/v1/completions");
    assert_eq!(
        openai(&s).headers,
        vec![("X-Team".to_owned(), "infra".to_owned())]
    );
    assert!(
        matches!(s.common.isl, LengthDist::Normal { mean, stddev, .. } if mean == 512.0 && stddev == 20.0)
    );
    assert_eq!(s.common.osl, LengthDist::Fixed(128));
    // flags win over the file
    let s = resolve(&[
        "--config",
        &f,
        "--concurrency",
        "8",
        "--request-count",
        "10",
        "--osl",
        "64",
    ])
    .unwrap();
    assert_eq!(s.plan.levels().len(), 1);
    assert_eq!(s.plan.levels()[0].request_count, 10);
    assert_eq!(s.common.osl, LengthDist::Fixed(64));
}

#[test]
fn json_config_and_simulator_section() {
    let d = tempfile::tempdir().unwrap();
    let f = write(
        &d,
        "c.json",
        r#"{"sweep_params": {"concurrency": [1, 2], "request_count": 3},
            "simulator": {"profile": "fast", "time_scale": 0.5}}"#,
    );
    let s = resolve(&["--config", &f]).unwrap();
    let Target::Simulator { profile: p, .. } = &s.common.target else {
        panic!("expected the simulator")
    };
    assert_eq!(p.name, "fast");
    assert_eq!(p.time_scale, 0.5);
    assert_eq!(s.plan.levels().len(), 2);
}

#[test]
fn bad_input_gives_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let unknown = write(&d, "u.toml", "[sweep_params]\nconcurrencies = [1]\n");
    let e = format!("{:#}", resolve(&["--config", &unknown]).unwrap_err());
    assert!(
        e.contains("unknown field") && e.contains("concurrencies"),
        "{e}"
    );
    let broken = write(&d, "b.json", "{\"sweep_params\": ");
    assert!(format!("{:#}", resolve(&["--config", &broken]).unwrap_err()).contains("JSON"));
    let missing = format!(
        "{:#}",
        resolve(&["--config", "/nonexistent/k.toml"]).unwrap_err()
    );
    assert!(missing.contains("/nonexistent/k.toml"), "{missing}");
    let e = format!("{:#}", resolve(&["--concurrency", "0"]).unwrap_err());
    assert!(e.contains("concurrency must be at least 1"), "{e}");
    let e = format!("{:#}", resolve(&["--concurrency", "4,4"]).unwrap_err());
    assert!(e.contains("more than once"), "{e}");
    assert!(format!("{:#}", resolve(&["--isl-stddev=-1"]).unwrap_err()).contains("stddev"));
    assert!(format!(
        "{:#}",
        resolve(&["--url", "ftp://x", "--model", "m"]).unwrap_err()
    )
    .contains("scheme"));
    assert!(format!(
        "{:#}",
        resolve(&["--endpoint-type", "classify"]).unwrap_err()
    )
    .contains("embeddings, rerank or score"));
    assert!(
        format!("{:#}", resolve(&["--sim-profile", "huge"]).unwrap_err())
            .contains("possible values: calibrated, fast")
    );
    assert!(
        format!("{:#}", resolve(&["--sim-time-scale", "0"]).unwrap_err()).contains("time_scale")
    );
    assert!(
        format!("{:#}", resolve(&["--header", "no-colon"]).unwrap_err()).contains("Name: value")
    );
    assert!(
        format!("{:#}", resolve(&["--extra-body", "[1]"]).unwrap_err()).contains("JSON object")
    );
    // Issue 20, item 10: kneepoint's own fields cannot be overridden behind the records' back.
    for body in [
        r#"{"stream":false}"#,
        r#"{"model":"x"}"#,
        r#"{"max_tokens":9}"#,
    ] {
        let e = format!("{:#}", resolve(&["--extra-body", body]).unwrap_err());
        assert!(e.contains("extra_body must not set"), "{body}: {e}");
    }
    assert!(resolve(&["--extra-body", r#"{"temperature":0.2}"#]).is_ok());
    assert!(resolve(&["--request-count", "-5"]).is_err());
}

#[test]
fn huge_deadlines_are_refused_not_a_panic() {
    for (flag, v) in [
        ("--request-timeout-s", "1e300"),
        ("--idle-timeout-s", "1e300"),
        ("--first-token-timeout-s", "1e20"),
        ("--response-timeout-s", "1e300"),
        ("--request-timeout-s", "inf"),
    ] {
        let e = format!("{:#}", resolve(&[flag, v]).unwrap_err());
        assert!(e.contains("30 days"), "{flag} {v}: {e}");
    }
    let d = tempfile::tempdir().unwrap();
    let f = write(&d, "t.toml", "[endpoint]\nidle_timeout_s = 1e300\n");
    let e = format!("{:#}", resolve(&["--config", &f]).unwrap_err());
    assert!(e.contains("30 days"), "{e}");
    // Sizes a typo makes absurd are refused before anything is allocated.
    for (flag, v, says) in [
        ("--isl", "1e12", "at most 10000000 tokens"),
        ("--osl", "1e12", "at most 10000000 tokens"),
        ("--concurrency", "10000000", "above the maximum of 1000000"),
    ] {
        let e = format!("{:#}", resolve(&[flag, v]).unwrap_err());
        assert!(e.contains(says), "{flag} {v}: {e}");
    }
    let ok = resolve(&[
        "--request-timeout-s",
        "2592000",
        "--first-token-timeout-s",
        "5",
    ])
    .unwrap();
    assert_eq!(
        ok.common.levels.deadlines.request,
        Some(std::time::Duration::from_secs(2_592_000))
    );
}

#[test]
fn sagemaker_endpoint_settings_from_file_and_flags() {
    use kneepoint_transport::sagemaker::{BodyFormat, CodecKind};
    let d = tempfile::tempdir().unwrap();
    let f = write(
        &d,
        "sm.toml",
        r#"
[endpoint]
sagemaker_endpoint = "my-vllm"
region = "eu-west-1"
inference_component = "ic-a"
target_variant = "AllTraffic"
custom_attributes = "team=infra"
session_id = "s-1"
body_format = "tgi"
payload_codec = "jsonlines"
aws_profile = "bench"
"#,
    );
    let s = resolve(&["--config", &f]).unwrap();
    assert!(matches!(
        s.common.target,
        Target::Endpoint(Protocol::SageMaker(_))
    ));
    let sm = s.common.target.protocol().sagemaker().unwrap();
    assert_eq!(sm.config.endpoint_name, "my-vllm");
    assert_eq!(sm.config.region, "eu-west-1");
    assert_eq!(sm.config.body, BodyFormat::Tgi);
    assert_eq!(sm.config.codec, CodecKind::JsonLines);
    assert_eq!(
        sm.config.headers.inference_component.as_deref(),
        Some("ic-a")
    );
    assert_eq!(sm.config.headers.session_id.as_deref(), Some("s-1"));
    assert_eq!(sm.aws_profile.as_deref(), Some("bench"));
    assert_eq!(
        sm.config.url(),
        "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/my-vllm/invocations-response-stream"
    );
    // Flags win over the file.
    let s = resolve(&[
        "--config",
        &f,
        "--region",
        "us-east-2",
        "--inference-component",
        "ic-b",
        "--endpoint-url",
        "http://127.0.0.1:9",
        "--streaming",
        "false",
    ])
    .unwrap();
    let sm = s.common.target.protocol().sagemaker().unwrap().clone();
    assert_eq!(sm.config.region, "us-east-2");
    assert_eq!(
        sm.config.headers.inference_component.as_deref(),
        Some("ic-b")
    );
    assert_eq!(
        sm.config.url(),
        "http://127.0.0.1:9/endpoints/my-vllm/invocations"
    );
    // Clear errors.
    let e = |args: &[&str]| resolve(args).unwrap_err().to_string();
    assert!(e(&["--sagemaker-endpoint", "bad_name!"]).contains("endpoint name"));
    assert!(e(&["--sagemaker-endpoint", "ok", "--url", "http://x"]).contains("not both"));
    assert!(
        e(&["--sagemaker-endpoint", "ok", "--sagemaker-body", "xml"])
            .contains("possible values: chat, completions, tgi")
    );
    assert!(e(&["--sim-protocol", "grpc"]).contains("possible values: openai, sagemaker"));
}

/// Issue 20, item 12: the README's first command warned about itself ("only 1.0 requests per
/// slot" at 1,024). Issue 32: the default levels are the source documents' sweep, each kept
/// loaded: a lead-in of one wave (at least 256), two waves measured (at least 256), fillers
/// to the end (steady in virtual time: kneepoint-config's `tests/default_job.rs`). Without a
/// lead-in (turned off, or a warm-up given), at least four per slot; a count given is kept.
#[test]
fn the_default_job_is_kept_loaded_with_a_lead_in_and_two_measured_waves() {
    let plan = |s: &kneepoint_config::SweepSettings| -> Vec<(u32, u32)> {
        s.plan
            .levels()
            .iter()
            .map(|l| (l.concurrency, l.request_count))
            .collect()
    };
    let s = resolve(&[]).unwrap();
    assert_eq!(plan(&s), [(64, 256), (256, 512), (1024, 2048)]);
    assert_eq!(s.common.levels.lead_in, Some(256));
    for off in [&["--lead-in", "0"][..], &["--warmup-requests", "8"]] {
        let s = resolve(off).unwrap();
        assert_eq!(plan(&s), [(64, 1024), (256, 1024), (1024, 4096)]);
        assert_eq!(s.common.levels.lead_in, None);
    }
    let s = resolve(&["--request-count", "100", "--concurrency", "8,64"]).unwrap();
    assert!(s.plan.levels().iter().all(|l| l.request_count == 100));
    assert_eq!(s.common.levels.lead_in, None);
    let s = resolve(&["--request-count", "100", "--lead-in", "32"]).unwrap();
    assert_eq!(s.common.levels.lead_in, Some(32));
    let e = resolve(&["--lead-in", "32", "--warmup-requests", "4"])
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("lead-in"), "{e}");
}

#[test]
fn server_metrics_flags_and_slas_on_server_concepts() {
    let s = resolve(&["--sla", "server_kv_cache_usage:max:<:0.9"]).unwrap();
    assert!(s.common.server_metrics.target_metrics);
    assert_eq!(s.common.server_metrics.interval.as_secs_f64(), 1.0);
    let e = resolve(&[
        "--sla",
        "server_kv_cache_usage:max:<:0.9",
        "--no-server-metrics",
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("none will be scraped"), "{e}");
    let s = resolve(&[
        "--no-server-metrics",
        "--server-metrics",
        "http://127.0.0.1:9",
        "--gpu-metrics",
        "http://127.0.0.1:9400",
        "--server-metrics-interval",
        "0.25",
        "--sla",
        "gpu_power:avg:le:700",
    ])
    .unwrap();
    assert!(!s.common.server_metrics.target_metrics);
    assert_eq!(s.common.server_metrics.endpoints.len(), 2);
    let e = resolve(&["--server-metrics-interval", "0"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--server-metrics-interval"), "{e}");
}

#[test]
fn conversation_flags_and_where_they_cannot_run() {
    let s = resolve(&[
        "--conversation-turn-mean",
        "4",
        "--conversation-turn-stddev",
        "1",
        "--conversation-turn-delay-mean",
        "1500",
        "--conversation-turn-delay-stddev",
        "300",
        "--conversation-turn-delay-ratio",
        "0.5",
    ])
    .unwrap();
    let c = s.common.conversations.expect("conversations");
    assert_eq!(c.turns, LengthDist::mean_stddev(4.0, 1.0));
    assert_eq!(
        (c.delay_ms_mean, c.delay_ms_stddev, c.delay_ratio),
        (1500.0, 300.0, 0.5)
    );
    // one turn without spread is a single-turn workload
    let s = resolve(&["--conversation-turn-mean", "1"]).unwrap();
    assert!(s.common.conversations.is_none());
    // from [workload]
    let d = tempfile::tempdir().unwrap();
    let f = write(
        &d,
        "c.toml",
        "[workload]\nconversation_turn_mean = 3\nconversation_turn_delay_mean = 20\n",
    );
    let c = resolve(&["--config", &f])
        .unwrap()
        .common
        .conversations
        .unwrap();
    assert_eq!((c.turns, c.delay_ms_mean), (LengthDist::Fixed(3), 20.0));
    for (bad, says) in [
        (vec!["--conversation-turn-mean", "0.5"], "at least 1"),
        (
            vec!["--conversation-turn-stddev", "2"],
            "needs conversation_turn_mean",
        ),
        (
            vec![
                "--conversation-turn-mean",
                "2",
                "--conversation-turn-delay-mean=-5",
            ],
            "not negative",
        ),
        (
            vec!["--conversation-turn-mean", "2", "--request-rate", "4"],
            "closed loop",
        ),
        (
            vec!["--conversation-turn-mean", "2", "--duration-s", "10"],
            "count-bound",
        ),
    ] {
        let e = format!("{:#}", resolve(&bad).unwrap_err());
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn several_models_and_urls_make_routes() {
    let s = resolve(&["--model", "base=3, adapter-1", "--route-by", "weighted"]).unwrap();
    let r = s.common.target.protocol().routes().expect("routes").clone();
    assert_eq!(
        r.models,
        vec![("base".to_owned(), 3.0), ("adapter-1".to_owned(), 1.0)]
    );
    assert!(r.urls.is_empty(), "the simulator's own URL");
    assert_eq!(r.rule, kneepoint_transport::RouteRule::Weighted);
    assert_eq!(openai(&s).model, "base", "the first model is the primary");
    let s = resolve(&[
        "--url",
        "http://127.0.0.1:9",
        "--url",
        "http://127.0.0.1:10",
        "--model",
        "m",
    ])
    .unwrap();
    let r = s.common.target.protocol().routes().unwrap().clone();
    assert_eq!(r.urls.len(), 2);
    assert_eq!(r.rule, kneepoint_transport::RouteRule::RoundRobin);
    assert_eq!(openai(&s).base_url, "http://127.0.0.1:9");
    // conversations stay on one target by default
    let s = resolve(&["--model", "a,b", "--conversation-turn-mean", "3"]).unwrap();
    assert_eq!(
        s.common.target.protocol().routes().unwrap().clone().rule,
        kneepoint_transport::RouteRule::Sticky
    );
    // one model on one URL: no routes
    assert!(resolve(&["--model", "m"])
        .unwrap()
        .common
        .target
        .protocol()
        .routes()
        .is_none());
    for (bad, says) in [
        (vec!["--model", "a=0,b"], "positive"),
        (vec!["--model", "a=x"], "must be a number"),
        (vec!["--model", ",,"], "names no model"),
        (vec!["--route-by", "sticky"], "needs several models"),
        (
            vec!["--model", "a,b", "--route-by", "fastest"],
            "unknown rule",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:9",
                "--url",
                "http://127.0.0.1:10",
            ],
            "name the model",
        ),
    ] {
        let e = format!("{:#}", resolve(&bad).unwrap_err());
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn image_flags_and_where_images_cannot_go() {
    let s = resolve(&["--images-per-request", "2", "--image-width", "336"]).unwrap();
    let i = s.common.images.expect("images");
    assert_eq!((i.count, i.width, i.height, i.pool), (2, 336, 512, 16));
    assert!(resolve(&["--images-per-request", "0"])
        .unwrap()
        .common
        .images
        .is_none());
    for (bad, says) in [
        (
            vec![
                "--images-per-request",
                "1",
                "--endpoint-type",
                "completions",
            ],
            "chat requests",
        ),
        (
            vec!["--images-per-request", "1", "--image-height", "0"],
            "between 1 and 8192",
        ),
    ] {
        let e = format!("{:#}", resolve(&bad).unwrap_err());
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn every_turn_of_a_sharegpt_dataset() {
    let d = tempfile::tempdir().unwrap();
    let f = write(
        &d,
        "sg.json",
        r#"[{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}]"#,
    );
    let s = resolve(&[
        "--dataset",
        &f,
        "--dataset-multi-turn",
        "--conversation-turn-delay-mean",
        "250",
    ])
    .unwrap();
    let c = s.common.conversations.expect("conversations");
    assert_eq!(c.delay_ms_mean, 250.0);
    assert_eq!(s.common.dataset.unwrap().conversations, Some(c));
    for (bad, says) in [
        (vec!["--dataset-multi-turn"], "give one"),
        (
            vec!["--dataset", f.as_str(), "--conversation-turn-mean", "3"],
            "--dataset-multi-turn",
        ),
    ] {
        let e = format!("{:#}", resolve(&bad).unwrap_err());
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn pooling_endpoint_types_and_batch_sizes() {
    use kneepoint_workload::Pooling;
    let s = resolve(&["--endpoint-type", "embeddings", "--batch-size", "16"]).unwrap();
    assert_eq!(s.common.pooling, Some(Pooling::Embed { batch: 16 }));
    assert_eq!(openai(&s).api, kneepoint_transport::Api::Embeddings);
    let s = resolve(&["--endpoint-type", "rerank"]).unwrap();
    assert_eq!(s.common.pooling, Some(Pooling::Rank { batch: 8 }));
    let s = resolve(&["--endpoint-type", "score", "--batch-size", "2"]).unwrap();
    assert_eq!(s.common.pooling, Some(Pooling::Rank { batch: 2 }));
    assert!(resolve(&[]).unwrap().common.pooling.is_none());
    for (bad, says) in [
        (vec!["--batch-size", "4"], "pooling endpoint types"),
        (
            vec!["--endpoint-type", "embeddings", "--batch-size", "0"],
            "at least 1",
        ),
        (
            vec!["--endpoint-type", "rerank", "--conversation-turn-mean", "2"],
            "no conversations",
        ),
        (
            vec!["--endpoint-type", "classify"],
            "embeddings, rerank or score",
        ),
    ] {
        let e = format!("{:#}", resolve(&bad).unwrap_err());
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

/// The OpenAI-compatible client configuration of a resolved sweep (panics for SageMaker).
fn openai(s: &SweepSettings) -> &kneepoint_transport::OpenAiConfig {
    s.common
        .target
        .protocol()
        .openai()
        .expect("an OpenAI-compatible target")
}
