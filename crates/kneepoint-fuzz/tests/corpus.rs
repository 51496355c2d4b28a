//! Replays every input kept in `fuzz/corpus/` (and `fuzz/artifacts/`, where cargo-fuzz puts a
//! crashing input) through the fuzz targets' checks, on the stable toolchain.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

fn replay(target: &str, check: fn(&[u8])) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for dir in ["corpus", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(
                outcome.is_ok(),
                "{target}: {} fails its check",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n > 0, "no corpus kept for {target}");
    println!("{target}: {n} inputs replayed");
}

#[test]
fn sse_corpus() {
    replay("sse_stream", kneepoint_fuzz::sse_stream);
}

#[test]
fn event_stream_corpus() {
    replay("event_stream", kneepoint_fuzz::event_stream);
}

#[test]
fn config_corpus() {
    replay("config_text", kneepoint_fuzz::config_text);
}

#[test]
fn datasets_corpus() {
    replay("datasets", kneepoint_fuzz::datasets);
}

#[test]
fn prometheus_corpus() {
    replay("prometheus_text", kneepoint_fuzz::prometheus_text);
}
