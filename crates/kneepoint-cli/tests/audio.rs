//! Audio inputs (issue 31): WAV clips made locally, sent as OpenAI `input_audio` parts; the
//! simulator counts 25 prompt tokens a second of audio, so the server's prompt count is the
//! text's plus the clips' (known truth), with the text the same as a run without audio.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use kneepoint_cli::run_sweep;
use serde_json::Value;

fn records(level: &Path) -> Vec<Value> {
    std::fs::read_to_string(level.join("profile_export.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audio_goes_as_input_audio_parts_and_counts_in_the_servers_prompt() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (with, without) = (tmp.path().join("with"), tmp.path().join("without"));
    let base = ["--concurrency", "3", "--request-count", "12"];
    // two clips of 1.2 s each: 30 prompt tokens a clip on the simulator
    let mut flags = base.to_vec();
    flags.extend([
        "--audio-per-request",
        "2",
        "--audio-length-mean",
        "1.2",
        "--audio-pool",
        "3",
    ]);
    run_sweep(&common::fast_sweep("8", &flags, &with)?, false).await?;
    run_sweep(&common::fast_sweep("8", &base, &without)?, false).await?;
    let (a, b) = (
        records(&with.join("concurrency_3")),
        records(&without.join("concurrency_3")),
    );
    assert_eq!((a.len(), b.len()), (12, 12));
    let by_id = |rs: &[Value]| {
        let mut v: Vec<(u64, Value)> = rs
            .iter()
            .map(|r| (r["metadata"]["session_num"].as_u64().unwrap(), r.clone()))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    };
    for ((ia, x), (ib, y)) in by_id(&a).iter().zip(&by_id(&b)) {
        assert_eq!(ia, ib);
        assert!(x["error"].is_null() && y["error"].is_null(), "{x} {y}");
        let (mx, my) = (&x["metadata"], &y["metadata"]);
        assert_eq!(
            (mx["audio_count"].as_u64(), mx["audio_ms"].as_u64()),
            (Some(2), Some(2400))
        );
        assert!(my.get("audio_count").is_none(), "{my}");
        let (sx, sy) = (
            mx["server_input_tokens"].as_u64().unwrap(),
            my["server_input_tokens"].as_u64().unwrap(),
        );
        assert_eq!(sx, sy + 60, "{sx} vs {sy}");
    }
    // inputs.json: the parts as sent, each clip's data shortened to its size and hash
    let inputs: Value =
        serde_json::from_slice(&std::fs::read(with.join("concurrency_3/inputs.json"))?)?;
    let parts = inputs["data"][0]["payloads"][0]["messages"][0]["content"]
        .as_array()
        .unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0]["type"], "text");
    for p in &parts[1..] {
        assert_eq!(p["type"], "input_audio");
        assert_eq!(p["input_audio"]["format"], "wav");
        let data = p["input_audio"]["data"].as_str().unwrap();
        // 1.2 s of 16-bit mono at 16 kHz: 38,444 bytes, 51,260 in base64
        assert!(
            data.starts_with("<51260 bytes, fnv1a ") && data.ends_with('>'),
            "{data}"
        );
    }
    // refused where audio cannot go, or of a length it cannot have
    for (flag, value, says) in [
        ("--endpoint-type", "completions", "chat"),
        ("--audio-length-mean", "0", "between 0.1 and 600"),
    ] {
        let e = common::fast_sweep(
            "8",
            &["--audio-per-request", "1", flag, value],
            &tmp.path().join("refused"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(says), "{e}");
    }
    Ok(())
}
