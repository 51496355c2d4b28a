//! Whether the server counted the prompts the client sent: the check behind the ISL-mismatch
//! warning.
//!
//! A server's count differs from the client's by a constant when it wraps every prompt in the
//! same chat template (a few tokens more, request after request). Any other difference means
//! the two sides tokenise differently (another tokenizer, or an estimate on one side), and
//! then the input lengths the summary reports are not what the server processed.

/// How the warning starts (`report` looks for it in saved summaries).
pub const ISL_WARNING: &str = "input lengths:";

/// The differences `server - client` between the two prompt counts of a level's successful
/// single-turn requests, in bounded memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct PromptCounts {
    n: u64,
    min: i64,
    max: i64,
    sum_diff: i64,
    sum_client: u64,
}

impl PromptCounts {
    /// Adds one request's counts.
    pub(crate) fn push(&mut self, client: u32, server: u32) {
        let d = i64::from(server) - i64::from(client);
        if self.n == 0 {
            (self.min, self.max) = (d, d);
        }
        self.n += 1;
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        self.sum_diff += d;
        self.sum_client += u64::from(client);
    }

    /// How far two requests' differences may lie apart and still read as one template: 8 tokens (a template joined to a prompt may merge or
    /// split a token at the seam, and a dataset's prompts may carry one or two messages more
    /// than others, each with a header of a few tokens) or 2 % of the mean prompt, whichever
    /// is larger. Another tokenizer differs by a share of every prompt, prompt by prompt, and
    /// the gap grows with the prompt (`crates/kneepoint-cli/tests/isl_mismatch.rs` shows a
    /// word-estimating server flagged at 256 tokens).
    fn tolerance(&self) -> f64 {
        let mean_client = self.sum_client as f64 / self.n.max(1) as f64;
        (0.02 * mean_client).max(8.0)
    }

    /// The warning for the summary, when the counts disagree beyond a constant offset or the
    /// server saw fewer tokens than were sent.
    pub(crate) fn warning(&self) -> Option<String> {
        if self.n == 0 {
            return None;
        }
        let (tolerance, spread) = (self.tolerance(), (self.max - self.min) as f64);
        let mean_diff = self.sum_diff as f64 / self.n as f64;
        let mean_client = self.sum_client as f64 / self.n as f64;
        let mean_server = mean_client + mean_diff;
        // A template only adds tokens: fewer on the server than sent, beyond a token merged
        // at a seam (2 tokens or 1 % of the prompt), is another tokenizer.
        let shortfall = (0.01 * mean_client).max(2.0);
        if spread <= tolerance && mean_diff >= -shortfall {
            return None;
        }
        Some(format!(
            "{ISL_WARNING} the server counted {mean_server:.1} prompt tokens on average where the client counted {mean_client:.1} (server minus client from {} to {} over {} requests, not a constant template offset): the two sides tokenise differently, so the reported ISL is not what the server processed; give the client the server's tokenizer (--tokenizer, or the workload's tokenizer in a library; a `kneepoint sim serve` counts prompts from their words unless started with --prompt-tokens builtin)",
            self.min, self.max, self.n
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(u32, u32)]) -> PromptCounts {
        let mut c = PromptCounts::default();
        for &(client, server) in pairs {
            c.push(client, server);
        }
        c
    }

    #[test]
    fn a_constant_template_offset_is_no_mismatch() {
        assert_eq!(
            counts(&[(256, 263), (256, 263), (100, 107)]).warning(),
            None
        );
        // a token merged at the seam now and then
        assert_eq!(
            counts(&[(256, 263), (256, 262), (256, 264)]).warning(),
            None
        );
        // a dataset where some prompts open with a system message (a header more)
        assert_eq!(
            counts(&[(300, 307), (220, 232), (410, 417)]).warning(),
            None
        );
        assert_eq!(counts(&[]).warning(), None);
    }

    #[test]
    fn a_varying_difference_or_fewer_tokens_on_the_server_is_a_mismatch() {
        // an estimate on the server: 229 on average for 256 sent, varying per prompt
        let w = counts(&[(256, 229), (256, 221), (256, 236)])
            .warning()
            .unwrap();
        assert!(w.contains("228.7") && w.contains("256.0"), "{w}");
        assert!(w.contains("from -35 to -20"), "{w}");
        // constant but negative: the server saw fewer tokens than were sent (a token merged
        // at a seam is no shortfall; 82 fewer at 4096 is)
        assert!(counts(&[(256, 250), (256, 250)]).warning().is_some());
        assert_eq!(counts(&[(256, 255), (256, 254)]).warning(), None);
        assert!(counts(&[(4096, 4014), (4096, 4014)]).warning().is_some());
        // 2 % of the prompt is tolerated on long prompts
        assert_eq!(counts(&[(4096, 4100), (4096, 4180)]).warning(), None);
        assert!(counts(&[(4096, 4100), (4096, 4200)]).warning().is_some());
        assert!(w.starts_with(ISL_WARNING), "{w}");
    }
}
