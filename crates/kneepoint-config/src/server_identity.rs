//! What an OpenAI-compatible server says about itself (`GET /version`, `GET /v1/models`),
//! kept with the run's settings (`server_identity`) so that the run's folder, and the results
//! store after it, say which server version and which model files were measured.

use std::time::Duration;

use kneepoint_transport::OpenAiConfig;
use serde_json::Value;

/// What the target's server says about itself: an OpenAI-compatible server's answers (a
/// SageMaker endpoint has no such routes).
async fn of_target(target: &crate::Target) -> Option<Value> {
    match target.protocol() {
        crate::Protocol::OpenAi { config, .. } => server_identity(config).await,
        #[cfg(feature = "sagemaker")]
        crate::Protocol::SageMaker(_) => None,
    }
}

/// The answers of `GET /version` and `GET /v1/models` beside `config`'s base URL, each a JSON
/// document of at most 64 KiB within 5 s; a route that does not answer so is left out, and
/// `None` when neither did.
async fn server_identity(config: &OpenAiConfig) -> Option<Value> {
    let fetch = kneepoint_transport::Fetcher::new(&config.connect).ok()?;
    let base = config.base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let mut out = serde_json::Map::new();
    for (key, path) in [("version", "/version"), ("models", "/v1/models")] {
        let Ok(uri) = format!("{root}{path}").parse::<http::Uri>() else {
            continue;
        };
        let Ok(got) = fetch.get(&uri, Duration::from_secs(5), 64 * 1024).await else {
            continue;
        };
        if got.status != 200 {
            continue;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(&got.body) {
            out.insert(key.to_owned(), v);
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// The run's description (`settings.describe()`) with what its server said about itself
/// (`server_identity`, when it said anything).
pub(crate) async fn described(settings: &crate::CommonSettings) -> Value {
    let mut description = settings.describe();
    if let (Some(o), Some(id)) = (
        description.as_object_mut(),
        of_target(&settings.target).await,
    ) {
        o.insert("server_identity".to_owned(), id);
    }
    description
}
