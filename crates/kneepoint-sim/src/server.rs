//! The HTTP side of the simulator: an OpenAI-compatible server on hyper.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kneepoint_core::{ApproxTokenCounter, TokenCounter};
use kneepoint_transport::{ReceiveClock, StampedTcpStream};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use tokio::net::TcpListener;
use tokio::sync::mpsc::unbounded_channel;
use tokio::task::JoinHandle;

use crate::engine::SeqSpec;
use crate::fault::Fault;
use crate::live::{spawn_engine, Command, Submission};
use crate::metrics::{EngineMetrics, LoadSample};
use crate::render::error_body;
use crate::request::{parse_request, Api, GenRequest};
use crate::sse_body::{InjectedFault, SseBody};
use crate::truth::{ServerTiming, TruthLog, WallClock};
use crate::{Error, SimProfile};

pub(crate) type Body = UnsyncBoxBody<Bytes, InjectedFault>;

pub(crate) const MAX_REQUEST_BYTES: usize = 64 << 20;

pub(crate) struct State {
    pub(crate) profile: SimProfile,
    #[cfg_attr(not(feature = "sagemaker"), allow(dead_code))]
    pub(crate) options: SimOptions,
    counter: Arc<dyn TokenCounter>,
    pub(crate) model_json: String,
    engine: Mutex<Sender<Command>>,
    next_id: AtomicU64,
    lengths: Mutex<StdRng>,
    /// Zero-latency mode: rendered bodies by (api, stream, usage, prompt and output tokens,
    /// finish reason).
    pub(crate) rendered: Mutex<RenderedBodies>,
    /// The server-side truth of completed requests.
    truth: Arc<Mutex<TruthLog>>,
    clock: WallClock,
    /// The engine's Prometheus view.
    metrics: Arc<Mutex<EngineMetrics>>,
}

type RenderedBodies = std::collections::HashMap<(Api, bool, bool, u32, u32, &'static str), Bytes>;

/// A SigV4 key the simulator checks SageMaker-protocol requests against. `Debug` is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct SigV4TestKey {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
}

impl std::fmt::Debug for SigV4TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigV4TestKey")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Server options beyond the engine profile.
#[derive(Debug, Clone, Default)]
pub struct SimOptions {
    /// Check SageMaker-protocol requests' signatures against this key (unsigned or wrongly
    /// signed requests get 403, as from AWS); `None` accepts any.
    pub sigv4: Option<SigV4TestKey>,
    /// Answer only this SageMaker endpoint name (others get 400 `ValidationError`); `None`
    /// answers any name.
    pub endpoint_name: Option<String>,
}

