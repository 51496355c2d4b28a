//! A plain `GET` (and `POST`) for side channels such as a server's Prometheus `/metrics` page
//! or its prefix-cache reset, never for timed requests: the trait the scraper takes, so that a crate reading such pages needs no
//! HTTP or TLS crate of its own. `kneepoint-transport`'s `Fetcher` implements it with the
//! transports' client, TLS options and proxies; a test or an embedding program may bring its
//! own (a file, a mock, another client).

use std::time::Duration;

use crate::async_trait;

/// An answer to [`Fetch::get`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fetched {
    /// The HTTP status.
    pub status: u16,
    /// The body (at most the asked number of bytes).
    pub body: Vec<u8>,
    /// When the request was sent, Unix ns.
    pub sent_unix_ns: u64,
    /// When the response headers arrived, Unix ns.
    pub first_byte_unix_ns: u64,
    /// When the body was read, Unix ns.
    pub done_unix_ns: u64,
}

impl Fetched {
    /// An answer with `status` and `body`, sent, answered and read at the given Unix times (ns).
    pub fn new(status: u16, body: Vec<u8>, sent: u64, first_byte: u64, done: u64) -> Fetched {
        Fetched {
            status,
            body,
            sent_unix_ns: sent,
            first_byte_unix_ns: first_byte,
            done_unix_ns: done,
        }
    }
}

/// Fetches a page with `GET`.
#[async_trait]
pub trait Fetch: Send + Sync + std::fmt::Debug {
    /// `GET url`, the whole exchange bounded by `timeout` and the body by `max_bytes`. The
    /// error is a readable sentence (refused, timed out, too large) that never carries
    /// credentials.
    async fn get(&self, url: &str, timeout: Duration, max_bytes: usize) -> Result<Fetched, String>;

    /// `POST url` with a JSON `body` (empty for none), bounded by `timeout`, for side-channel
    /// commands such as a server's prefix-cache reset; the answer's body is read up to 64 KiB.
    /// A fetcher that cannot post says so (the default).
    async fn post(&self, url: &str, body: Vec<u8>, timeout: Duration) -> Result<Fetched, String> {
        let _ = (url, body, timeout);
        Err("this fetcher cannot send a POST".into())
    }
}
