//! `--records-zstd`: each level's records go to `profile_export.jsonl.zst`, hold the same
//! records as the plain file would (one per request), take a fraction of its bytes, and are
//! read back by `report` (and so by `compare` and `merge`, which load levels the same way).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use kneepoint_cli::run_sweep;
use kneepoint_metrics::export::{read_jsonl, records_path, RECORDS_FILE, RECORDS_FILE_ZSTD};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_records_are_smaller_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (plain, packed) = (tmp.path().join("plain"), tmp.path().join("zstd"));
    let args = [
        "--concurrency",
        "16",
        "--request-count",
        "600",
        "--seed",
        "7",
    ];
    run_sweep(&common::fast_sweep("8", &args, &plain).unwrap(), false)
        .await
        .unwrap();
    let mut z = args.to_vec();
    z.push("--records-zstd");
    run_sweep(&common::fast_sweep("8", &z, &packed).unwrap(), false)
        .await
        .unwrap();
    let level = |d: &std::path::Path| d.join("concurrency_16");
    assert!(!level(&packed).join(RECORDS_FILE).exists());
    let zpath = level(&packed).join(RECORDS_FILE_ZSTD);
    assert_eq!(records_path(&level(&packed)), zpath);
    let a = read_jsonl(&level(&plain).join(RECORDS_FILE)).unwrap();
    let b = read_jsonl(&zpath).unwrap();
    assert_eq!((a.len(), b.len()), (600, 600));
    assert!(b.iter().all(|r| r.error.is_none()));
    let (pa, pb) = (
        std::fs::metadata(level(&plain).join(RECORDS_FILE))
            .unwrap()
            .len(),
        std::fs::metadata(&zpath).unwrap().len(),
    );
    eprintln!(
        "bytes per request: plain {:.0}, zstd {:.0}",
        pa as f64 / 600.0,
        pb as f64 / 600.0
    );
    assert!(pb * 4 < pa, "zstd {pb} vs plain {pa} bytes");
    // Re-rendered from the compressed file, the level reads the same 600 requests.
    let o = kneepoint_cli::run_report(&packed, false).unwrap();
    assert!(o.html.is_file());
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(level(&packed).join("profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(doc["request_count"]["avg"], 600.0);
    // A file cut short keeps the records before the cut.
    let bytes = std::fs::read(&zpath).unwrap();
    let cut = tmp.path().join("cut.jsonl.zst");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let kept = read_jsonl(&cut).unwrap();
    assert!(kept.len() > 100 && kept.len() < 600, "{}", kept.len());
}
