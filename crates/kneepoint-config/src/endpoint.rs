//! The endpoint: the OpenAI-compatible transport's configuration (URL, API, headers, key,
//! TLS, proxy, request ids), SageMaker's, and the per-request deadlines, from the flags and
//! `[endpoint]`.

use kneepoint_runner::Deadlines;
use kneepoint_sim::SimProfile;
use kneepoint_transport::{ApiKey, ConnectOptions, OpenAiConfig, ProxySetting, RequestIdHeader};

use crate::error::{bail, Context};
use crate::file::{EndpointSection, WorkloadSection};
use crate::limits::seconds;
use crate::Result;

/// Body fields kneepoint writes itself: an `extra_body` that set them would make the records
/// describe requests other than those sent.
const OWN_FIELDS: [&str; 9] = [
    "model",
    "stream",
    "stream_options",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "min_tokens",
    "ignore_eos",
];

/// The OpenAI-compatible transport's configuration; `url` is `None` for the built-in
/// simulator `sim` (whose model it names). Without a model, a URL target's is asked of the
/// server (`GET /v1/models`) when the run starts.
pub(crate) fn openai_config(
    ep: &EndpointSection,
    wl: &WorkloadSection,
    url: Option<&str>,
    sim: Option<&SimProfile>,
) -> Result<OpenAiConfig> {
    let api = ep.endpoint_type.unwrap_or_default();
    let streaming = ep.streaming.or(wl.streaming).unwrap_or(true);
    let max_tokens_field = ep.max_tokens_field.unwrap_or_default();
    // The first of several models is the primary one (see `routes`).
    let model = ep
        .model
        .as_deref()
        .map(|m| parse_models(m).map(|v| v[0].0.clone()))
        .transpose()?;
    let mut transport = OpenAiConfig::new(
        url.unwrap_or("http://127.0.0.1:0"),
        model.unwrap_or_else(|| sim.map(|p| p.model.clone()).unwrap_or_default()),
    );
    transport.api = api;
    transport.path = ep.endpoint_path.clone();
    transport.streaming = streaming;
    transport.max_tokens_field = max_tokens_field;
    transport.request_id = request_id_header(ep)?;
    transport.connect = ConnectOptions {
        ca_bundle: ep.ca_bundle.clone(),
        client_cert: ep.client_cert.clone(),
        client_key: ep.client_key.clone(),
        insecure_skip_verify: ep.insecure,
        http2: ep.http2,
        proxy: match ep.proxy.as_ref() {
            None => ProxySetting::Environment,
            Some(p) if p.eq_ignore_ascii_case("none") => ProxySetting::Off,
            Some(p) if p.starts_with("http://") || p.starts_with("https://") => {
                ProxySetting::Url(p.clone())
            }
            Some(_) => bail!("--proxy must be an http:// or https:// URL, or none"),
        },
        source_addrs: ep
            .source_addrs
            .as_deref()
            .map(kneepoint_transport::parse_source_addrs)
            .transpose()?
            .unwrap_or_default(),
    };
    if let Some(b) = &ep.extra_body_map {
        transport.extra_body = b.clone();
    }
    if let Some(b) = &ep.extra_body {
        let v: serde_json::Value =
            serde_json::from_str(b).context("--extra-body must be a JSON object")?;
        let serde_json::Value::Object(m) = v else {
            bail!("--extra-body must be a JSON object");
        };
        transport.extra_body.extend(m);
    }
    // A body field named like a credential (`api_key`, `password`, at any depth) is a secret:
    // every file and message kneepoint writes is scrubbed of it.
    kneepoint_core::secrets::register_json(&serde_json::Value::Object(
        transport.extra_body.clone(),
    ));
    if let Some(k) = transport
        .extra_body
        .keys()
        .find(|k| OWN_FIELDS.contains(&k.as_str()))
    {
        bail!("extra_body must not set {k:?}: kneepoint sets it from its own settings (and records what it sent); use the matching option instead (--model, --osl, --streaming, --endpoint-type, --max-tokens-field)");
    }
    transport.headers = ep.header_map.clone().into_iter().collect();
    for h in &ep.headers {
        transport.headers.push(parse_header(h)?);
    }
    let key_env = ep
        .api_key_env
        .clone()
        .unwrap_or_else(|| "OPENAI_API_KEY".into());
    if url.is_some() {
        if let Ok(k) = std::env::var(&key_env) {
            if !k.is_empty() {
                transport.api_key = Some(ApiKey::new(k));
            }
        }
    }
    // Fail early on a bad URL or header.
    kneepoint_transport::OpenAiTransport::new(transport.clone())?;

    Ok(transport)
}

/// The per-request deadlines.
pub(crate) fn deadlines(ep: &EndpointSection) -> Result<Deadlines> {
    let request_timeout = seconds(
        "request timeout",
        Some(ep.request_timeout_s.unwrap_or(600.0)),
    )?;
    Ok(Deadlines {
        request: request_timeout,
        response: seconds("response timeout", ep.response_timeout_s)?,
        first_token: seconds("first-token timeout", ep.first_token_timeout_s)?,
        idle: seconds("idle timeout", ep.idle_timeout_s)?,
    })
}

/// `--request-id-header` / `--request-id-format` (or `[endpoint]`'s keys) over the default
/// (`x-request-id` with a UUID).
fn request_id_header(ep: &EndpointSection) -> Result<RequestIdHeader> {
    let mut h = RequestIdHeader::default();
    match ep.request_id_header.as_ref() {
        Some(n) if n.eq_ignore_ascii_case("none") => h.name = None,
        Some(n) if n.trim().is_empty() => bail!("--request-id-header needs a name (or none)"),
        Some(n) => h.name = Some(n.trim().to_ascii_lowercase()),
        None => {}
    }
    h.style = ep.request_id_format.unwrap_or_default();
    Ok(h)
}

fn parse_header(h: &str) -> Result<(String, String)> {
    let Some((k, v)) = h.split_once(':') else {
        bail!("header {h:?} must look like 'Name: value'");
    };
    Ok((k.trim().to_owned(), v.trim().to_owned()))
}

/// `--model a,b=3`: model names with optional weights (default 1), at least one.
pub(crate) fn parse_models(spec: &str) -> Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, weight) = match part.rsplit_once('=') {
            Some((n, w)) => {
                let w: f64 = w.trim().parse().map_err(|_| {
                    crate::Error::Invalid(format!("--model {part:?}: the weight must be a number"))
                })?;
                if !(w.is_finite() && w > 0.0) {
                    return Err(crate::Error::Invalid(format!(
                        "--model {part:?}: the weight must be positive"
                    )));
                }
                (n.trim(), w)
            }
            None => (part, 1.0),
        };
        if name.is_empty() {
            return Err(crate::Error::Invalid(format!(
                "--model {part:?}: a model needs a name"
            )));
        }
        out.push((name.to_owned(), weight));
    }
    if out.is_empty() {
        return Err(crate::Error::Invalid("--model names no model".into()));
    }
    Ok(out)
}
