//! Per-request metrics derived from a [`RequestRecord`], as `docs/metrics.md` defines them.

use kneepoint_core::RequestRecord;

const NS_PER_MS: f64 = 1e6;

/// The metrics of one request (times in ms). `None` where a metric does not apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestMetrics {
    /// First token-bearing chunk − start.
    pub ttft_ms: Option<f64>,
    /// First answer (non-reasoning) chunk − start.
    pub ttfo_ms: Option<f64>,
    /// Second token-bearing chunk − first.
    pub ttst_ms: Option<f64>,
    /// Last token-bearing chunk − start (end of response when no chunk arrived).
    pub request_latency_ms: Option<f64>,
    /// End of stream − start.
    pub stream_end_latency_ms: f64,
    /// (latency − TTFT) / (output tokens − 1); streaming, ≥ 2 tokens and ≥ 2 chunks.
    pub itl_ms: Option<f64>,
    /// Gaps between consecutive token-bearing chunks.
    pub inter_chunk_ms: Vec<f64>,
    /// Output tokens (reasoning included).
    pub osl: Option<u32>,
    /// Reasoning tokens: the server's count when the output length is the server's and it
    /// gives one, else the client's count of the reasoning text; `None` without reasoning.
    pub reasoning_tokens: Option<u32>,
    /// Answer tokens: output tokens without the reasoning ones (AIPerf's
    /// `output_token_count`); set only when the response carried reasoning.
    pub answer_tokens: Option<u32>,
    /// Input tokens (client count, else the server's).
    pub isl: Option<u32>,
    /// 1000 / ITL.
    pub tokens_per_s_per_user: Option<f64>,
    /// Open loop: actual start − intended start (how late the client sent it).
    pub schedule_lag_ms: Option<f64>,
    /// Open loop: TTFT counted from the intended start (no coordinated omission).
    pub ttft_from_schedule_ms: Option<f64>,
    /// Open loop: request latency counted from the intended start.
    pub request_latency_from_schedule_ms: Option<f64>,
    /// The connection's setup, when the transport reported it.
    pub connection: Option<ConnectionMetrics>,
}

/// A request's connection phases (k6's and AIPerf's `http_req_*`), ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConnectionMetrics {
    /// Resolving the host name.
    pub dns_ms: f64,
    /// The TCP connect.
    pub connecting_ms: f64,
    /// The TLS handshake.
    pub tls_ms: f64,
    /// The three together.
    pub overhead_ms: f64,
    /// 1 on a connection open already, else 0.
    pub reused: f64,
    /// From handing the request to the HTTP client to its response headers, less the setup.
    pub waiting_ms: f64,
}

