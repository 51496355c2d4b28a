//! Prompts for trace records: each `hash_id` is a block of text of a fixed token count, the
//! same text wherever the id repeats, so requests share prefixes exactly as the trace says.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::dataset::TraceEntry;
use crate::prompt::PromptBuilder;
use crate::Error;

/// One prompt per record, each of exactly `input_length` tokens: the blocks of its `hash_ids`
/// in order (the last one cut to fit), then fresh text to the full length; with each, the
/// tokens it repeats from the record it follows.
///
/// `previous` is given when lengths count a session's history: `previous[i] = Some(j)` is the
/// turn before record i in its session. A turn with `hash_ids` repeats the blocks it shares
/// with that turn; a turn without starts with that turn's whole prompt and a blank line (when
/// that leaves room) and repeats its length. Without `previous`, nothing is counted (0).
pub(crate) fn prompts(
    b: &mut PromptBuilder,
    entries: &[TraceEntry],
    block_tokens: u32,
    seed: u64,
    previous: Option<&[Option<usize>]>,
) -> Result<Vec<(String, u32)>, Error> {
    if block_tokens == 0 {
        return Err(Error::InvalidPrefix {
            reason: "trace block size must be at least 1 token".into(),
        });
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0074_7261_6365);
    let mut blocks: HashMap<u64, String> = HashMap::new();
    let tok = b.tokenizer().clone();
    let mut out: Vec<(String, u32)> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let before = previous.and_then(|p| p.get(i).copied().flatten());
        let before = before.and_then(|j| Some((entries.get(j)?, &out.get(j)?.0)));
        if let (Some((last, text)), true) = (before, e.hash_ids.is_empty()) {
            let prefix = format!("{}\n\n", text.trim_end());
            if (tok.count(&prefix)? as u64) < u64::from(e.input_length) {
                let body = b.exact(&prefix, e.input_length, &mut rng)?;
                out.push((format!("{prefix}{body}"), last.input_length));
                continue;
            }
        }
        let shared = before.map_or(0, |(last, _)| shared_blocks(last, e, block_tokens));
        let mut prefix = String::new();
        let mut used = 0u32;
        for id in &e.hash_ids {
            if used + block_tokens > e.input_length {
                break;
            }
            if !blocks.contains_key(id) {
                // Blocks end with a blank line so the next block starts a new pre-token and
                // the shared tokens stay identical in every prompt.
                let body = b.exact("", block_tokens.saturating_sub(1).max(1), &mut rng)?;
                let mut text = format!("{}\n\n", body.trim_end());
                let mut k = tok.count(&text)? as i64;
                let mut len = i64::from(block_tokens.saturating_sub(1).max(1));
                let mut tries = 0;
                while k != i64::from(block_tokens) && tries < 8 && len > 0 {
                    len += i64::from(block_tokens) - k;
                    let body = b.exact("", len.max(1) as u32, &mut rng)?;
                    text = format!("{}\n\n", body.trim_end());
                    k = tok.count(&text)? as i64;
                    tries += 1;
                }
                blocks.insert(*id, text);
            }
            prefix.push_str(&blocks[id]);
            used += block_tokens;
        }
        let body = b.exact(&prefix, e.input_length, &mut rng)?;
        out.push((format!("{prefix}{body}"), shared));
    }
    Ok(out)
}

/// Tokens of the leading blocks two records share (blocks a record's length has room for).
fn shared_blocks(a: &TraceEntry, b: &TraceEntry, block_tokens: u32) -> u32 {
    let room = |e: &TraceEntry| (e.input_length / block_tokens) as usize;
    let common = a
        .hash_ids
        .iter()
        .zip(&b.hash_ids)
        .take_while(|(x, y)| x == y)
        .count()
        .min(room(a))
        .min(room(b));
    u32::try_from(common)
        .unwrap_or(u32::MAX)
        .saturating_mul(block_tokens)
}
