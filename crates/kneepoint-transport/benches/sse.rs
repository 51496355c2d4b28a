//! SSE parsing and chunk decoding throughput: `cargo bench -p kneepoint-transport --bench sse`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kneepoint_transport::parse_body;
use kneepoint_transport::sse::SseParser;

fn stream(tokens: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..tokens {
        s.push_str(&format!(
            "data: {{\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" word{i}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn bench(c: &mut Criterion) {
    let bytes = stream(256);
    let mut g = c.benchmark_group("sse_256_token_stream");
    g.throughput(Throughput::Elements(256));
    // Reads of 1,460 bytes (one TCP segment each), as a socket delivers them.
    g.bench_function("parse_events", |b| {
        b.iter(|| {
            let mut p = SseParser::default();
            let mut out = Vec::with_capacity(300);
            for chunk in bytes.chunks(1460) {
                p.push(chunk, &mut out).unwrap();
            }
            out.len()
        })
    });
    g.bench_function("parse_events_and_json", |b| {
        b.iter(|| {
            let mut p = SseParser::default();
            let mut out = Vec::with_capacity(300);
            let mut events = Vec::with_capacity(4);
            let mut n = 0;
            for chunk in bytes.chunks(1460) {
                p.push(chunk, &mut out).unwrap();
                for e in out.drain(..) {
                    if e.data != "[DONE]" {
                        parse_body(&e.data, &mut events).unwrap();
                        n += events.len();
                        events.clear();
                    }
                }
            }
            n
        })
    });
    // The path the transport takes: events borrowed from the parser's buffer, decoded in place.
    g.bench_function("parse_borrowed_events", |b| {
        b.iter(|| {
            let mut p = SseParser::default();
            let mut n = 0usize;
            for chunk in bytes.chunks(1460) {
                p.push_each(chunk, |e| n += e.data.len()).unwrap();
            }
            n
        })
    });
    g.bench_function("parse_borrowed_events_and_json", |b| {
        b.iter(|| {
            let mut p = SseParser::default();
            let mut events = Vec::with_capacity(4);
            let mut n = 0;
            for chunk in bytes.chunks(1460) {
                p.push_each(chunk, |e| {
                    if e.data != "[DONE]" {
                        parse_body(e.data, &mut events).unwrap();
                        n += events.len();
                        events.clear();
                    }
                })
                .unwrap();
            }
            n
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
