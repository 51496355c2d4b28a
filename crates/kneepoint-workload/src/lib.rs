//! Workloads for kneepoint: what to send at each level.
//!
//! - [`Tokenizer`]s: the built-in offline `o200k_base` (tiktoken, the default) and Hugging Face
//!   `tokenizer.json` files from a path or the local cache ([`load_tokenizer`]).
//! - Prompts of an **exact** token count ([`PromptBuilder`]): windows of a built-in corpus,
//!   re-encoded the way they are sent (no special tokens) and adjusted until exact.
//! - Input/output lengths from fixed values, truncated normals or weighted mixtures
//!   ([`Lengths`]), optional shared prefixes ([`SharedPrefix`]), deterministic under a seed.
//! - Images ([`Images`], PNG) and audio clips ([`AudioClips`], WAV) made locally for chat
//!   models that take them.
//! - Datasets ([`DatasetWorkload`]): single-turn JSONL, ShareGPT, and traces whose `hash_ids`
//!   become shared blocks of text.
//!
//! # Example
//! ```
//! use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload, Workload};
//!
//! let tok = load_tokenizer("builtin").unwrap();
//! let mut w = SyntheticWorkload::new(tok.clone(), LengthDist::Fixed(128), LengthDist::Fixed(16), 7).unwrap();
//! let reqs = w.requests(3).unwrap();
//! assert_eq!(tok.count(&reqs[0].prompt.text()).unwrap(), 128);
//! assert_eq!(reqs[0].max_output_tokens, Some(16));
//! assert_ne!(reqs[0].prompt, reqs[1].prompt);
//! ```

mod audio;
mod corpus;
pub mod dataset;
mod dist;
mod error;
mod images;
mod prompt;
mod synthetic;
pub mod tokenizer;

pub use audio::{AudioClips, MAX_CLIP_SECONDS};
pub use corpus::corpus;
pub use dataset::{DatasetConfig, DatasetFormat, DatasetWorkload, Sampling};
pub use dist::{LengthDist, Lengths, MixEntry};
pub use error::Error;
pub use images::Images;
pub use prompt::PromptBuilder;
pub use synthetic::{
    Conversations, Pooling, SharedPrefix, SyntheticConfig, SyntheticWorkload, MAX_THINK_TIME_MS,
    MAX_TURNS,
};
pub use tokenizer::{load_tokenizer, Tokenizer, TokenizerCounter};

/// The longest input or output length accepted anywhere (flags, files, datasets, traces), in
/// tokens: the longest context windows served today. A trace row claiming four billion tokens
/// is refused with its line instead of allocating gigabytes.
pub const MAX_TOKENS: u32 = 10_000_000;

use kneepoint_core::Request;

/// A source of prepared requests. Requests are generated before a level's timing starts.
pub trait Workload: Send {
    /// The next `count` requests (ids continue across calls); a workload of conversations
    /// returns whole conversations, so at least `count`.
    fn requests(&mut self, count: usize) -> Result<Vec<Request>, Error>;

    /// Counts tokens as this workload's prompts were counted (its tokenizer), so that a
    /// client without server usage counts output tokens the same way; `None` (the default)
    /// when the workload has no tokenizer.
    fn token_counter(&self) -> Option<std::sync::Arc<dyn kneepoint_core::TokenCounter>> {
        None
    }
}
