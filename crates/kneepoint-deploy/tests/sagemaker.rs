//! The SageMaker launcher against a fake control plane on loopback (the real-server suite runs
//! it against moto's, signatures checked): created, InService, recipe, deleted once and
//! idempotently; an endpoint that fails or never gets InService, a create that fails half
//! way, and an interrupt all leave nothing behind; leftovers of a gone launcher are found by
//! their tag and deleted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use kneepoint_deploy::{
    find_sagemaker_leftovers, remove_sagemaker_leftovers, Error, SageMakerSpec, LAUNCHER_TAG,
};
use kneepoint_runner::CancelToken;
use kneepoint_transport::sagemaker::{SageMakerApi, StaticCredentials};
use serde_json::{json, Value};

/// How the fake's endpoints behave.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Creating for two polls, then InService.
    Healthy,
    /// Creating, then Failed.
    Fails,
    /// Creating forever.
    NeverReady,
    /// Creating for five polls, then InService.
    SlowCreate,
    /// CreateEndpointConfig is refused.
    ConfigRefused,
}

#[derive(Debug, Default)]
struct State {
    models: BTreeMap<String, Value>,
    configs: BTreeMap<String, Value>,
    endpoints: BTreeMap<String, (Value, u32)>,
    calls: Vec<String>,
    /// Fired at the first DescribeEndpoint (an interrupt while waiting, with no timing).
    cancel_on_describe: Option<CancelToken>,
}

/// The endpoint's status after `polls` DescribeEndpoint calls.
fn status(mode: Mode, polls: u32) -> &'static str {
    match (mode, polls) {
        (Mode::Healthy, p) if p > 2 => "InService",
        (Mode::SlowCreate, p) if p > 5 => "InService",
        (Mode::Fails, p) if p > 1 => "Failed",
        _ => "Creating",
    }
}

fn answer(status: u16, body: Value) -> hyper::Response<Full<bytes::Bytes>> {
    let mut r = hyper::Response::new(Full::new(bytes::Bytes::from(body.to_string())));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r
}

fn not_found(what: &str, name: &str) -> hyper::Response<Full<bytes::Bytes>> {
    answer(
        400,
        json!({"__type": "ValidationException", "Message": format!("Could not find {what} \"{name}\".")}),
    )
}

fn handle(
    state: &Mutex<State>,
    mode: Mode,
    op: &str,
    b: &Value,
) -> hyper::Response<Full<bytes::Bytes>> {
    let mut s = state.lock().unwrap();
    s.calls.push(op.to_owned());
    let arn = |kind: &str, n: &str| format!("arn:aws:sagemaker:us-east-1:123456789012:{kind}/{n}");
    match op {
        "CreateModel" => {
            let n = b["ModelName"].as_str().unwrap().to_owned();
            s.models.insert(n.clone(), b.clone());
            answer(200, json!({"ModelArn": arn("model", &n)}))
        }
        "CreateEndpointConfig" if mode == Mode::ConfigRefused => answer(
            400,
            json!({"__type": "ResourceLimitExceeded", "Message": "The account-level service limit 'ml.g5.12xlarge for endpoint usage' is 0 Instances"}),
        ),
        "CreateEndpointConfig" => {
            let n = b["EndpointConfigName"].as_str().unwrap().to_owned();
            if !s
                .models
                .contains_key(b["ProductionVariants"][0]["ModelName"].as_str().unwrap())
            {
                return not_found("model", &n);
            }
            s.configs.insert(n.clone(), b.clone());
            answer(
                200,
                json!({"EndpointConfigArn": arn("endpoint-config", &n)}),
            )
        }
        "CreateEndpoint" => {
            let n = b["EndpointName"].as_str().unwrap().to_owned();
            s.endpoints.insert(n.clone(), (b.clone(), 0));
            answer(200, json!({"EndpointArn": arn("endpoint", &n)}))
        }
        "DescribeEndpoint" => {
            if let Some(c) = s.cancel_on_describe.take() {
                c.cancel();
            }
            let n = b["EndpointName"].as_str().unwrap();
            let Some((_, polls)) = s.endpoints.get_mut(n) else {
                return not_found("endpoint", n);
            };
            *polls += 1;
            let status = status(mode, *polls);
            answer(
                200,
                json!({"EndpointName": n, "EndpointStatus": status,
                "FailureReason": "The primary container for production variant AllTraffic did not pass the ping health check."}),
            )
        }
        // As SageMaker: an endpoint being created cannot be deleted yet.
        "DeleteEndpoint"
            if s.endpoints
                .get(b["EndpointName"].as_str().unwrap())
                .is_some_and(|(_, polls)| status(mode, *polls) == "Creating") =>
        {
            answer(
                400,
                json!({"__type": "ValidationException",
                "Message": "Cannot update in-progress endpoint"}),
            )
        }
        "DeleteEndpoint" | "DeleteEndpointConfig" | "DeleteModel" => {
            let (key, map): (&str, &mut dyn FnMut(&str) -> bool) = match op {
                "DeleteEndpoint" => ("EndpointName", &mut |n| s.endpoints.remove(n).is_some()),
                "DeleteEndpointConfig" => {
                    ("EndpointConfigName", &mut |n| s.configs.remove(n).is_some())
                }
                _ => ("ModelName", &mut |n| s.models.remove(n).is_some()),
            };
            let n = b[key].as_str().unwrap();
            if map(n) {
                answer(200, json!({}))
            } else {
                not_found(op.trim_start_matches("Delete"), n)
            }
        }
        "ListEndpoints" | "ListEndpointConfigs" | "ListModels" => {
            let (key, name, arn_key, kind, names): (&str, &str, &str, &str, Vec<String>) = match op
            {
                "ListEndpoints" => (
                    "Endpoints",
                    "EndpointName",
                    "EndpointArn",
                    "endpoint",
                    s.endpoints.keys().cloned().collect(),
                ),
                "ListEndpointConfigs" => (
                    "EndpointConfigs",
                    "EndpointConfigName",
                    "EndpointConfigArn",
                    "endpoint-config",
                    s.configs.keys().cloned().collect(),
                ),
                _ => (
                    "Models",
                    "ModelName",
                    "ModelArn",
                    "model",
                    s.models.keys().cloned().collect(),
                ),
            };
            let items: Vec<Value> = names
                .iter()
                .map(|n| json!({name: n, arn_key: arn(kind, n)}))
                .collect();
            answer(200, json!({key: items}))
        }
        "ListTags" => {
            let a = b["ResourceArn"].as_str().unwrap();
            let n = a.rsplit('/').next().unwrap();
            let tags = s
                .endpoints
                .get(n)
                .map(|e| e.0["Tags"].clone())
                .or_else(|| s.configs.get(n).map(|c| c["Tags"].clone()))
                .or_else(|| s.models.get(n).map(|m| m["Tags"].clone()))
                .unwrap_or(json!([]));
            answer(200, json!({"Tags": tags}))
        }
        other => answer(
            400,
            json!({"__type": "UnknownOperationException", "Message": other}),
        ),
    }
}

