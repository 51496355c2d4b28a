//! What a transport yields while a response arrives.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// One event of a response, in arrival order. The runner stamps each with its arrival time.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ResponseEvent {
    /// A chunk carrying generated tokens (content, reasoning, or both).
    Chunk(Chunk),
    /// Token usage reported by the server.
    Usage(Usage),
    /// A pooling endpoint's whole answer (embeddings, rerank or score): `items` vectors or
    /// scores came back. Such a response carries no tokens and succeeds without any.
    Pooled {
        /// Embeddings, ranked documents or scores in the answer.
        items: u32,
    },
    /// The server said generation finished, with its reason (`stop`, `length`, ...).
    Finish {
        /// The finish reason, when given.
        reason: Option<String>,
    },
    /// How the response's connection was set up, from transports that know: yielded once,
    /// before any other event.
    Connection(ConnectionTimings),
}

/// The setup of the connection a request went on, and the wait for the response headers (k6's
/// and AIPerf's `http_req_*` phases). A
/// request on a connection an earlier request opened reports `reused` and zeros, as k6 does:
/// the setup was paid once, by the request that waited for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConnectionTimings {
    /// The connection was open already.
    pub reused: bool,
    /// Resolving the host name, ns (0 for an IP address).
    pub dns_ns: u64,
    /// The TCP connect (to the proxy, through one), ns.
    pub connect_ns: u64,
    /// The TLS handshake (with an HTTPS proxy's `CONNECT` exchange before it), ns; 0 for
    /// plain HTTP.
    pub tls_ns: u64,
    /// From handing the request to the HTTP client to its response headers, less the setup
    /// above, ns: the server's time to answer (k6's `http_req_waiting`), for the attempt
    /// that answered.
    pub waiting_ns: u64,
}

impl ConnectionTimings {
    /// A connection opened for this request, with its phases.
    pub fn opened(dns_ns: u64, connect_ns: u64, tls_ns: u64) -> Self {
        ConnectionTimings {
            reused: false,
            dns_ns,
            connect_ns,
            tls_ns,
            waiting_ns: 0,
        }
    }

    /// Says how long the server took to answer headers (builder style).
    pub fn with_waiting(mut self, waiting_ns: u64) -> Self {
        self.waiting_ns = waiting_ns;
        self
    }

    /// A connection an earlier request opened.
    pub fn reused() -> Self {
        ConnectionTimings {
            reused: true,
            ..ConnectionTimings::default()
        }
    }

    /// Setup in all, ns (AIPerf's `http_req_connection_overhead` without the pool wait).
    pub fn total_ns(&self) -> u64 {
        self.dns_ns
            .saturating_add(self.connect_ns)
            .saturating_add(self.tls_ns)
    }
}

/// A token-bearing piece of a response: [`Chunk::content`] or [`Chunk::reasoning`], then
/// [`Chunk::with_tokens`] and [`Chunk::received_at`] when the transport knows more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Chunk {
    /// Generated answer text.
    pub text: String,
    /// Generated reasoning text (`reasoning_content`), kept apart from `text`.
    pub reasoning: String,
    /// Tokens in this chunk, when the server says (most do not).
    pub tokens: Option<u32>,
    /// When the chunk's bytes reached this host, when the transport knows it better than the
    /// moment it yields the chunk (a kernel receive time). The runner stamps the chunk with it,
    /// bounded by the request's start and the moment the chunk was yielded; `None` stamps the
    /// chunk when it is yielded.
    pub received: Option<Instant>,
}

impl Chunk {
    /// A chunk with answer text only.
    pub fn content(text: impl Into<String>) -> Self {
        Chunk {
            text: text.into(),
            ..Chunk::default()
        }
    }

    /// A chunk with reasoning text only.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Chunk {
            reasoning: text.into(),
            ..Chunk::default()
        }
    }

    /// Says how many tokens the chunk carries (builder style).
    pub fn with_tokens(mut self, tokens: Option<u32>) -> Self {
        self.tokens = tokens;
        self
    }

    /// Says when the chunk's bytes reached this host (builder style).
    pub fn received_at(mut self, received: Option<Instant>) -> Self {
        self.received = received;
        self
    }

    /// True when the chunk carries any generated text.
    pub fn has_tokens(&self) -> bool {
        !self.text.is_empty() || !self.reasoning.is_empty() || self.tokens.is_some_and(|t| t > 0)
    }
}

/// Token usage as the server reports it (`usage` in OpenAI responses): [`Usage::new`], then
/// [`Usage::with_reasoning`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens counted by the server.
    pub prompt_tokens: Option<u32>,
    /// Generated tokens counted by the server (reasoning included).
    pub completion_tokens: Option<u32>,
    /// Of those, reasoning tokens (`completion_tokens_details.reasoning_tokens`), when given.
    #[serde(default)]
    pub reasoning_tokens: Option<u32>,
}

impl Usage {
    /// Prompt and completion tokens as the server counted them (either may be missing).
    pub fn new(prompt_tokens: Option<u32>, completion_tokens: Option<u32>) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            reasoning_tokens: None,
        }
    }

    /// Of the completion tokens, the reasoning ones (builder style).
    pub fn with_reasoning(mut self, reasoning_tokens: Option<u32>) -> Self {
        self.reasoning_tokens = reasoning_tokens;
        self
    }
}
