//! How each connection was set up: DNS, TCP connect and TLS handshake times (k6's and
//! AIPerf's `http_req_*` phases), handed to every response the connection carries.
//!
//! hyper-rustls does the handshake above kneepoint's TCP connector, and hyper-util's
//! `HttpConnector` resolves and connects inside one future, so the phases are timed at three
//! places that share one [`Setup`] per connection through a task-local value:
//! [`TimingConnector`] (outermost) makes it and times the whole setup; [`TimedResolver`] (the
//! resolver `HttpConnector` calls) times DNS; the TCP connector times DNS + connect and keeps
//! the `Setup` in its connection, whose `Connected::extra` puts a [`SetupHandle`] on every
//! response. TLS is the whole less DNS and connect. A request reports the setup when the
//! connection was ready only after the request was sent (it waited for it) and no other
//! request claimed it first; every other request reports the connection reused (zeros), as
//! k6 does. (hyper-util's pool may finish a connection in the background for a request that
//! got an idle one meanwhile: whoever uses it later did not wait for it.)
//!
//! The task-local value is set around the polls of the connect future, where hyper-util calls
//! the resolver and the TCP connector, whichever task polls it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::Uri;
use hyper_util::client::legacy::connect::dns::{GaiAddrs, GaiResolver, Name};
use kneepoint_core::ConnectionTimings;
use tower_service::Service;

tokio::task_local! {
    static SETUP: Arc<Setup>;
}

/// One connection's setup phases, ns.
#[derive(Debug, Default)]
pub(crate) struct Setup {
    dns_ns: AtomicU64,
    connect_ns: AtomicU64,
    tls_ns: AtomicU64,
    claimed: AtomicBool,
    /// When the connection was ready.
    ready: std::sync::OnceLock<Instant>,
}

impl Setup {
    /// The setup of the connection being made, when a [`TimingConnector`] is making it.
    pub(crate) fn current() -> Option<Arc<Setup>> {
        SETUP.try_with(Arc::clone).ok()
    }

    /// Records the TCP connector's time: DNS and connect together.
    pub(crate) fn resolved_and_connected(&self, ns: u64) {
        let dns = self.dns_ns.load(Ordering::Relaxed);
        self.connect_ns
            .store(ns.saturating_sub(dns), Ordering::Relaxed);
    }
}

/// A connection's setup, on every response the connection carries.
#[derive(Debug, Clone)]
pub(crate) struct SetupHandle(pub(crate) Arc<Setup>);

impl SetupHandle {
    /// The setup for a request sent at `sent` that got this response: the phases when the
    /// connection was ready after `sent` and no request claimed them before,
    /// [`ConnectionTimings::reused`] otherwise.
    pub(crate) fn claim(&self, sent: Instant) -> ConnectionTimings {
        let s = &self.0;
        if s.ready.get().is_some_and(|&r| r <= sent) || s.claimed.swap(true, Ordering::AcqRel) {
            return ConnectionTimings::reused();
        }
        ConnectionTimings::opened(
            s.dns_ns.load(Ordering::Relaxed),
            s.connect_ns.load(Ordering::Relaxed),
            s.tls_ns.load(Ordering::Relaxed),
        )
    }
}

fn ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// hyper-util's `getaddrinfo` resolver, timed into the connection's [`Setup`].
#[derive(Debug, Clone)]
pub(crate) struct TimedResolver(GaiResolver);

impl TimedResolver {
    /// Resolves with `getaddrinfo` on tokio's blocking pool.
    pub(crate) fn new() -> Self {
        TimedResolver(GaiResolver::new())
    }
}

type Resolving = Pin<Box<dyn Future<Output = Result<GaiAddrs, io::Error>> + Send>>;

impl Service<Name> for TimedResolver {
    type Response = GaiAddrs;
    type Error = io::Error;
    type Future = Resolving;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let setup = Setup::current();
        let t0 = Instant::now();
        let resolving = self.0.call(name);
        Box::pin(async move {
            let addrs = resolving.await;
            if let Some(s) = setup {
                s.dns_ns.store(ns(t0), Ordering::Relaxed);
            }
            addrs
        })
    }
}

/// The outermost connector: makes each connection's [`Setup`], sets it for the connect
/// future's polls, and times the whole (TLS is the whole less DNS and connect).
#[derive(Debug, Clone)]
pub(crate) struct TimingConnector<C>(pub(crate) C);

impl<C> Service<Uri> for TimingConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Send + 'static,
{
    type Response = C::Response;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, C::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tls = uri.scheme_str() == Some("https");
        let setup = Arc::new(Setup::default());
        let connecting = self.0.call(uri);
        let s = setup.clone();
        Box::pin(SETUP.scope(setup, async move {
            let t0 = Instant::now();
            let conn = connecting.await?;
            let _ = s.ready.set(Instant::now());
            if tls {
                let before =
                    s.dns_ns.load(Ordering::Relaxed) + s.connect_ns.load(Ordering::Relaxed);
                s.tls_ns
                    .store(ns(t0).saturating_sub(before), Ordering::Relaxed);
            }
            Ok(conn)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reader_claims_the_setup_and_later_ones_see_reuse() {
        let s = Arc::new(Setup::default());
        s.dns_ns.store(5, Ordering::Relaxed);
        s.resolved_and_connected(25);
        s.tls_ns.store(40, Ordering::Relaxed);
        let sent = Instant::now();
        let _ = s.ready.set(Instant::now());
        let h = SetupHandle(s);
        assert_eq!(h.claim(sent), ConnectionTimings::opened(5, 20, 40));
        assert_eq!(h.clone().claim(sent), ConnectionTimings::reused());
        // a connection ready before the request was sent was not waited for
        let early = Arc::new(Setup::default());
        let _ = early.ready.set(Instant::now());
        let later = Instant::now();
        assert_eq!(SetupHandle(early).claim(later), ConnectionTimings::reused());
        assert_eq!(ConnectionTimings::opened(5, 20, 40).total_ns(), 65);
    }

    #[tokio::test]
    async fn the_setup_is_seen_inside_the_connect_future_only() {
        assert!(Setup::current().is_none());
        let mut seen = None;
        SETUP
            .scope(Arc::new(Setup::default()), async {
                seen = Setup::current().map(|_| ());
            })
            .await;
        assert_eq!(seen, Some(()));
    }
}
