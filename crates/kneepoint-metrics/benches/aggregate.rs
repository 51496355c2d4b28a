//! Level aggregation speed: `cargo bench -p kneepoint-metrics --bench aggregate`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kneepoint_core::{Phase, RequestRecord, TokenSource};
use kneepoint_metrics::{GoodputSlo, LevelSummary};

fn records(n: u64, tokens: u64) -> Vec<RequestRecord> {
    (0..n)
        .map(|i| {
            let start = i * 1_000_000;
            let chunk_ns: Vec<u64> = (0..tokens)
                .map(|t| start + 50_000_000 + t * 9_000_000 + (i * 7919 + t * 104_729) % 1_000_000)
                .collect();
            {
                let mut built = RequestRecord::new(i, Phase::Profiling);
                built.x_request_id = None;
                built.worker = (i % 256) as u32;
                built.origin_unix_ns = 0;
                built.start_ns = start;
                built.response_ns = Some(start + 1_000_000);
                built.first_content_ns = chunk_ns.first().copied();
                built.end_ns = chunk_ns.last().copied().unwrap_or(start) + 100_000;
                built.chunk_ns = chunk_ns;
                built.input_tokens = Some(1024);
                built.server_input_tokens = Some(1024);
                built.output_tokens = Some(tokens as u32);
                built.output_tokens_source = Some(TokenSource::Usage);
                built.client_output_tokens = Some(tokens as u32);
                built.output_bytes = tokens * 6;
                built.requested_output_tokens = Some(tokens as u32);
                built.finish_reason = Some("length".into());
                built.error = None;
                built.attempts = 1;
                built.intended_start_ns = None;
                built
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let recs = records(1024, 256);
    let mut g = c.benchmark_group("aggregate");
    g.throughput(Throughput::Elements(recs.len() as u64));
    g.sample_size(20);
    g.bench_function("level_summary_1024_requests_x_256_tokens", |b| {
        b.iter(|| LevelSummary::from_records(256, &recs, &GoodputSlo::default()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