/// A running simulator. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct SimServer {
    addr: SocketAddr,
    truth: Arc<Mutex<TruthLog>>,
    metrics: Arc<Mutex<EngineMetrics>>,
    accept: JoinHandle<()>,
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl SimServer {
    /// Validates `profile`, binds `addr` (use `127.0.0.1:0` for a free port) and starts serving
    /// on the current Tokio runtime. Prompt tokens are counted as whitespace words.
    pub async fn start(profile: SimProfile, addr: SocketAddr) -> Result<SimServer, Error> {
        Self::start_with_counter(profile, addr, Arc::new(ApproxTokenCounter)).await
    }

    /// Like [`SimServer::start`], counting prompt tokens with `counter` (give it the client's
    /// tokenizer so that `usage.prompt_tokens` matches the workload's input lengths).
    pub async fn start_with_counter(
        profile: SimProfile,
        addr: SocketAddr,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<SimServer, Error> {
        Self::start_with_options(profile, addr, counter, SimOptions::default()).await
    }

    /// Like [`SimServer::start_with_counter`], with [`SimOptions`] (SageMaker protocol checks).
    pub async fn start_with_options(
        profile: SimProfile,
        addr: SocketAddr,
        counter: Arc<dyn TokenCounter>,
        options: SimOptions,
    ) -> Result<SimServer, Error> {
        profile.validate()?;
        if cfg!(not(feature = "sagemaker"))
            && (options.sigv4.is_some() || options.endpoint_name.is_some())
        {
            return Err(Error::FeatureOff {
                what: "the SageMaker protocol (a SigV4 key or an endpoint name)",
                feature: "sagemaker",
            });
        }
        let listener = listen(addr).map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: addr.to_string(),
            source,
        })?;
        let truth = Arc::new(Mutex::new(TruthLog::new(1 << 20)));
        let clock = WallClock::now();
        let metrics = Arc::new(Mutex::new(EngineMetrics::new()));
        let engine = spawn_engine(profile.clone(), truth.clone(), clock, metrics.clone())?;
        let state = Arc::new(State {
            model_json: serde_json::Value::String(profile.model.clone()).to_string(),
            lengths: Mutex::new(StdRng::seed_from_u64(profile.seed)),
            profile,
            options,
            counter,
            engine: Mutex::new(engine),
            next_id: AtomicU64::new(0),
            rendered: Mutex::default(),
            truth: truth.clone(),
            clock,
            metrics: metrics.clone(),
        });
        let accept = tokio::spawn(accept_loop(listener, state));
        Ok(SimServer {
            addr,
            truth,
            metrics,
            accept,
        })
    }

    /// Starts on `127.0.0.1` with a free port.
    pub async fn start_local(profile: SimProfile) -> Result<SimServer, Error> {
        Self::start(profile, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, the base URL for an OpenAI-compatible client.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server-side timings of completed requests so far.
    pub fn truth(&self) -> Vec<ServerTiming> {
        self.truth.lock().map(|t| t.snapshot()).unwrap_or_default()
    }

    /// The engine's load (running, waiting, KV usage) each time it changed, oldest first: the
    /// truth that `GET /metrics` (vLLM's names) reports from.
    pub fn load_history(&self) -> Vec<LoadSample> {
        self.metrics.lock().map(|m| m.history()).unwrap_or_default()
    }

    /// Forgets the timings recorded so far.
    pub fn clear_truth(&self) {
        if let Ok(mut t) = self.truth.lock() {
            t.clear();
        }
    }
}

/// A listener with a deep accept queue: a level opens hundreds of connections at once, and a
/// full queue makes the kernel drop SYNs, which clients retry a whole second later.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(65_535)
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let stream = StampedTcpStream::new(stream);
        let clock = stream.clock().clone();
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                let clock = clock.clone();
                async move { handle(state, req, &clock).await }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

pub(crate) fn json_response(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn error(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    json_response(status, error_body(status.as_u16(), kind, message))
}

/// Answers one request; an `Err` makes hyper drop the connection without a response (the
/// `reset_before_headers` fault).
async fn handle(
    state: Arc<State>,
    req: hyper::Request<Incoming>,
    clock: &ReceiveClock,
) -> Result<Response<Body>, InjectedFault> {
    // A request arrives when the bytes that completed its headers reached the host (the
    // connection's latest read; its body may still be on the way), not when this task got to
    // it: the time a busy or sleeping server thread takes to wake is the server's latency.
    let now = Instant::now();
    let arrival = clock.latest().map_or(now, |t| t.min(now));
    let r = respond(state, req, arrival).await;
    if r.extensions().get::<ResetMarker>().is_some() {
        return Err(InjectedFault("connection reset before headers"));
    }
    Ok(r)
}

/// Marks a response that must not be sent: the connection is dropped instead.
#[derive(Clone, Copy)]
pub(crate) struct ResetMarker;

async fn respond(
    state: Arc<State>,
    req: hyper::Request<Incoming>,
    arrival: Instant,
) -> Response<Body> {
    if req.method() == Method::POST {
        #[cfg(feature = "sagemaker")]
        if let Some((name, streaming)) = crate::sagemaker::route(req.uri().path()) {
            let name = name.to_owned();
            return crate::sagemaker::respond(state, req, name, streaming, arrival).await;
        }
    }
    let api = match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/chat/completions") => Api::Chat,
        (&Method::POST, "/v1/completions") => Api::Completions,
        (&Method::POST, "/v1/embeddings") => Api::Embeddings,
        (&Method::POST, "/v1/rerank" | "/rerank" | "/v2/rerank") => Api::Rerank,
        (&Method::POST, "/v1/score" | "/score") => Api::Score,
        (&Method::GET, "/health") => return Response::new(full(Bytes::new())),
        (&Method::GET, "/truth") => return truth_response(&state),
        (&Method::GET, "/metrics") => {
            let page = state
                .metrics
                .lock()
                .map(|m| m.render(&state.profile.model))
                .unwrap_or_default();
            let mut r = Response::new(full(page));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            return r;
        }
        (&Method::DELETE, "/truth") => {
            if let Ok(mut t) = state.truth.lock() {
                t.clear();
            }
            return Response::new(full(Bytes::new()));
        }
        (&Method::GET, "/v1/models") => {
            let body = format!(
                r#"{{"object":"list","data":[{{"id":{},"object":"model","owned_by":"kneepoint-sim"}}]}}"#,
                state.model_json
            );
            return json_response(StatusCode::OK, Bytes::from(body));
        }
        _ => return error(StatusCode::NOT_FOUND, "NotFoundError", "no such route"),
    };
    let (client_request_id, hint) = request_hints(req.headers());
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                "unreadable body",
            )
        }
    };
    generate(state, api, &body, (hint, client_request_id), None, arrival).await
}

