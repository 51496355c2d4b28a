//! The TCP connector under the pooled client: hyper-util's `HttpConnector` (DNS, connect
//! timeout, `TCP_NODELAY`) whose streams are wrapped in [`StampedTcpStream`], so that every
//! response carries its connection's [`crate::ReceiveClock`] as an extension, and its setup
//! times ([`crate::conn_setup`]).
//!
//! Proxies: where a [`Matcher`] (from `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`/`NO_PROXY`, or
//! one proxy URL) intercepts a destination, an https destination is reached through an HTTP
//! `CONNECT` tunnel (hyper-util's `Tunnel`, with the proxy URL's credentials as
//! `Proxy-Authorization`) under the TLS layer, and an http destination by connecting to the
//! proxy and sending requests in absolute form (`Connected::proxy`). The stream is stamped
//! either way; through a proxy, receive times are the proxy's delivery times to the client.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use tower_service::Service;

use crate::conn_setup::{Setup, SetupHandle, TimedResolver};
use crate::stamped_tcp::StampedTcpStream;

/// hyper-util's connector with the timed resolver.
pub(crate) type HttpConnector = hyper_util::client::legacy::connect::HttpConnector<TimedResolver>;

/// Connects like [`HttpConnector`] (through a proxy where one applies) and stamps the
/// connection's reads.
#[derive(Clone)]
pub(crate) struct StampingConnector {
    http: HttpConnector,
    /// One connector per source address (empty: `http` picks), used in turn.
    sources: Arc<[HttpConnector]>,
    next: Arc<AtomicUsize>,
    proxy: Option<Arc<Matcher>>,
}

impl std::fmt::Debug for StampingConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StampingConnector")
            .field("proxy", &self.proxy.is_some())
            .finish_non_exhaustive()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl StampingConnector {
    /// A connector over `http`; `proxy` decides which destinations go through a proxy; new
    /// connections come from `sources` in turn (from where the system picks when empty).
    pub(crate) fn new(
        http: HttpConnector,
        proxy: Option<Matcher>,
        sources: &[std::net::IpAddr],
    ) -> Self {
        let sources: Vec<HttpConnector> = sources
            .iter()
            .map(|a| {
                let mut c = http.clone();
                c.set_local_address(Some(*a));
                c
            })
            .collect();
        StampingConnector {
            http,
            sources: sources.into(),
            next: Arc::new(AtomicUsize::new(0)),
            proxy: proxy.map(Arc::new),
        }
    }

    fn direct(&self) -> Direct {
        if self.sources.is_empty() {
            return Direct(self.http.clone());
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.sources.len();
        Direct(self.sources[i].clone())
    }
}

/// A TCP connection, stamped, that may lead to a plain-HTTP proxy.
#[derive(Debug)]
pub(crate) struct Conn {
    io: TokioIo<StampedTcpStream>,
    via_http_proxy: bool,
    /// How it was set up, when a [`crate::conn_setup::TimingConnector`] made it.
    setup: Option<Arc<Setup>>,
}

/// Straight to the destination.
#[derive(Clone, Debug)]
struct Direct(HttpConnector);

impl Service<Uri> for Direct {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let setup = Setup::current();
            let t0 = std::time::Instant::now();
            let tcp = connecting.await?.into_inner();
            if let Some(s) = &setup {
                s.resolved_and_connected(
                    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX),
                );
            }
            Ok(Conn {
                io: TokioIo::new(StampedTcpStream::new(tcp)),
                via_http_proxy: false,
                setup,
            })
        })
    }
}

impl Service<Uri> for StampingConnector {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let intercept = self.proxy.as_ref().and_then(|m| m.intercept(&uri));
        let mut direct = self.direct();
        match intercept {
            None => direct.call(uri),
            Some(proxy) if uri.scheme_str() == Some("https") => {
                let via = proxy_name(proxy.uri());
                let mut tunnel = Tunnel::new(proxy.uri().clone(), direct);
                if let Some(auth) = proxy.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                Box::pin(async move {
                    tunnel
                        .call(uri)
                        .await
                        .map_err(|e| format!("through proxy {via}: {e}").into())
                })
            }
            Some(proxy) => {
                let via = proxy_name(proxy.uri());
                let connecting = direct.call(proxy.uri().clone());
                Box::pin(async move {
                    let mut conn = connecting
                        .await
                        .map_err(|e| BoxError::from(format!("through proxy {via}: {e}")))?;
                    conn.via_http_proxy = true;
                    Ok(conn)
                })
            }
        }
    }
}

/// A proxy's host and port, for messages (never its credentials).
fn proxy_name(uri: &Uri) -> String {
    match (uri.host(), uri.port_u16()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        _ => "(unnamed)".to_owned(),
    }
}

impl Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        let c = self.io.connected().proxy(self.via_http_proxy);
        match &self.setup {
            Some(s) => c.extra(SetupHandle(s.clone())),
            None => c,
        }
    }
}

/// A stamped stream tells hyper-util its clock, which the pool then sets on every response the
/// connection carries.
impl Connection for StampedTcpStream {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.clock().clone())
    }
}
