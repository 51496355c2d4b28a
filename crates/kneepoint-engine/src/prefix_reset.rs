//! `--reset-prefix-cache`: the server's prefix cache emptied before every level (and every run
//! of a level), so that one level's prompts do not warm the next. vLLM offers
//! `POST /reset_prefix_cache` when started with `VLLM_SERVER_DEV_MODE=1`; SGLang has
//! `POST /flush_cache`. The request goes through a [`Fetch`] (the transports' client and TLS
//! options), never through the timed transport.

use std::sync::Arc;
use std::time::Duration;

use kneepoint_core::Fetch;

/// How long a reset may take.
const RESET_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to empty the server's prefix cache.
#[derive(Debug, Clone)]
pub struct PrefixCacheReset {
    url: String,
    fetch: Arc<dyn Fetch>,
}

impl PrefixCacheReset {
    /// `POST url` (e.g. `http://host:8000/reset_prefix_cache`) through `fetch`.
    pub fn new(url: impl Into<String>, fetch: Arc<dyn Fetch>) -> Self {
        PrefixCacheReset {
            url: url.into(),
            fetch,
        }
    }

    /// The reset's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Why a run stops when the server refused a reset (`why`, from [`PrefixCacheReset::reset`]),
    /// with what usually fixes it.
    pub fn refused(&self, why: &str) -> String {
        format!(
            "--reset-prefix-cache: POST {} failed: {why}. vLLM offers it only when started with VLLM_SERVER_DEV_MODE=1; give the server's own route with --reset-prefix-cache URL (SGLang: http://host:port/flush_cache)",
            kneepoint_core::redact_url(&self.url)
        )
    }

    /// Empties the cache: the server's HTTP status (a 2xx says the server took the command; vLLM
    /// does not say whether blocks still in use were kept), or why it did not.
    pub async fn reset(&self) -> Result<u16, String> {
        let answer = self
            .fetch
            .post(&self.url, Vec::new(), RESET_TIMEOUT)
            .await?;
        if (200..300).contains(&answer.status) {
            return Ok(answer.status);
        }
        let body = String::from_utf8_lossy(&answer.body);
        let body: String = body.chars().take(200).collect();
        Err(format!(
            "the server answered {}{}",
            answer.status,
            if body.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", body.trim())
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::Fetched;

    #[derive(Debug)]
    struct Answers(u16, &'static str);

    #[kneepoint_core::async_trait]
    impl Fetch for Answers {
        async fn get(&self, _: &str, _: Duration, _: usize) -> Result<Fetched, String> {
            Err("no GET here".into())
        }
        async fn post(&self, _: &str, _: Vec<u8>, _: Duration) -> Result<Fetched, String> {
            Ok(Fetched::new(self.0, self.1.as_bytes().to_vec(), 0, 0, 0))
        }
    }

    #[derive(Debug)]
    struct GetOnly;

    #[kneepoint_core::async_trait]
    impl Fetch for GetOnly {
        async fn get(&self, _: &str, _: Duration, _: usize) -> Result<Fetched, String> {
            Err("unused".into())
        }
    }

    #[tokio::test]
    async fn a_reset_succeeds_on_2xx_and_says_why_otherwise() {
        let ok = PrefixCacheReset::new("http://x/reset_prefix_cache", Arc::new(Answers(200, "")));
        assert_eq!(ok.reset().await, Ok(200));
        let missing = PrefixCacheReset::new(
            "http://x/r",
            Arc::new(Answers(404, "{\"detail\":\"Not Found\"}")),
        );
        let e = missing.reset().await.unwrap_err();
        assert!(e.contains("404") && e.contains("Not Found"), "{e}");
        let cannot = PrefixCacheReset::new("http://x/r", Arc::new(GetOnly));
        assert!(cannot
            .reset()
            .await
            .unwrap_err()
            .contains("cannot send a POST"));
    }
}