/// A fake control plane on loopback; its state, to look at.
async fn fake(mode: Mode) -> (String, Arc<Mutex<State>>) {
    let state = Arc::new(Mutex::new(State::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let st = state.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let st = st.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let st = st.clone();
                    async move {
                        let op = req
                            .headers()
                            .get("x-amz-target")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .trim_start_matches("SageMaker.")
                            .to_owned();
                        let signed = req.headers().contains_key("authorization");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let b: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let r = if signed {
                            handle(&st, mode, &op, &b)
                        } else {
                            answer(403, json!({"__type": "MissingAuthenticationToken"}))
                        };
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, state)
}

fn api(url: &str) -> Arc<SageMakerApi> {
    let creds = aws_credential_types::Credentials::new("AKIDTEST", "secret", None, None, "test");
    Arc::new(
        SageMakerApi::new(
            "us-east-1",
            Some(url),
            Arc::new(StaticCredentials(creds)),
            &kneepoint_transport::ConnectOptions::default(),
        )
        .unwrap(),
    )
}

fn spec(name: &str) -> SageMakerSpec {
    let mut s = SageMakerSpec::new(name, "vllm:latest", "ml.g5.12xlarge");
    s.env.insert("SM_VLLM_MAX_NUM_SEQS".into(), "64".into());
    s.poll_interval = Duration::from_millis(20);
    s.ready_timeout = Duration::from_secs(60);
    s
}

fn empty(state: &Mutex<State>) -> bool {
    let s = state.lock().unwrap();
    s.models.is_empty() && s.configs.is_empty() && s.endpoints.is_empty()
}

#[tokio::test]
async fn an_endpoint_is_created_measured_and_deleted_once() {
    use kneepoint_engine::Deployment as _;
    let (url, state) = fake(Mode::Healthy).await;
    let mut s = spec("vllm (fp8) max_num_seqs=64");
    s.env.insert("HF_TOKEN".into(), "hf_secret_value".into());
    let mut d = s.launch(api(&url), &CancelToken::new()).await.unwrap();
    assert_eq!(d.endpoint_name(), s.resource_name);
    {
        let st = state.lock().unwrap();
        assert_eq!(st.endpoints.len(), 1);
        let model = &st.models[&s.resource_name];
        assert_eq!(
            model["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"],
            "64"
        );
        assert_eq!(model["Tags"][0]["Key"], LAUNCHER_TAG);
    }
    let recipe = d.recipe().unwrap();
    assert!(!recipe.to_string().contains("hf_secret_value"), "{recipe}");
    assert_eq!(
        recipe["create_model"]["PrimaryContainer"]["Environment"]["HF_TOKEN"],
        "[redacted]"
    );
    assert_eq!(
        state.lock().unwrap().models[&s.resource_name]["Tags"][1]["Value"],
        "vllm _fp8_ max_num_seqs=64",
        "a tag value AWS accepts"
    );
    assert_eq!(
        recipe["create_endpoint_config"]["ProductionVariants"][0]["InstanceType"],
        "ml.g5.12xlarge"
    );
    d.teardown().await.unwrap();
    assert!(empty(&state));
    let calls = state.lock().unwrap().calls.len();
    d.teardown().await.unwrap();
    assert_eq!(
        state.lock().unwrap().calls.len(),
        calls,
        "a second teardown calls nothing"
    );
}

#[tokio::test]
async fn a_failed_or_never_ready_endpoint_is_deleted_with_its_reason() {
    let (url, state) = fake(Mode::Fails).await;
    let e = spec("fails")
        .launch(api(&url), &CancelToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Failed { .. }), "{e}");
    assert!(
        e.to_string().contains("did not pass the ping health check"),
        "{e}"
    );
    assert!(empty(&state));

    // Never InService: SageMaker refuses to delete an endpoint being created, so after its
    // own wait the error says what is left and how to remove it.
    let (url, state) = fake(Mode::NeverReady).await;
    let mut s = spec("slow");
    s.ready_timeout = Duration::from_millis(300);
    s.delete_wait = Duration::from_millis(300);
    let e = s.launch(api(&url), &CancelToken::new()).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("did not answer DescribeEndpoint"), "{msg}");
    assert!(
        msg.contains(
            "may be left running; `kneepoint cleanup --sagemaker-region us-east-1` deletes it"
        ),
        "{msg}"
    );
    let st = state.lock().unwrap();
    assert_eq!(st.endpoints.len(), 1, "the endpoint being created stays");
    assert!(st.models.is_empty() && st.configs.is_empty());
}