/// `GET /truth`: the server-side timing of every completed request still in the log, as JSON
/// lines (oldest first), for clients measured from another process.
fn truth_response(state: &State) -> Response<Body> {
    let entries = state.truth.lock().map(|t| t.snapshot()).unwrap_or_default();
    let mut out = Vec::with_capacity(entries.len() * 256);
    for e in &entries {
        if serde_json::to_writer(&mut out, e).is_ok() {
            out.push(b'\n');
        }
    }
    let mut r = Response::new(full(out));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/jsonl"),
    );
    r
}

/// The fault injected into a streamed response (carried to the SageMaker framing).
#[derive(Clone, Copy)]
pub(crate) struct FaultTag(
    #[cfg_attr(not(feature = "sagemaker"), allow(dead_code))] pub(crate) Option<Fault>,
);

/// Reads the headers a generation needs: the client's request id and input-length hint.
pub(crate) fn request_hints(headers: &http::HeaderMap) -> (Option<String>, Option<usize>) {
    let id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let hint = headers
        .get("x-kneepoint-input-tokens")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    (id, hint)
}

/// Runs one generation request (already routed and read) and answers it (a streamed answer
/// carries the injected fault, if any, as a [`FaultTag`]). `stream` overrides the body's `stream` flag (SageMaker decides
/// by the operation).
pub(crate) async fn generate(
    state: Arc<State>,
    api: Api,
    body: &[u8],
    (hint, client_request_id): (Option<usize>, Option<String>),
    stream: Option<bool>,
    arrival: Instant,
) -> Response<Body> {
    // kneepoint's own client may say how many tokens the prompt has; counting is then skipped
    // (it costs ~1 ms per 1k tokens of CPU the client needs on a shared machine).
    let counter: &dyn TokenCounter = match hint {
        Some(_) => &SkipCounter,
        None => state.counter.as_ref(),
    };
    let mut gen = match parse_request(api, body, counter) {
        Ok(g) => g,
        Err(m) => return error(StatusCode::BAD_REQUEST, "BadRequestError", &m),
    };
    if let Some(s) = stream {
        gen.stream = s;
    }
    if let Some(n) = hint {
        gen.prompt_tokens = u32::try_from(n).unwrap_or(u32::MAX);
    }
    let (output_tokens, finish_reason) = match output_length(&state, &gen) {
        Ok(x) => x,
        Err(m) => return error(StatusCode::BAD_REQUEST, "BadRequestError", &m),
    };
    let spec = SeqSpec {
        prompt_tokens: gen.prompt_tokens,
        output_tokens,
    };
    let total = u64::from(spec.prompt_tokens) + u64::from(spec.output_tokens);
    if total > u64::from(state.profile.max_model_len) {
        let m = crate::engine::Rejection::TooLong {
            tokens: total,
            max_model_len: state.profile.max_model_len,
        };
        return error(StatusCode::BAD_REQUEST, "BadRequestError", &m.to_string());
    }
    let fault = state.profile.faults.as_ref().and_then(|plan| {
        let mut rng = state.lengths.lock().ok()?;
        plan.pick(rng.random(), rng.random())
    });
    match fault {
        Some(Fault::Http429) => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "RateLimitError",
                "injected fault: too many requests",
            );
            r.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            return r;
        }
        Some(Fault::Http500) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                "injected fault",
            );
        }
        Some(Fault::Http503) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "injected fault",
            );
        }
        Some(Fault::WrongContentType) => {
            let mut r = Response::new(full(Bytes::from_static(
                b"<html><body>gateway</body></html>",
            )));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/html"),
            );
            return r;
        }
        Some(f) if f == Fault::ResetBeforeHeaders || (f.in_stream() && !gen.stream) => {
            let mut r = Response::new(full(Bytes::new()));
            r.extensions_mut().insert(ResetMarker);
            return r;
        }
        _ => {}
    }
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    if state.profile.instant {
        return crate::modes::instant_response(&state, api, id, &gen, output_tokens, finish_reason);
    }
    let mut meta = crate::modes::response_meta(
        &state,
        api,
        id,
        spec.prompt_tokens,
        output_tokens,
        finish_reason,
    );
    meta.items = gen.items;
    if let Some(timing) = state.profile.fixed {
        let schedule = crate::fixed::Schedule::new(
            timing,
            state.profile.time_scale,
            arrival,
            id,
            client_request_id,
            (state.truth.clone(), state.clock),
        );
        return crate::modes::fixed_response(schedule, meta, &gen).await;
    }
    let (tx, rx) = unbounded_channel();
    let submitted = state.engine.lock().is_ok_and(|e| {
        e.send(Command::Submit(Submission {
            id,
            client_request_id,
            spec,
            arrival,
            tokens: tx,
        }))
        .is_ok()
    });
    if !submitted {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "engine stopped",
        );
    }
    if gen.stream {
        let stall = std::time::Duration::from_millis(
            state.profile.faults.as_ref().map_or(0, |f| f.stall_ms),
        );
        let mut r =
            Response::new(SseBody::new(rx, meta, gen.include_usage, fault, stall).boxed_unsync());
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/event-stream"),
        );
        r.extensions_mut().insert(FaultTag(fault));
        r
    } else {
        let mut rx = rx;
        while let Some(t) = rx.recv().await {
            if t.finished {
                return json_response(StatusCode::OK, meta.whole());
            }
        }
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "generation aborted",
        )
    }
}

