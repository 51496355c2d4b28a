//! Prompt generation speed: 1,024 prompts of 1,024 and of 8,192 tokens with each tokenizer.
//! `cargo bench -p kneepoint-workload --bench prompts` (figures in docs/PERFORMANCE.md).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kneepoint_workload::tokenizer::HfTokenizer;
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload, Tokenizer, Workload};

fn bench(c: &mut Criterion) {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer.json");
    let tokenizers: Vec<(&str, Arc<dyn Tokenizer>)> = vec![
        ("builtin_o200k", load_tokenizer("builtin").unwrap()),
        (
            "hf_fixture_bpe",
            Arc::new(HfTokenizer::from_file(&fixture).unwrap()),
        ),
    ];
    let mut group = c.benchmark_group("generate_1024_prompts");
    group.sample_size(10);
    for (name, tok) in &tokenizers {
        for isl in [1024u32, 8192] {
            group.bench_function(format!("{name}/isl_{isl}"), |b| {
                b.iter_batched(
                    || {
                        SyntheticWorkload::new(
                            tok.clone(),
                            LengthDist::Fixed(isl),
                            LengthDist::Fixed(256),
                            1,
                        )
                        .unwrap()
                    },
                    |mut w| w.requests(1024).unwrap(),
                    BatchSize::PerIteration,
                )
            });
        }
    }
    group.finish();
    let mut setup = c.benchmark_group("workload_setup");
    setup.sample_size(10);
    for (name, tok) in &tokenizers {
        setup.bench_function(format!("{name}/tokenize_corpus"), |b| {
            b.iter(|| {
                SyntheticWorkload::new(tok.clone(), LengthDist::Fixed(8), LengthDist::Fixed(8), 1)
                    .unwrap()
            })
        });
    }
    setup.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
