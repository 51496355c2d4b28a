//! AWS credentials: the standard chain from `aws-config` (environment, shared config and
//! credentials files with profiles, web identity, ECS container and EC2 instance metadata,
//! `credential_process`), with its HTTP calls going through kneepoint's own hyper client (no
//! second HTTP client or TLS stack), cached and refreshed before they expire.

use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use kneepoint_core::{async_trait, Error as RequestError};

use crate::client::https_client;
use crate::Error;

/// Credentials are refreshed this long before they expire.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Where a transport gets its credentials. `Debug` must not print secrets.
#[async_trait]
pub trait CredentialSource: Send + Sync + std::fmt::Debug {
    /// Current credentials (refreshed when needed).
    async fn credentials(&self) -> Result<Credentials, RequestError>;
}

/// Fixed credentials (tests, and the built-in simulator's test key).
#[derive(Debug, Clone)]
pub struct StaticCredentials(pub Credentials);

#[async_trait]
impl CredentialSource for StaticCredentials {
    async fn credentials(&self) -> Result<Credentials, RequestError> {
        Ok(self.0.clone())
    }
}

/// The standard AWS credential chain, cached.
#[derive(Debug)]
pub struct AwsCredentialChain {
    provider: SharedCredentialsProvider,
    cached: tokio::sync::Mutex<Option<Credentials>>,
}

impl AwsCredentialChain {
    /// Resolves the chain for `region` (and `profile`, else `AWS_PROFILE` / `default`) and
    /// fetches credentials once, so that a missing or broken setup fails before any load.
    pub async fn load(region: &str, profile: Option<&str>) -> Result<Self, Error> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_owned()))
            .http_client(SharedHttpClient::new(HyperForAws));
        if let Some(p) = profile {
            loader = loader.profile_name(p);
        }
        let config = loader.load().await;
        let provider = config
            .credentials_provider()
            .ok_or_else(|| Error::Credentials {
                reason: "no AWS credential provider could be configured".into(),
            })?;
        let chain = AwsCredentialChain {
            provider,
            cached: tokio::sync::Mutex::new(None),
        };
        chain.credentials().await.map_err(|e| Error::Credentials {
            reason: e.to_string(),
        })?;
        Ok(chain)
    }

    /// Wraps any provider (for tests and embedders).
    pub fn from_provider(provider: impl ProvideCredentials + 'static) -> Self {
        AwsCredentialChain {
            provider: SharedCredentialsProvider::new(provider),
            cached: tokio::sync::Mutex::new(None),
        }
    }
}

fn fresh(c: &Credentials, now: SystemTime) -> bool {
    c.expiry().is_none_or(|t| {
        t.duration_since(now)
            .is_ok_and(|left| left > REFRESH_MARGIN)
    })
}

#[async_trait]
impl CredentialSource for AwsCredentialChain {
    async fn credentials(&self) -> Result<Credentials, RequestError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| fresh(c, SystemTime::now())) {
            return Ok(c.clone());
        }
        let c = self.provider.provide_credentials().await.map_err(|e| {
            RequestError::InvalidRequest {
                message: format!("AWS credentials unavailable: {}", error_chain(&e)),
            }
        })?;
        *cached = Some(c.clone());
        Ok(c)
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(x) = cur {
        s.push_str(": ");
        s.push_str(&x.to_string());
        cur = x.source();
    }
    s
}

/// `aws-config`'s providers (IMDS, ECS, STS web identity) send their few requests through
/// kneepoint's hyper client.
#[derive(Debug)]
struct HyperForAws;

impl HttpClient for HyperForAws {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(HyperConnector {
            // A default client cannot fail to build; if it did, each call says so.
            client: https_client(settings.connect_timeout(), &Default::default(), None)
                .map_err(|e| e.to_string()),
            read_timeout: settings.read_timeout(),
        })
    }
}

#[derive(Debug)]
struct HyperConnector {
    client: Result<crate::client::HttpClient, String>,
    read_timeout: Option<Duration>,
}

impl HttpConnector for HyperConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = match self.client.clone() {
            Ok(c) => c,
            Err(e) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::other(e.into(), None)))
            }
        };
        let read_timeout = self.read_timeout.unwrap_or(Duration::from_secs(30));
        HttpConnectorFuture::new(async move {
            let req = request
                .try_into_http1x()
                .map_err(|e| ConnectorError::other(Box::new(e), None))?;
            let (parts, body) = req.into_parts();
            let bytes = body.bytes().map(Bytes::copy_from_slice).unwrap_or_default();
            let req = http::Request::from_parts(parts, Full::new(bytes));
            let call = async {
                let resp = client
                    .request(req)
                    .await
                    .map_err(|e| ConnectorError::io(Box::new(e)))?;
                let (parts, body) = resp.into_parts();
                let body = Limited::new(body, 1 << 20)
                    .collect()
                    .await
                    .map_err(ConnectorError::io)?
                    .to_bytes();
                HttpResponse::try_from(http::Response::from_parts(parts, SdkBody::from(body)))
                    .map_err(|e| ConnectorError::other(Box::new(e), None))
            };
            match tokio::time::timeout(read_timeout, call).await {
                Ok(r) => r,
                Err(e) => Err(ConnectorError::timeout(Box::new(e))),
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[derive(Debug, Clone)]
    struct Counting {
        calls: Arc<AtomicU32>,
        lifetime: Duration,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let c = Credentials::new(
                format!("AKID{n}"),
                "secret",
                None,
                Some(SystemTime::now() + self.lifetime),
                "test",
            );
            aws_credential_types::provider::future::ProvideCredentials::ready(Ok(c))
        }
    }

    #[tokio::test]
    async fn credentials_are_cached_until_close_to_expiry() {
        let calls = Arc::new(AtomicU32::new(0));
        let long = AwsCredentialChain::from_provider(Counting {
            calls: calls.clone(),
            lifetime: Duration::from_secs(3600),
        });
        for _ in 0..5 {
            assert_eq!(long.credentials().await.unwrap().access_key_id(), "AKID0");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Expiring within the refresh margin: fetched again each time.
        let calls = Arc::new(AtomicU32::new(0));
        let short = AwsCredentialChain::from_provider(Counting {
            calls: calls.clone(),
            lifetime: Duration::from_secs(60),
        });
        short.credentials().await.unwrap();
        assert_eq!(short.credentials().await.unwrap().access_key_id(), "AKID1");
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let c = StaticCredentials(Credentials::new("AKIDX", "sEcReT-123", None, None, "t"));
        assert!(!format!("{c:?}").contains("sEcReT-123"));
    }
}