#[tokio::test]
async fn a_create_refused_half_way_deletes_what_was_created() {
    let (url, state) = fake(Mode::ConfigRefused).await;
    let e = spec("refused")
        .launch(api(&url), &CancelToken::new())
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("CreateEndpointConfig failed (HTTP 400): ResourceLimitExceeded"),
        "{msg}"
    );
    assert!(empty(&state), "the model created first is deleted");
    let calls = state.lock().unwrap().calls.clone();
    assert_eq!(
        calls,
        ["CreateModel", "CreateEndpointConfig", "DeleteModel"]
    );
}

#[tokio::test]
async fn an_interrupt_while_creating_waits_until_the_endpoint_can_be_deleted() {
    let (url, state) = fake(Mode::SlowCreate).await;
    let cancel = CancelToken::new();
    state.lock().unwrap().cancel_on_describe = Some(cancel.clone());
    let e = spec("interrupted")
        .launch(api(&url), &cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Cancelled { .. }),
        "{e}: {:?}",
        state.lock().unwrap().calls
    );
    assert!(empty(&state));
    let calls = state.lock().unwrap().calls.clone();
    assert!(
        calls.iter().filter(|c| *c == "DeleteEndpoint").count() >= 2,
        "the first delete was refused while Creating: {calls:?}"
    );
}

#[tokio::test]
async fn leftovers_of_a_gone_launcher_are_found_by_tag_and_deleted() {
    let (url, state) = fake(Mode::Healthy).await;
    let api = api(&url);
    // What a crashed run on this host left: tagged with a launcher that is gone.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let gone = format!("{}:1:424242", host.trim());
    let tags = json!([{"Key": LAUNCHER_TAG, "Value": gone}]);
    api.call(
        "CreateModel",
        &json!({"ModelName": "kneepoint-old-1", "Tags": tags}),
    )
    .await
    .unwrap();
    api.call(
        "CreateEndpointConfig",
        &json!({"EndpointConfigName": "kneepoint-old-1", "Tags": tags,
        "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": "kneepoint-old-1"}]}),
    )
    .await
    .unwrap();
    api.call("CreateEndpoint", &json!({"EndpointName": "kneepoint-old-1", "EndpointConfigName": "kneepoint-old-1", "Tags": tags})).await.unwrap();
    // Someone else's endpoint, and a live run's: neither is touched.
    api.call(
        "CreateModel",
        &json!({"ModelName": "production-llama", "Tags": []}),
    )
    .await
    .unwrap();
    let mut live = spec("live")
        .launch(api.clone(), &CancelToken::new())
        .await
        .unwrap();

    let found = find_sagemaker_leftovers(&api, false).await.unwrap();
    let names: Vec<(&str, &str)> = found.iter().map(|l| (l.kind, l.name.as_str())).collect();
    assert_eq!(
        names,
        [
            ("endpoint", "kneepoint-old-1"),
            ("endpoint_config", "kneepoint-old-1"),
            ("model", "kneepoint-old-1")
        ]
    );
    assert!(remove_sagemaker_leftovers(
        &api,
        &found,
        Duration::from_secs(30),
        Duration::from_millis(20)
    )
    .await
    .is_empty());
    assert!(find_sagemaker_leftovers(&api, false)
        .await
        .unwrap()
        .is_empty());
    {
        let st = state.lock().unwrap();
        assert!(st.models.contains_key("production-llama"));
        assert!(st.endpoints.contains_key(live.endpoint_name()));
    }
    live.delete().await.unwrap();
}