impl RequestMetrics {
    /// Computes the metrics of `r`.
    pub fn of(r: &RequestRecord) -> RequestMetrics {
        let rel = |t: u64| t.saturating_sub(r.start_ns) as f64 / NS_PER_MS;
        let ttft = r.chunk_ns.first().map(|&t| rel(t));
        let latency = r
            .chunk_ns
            .last()
            .map(|&t| rel(t))
            .or(Some(rel(r.end_ns)).filter(|_| r.is_ok()));
        let osl = r.output_tokens;
        let lag = r
            .intended_start_ns
            .map(|i| r.start_ns.saturating_sub(i) as f64 / NS_PER_MS);
        let itl = match (ttft, latency, osl) {
            (Some(f), Some(l), Some(n)) if n >= 2 && r.chunk_ns.len() >= 2 => {
                Some((l - f) / f64::from(n - 1))
            }
            _ => None,
        };
        // The server's count when the output length is the server's; the client's otherwise
        // (or the server's alone, when the reasoning was not streamed for the client to count).
        let reasoning = match (r.output_tokens_source, r.usage_reasoning_tokens) {
            (Some(kneepoint_core::TokenSource::Usage), Some(n)) => Some(n),
            (_, server) => r.reasoning_tokens.or(server),
        };
        RequestMetrics {
            reasoning_tokens: reasoning,
            answer_tokens: reasoning.zip(osl).map(|(k, n)| n.saturating_sub(k)),
            ttft_ms: ttft,
            ttfo_ms: r.first_content_ns.map(rel),
            ttst_ms: match r.chunk_ns.as_slice() {
                [a, b, ..] => Some(b.saturating_sub(*a) as f64 / NS_PER_MS),
                _ => None,
            },
            request_latency_ms: latency,
            stream_end_latency_ms: rel(r.end_ns),
            itl_ms: itl,
            inter_chunk_ms: r
                .chunk_ns
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]) as f64 / NS_PER_MS)
                .collect(),
            osl,
            isl: r.input_tokens.or(r.server_input_tokens),
            tokens_per_s_per_user: itl.filter(|&x| x > 0.0).map(|x| 1000.0 / x),
            schedule_lag_ms: lag,
            ttft_from_schedule_ms: lag.zip(ttft).map(|(a, b)| a + b),
            request_latency_from_schedule_ms: lag.zip(latency).map(|(a, b)| a + b),
            connection: r.connection.map(|c| ConnectionMetrics {
                dns_ms: c.dns_ns as f64 / NS_PER_MS,
                connecting_ms: c.connect_ns as f64 / NS_PER_MS,
                tls_ms: c.tls_ns as f64 / NS_PER_MS,
                overhead_ms: c.total_ns() as f64 / NS_PER_MS,
                reused: if c.reused { 1.0 } else { 0.0 },
                waiting_ms: c.waiting_ns as f64 / NS_PER_MS,
            }),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kneepoint_core::{Phase, TokenSource};

    pub(crate) fn record(start: u64, chunks: &[u64], end: u64, osl: u32) -> RequestRecord {
        {
            let mut built = RequestRecord::new(0, Phase::Profiling);
            built.x_request_id = None;
            built.worker = 0;
            built.origin_unix_ns = 0;
            built.start_ns = start;
            built.response_ns = Some(start + 1);
            built.chunk_ns = chunks.to_vec();
            built.first_content_ns = chunks.first().copied();
            built.end_ns = end;
            built.input_tokens = Some(100);
            built.server_input_tokens = Some(100);
            built.output_tokens = Some(osl);
            built.output_tokens_source = Some(TokenSource::Usage);
            built.client_output_tokens = Some(osl);
            built.output_bytes = 0;
            built.requested_output_tokens = Some(osl);
            built.finish_reason = Some("length".into());
            built.error = None;
            built.attempts = 1;
            built.intended_start_ns = None;
            built
        }
    }

    #[test]
    fn streaming_request() {
        // start 0, chunks at 100ms, 130ms, 160ms, 190ms; 4 tokens; stream end 195ms
        let ms = 1_000_000;
        let r = record(0, &[100 * ms, 130 * ms, 160 * ms, 190 * ms], 195 * ms, 4);
        let m = RequestMetrics::of(&r);
        assert_eq!(m.ttft_ms, Some(100.0));
        assert_eq!(m.ttst_ms, Some(30.0));
        assert_eq!(m.request_latency_ms, Some(190.0));
        assert_eq!(m.stream_end_latency_ms, 195.0);
        assert_eq!(m.itl_ms, Some(30.0));
        assert_eq!(m.inter_chunk_ms, vec![30.0, 30.0, 30.0]);
        assert!((m.tokens_per_s_per_user.unwrap() - 33.333333333).abs() < 1e-6);
        assert_eq!(m.isl, Some(100));
    }

    #[test]
    fn multi_token_chunks_use_token_count() {
        // 2 chunks carrying 5 tokens: ITL = (200 - 100) / 4
        let ms = 1_000_000;
        let m = RequestMetrics::of(&record(0, &[100 * ms, 200 * ms], 200 * ms, 5));
        assert_eq!(m.itl_ms, Some(25.0));
    }

    #[test]
    fn non_streaming_and_single_token() {
        let ms = 1_000_000;
        let m = RequestMetrics::of(&record(0, &[80 * ms], 81 * ms, 10));
        assert_eq!(m.itl_ms, None);
        assert_eq!(m.ttst_ms, None);
        assert_eq!(m.request_latency_ms, Some(80.0));
        let m = RequestMetrics::of(&record(0, &[], 50 * ms, 0));
        assert_eq!(m.ttft_ms, None);
        assert_eq!(m.request_latency_ms, Some(50.0));
    }
}
