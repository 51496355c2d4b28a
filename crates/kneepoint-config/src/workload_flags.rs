//! What is sent ([`WorkloadOptions`]): the Workload flags, flattened into every command that
//! sends, and the file's `[workload]` section, in one struct. A few keys are spelt as
//! SageMaker spells them in the file (`prompt_input_tokens_stddev` for `--isl-stddev`), a few
//! exist on one side only (`--mix` and `mixture`, `streaming`, `output_control`).

use std::path::PathBuf;

use clap::Args;
use kneepoint_workload::MixEntry;
use merge::Merge;
use serde::Deserialize;

/// The flags' name for [`WorkloadOptions`].
pub type WorkloadArgs = WorkloadOptions;

/// What is sent: synthetic lengths, shared prefixes, conversations, images, audio, pooling
/// batches, or a dataset.
#[derive(Debug, Clone, Default, Args, Deserialize, Merge)]
#[serde(deny_unknown_fields)]
#[merge(strategy = merge::option::overwrite_none)]
pub struct WorkloadOptions {
    /// Tokenizer for prompt lengths: `builtin` (o200k_base, default), a tokenizer.json path, or
    /// a Hugging Face model id found in the local cache.
    #[arg(long, value_name = "SPEC")]
    pub tokenizer: Option<String>,
    /// Tokens of a system prompt shared by every request (prefix caching), inside the ISL.
    #[arg(long, value_name = "TOKENS")]
    pub shared_prefix_tokens: Option<u32>,
    /// Distinct shared prefixes; each request uses one at random (default 1).
    #[arg(long, value_name = "N")]
    pub shared_prefix_pool: Option<u32>,
    /// Pooling endpoints: inputs per embeddings request, or documents per rerank/score query
    /// (default 1 for embeddings, 8 for rerank and score); each of the sampled input length.
    #[arg(long, value_name = "N")]
    pub batch_size: Option<u32>,
    /// Images attached to each request (chat only): PNGs made locally, sent as `data:` URLs in
    /// OpenAI content parts (default 0).
    #[arg(long, value_name = "N")]
    pub images_per_request: Option<u32>,
    /// Width of each image, pixels (default 512).
    #[arg(long, value_name = "PX")]
    pub image_width: Option<u32>,
    /// Height of each image, pixels (default 512).
    #[arg(long, value_name = "PX")]
    pub image_height: Option<u32>,
    /// Distinct images made; each request draws from them (default 16).
    #[arg(long, value_name = "N")]
    pub image_pool: Option<u32>,
    /// Audio clips attached to each request (chat only, for models that take audio): WAVs
    /// made locally, sent as OpenAI `input_audio` parts (default 0).
    #[arg(long, value_name = "N")]
    pub audio_per_request: Option<u32>,
    /// Mean length of each clip, seconds (default 5).
    #[arg(long, value_name = "S")]
    pub audio_length_mean: Option<f64>,
    /// Standard deviation of the clips' length, seconds (default 0).
    #[arg(long, value_name = "S")]
    pub audio_length_stddev: Option<f64>,
    /// Samples per second of each clip (16-bit mono PCM; default 16000).
    #[arg(long, value_name = "HZ")]
    pub audio_sample_rate: Option<u32>,
    /// Distinct clips made; each request draws from them (default 16).
    #[arg(long, value_name = "N")]
    pub audio_pool: Option<u32>,
    /// With a ShareGPT --dataset: send every human turn of each conversation, as a
    /// conversation (the server's own replies make the history), with the
    /// --conversation-turn-delay-* think times.
    #[arg(long)]
    #[serde(default)]
    #[merge(strategy = merge::bool::overwrite_false)]
    pub dataset_multi_turn: bool,
    /// Multi-turn: mean turns per conversation (AIPerf's option; 1 = single-turn requests).
    /// Concurrency then counts conversations, and each turn is sent with the conversation so
    /// far, the server's replies included.
    #[arg(long, value_name = "N")]
    pub conversation_turn_mean: Option<f64>,
    /// Standard deviation of the turns per conversation (default 0).
    #[arg(long, value_name = "N")]
    pub conversation_turn_stddev: Option<f64>,
    /// Mean think time between a reply and the next turn, ms (default 0).
    #[arg(long, value_name = "MS")]
    pub conversation_turn_delay_mean: Option<f64>,
    /// Standard deviation of the think time, ms (default 0).
    #[arg(long, value_name = "MS")]
    pub conversation_turn_delay_stddev: Option<f64>,
    /// Multiplies every think time (default 1; 0 removes them).
    #[arg(long, value_name = "X")]
    pub conversation_turn_delay_ratio: Option<f64>,
    /// A weighted mixture of (input, output) lengths instead of --isl/--osl:
    /// ISL:OSL:WEIGHT,... e.g. 1024:256:0.7,128:1024:0.3.
    #[arg(long, value_name = "MIX")]
    #[serde(skip)]
    pub mix: Option<String>,
    /// Requests from a dataset instead of synthetic prompts: single-turn JSONL, ShareGPT JSON,
    /// or a trace JSONL (input_length, output_length, timestamp, hash_ids, session_id, delay).
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// The dataset's format: jsonl, sharegpt, trace (Mooncake's) or burstgpt (BurstGPT's CSV)
    /// (default: detected; .csv is BurstGPT).
    #[arg(long, value_name = "FORMAT")]
    #[serde(default, deserialize_with = "crate::choices::parsed")]
    pub dataset_format: Option<kneepoint_workload::DatasetFormat>,
    /// Order of dataset records: sequential, random or shuffle.
    #[arg(long, value_name = "ORDER")]
    #[serde(default, deserialize_with = "crate::choices::parsed")]
    pub sampling: Option<kneepoint_workload::Sampling>,
    /// Tokens per trace block (hash_ids), default 512.
    #[arg(long, value_name = "TOKENS")]
    pub trace_block_tokens: Option<u32>,
    /// A trace with session_ids: what a turn's input_length counts. `turn` (default, AIPerf's
    /// reading): the turn's new text, sent after the conversation so far (the server's
    /// replies included); `context`: the whole prompt the server sees, each turn built to
    /// exactly that length from what it shares with the turn before it.
    #[arg(long, value_name = "turn|context")]
    #[serde(default, deserialize_with = "crate::choices::parsed")]
    pub session_input_length: Option<kneepoint_workload::dataset::SessionLength>,
    /// Mean input tokens. A list (`--isl 128,1024,4096`) makes `sweep` a length sweep: one
    /// level per length at one concurrency (default 1), TTFT and ITL against the length, and
    /// the fitted prefill rate.
    #[arg(long, value_name = "TOKENS", value_delimiter = ',')]
    #[serde(
        default,
        rename = "prompt_input_tokens_mean",
        deserialize_with = "crate::choices::one"
    )]
    pub isl: Option<Vec<f64>>,
    /// Standard deviation of input tokens.
    #[arg(long, value_name = "TOKENS")]
    #[serde(rename = "prompt_input_tokens_stddev")]
    pub isl_stddev: Option<f64>,
    /// Mean output tokens; a list sweeps output lengths (with an `--isl` list of the same
    /// length, the two pair up in order).
    #[arg(long, value_name = "TOKENS", value_delimiter = ',')]
    #[serde(
        default,
        rename = "output_tokens_mean",
        deserialize_with = "crate::choices::one"
    )]
    pub osl: Option<Vec<f64>>,
    /// Standard deviation of output tokens.
    #[arg(long, value_name = "TOKENS")]
    #[serde(rename = "output_tokens_stddev")]
    pub osl_stddev: Option<f64>,
    /// Seed for the workload.
    #[arg(long)]
    pub seed: Option<u64>,
    /// File only: weighted (isl, osl) pairs instead of the means (`--mix` on the command line).
    #[arg(skip)]
    pub mixture: Option<Vec<MixEntry>>,
    /// File only: stream responses (`--streaming` on the command line, in the Endpoint group).
    #[arg(skip)]
    pub streaming: Option<bool>,
    /// File only: send `ignore_eos` and `min_tokens` (`--no-output-control` on the command
    /// line, in the Endpoint group).
    #[arg(skip)]
    pub output_control: Option<bool>,
}
