//! `kneepoint k8s job`: the printed manifest deserialises into `k8s-openapi`'s `Job` and says
//! what a sharded sweep needs (Indexed completions, the index as `--shard K/N`, one start time,
//! one results folder per shard, no retries); flags the Job sets itself, and typos in the
//! sweep's flags, are refused before any pod would run them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use k8s_openapi::api::batch::v1::Job;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

fn job(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["k8s", "job"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_manifest_is_an_indexed_job_of_shards() {
    let o = job(&[
        "--shards",
        "4",
        "--pvc",
        "kp-results",
        "--namespace",
        "bench",
        "--image",
        "ghcr.io/example/kneepoint:0.1",
        "--start-at",
        "2026-12-01T20:00:00Z",
        "--",
        "--url",
        "http://vllm:8000",
        "--concurrency",
        "64,256",
        "--request-count",
        "1024",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Job = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j.metadata.namespace.as_deref(), Some("bench"));
    let spec = j.spec.unwrap();
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(
        (spec.completions, spec.parallelism, spec.backoff_limit),
        (Some(4), Some(4), Some(0))
    );
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let c = &pod.containers[0];
    assert_eq!(c.command.as_deref(), Some(&["kneepoint".to_owned()][..]));
    let args = c.args.clone().unwrap().join(" ");
    assert!(
        args.starts_with("sweep --url http://vllm:8000 --concurrency 64,256"),
        "{args}"
    );
    assert!(args.contains("--shard $(SHARD_INDEX)/4"), "{args}");
    // 2026-12-01T20:00:00Z, the same for every pod.
    assert!(args.contains("--start-at 1796155200"), "{args}");
    assert!(
        args.contains("--artifact-dir /results/kneepoint-sweep/shard-$(SHARD_INDEX)"),
        "{args}"
    );
    let env = c.env.clone().unwrap();
    let index = env.iter().find(|e| e.name == "SHARD_INDEX").unwrap();
    let field = index
        .value_from
        .as_ref()
        .unwrap()
        .field_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        field.field_path,
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    let vol = &pod.volumes.unwrap()[0];
    assert_eq!(
        vol.persistent_volume_claim.as_ref().unwrap().claim_name,
        "kp-results"
    );
    assert_eq!(c.volume_mounts.as_ref().unwrap()[0].mount_path, "/results");

    // To S3 instead: one prefix per shard.
    let o = job(&[
        "--shards",
        "2",
        "--output-s3",
        "s3://bkt/runs",
        "--",
        "--url",
        "http://x:1",
    ]);
    let j: Job = serde_json::from_slice(&o.stdout).unwrap();
    let args = j.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap()
        .join(" ");
    assert!(
        args.contains("--output-s3 s3://bkt/runs/kneepoint-sweep/shard-$(SHARD_INDEX)"),
        "{args}"
    );
}

#[test]
fn the_api_key_comes_from_a_secret_and_never_the_manifest() {
    let o = job(&[
        "--shards",
        "2",
        "--pvc",
        "r",
        "--api-key-secret",
        "vllm-key/token",
        "--",
        "--url",
        "http://x:1",
        "--concurrency",
        "8",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Job = serde_json::from_slice(&o.stdout).unwrap();
    let c = j.spec.unwrap().template.spec.unwrap().containers.remove(0);
    let key = c
        .env
        .unwrap()
        .into_iter()
        .find(|e| e.name == "OPENAI_API_KEY")
        .unwrap();
    let r = key.value_from.unwrap().secret_key_ref.unwrap();
    assert_eq!((r.name.as_str(), r.key.as_str()), ("vllm-key", "token"));
    let args = c.args.unwrap();
    assert!(args.join(" ").contains("--api-key-env OPENAI_API_KEY"));
    // The user's --quiet and the Job's are not both passed (clap refuses a repeat).
    assert_eq!(args.iter().filter(|a| *a == "--quiet").count(), 1);
}

#[test]
fn what_the_job_sets_and_typos_are_refused() {
    let err = |args: &[&str]| {
        let o = job(args);
        assert!(!o.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let base = ["--shards", "4", "--pvc", "r", "--", "--url", "http://x:1"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    assert!(err(&with(&["--shard", "0/4"])).contains("set by the Job itself"));
    assert!(err(&with(&["--concurency", "8"])).contains("do not parse"));
    // A level smaller than the shard count fails here, not in four pods.
    assert!(err(&with(&["--concurrency", "2"])).contains("cannot be split"));
    assert!(err(&with(&["--header", "Authorization: Bearer sk-x"])).contains("--api-key-secret"));
    assert!(err(&["--shards", "2", "--", "--url", "http://x:1"]).contains("--pvc"));
    assert!(
        err(&["--shards", "0", "--pvc", "r", "--", "--url", "http://x:1"]).contains("--shards")
    );
    assert!(err(&[
        "--shards",
        "2",
        "--pvc",
        "r",
        "--api-key-secret",
        "nokey",
        "--",
        "--url",
        "http://x:1",
    ])
    .contains("NAME/KEY"));
}

/// Issue 46 item 2: no secret a header, a URL, a proxy or the environment holds is written into
/// the manifest; each is refused, pointing at the Secret option.
#[test]
fn header_url_and_proxy_secrets_are_refused_not_written() {
    const KEY: &str = "sk-k8s-env-secret-5521";
    let refused = |extra: &[&str]| {
        let mut args = vec!["--shards", "2", "--pvc", "r", "--", "--concurrency", "8"];
        args.extend_from_slice(extra);
        let o = Command::new(BIN)
            .args(["k8s", "job"])
            .args(&args)
            .env("OPENAI_API_KEY", KEY)
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(!o.status.success(), "{extra:?} was accepted: {out}");
        assert!(err.contains("--api-key-secret"), "{extra:?}: {err}");
        for secret in [KEY, "hdr-k8s-secret", "url-k8s-secret", "proxy-k8s-pw"] {
            assert!(
                !out.contains(secret) && !err.contains(secret),
                "{extra:?}: {err}"
            );
        }
    };
    refused(&["--url", "http://x:1", "--header", "api-key: hdr-k8s-secret"]);
    refused(&["--url", "http://x:1", "--header=X-Api-Key: hdr-k8s-secret"]);
    refused(&[
        "--url",
        "http://x:1",
        "--header",
        "Cookie: s=hdr-k8s-secret",
    ]);
    refused(&["--url", "http://x:1/v1?key=url-k8s-secret"]);
    refused(&["--url=http://x:1/v1?api_key=url-k8s-secret"]);
    refused(&[
        "--url",
        "http://x:1",
        "--proxy",
        "http://u:proxy-k8s-pw@p:3128",
    ]);
    // The environment's own key, pasted into a header of another name.
    refused(&[
        "--url",
        "http://x:1",
        "--header",
        &format!("X-Custom: {KEY}"),
    ]);
    // Plain headers and URLs still pass.
    let o = Command::new(BIN)
        .args([
            "k8s",
            "job",
            "--shards",
            "2",
            "--pvc",
            "r",
            "--",
            "--concurrency",
            "8",
        ])
        .args([
            "--url",
            "http://x:1/v1?api-version=2",
            "--header",
            "X-Tenant: acme",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Issue 46 item 9: a Job name Kubernetes would reject is refused, not written.
#[test]
fn invalid_job_names_are_refused() {
    let long = "a".repeat(300);
    for name in [
        "with space",
        "a/b",
        long.as_str(),
        "",
        "9lives",
        "Upper",
        "end-",
    ] {
        let o = job(&[
            "--shards",
            "2",
            "--pvc",
            "r",
            "--name",
            name,
            "--",
            "--url",
            "http://x:1",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name:?} was accepted");
        assert!(err.contains("not a valid Job name"), "{name:?}: {err}");
        assert!(o.stdout.is_empty());
    }
    let o = job(&[
        "--shards",
        "2",
        "--pvc",
        "r",
        "--name",
        "bench-7",
        "--",
        "--url",
        "http://x:1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
