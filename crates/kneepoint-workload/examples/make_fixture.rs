//! Trains the small byte-level BPE `tokenizer.json` the tests use, on the built-in corpus:
//! `cargo run -p kneepoint-workload --example make_fixture -- tests/fixtures/tokenizer.json`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::Tokenizer;

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tokenizer.json".into());
    let dir = std::env::temp_dir().join("kneepoint-fixture");
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, kneepoint_workload::corpus()).unwrap();
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(600)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build()
        .into();
    tokenizer
        .train_from_files(&mut trainer, vec![corpus.display().to_string()])
        .unwrap();
    tokenizer.save(&out, false).unwrap();
    println!("wrote {out}");
}
