//! A stand-in OpenAI-compatible server: `POST /v1/chat/completions` answers every request with
//! the same `OSL`-token answer at once (streamed as SSE when the body asks `"stream":true`,
//! else one JSON body), and `GET /v1/models` lists one model. It reads each request body
//! whole and does nothing else, so a client benchmarked against it measures the client.
//!
//! Usage: `mock-openai [PORT] [OSL] [--per-request] [--ttft-ms T --itl-ms I] [--threads N]`
//! (defaults 0, a free port, and 256); prints `listening on http://127.0.0.1:PORT` once bound.
//! - `--per-request` renders each streamed answer for its request (its own id and creation
//!   time, the words rotated by the request's number) instead of reusing one rendering, as a
//!   real server's serialisation would;
//! - `--ttft-ms T --itl-ms I` paces a streamed answer: the role chunk and first token after
//!   T ms, then a token every I ms, each event rendered as it is sent (implies per-request);
//!   every event carries `"sent_ns"`, its Unix send time, which clients ignore;
//! - `--threads N` sets the runtime's worker threads (default 1 when paced, else one per core).

mod paced;

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;

const WORDS: &[&str] = &[
    " the", " model", " answers", " with", " a", " long", " and", " steady", " stream", " of",
    " words", " that", " mean", " nothing", " at", " all",
];

struct Bodies {
    stream: Bytes,
    whole: Bytes,
    models: Bytes,
}

/// One streamed event of request `id`: the role chunk (`k` = None), token `k`, or the usage
/// chunk and `[DONE]` (`k` = `osl`); `sent_ns` is added when given.
pub(crate) fn event(
    id: u64,
    created: u64,
    k: Option<usize>,
    osl: usize,
    sent_ns: Option<u128>,
) -> String {
    let stamp = sent_ns
        .map(|t| format!(",\"sent_ns\":{t}"))
        .unwrap_or_default();
    let head = format!(
        r#"{{"id":"mock-{id}","object":"chat.completion.chunk","created":{created},"model":"mock"{stamp},"choices":"#
    );
    match k {
        None => format!(
            "data: {head}[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n"
        ),
        Some(k) if k < osl => {
            let w = WORDS[(k + id as usize) % WORDS.len()];
            let finish = if k + 1 == osl { "\"length\"" } else { "null" };
            format!(
                "data: {head}[{{\"index\":0,\"delta\":{{\"content\":\"{w}\"}},\"finish_reason\":{finish}}}]}}\n\n"
            )
        }
        Some(_) => format!(
            "data: {head}[],\"usage\":{{\"prompt_tokens\":1024,\"completion_tokens\":{osl},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
            1024 + osl
        ),
    }
}

/// A whole streamed answer for request `id`.
fn render_stream(id: u64, created: u64, osl: usize) -> String {
    let mut stream = String::with_capacity(osl * 160 + 512);
    stream.push_str(&event(id, created, None, osl, None));
    for k in 0..=osl {
        stream.push_str(&event(id, created, Some(k), osl, None));
    }
    stream
}

fn render(osl: usize) -> Bodies {
    let stream = render_stream(1, 1, osl);
    let text: String = (0..osl).map(|k| WORDS[(k + 1) % WORDS.len()]).collect();
    let usage = format!(
        r#"{{"prompt_tokens":1024,"completion_tokens":{osl},"total_tokens":{}}}"#,
        1024 + osl
    );
    let whole = format!(
        r#"{{"id":"mock-1","object":"chat.completion","created":1,"model":"mock","choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"length"}}],"usage":{usage}}}"#
    );
    Bodies {
        stream: Bytes::from(stream),
        whole: Bytes::from(whole),
        models: Bytes::from_static(
            br#"{"object":"list","data":[{"id":"mock","object":"model","owned_by":"mock"}]}"#,
        ),
    }
}

/// What the server was asked to do.
struct Mock {
    bodies: Bodies,
    osl: usize,
    per_request: bool,
    /// (TTFT, ITL) of a paced stream.
    pace: Option<(std::time::Duration, std::time::Duration)>,
    requests: AtomicU64,
}

type Body = http_body_util::Either<Full<Bytes>, paced::Paced>;

fn unix_now() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

async fn serve(mock: Arc<Mock>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let reply = |status: u16, kind: &str, body: Body| {
        let mut r = Response::new(body);
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
        if let Ok(v) = hyper::header::HeaderValue::from_str(kind) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    let full = |b: Bytes| Body::Left(Full::new(b));
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/v1/models") => Ok(reply(
            200,
            "application/json",
            full(mock.bodies.models.clone()),
        )),
        (&Method::POST, "/v1/chat/completions") => {
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return Ok(reply(
                        400,
                        "text/plain",
                        full(Bytes::from_static(b"unreadable body")),
                    ))
                }
            };
            let streaming = body.windows(13).any(|w| w == b"\"stream\":true")
                || body.windows(14).any(|w| w == b"\"stream\": true");
            if !streaming {
                return Ok(reply(
                    200,
                    "application/json",
                    full(mock.bodies.whole.clone()),
                ));
            }
            let id = mock.requests.fetch_add(1, Ordering::Relaxed) + 1;
            let created = unix_now().as_secs();
            let body = match mock.pace {
                Some((ttft, itl)) => {
                    Body::Right(paced::Paced::new(id, created, mock.osl, ttft, itl))
                }
                None if mock.per_request => full(Bytes::from(render_stream(id, created, mock.osl))),
                None => full(mock.bodies.stream.clone()),
            };
            Ok(reply(200, "text/event-stream", body))
        }
        _ => Ok(reply(
            404,
            "text/plain",
            full(Bytes::from_static(b"not found")),
        )),
    }
}

fn main() -> std::io::Result<()> {
    let mut positional = Vec::new();
    let (mut per_request, mut ttft, mut itl, mut threads) = (false, None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = || args.next().and_then(|v| v.parse::<f64>().ok());
        match a.as_str() {
            "--per-request" => per_request = true,
            "--ttft-ms" => ttft = number(),
            "--itl-ms" => itl = number(),
            "--threads" => threads = number().map(|n| n.max(1.0) as usize),
            _ => positional.push(a),
        }
    }
    let port: u16 = positional.first().and_then(|a| a.parse().ok()).unwrap_or(0);
    let osl: usize = positional
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(256);
    let ms = |v: f64| std::time::Duration::from_secs_f64(v / 1000.0);
    let pace = match (ttft, itl) {
        (None, None) => None,
        (t, i) => Some((ms(t.unwrap_or(0.0)), ms(i.unwrap_or(0.0)))),
    };
    let mut rt = if pace.is_some() && threads.is_none_or(|n| n == 1) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = threads {
            b.worker_threads(n);
        }
        b
    };
    let mock = Arc::new(Mock {
        bodies: render(osl),
        osl,
        per_request,
        pace,
        requests: AtomicU64::new(0),
    });
    rt.enable_all().build()?.block_on(run(port, mock))
}

async fn run(port: u16, mock: Arc<Mock>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let mock = mock.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| serve(mock.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
