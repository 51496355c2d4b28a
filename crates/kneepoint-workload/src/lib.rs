//! Workloads for kneepoint: what to send at each level.
//!
//! This first version generates synthetic prompts from common English words, one word per
//! token as the built-in approximate counter ([`kneepoint_core::ApproxTokenCounter`]) and the
//! simulator count them, with input and output lengths drawn from fixed or normal
//! distributions under a seed. Against a real model the prompt length in that model's tokens is
//! approximate; tokenizer-exact prompts replace the text generator behind the same
//! [`Workload`] trait.
//!
//! # Example
//! ```
//! use kneepoint_workload::{LengthDist, SyntheticWorkload, Workload};
//!
//! let mut w = SyntheticWorkload::new(LengthDist::Fixed(128), LengthDist::Fixed(16), 7);
//! let reqs = w.requests(3).unwrap();
//! assert_eq!(reqs.len(), 3);
//! assert_eq!(reqs[0].input_tokens, Some(128));
//! assert_eq!(reqs[0].max_output_tokens, Some(16));
//! assert_ne!(reqs[0].prompt, reqs[1].prompt);
//! ```

mod dist;
mod error;
mod synthetic;

pub use dist::LengthDist;
pub use error::Error;
pub use synthetic::SyntheticWorkload;

use kneepoint_core::Request;

/// A source of prepared requests. Requests are generated before a level's timing starts.
pub trait Workload: Send {
    /// The next `count` requests (ids continue across calls).
    fn requests(&mut self, count: usize) -> Result<Vec<Request>, Error>;
}
