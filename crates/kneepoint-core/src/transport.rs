//! The one trait every endpoint protocol implements.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;

use crate::{Error, Request, ResponseEvent};

/// The events of one response. An `Err` item ends the response as failed; the stream ending
/// (`None`) is the end of the response.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<ResponseEvent, Error>> + Send>>;

/// Sends requests to an inference endpoint.
///
/// The runner reads its clock around these calls: `send` resolves when the response has started
/// (headers received), and each stream item is stamped when it is yielded, unless a chunk says
/// when its bytes were received ([`crate::Chunk::received`], which the runner prefers). A
/// transport therefore yields each event as soon as its bytes are parsed and does no waiting of
/// its own. Implementations are shared across tasks (`Arc<dyn Transport>`).
#[async_trait::async_trait]
pub trait Transport: Send + Sync {
    /// Sends one request and returns its event stream.
    async fn send(&self, request: &Request) -> Result<EventStream, Error>;

    /// The body this transport would send for `request`, for `inputs.json`. `None` when the
    /// transport cannot show it.
    fn payload(&self, request: &Request) -> Option<serde_json::Value> {
        let _ = request;
        None
    }

    /// The id this transport names `request` by to the server (for example its `x-request-id`
    /// header), kept in the record as `x_request_id` so that server logs join client records.
    /// `None` (the default) records the request's own id in decimal.
    fn request_id(&self, request: &Request) -> Option<String> {
        let _ = request;
        None
    }

    /// Which model and endpoint `request` goes to, kept in its record (`model`, `url`), when
    /// the transport spreads requests over several (`None`, the default, for one). It must
    /// name the target `send` uses for the same request.
    fn route(&self, request: &Request) -> Option<Route> {
        let _ = request;
        None
    }
}

/// A model on an endpoint: where a request was sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    /// The model name sent in the request.
    pub model: String,
    /// The endpoint's URL (no credentials or query).
    pub url: String,
}

macro_rules! forward_transport {
    ($($ty:ty),*) => {$(
        #[async_trait::async_trait]
        impl<T: Transport + ?Sized> Transport for $ty {
            async fn send(&self, request: &Request) -> Result<EventStream, Error> {
                (**self).send(request).await
            }

            fn payload(&self, request: &Request) -> Option<serde_json::Value> {
                (**self).payload(request)
            }

            fn request_id(&self, request: &Request) -> Option<String> {
                (**self).request_id(request)
            }

            fn route(&self, request: &Request) -> Option<Route> {
                (**self).route(request)
            }
        }
    )*};
}

// A shared, boxed or borrowed transport is a transport.
forward_transport!(std::sync::Arc<T>, Box<T>, &T);

/// A stream over already-known events (for tests and simple transports).
pub fn iter_stream<I>(items: I) -> IterStream<I::IntoIter>
where
    I: IntoIterator<Item = Result<ResponseEvent, Error>>,
{
    IterStream(items.into_iter())
}

/// The stream returned by [`iter_stream`].
#[derive(Debug)]
pub struct IterStream<I>(I);

impl<I> Stream for IterStream<I>
where
    I: Iterator<Item = Result<ResponseEvent, Error>> + Unpin,
{
    type Item = Result<ResponseEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    // Object safety is checked at compile time.
    fn _object_safe(_: Arc<dyn Transport>) {}

    // Arc, Box and references forward to the transport they hold.
    fn _forwarding<T: Transport + 'static>(t: T) {
        fn takes(_: impl Transport) {}
        let shared: Arc<dyn Transport> = Arc::new(t);
        takes(&shared);
        takes(shared.clone());
        takes(Box::new(shared));
    }

    struct Fixed;

    #[async_trait::async_trait]
    impl Transport for Fixed {
        async fn send(&self, _request: &Request) -> Result<EventStream, Error> {
            Ok(Box::pin(iter_stream(vec![Err(Error::Cancelled)])))
        }
    }

    #[tokio::test]
    async fn default_payload_and_stream() {
        use futures_util::StreamExt;
        let t: Arc<dyn Transport> = Arc::new(Fixed);
        assert!(t.payload(&Request::text(0, "x")).is_none());
        assert!(t.request_id(&Request::text(0, "x")).is_none());
        let mut s = t.send(&Request::text(0, "x")).await.unwrap();
        assert!(matches!(s.next().await, Some(Err(Error::Cancelled))));
        assert!(s.next().await.is_none());
        // The forwarding impls reach the inner transport.
        let boxed: Box<dyn Transport> = Box::new(&t);
        let mut s = boxed.send(&Request::text(1, "y")).await.unwrap();
        assert!(matches!(s.next().await, Some(Err(Error::Cancelled))));
    }
}
