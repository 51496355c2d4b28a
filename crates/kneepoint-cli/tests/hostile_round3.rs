//! Issue 46: datasets, traces and audio settings that claim absurd sizes or times are refused
//! with a clear message naming the file and line, never an abort, under a 3 GB address-space
//! limit (items 3, 6 and 11).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kneepoint");

/// Runs `kneepoint sweep` against the simulator with `args`, under `ulimit -v` 3 GB; returns
/// the exit code and standard error.
fn sweep_limited(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3145728; exec \"$0\" sweep \"$@\"")
        .arg(BIN)
        .args(args)
        .args([
            "--sim-profile",
            "fast",
            "--sim-time-scale",
            "1",
            "--concurrency",
            "4",
            "--request-count",
            "8",
            "--quiet",
            "--artifact-dir",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn refused(dir: &Path, args: &[&str], says: &[&str]) {
    let (code, err) = sweep_limited(dir, args);
    assert_eq!(code, Some(1), "{args:?}: {err}");
    for s in says {
        assert!(err.contains(s), "{args:?}: wanted {s:?} in {err}");
    }
}

#[test]
fn trace_rows_claiming_billions_of_tokens_are_refused_with_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mooncake = tmp.path().join("mooncake.jsonl");
    std::fs::write(
        &mooncake,
        "{\"timestamp\": 0, \"input_length\": 64, \"output_length\": 4}\n\
         {\"timestamp\": 5, \"input_length\": 4294967295, \"output_length\": 4}\n",
    )
    .unwrap();
    refused(
        tmp.path(),
        &["--dataset", mooncake.to_str().unwrap()],
        &["mooncake.jsonl:2:", "at most 10000000 tokens"],
    );
    let burst = tmp.path().join("burst.csv");
    std::fs::write(
        &burst,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         0,ChatGPT,100,10,110,Conversation log\n\
         1,ChatGPT,4000000000,10,4000000010,Conversation log\n",
    )
    .unwrap();
    refused(
        tmp.path(),
        &["--dataset", burst.to_str().unwrap()],
        &["burst.csv:3:", "at most 10000000 tokens"],
    );
    let single = tmp.path().join("single.jsonl");
    std::fs::write(
        &single,
        "{\"text\": \"hi\", \"output_length\": 4000000000}\n",
    )
    .unwrap();
    refused(
        tmp.path(),
        &["--dataset", single.to_str().unwrap()],
        &["single.jsonl", "output_length"],
    );
}

#[test]
fn replays_that_would_never_end_are_refused_with_their_planned_duration() {
    let tmp = tempfile::tempdir().unwrap();
    let far = tmp.path().join("far.jsonl");
    std::fs::write(
        &far,
        "{\"timestamp\": 0, \"input_length\": 16, \"output_length\": 4}\n\
         {\"timestamp\": 1000000000000000, \"input_length\": 16, \"output_length\": 4}\n",
    )
    .unwrap();
    refused(
        tmp.path(),
        &["--dataset", far.to_str().unwrap(), "--replay-speedup", "1"],
        &["would take", "years", "--replay-speedup"],
    );
    let burst = tmp.path().join("far.csv");
    std::fs::write(
        &burst,
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
         0,ChatGPT,16,4,20,Conversation log\n\
         1e300,ChatGPT,16,4,20,Conversation log\n",
    )
    .unwrap();
    refused(
        tmp.path(),
        &[
            "--dataset",
            burst.to_str().unwrap(),
            "--replay-speedup",
            "1",
        ],
        &["would take"],
    );
    let delays = tmp.path().join("delays.jsonl");
    std::fs::write(
        &delays,
        "{\"session_id\": \"a\", \"input_length\": 16, \"output_length\": 4}\n\
         {\"session_id\": \"a\", \"delay\": 1000000000000000, \"input_length\": 16, \"output_length\": 4}\n",
    )
    .unwrap();
    refused(
        tmp.path(),
        &["--dataset", delays.to_str().unwrap()],
        &["delays.jsonl:2:", "think time"],
    );
}

#[test]
fn audio_that_would_make_huge_requests_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    refused(
        tmp.path(),
        &[
            "--endpoint-type",
            "chat",
            "--audio-per-request",
            "64",
            "--audio-length-mean",
            "600",
            "--audio-sample-rate",
            "48000",
            "--audio-pool",
            "1",
        ],
        &["MB of audio", "at most"],
    );
    assert!(!tmp.path().join("out/concurrency_4").exists());
}

/// `kneepoint ARGS` under `ulimit -v` 3 GB: exit code, stdout and stderr.
fn kneepoint_limited(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3145728; exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Items 4 and 10: records files that were emptied, doubled or followed by a gigabyte of zero
/// bytes are refused by `report` and `compare` alike, named, in bounded memory; none of them
/// is called a regression.
#[test]
fn tampered_records_files_are_refused_not_compared() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let (code, _, err) = kneepoint_limited(&[
        "sweep",
        "--sim-profile",
        "fast",
        "--sim-time-scale",
        "1",
        "--concurrency",
        "2",
        "--request-count",
        "24",
        "--isl",
        "16",
        "--osl",
        "4",
        "--quiet",
        "--artifact-dir",
        a.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let records = std::fs::read(a.join("concurrency_2/profile_export.jsonl")).unwrap();
    let tampered = |name: &str, bytes: &[u8], junk_tail: u64| {
        let b = tmp.path().join(name);
        let cp = Command::new("cp")
            .arg("-r")
            .arg(&a)
            .arg(&b)
            .status()
            .unwrap();
        assert!(cp.success());
        let path = b.join("concurrency_2/profile_export.jsonl");
        std::fs::write(&path, bytes).unwrap();
        if junk_tail > 0 {
            // A sparse tail of zero bytes: a gigabyte read, none of it on disk.
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.set_len(bytes.len() as u64 + junk_tail).unwrap();
        }
        b
    };
    let doubled = [records.as_slice(), records.as_slice()].concat();
    for (name, bytes, tail, says) in [
        ("empty", &b""[..], 0, "holds 0 of the"),
        ("doubled", &doubled[..], 0, "twice"),
        ("zeros", &records[..], 1 << 30, "not a record"),
    ] {
        let b = tampered(name, bytes, tail);
        let (code, out, err) =
            kneepoint_limited(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{name}: {out}{err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(
            !out.contains("regressed") && !err.contains("regressed"),
            "{name}: {out}{err}"
        );
        if name != "empty" {
            // `report` refuses an emptied file already (issue 34); the others too now.
            let (code, _, err) = kneepoint_limited(&["report", b.to_str().unwrap()]);
            assert_eq!(code, Some(1), "{name}: {err}");
            assert!(err.contains(says), "{name}: {err}");
        }
    }
}
