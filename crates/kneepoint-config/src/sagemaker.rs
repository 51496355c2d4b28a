//! A SageMaker endpoint's settings, from the flags and `[endpoint]` (feature `sagemaker`).

use std::sync::Arc;

use kneepoint_core::{TokenCounter, Transport};
use kneepoint_sim::SimServer;
use kneepoint_transport::sagemaker::{AwsCredentialChain, SageMakerTransport, StaticCredentials};
use kneepoint_transport::{Api, OpenAiConfig};

use crate::error::{bail, Context};
use crate::file::EndpointSection;
use crate::Result;

/// How to reach a SageMaker endpoint.
#[derive(Debug, Clone)]
pub struct SageMakerSettings {
    /// The transport's configuration.
    pub config: kneepoint_transport::sagemaker::SageMakerConfig,
    /// AWS profile for the credential chain.
    pub aws_profile: Option<String>,
}

/// The SageMaker settings of the flags and `[endpoint]` for endpoint `name`; the request
/// body's fields (model, streaming, deadlines, TLS...) follow `transport`.
pub(crate) fn sagemaker_settings(
    ep: &EndpointSection,
    transport: &OpenAiConfig,
    name: String,
) -> Result<SageMakerSettings> {
    use kneepoint_transport::sagemaker::{BodyFormat, CodecKind, InvokeHeaders, SageMakerConfig};
    let region = crate::aws::aws_region(ep.region.clone());
    let mut c = SageMakerConfig::new(name, region);
    c.endpoint_url = ep.endpoint_url.clone();
    // (a flag's value was checked by clap: a parse error is the file's)
    let body = ep.sagemaker_body.as_deref().map(str::parse).transpose();
    c.body = match body.context("[endpoint] body_format")? {
        Some(b) => b,
        None if transport.api == Api::Completions => BodyFormat::OpenAiCompletions,
        None => BodyFormat::OpenAiChat,
    };
    let codec = ep.payload_codec.as_deref().map(str::parse).transpose();
    c.codec = codec
        .context("[endpoint] payload_codec")?
        .unwrap_or(CodecKind::Sse);
    c.model = transport.model.clone();
    c.streaming = transport.streaming;
    c.max_tokens_field = transport.max_tokens_field;
    c.request_id = transport.request_id.clone();
    c.connect = transport.connect.clone();
    c.extra_body = transport.extra_body.clone();
    c.connect_timeout = transport.connect_timeout;
    c.headers = InvokeHeaders {
        custom_attributes: ep.custom_attributes.clone(),
        target_variant: ep.target_variant.clone(),
        target_container_hostname: ep.target_container_hostname.clone(),
        inference_component: ep.inference_component.clone(),
        session_id: ep.session_id.clone(),
        inference_id: ep.inference_id.clone(),
        target_model: ep.target_model.clone(),
    };
    c.validate()?;
    Ok(SageMakerSettings {
        config: c,
        aws_profile: ep.aws_profile.clone(),
    })
}

/// Starts the built-in simulator speaking the SageMaker protocol, checking signatures made
/// with a fresh test key; returns the transport to it, the server and its URL.
pub(crate) async fn start_simulator(
    profile: &kneepoint_sim::SimProfile,
    sm: &SageMakerSettings,
    counter: Arc<dyn TokenCounter>,
) -> Result<(Arc<dyn Transport>, SimServer, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let key = kneepoint_sim::SigV4TestKey {
        access_key_id: format!("AKIDKNEEPOINTSIM{}", nanos % 1_000_000),
        secret_access_key: format!("sim-secret-{nanos:x}"),
    };
    let options = kneepoint_sim::SimOptions {
        sigv4: Some(key.clone()),
        endpoint_name: Some(sm.config.endpoint_name.clone()),
        ..Default::default()
    };
    let server = SimServer::start_with_options(profile.clone(), addr, counter, options)
        .await
        .context("starting the built-in simulator")?;
    let mut c = sm.config.clone();
    c.endpoint_url = Some(server.base_url());
    c.send_input_token_hint = true;
    c.connect.proxy = kneepoint_transport::ProxySetting::Off;
    if c.model.is_empty() {
        c.model = profile.model.clone();
    }
    let creds = aws_credential_types::Credentials::new(
        key.access_key_id,
        key.secret_access_key,
        None,
        None,
        "kneepoint-sim",
    );
    let url = server.base_url();
    let t = SageMakerTransport::new(c, Arc::new(StaticCredentials(creds)))?;
    Ok((Arc::new(t), server, url))
}

/// Checks that a SageMaker endpoint's runtime URL accepts connections, loads the AWS
/// credential chain, and returns the transport to the endpoint.
pub(crate) async fn connect(sm: &SageMakerSettings) -> Result<Arc<dyn Transport>> {
    ready_tcp(&sm.config.base_url()).await?;
    let creds = AwsCredentialChain::load(&sm.config.region, sm.aws_profile.as_deref())
        .await
        .context("loading AWS credentials (environment, ~/.aws files, web identity, container or instance metadata)")?;
    Ok(Arc::new(SageMakerTransport::new(
        sm.config.clone(),
        Arc::new(creds),
    )?))
}

/// Fails fast when a SageMaker runtime URL cannot be reached at all (there is no cheap,
/// unbilled request to send, so this checks that a TCP connection opens).
async fn ready_tcp(base_url: &str) -> Result<()> {
    let uri: http::Uri = base_url
        .parse()
        .with_context(|| format!("invalid endpoint URL {base_url}"))?;
    let host = uri.host().unwrap_or("localhost").to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    match tokio::time::timeout(
        std::time::Duration::from_secs(15),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Err(_) => bail!("{base_url} did not accept a connection within 15 s"),
        Ok(Err(e)) => Err(e).context(format!("cannot reach {base_url}")),
        Ok(Ok(_)) => Ok(()),
    }
}
