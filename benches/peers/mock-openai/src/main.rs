//! A stand-in OpenAI-compatible server: `POST /v1/chat/completions` answers every request with
//! the same `OSL`-token answer at once (streamed as SSE when the body asks `"stream":true`,
//! else one JSON body), and `GET /v1/models` lists one model. It reads each request body
//! whole and does nothing else, so a client benchmarked against it measures the client.
//!
//! Usage: `mock-openai [PORT] [OSL]` (defaults 0, a free port, and 256); prints
//! `listening on http://127.0.0.1:PORT` once bound.

use std::convert::Infallible;
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

fn render(osl: usize) -> Bodies {
    let head = r#"{"id":"mock-1","object":"chat.completion.chunk","created":1,"model":"mock","choices":[{"index":0,"delta":"#;
    let mut stream = String::new();
    stream.push_str(&format!(
        "data: {head}{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]}}\n\n"
    ));
    let mut text = String::new();
    for k in 0..osl {
        let w = WORDS[k % WORDS.len()];
        text.push_str(w);
        let finish = if k + 1 == osl { "\"length\"" } else { "null" };
        stream.push_str(&format!(
            "data: {head}{{\"content\":\"{w}\"}},\"finish_reason\":{finish}}}]}}\n\n"
        ));
    }
    let usage = format!(
        r#"{{"prompt_tokens":1024,"completion_tokens":{osl},"total_tokens":{}}}"#,
        1024 + osl
    );
    stream.push_str(&format!(
        "data: {{\"id\":\"mock-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"mock\",\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n"
    ));
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

async fn serve(
    bodies: Arc<Bodies>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: u16, kind: &str, body: Bytes| {
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
        if let Ok(v) = hyper::header::HeaderValue::from_str(kind) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/v1/models") => Ok(reply(200, "application/json", bodies.models.clone())),
        (&Method::POST, "/v1/chat/completions") => {
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return Ok(reply(
                        400,
                        "text/plain",
                        Bytes::from_static(b"unreadable body"),
                    ))
                }
            };
            let streaming = body.windows(13).any(|w| w == b"\"stream\":true")
                || body.windows(14).any(|w| w == b"\"stream\": true");
            Ok(if streaming {
                reply(200, "text/event-stream", bodies.stream.clone())
            } else {
                reply(200, "application/json", bodies.whole.clone())
            })
        }
        _ => Ok(reply(404, "text/plain", Bytes::from_static(b"not found"))),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let osl: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let bodies = Arc::new(render(osl));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let bodies = bodies.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| serve(bodies.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
