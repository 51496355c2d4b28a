//! The pooled HTTP(S) client every transport shares: hyper-util's legacy client over rustls
//! (ring) with native roots, HTTP/1.1, on connections that stamp their reads
//! ([`crate::connector`]).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::connector::StampingConnector;

/// The client type.
pub(crate) type HttpClient = Client<HttpsConnector<StampingConnector>, Full<Bytes>>;

/// A new pooled client (no connections are made until the first request).
pub(crate) fn https_client(connect_timeout: Option<Duration>) -> HttpClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(connect_timeout);
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match builder.with_native_roots() {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("no native TLS roots ({e}); https endpoints will fail to verify");
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            )
        }
    };
    let connector = builder
        .https_or_http()
        .enable_http1()
        .wrap_connector(StampingConnector(http));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(usize::MAX)
        .build(connector)
}

/// Classifies a failure of the client: a connect failure, or a connection lost afterwards.
pub(crate) fn send_error(
    target: &str,
    e: hyper_util::client::legacy::Error,
) -> kneepoint_core::Error {
    let message = std::error::Error::source(&e)
        .map(|s| s.to_string())
        .unwrap_or_else(|| e.to_string());
    if e.is_connect() {
        kneepoint_core::Error::Connect {
            target: target.to_owned(),
            message,
            source: Some(Box::new(e)),
        }
    } else {
        kneepoint_core::Error::Disconnected {
            message,
            source: Some(Box::new(e)),
        }
    }
}
