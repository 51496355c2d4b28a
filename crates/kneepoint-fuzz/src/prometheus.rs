//! Prometheus text pages: the parser and everything downstream of it.

use kneepoint_scrape::text::{parse, Value};
use kneepoint_scrape::{export_csv, export_json, summarise, Part, Timeline, Window};

/// Reads the bytes as a metrics page (lossy UTF-8, as the scraper does) twice, with counters
/// moved on, and summarises and exports them: never a panic; every unreadable line counted;
/// every family non-empty with sorted buckets.
pub fn prometheus_text(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let e = parse(&text);
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    assert!(e.skipped <= lines, "{} skipped of {lines} lines", e.skipped);
    assert_eq!(e.skipped > 0, e.first_problem.is_some());
    for f in &e.families {
        assert!(!f.series.is_empty(), "empty family {}", f.name);
        for s in &f.series {
            if let Value::Histogram { buckets, .. } = &s.value {
                assert!(
                    buckets.windows(2).all(|w| w[0].0 < w[1].0),
                    "unsorted {}",
                    f.name
                );
            }
        }
    }
    let mut tl = Timeline::new("http://127.0.0.1:1/metrics");
    tl.add(0, 0, 1, &e);
    tl.add(1_000, 1, 1, &parse(&text.replace(" 1", " 2")));
    tl.add(2_000, 2, 1, &e);
    let parts = [Part {
        window: Window {
            start_ns: 500,
            end_ns: 2_000,
        },
        timelines: vec![tl],
    }];
    let summary = summarise(&parts);
    let doc = export_json(&parts, &summary);
    assert!(serde_json::to_vec(&doc).is_ok());
    let _ = export_csv(&parts);
}
