//! The TCP connector under the pooled client: hyper-util's `HttpConnector` (DNS, connect
//! timeout, `TCP_NODELAY`) whose streams are wrapped in [`StampedTcpStream`], so that every
//! response carries its connection's [`crate::ReceiveClock`] as an extension.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tower_service::Service;

use crate::stamped_tcp::StampedTcpStream;

/// Connects like [`HttpConnector`] and stamps the connection's reads.
#[derive(Clone, Debug)]
pub(crate) struct StampingConnector(pub(crate) HttpConnector);

type ConnectError = <HttpConnector as Service<Uri>>::Error;

impl Service<Uri> for StampingConnector {
    type Response = TokioIo<StampedTcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let tcp = connecting.await?.into_inner();
            Ok(TokioIo::new(StampedTcpStream::new(tcp)))
        })
    }
}

/// A stamped stream tells hyper-util its clock, which the pool then sets on every response the
/// connection carries.
impl Connection for StampedTcpStream {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.clock().clone())
    }
}
