//! Plain `GET`s and `POST`s through the same client, TLS options and proxies as the transports:
//! for side channels such as a server's Prometheus `/metrics` or its prefix-cache reset, never
//! for timed requests.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};

use crate::client::{https_client, HttpClient};
use crate::{ConnectOptions, Error};
pub use kneepoint_core::Fetched;

/// A pooled client for plain `GET`s.
#[derive(Clone)]
pub struct Fetcher {
    client: HttpClient,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher").finish_non_exhaustive()
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Fetcher {
    /// A client with `options` (CA bundle, client certificate, proxy).
    pub fn new(options: &ConnectOptions) -> Result<Fetcher, Error> {
        Ok(Fetcher {
            client: https_client(Some(Duration::from_secs(5)), options, None)?,
        })
    }

    /// `GET url`, the whole exchange bounded by `timeout` and the body by `max_bytes`. The
    /// error is a readable sentence (refused, timed out, too large), never with credentials.
    pub async fn get(
        &self,
        url: &http::Uri,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Fetched, String> {
        let request = http::Request::get(url.clone())
            .header(http::header::ACCEPT, "text/plain;version=0.0.4, */*;q=0.1")
            .body(Full::new(Bytes::new()))
            .map_err(|e| format!("bad request: {e}"))?;
        self.exchange(request, timeout, max_bytes).await
    }

    /// `POST url` with a JSON `body`, bounded like [`Fetcher::get`].
    pub async fn post(
        &self,
        url: &http::Uri,
        body: Vec<u8>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Fetched, String> {
        let request = http::Request::post(url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("bad request: {e}"))?;
        self.exchange(request, timeout, max_bytes).await
    }

    async fn exchange(
        &self,
        request: http::Request<Full<Bytes>>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Fetched, String> {
        let exchange = async {
            let sent_unix_ns = unix_ns();
            let response = self.client.request(request).await.map_err(|e| {
                crate::client::send_error("the server's side channel", e).to_string()
            })?;
            let first_byte_unix_ns = unix_ns();
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), max_bytes)
                .collect()
                .await
                .map_err(|e| format!("reading the body: {e}"))?
                .to_bytes();
            Ok(Fetched::new(
                status,
                body.to_vec(),
                sent_unix_ns,
                first_byte_unix_ns,
                unix_ns(),
            ))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {:.1} s", timeout.as_secs_f64())),
        }
    }
}

#[kneepoint_core::async_trait]
impl kneepoint_core::Fetch for Fetcher {
    async fn get(&self, url: &str, timeout: Duration, max_bytes: usize) -> Result<Fetched, String> {
        let uri: http::Uri = url
            .parse()
            // The URL is not echoed: one that does not parse may hide credentials anywhere.
            .map_err(|e| format!("invalid URL: {e}"))?;
        Fetcher::get(self, &uri, timeout, max_bytes).await
    }

    async fn post(&self, url: &str, body: Vec<u8>, timeout: Duration) -> Result<Fetched, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
        Fetcher::post(self, &uri, body, timeout, 64 * 1024).await
    }
}
