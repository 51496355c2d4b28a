//! Token counting seam. Real tokenizers live in `kneepoint-workload`; the approximation here
//! needs no files and is what the built-in simulator uses, so the two always agree.

/// Counts tokens in text.
pub trait TokenCounter: Send + Sync {
    /// The number of tokens in `text` (no special tokens).
    fn count(&self, text: &str) -> usize;
    /// A short name for reports (e.g. `approx-words`).
    fn name(&self) -> &str;
    /// True when counts are exact for the model's tokenizer (false for approximations).
    fn is_exact(&self) -> bool {
        true
    }
}

/// Counts whitespace-separated words: one word ≈ one token for the common English words the
/// synthetic workload and the simulator use. Not exact for arbitrary text.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxTokenCounter;

impl TokenCounter for ApproxTokenCounter {
    fn count(&self, text: &str) -> usize {
        approx_token_count(text)
    }

    fn name(&self) -> &str {
        "approx-words"
    }

    fn is_exact(&self) -> bool {
        false
    }
}

/// The number of whitespace-separated words in `text`.
pub fn approx_token_count(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words() {
        assert_eq!(approx_token_count(""), 0);
        assert_eq!(approx_token_count(" the  cat\nsat "), 3);
        assert_eq!(ApproxTokenCounter.count("a b"), 2);
    }
}