/// Counts nothing: used when the client's hint gives the prompt's length.
struct SkipCounter;

impl TokenCounter for SkipCounter {
    fn count(&self, _text: &str) -> usize {
        0
    }

    fn name(&self) -> &str {
        "client-hint"
    }
}

/// Decides how many tokens to generate and the finish reason.
fn output_length(state: &State, gen: &GenRequest) -> Result<(u32, &'static str), String> {
    let max = gen.max_tokens.unwrap_or(state.profile.default_max_tokens);
    if max == 0 {
        return Err("max_tokens must be at least 1".into());
    }
    if let Some(min) = gen.min_tokens {
        if min > max {
            return Err(format!("min_tokens ({min}) must be ≤ max_tokens ({max})"));
        }
    }
    if gen.ignore_eos {
        return Ok((max, "length"));
    }
    let mean = f64::from(state.profile.natural_output_mean);
    let natural = match (Exp::new(1.0 / mean), state.lengths.lock()) {
        (Ok(d), Ok(mut rng)) => d.sample(&mut *rng).ceil().max(1.0) as u32,
        _ => state.profile.natural_output_mean,
    };
    let n = natural.max(gen.min_tokens.unwrap_or(1)).min(max);
    Ok((n, if n == max { "length" } else { "stop" }))
}
