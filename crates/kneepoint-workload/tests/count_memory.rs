//! A server's answer with no whitespace (one unbroken 16 MiB "word", within the client's body
//! cap) is counted in bounded memory: the process's peak resident size (Linux's `VmHWM`) stays
//! far below what counting it whole took (~880 MB).

use kneepoint_core::TokenCounter;
use kneepoint_workload::{load_tokenizer, TokenizerCounter};

/// A field of `/proc/self/status`, in kB (Linux only).
fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn an_unbroken_16_mib_word_is_counted_in_bounded_memory() {
    let counter = TokenizerCounter(load_tokenizer("builtin").unwrap());
    // A repeated pair: the merge step's worst shape (random letters cost it little).
    let text = "ab".repeat(8 << 20);
    let before = status_kb("VmRSS:");
    let tokens = counter.count(&text);
    // o200k_base merges "abab" into one token; counted whole, the text is 4 Mi tokens too.
    assert_eq!(tokens, 4 << 20);
    let (Some(before), Some(peak)) = (before, status_kb("VmHWM:")) else {
        eprintln!("no /proc/self/status here: the memory bound is not checked");
        return;
    };
    // Whole, this text made the tokenizer hold ~59 bytes per byte (1.0 GB peak, 13 s). In pieces of
    // 8 KiB a piece's merge needs well under 1 MB; 64 MB above the resident size before
    // counting leaves room for the allocator and the other test in this binary.
    assert!(
        peak < before + 64 * 1024,
        "peak {peak} kB against {before} kB before counting"
    );
}

#[test]
fn pieces_count_like_the_whole_text_when_it_has_whitespace() {
    let tok = load_tokenizer("builtin").unwrap();
    let counter = TokenizerCounter(tok.clone());
    let text =
        "The engine keeps the batch full while the queue drains.  Tokens\nflow on. ".repeat(2_000);
    assert!(text.len() > 16 * kneepoint_workload::tokenizer::PIECE_BYTES);
    assert_eq!(counter.count(&text), tok.count(&text).unwrap());
}
