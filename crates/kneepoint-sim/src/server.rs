//! The HTTP side of the simulator: an OpenAI-compatible server on hyper.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kneepoint_core::{ApproxTokenCounter, TokenCounter};
use kneepoint_transport::{ReceiveClock, StampedTcpStream};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::generate::generate;
use crate::live::spawn_engine;
use crate::metrics::{EngineMetrics, LoadSample};
use crate::request::Api;
use crate::respond::{
    error, full, json_response, request_hints, Body, ResetMarker, MAX_REQUEST_BYTES,
};
use crate::sse_body::InjectedFault;
use crate::state::{SimOptions, State};
use crate::truth::{ServerTiming, TruthLog, WallClock};
use crate::{Error, SimProfile};

/// What [`SimServer::start`] counts prompt tokens with: kneepoint's default tokenizer
/// (o200k_base) with the `builtin-tokenizer` feature, else (or if it cannot load) a
/// whitespace-word estimate.
pub fn default_counter() -> Arc<dyn TokenCounter> {
    #[cfg(feature = "builtin-tokenizer")]
    if let Ok(t) = kneepoint_workload::load_tokenizer("builtin") {
        return Arc::new(kneepoint_workload::TokenizerCounter(t));
    }
    Arc::new(ApproxTokenCounter)
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
    /// on the current Tokio runtime. Prompt tokens are counted with [`default_counter`]: the
    /// workload's default tokenizer, so that the usage a client reads agrees with the prompts
    /// kneepoint built ([`SimServer::start_with_counter`] counts otherwise).
    pub async fn start(profile: SimProfile, addr: SocketAddr) -> Result<SimServer, Error> {
        Self::start_with_counter(profile, addr, default_counter()).await
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
        let engines = options.data_parallel_size.max(1);
        if engines > crate::state::MAX_DATA_PARALLEL {
            return Err(Error::InvalidProfile {
                field: "data_parallel_size",
                reason: format!(
                    "must be at most {} engines (got {engines})",
                    crate::state::MAX_DATA_PARALLEL
                ),
            });
        }
        let metrics = Arc::new(Mutex::new(EngineMetrics::new(engines)));
        let engine_handles = (0..engines)
            .map(|i| {
                let shared = crate::live::Shared {
                    truth: truth.clone(),
                    clock,
                    metrics: metrics.clone(),
                };
                // each engine draws its own jitter
                let mut p = profile.clone();
                p.seed = p.seed.wrapping_add(i as u64);
                spawn_engine(p, i, shared)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let state = Arc::new(State {
            model_json: serde_json::Value::String(profile.model.clone()).to_string(),
            lengths: Mutex::new(StdRng::seed_from_u64(profile.seed)),
            profile,
            options,
            counter,
            engines: engine_handles,
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
        // vLLM's development-mode route (VLLM_SERVER_DEV_MODE=1); the simulator has no prefix
        // cache, and counts the resets in /metrics
        (&Method::POST, "/reset_prefix_cache") => {
            if let Ok(mut m) = state.metrics.lock() {
                m.prefix_cache_reset();
            }
            return Response::new(full(Bytes::new()));
        }
        (&Method::DELETE, "/truth") => {
            if let Ok(mut t) = state.truth.lock() {
                t.clear();
            }
            return Response::new(full(Bytes::new()));
        }
        // as vLLM answers it: the server's own version
        (&Method::GET, "/version") => {
            let body = concat!(
                r#"{"version":"kneepoint-sim "#,
                env!("CARGO_PKG_VERSION"),
                r#""}"#
            );
            return json_response(StatusCode::OK, Bytes::from_static(body.as_bytes()));
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
