//! The pooled HTTP(S) client every transport shares: hyper-util's legacy client over rustls
//! (ring) with native roots, HTTP/1.1, on connections that stamp their reads
//! ([`crate::connector`]).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::conn_setup::{TimedResolver, TimingConnector};
use crate::connect::{client_config, ConnectOptions};
use crate::connector::{HttpConnector, StampingConnector};
use crate::Error;

/// The client type.
pub(crate) type HttpClient =
    Client<TimingConnector<HttpsConnector<StampingConnector>>, Full<Bytes>>;

/// How long an idle connection stays in the pool. Below the keep-alive timeout of uvicorn
/// (5 s by default), which serves vLLM, SGLang and most Python servers: a connection idle
/// for longer may be closed by the server just as it is reused, and that request then fails
/// as `disconnected` (seen against vLLM: a readiness probe's connection reused by the level
/// after the prompts were prepared). In a closed loop connections are reused at once; an open
/// loop slower than one request per 4 s per connection opens a new one for each request (its
/// TTFT then includes the connect, as it would for a new client). hyper-util checks the expiry
/// when it takes a connection from the pool.
const POOL_IDLE: Duration = Duration::from_secs(4);

/// A new pooled client (no connections are made until the first request) for `endpoint`.
///
/// Plain http through a proxy is not pooled: forward proxies such as tinyproxy close the
/// client connection after each response without saying so (no `Connection: close`), and a
/// request that reuses it fails as `disconnected`, a client artefact.
pub(crate) fn https_client(
    connect_timeout: Option<Duration>,
    options: &ConnectOptions,
    endpoint: Option<&http::Uri>,
) -> Result<HttpClient, Error> {
    let mut http = HttpConnector::new_with_resolver(TimedResolver::new());
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(connect_timeout);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client_config(options)?)
        .https_or_http();
    let matcher = options.proxy.matcher();
    let pooled = match (endpoint, &matcher) {
        (Some(uri), Some(m)) => uri.scheme_str() != Some("http") || m.intercept(uri).is_none(),
        _ => true,
    };
    let tcp = StampingConnector::new(http, matcher, &options.source_addrs);
    let connector = if options.http2 {
        builder.enable_all_versions().wrap_connector(tcp)
    } else {
        builder.enable_http1().wrap_connector(tcp)
    };
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(if pooled { usize::MAX } else { 0 })
        .build(TimingConnector(connector)))
}

/// Classifies a failure of the client: a connect failure, or a connection lost afterwards.
pub(crate) fn send_error(
    target: &str,
    e: hyper_util::client::legacy::Error,
) -> kneepoint_core::Error {
    let message = std::error::Error::source(&e)
        .map(|s| s.to_string())
        .unwrap_or_else(|| e.to_string());
    if let Some(limit) = out_of_descriptors(&e) {
        return kneepoint_core::Error::ClientResources {
            message: limit,
            source: Some(Box::new(e)),
        };
    }
    if e.is_connect() {
        kneepoint_core::Error::Connect {
            target: target.to_owned(),
            message,
            source: Some(Box::new(e)),
        }
    } else {
        lost(e)
    }
}

/// How a connection was lost mid-response, read from `e`'s sources: a reset (TCP RST) and a
/// close before the response ended are different faults, and the record says which.
pub(crate) fn how_lost(e: &(dyn std::error::Error + 'static)) -> &'static str {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionReset => return "the server reset the connection",
                std::io::ErrorKind::UnexpectedEof => {
                    return "the server closed the connection before the response ended"
                }
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionAborted => {
                    return "the connection was aborted"
                }
                _ => {}
            }
        }
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return "the server closed the connection before the response ended";
            }
        }
        cur = err.source();
    }
    "the connection was lost"
}

/// A connection lost mid-response, saying how.
pub(crate) fn lost<E: std::error::Error + Send + Sync + 'static>(e: E) -> kneepoint_core::Error {
    kneepoint_core::Error::Disconnected {
        message: format!("{}: {e}", how_lost(&e)),
        source: Some(Box::new(e)),
    }
}

/// `EMFILE` or `ENFILE` anywhere in `e`'s sources: the client, not the server, ran out of
/// file descriptors. The message says so and what to do.
pub(crate) fn out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            // EMFILE (24) and ENFILE (23) on Linux and the BSDs.
            if matches!(io.raw_os_error(), Some(23 | 24)) {
                return Some(format!(
                    "too many open files ({io}): the client's file-descriptor limit is reached; raise it (ulimit -n) or lower the concurrency"
                ));
            }
        }
        cur = err.source();
    }
    None
}

/// Response headers that explain a failed status, kept in the record beside the body excerpt.
const EXPLAINING: [&str; 5] = [
    "location",
    "retry-after",
    "www-authenticate",
    "proxy-authenticate",
    "allow",
];

/// The headers of a failed response that say why (a redirect's target, when to retry, which
/// authentication is wanted), with lower-case names. A `location` keeps only scheme, host and
/// path (user info, query and fragment can carry credentials) and every value is cut to 200
/// characters.
pub(crate) fn explaining_headers(headers: &http::HeaderMap) -> Vec<(String, String)> {
    EXPLAINING
        .iter()
        .filter_map(|&name| {
            let v = headers.get(name)?;
            let mut v = String::from_utf8_lossy(v.as_bytes()).into_owned();
            if name == "location" {
                v = kneepoint_core::redact_url(&v);
            }
            Some((name.to_owned(), v.chars().take(200).collect()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_open_files_is_the_client_s_fault() {
        #[derive(Debug)]
        struct Wrap(std::io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tcp open error")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Wrap(std::io::Error::from_raw_os_error(24));
        let why = out_of_descriptors(&e).unwrap();
        assert!(
            why.contains("too many open files") && why.contains("ulimit"),
            "{why}"
        );
        assert!(out_of_descriptors(&Wrap(std::io::Error::from_raw_os_error(111))).is_none());
    }

    #[test]
    fn locations_lose_credentials() {
        assert_eq!(kneepoint_core::redact_url("https://h/p"), "https://h/p");
        assert_eq!(
            kneepoint_core::redact_url("https://u:pw@h:1/p?a=b"),
            "https://…@h:1/p…"
        );
        assert_eq!(kneepoint_core::redact_url("/login#token=abc"), "/login…");
        assert_eq!(kneepoint_core::redact_url("https://h/a@b"), "https://h/a@b");
    }

    #[test]
    fn explaining_headers_keep_the_reasons_and_drop_query_strings() {
        let mut h = http::HeaderMap::new();
        h.insert(
            "location",
            "https://h/v1/chat?X-Amz-Signature=abc".parse().unwrap(),
        );
        h.insert("retry-after", "7".parse().unwrap());
        h.insert("set-cookie", "session=secret".parse().unwrap());
        let kept = explaining_headers(&h);
        assert_eq!(
            kept,
            vec![
                ("location".to_owned(), "https://h/v1/chat…".to_owned()),
                ("retry-after".to_owned(), "7".to_owned()),
            ]
        );
    }
}
