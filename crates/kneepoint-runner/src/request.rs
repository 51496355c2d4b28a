//! Driving one request through a transport and building its record.

use crate::lazy_deadline::{Elapsed, LazyDeadline};
use crate::read_batch::ReadBatch;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kneepoint_core::{
    Error, ErrorRecord, Phase, Request, RequestRecord, ResponseEvent, TimeoutPhase, TokenCounter,
    TokenSource, Transport,
};

use crate::{CancelToken, Deadlines, RetryPolicy};

/// Everything one request accumulates while it runs; kept outside the timed future so that a
/// timeout keeps what arrived before it.
struct Progress {
    response: Option<Instant>,
    chunks: Vec<Instant>,
    first_content: Option<Instant>,
    /// The answer text.
    text: String,
    /// The reasoning text (`reasoning_content`), apart from the answer.
    reasoning: String,
    chunk_tokens: Option<u32>,
    prompt_usage: Option<u32>,
    connection: Option<kneepoint_core::ConnectionTimings>,
    completion_usage: Option<u32>,
    reasoning_usage: Option<u32>,
    /// A pooling answer's items (embeddings, ranked documents, scores).
    pooled: Option<u32>,
    finish: Option<String>,
    error: Option<Error>,
}

/// The longest `Retry-After` a retry waits for (a server asking for more is waited on for
/// this long).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

fn timeout_error(phase: TimeoutPhase, limit: Duration) -> Error {
    Error::Timeout {
        phase,
        after_ms: limit.as_millis() as u64,
    }
}

/// Token chunks and bytes of generated text accepted for one response: a server that never
/// stops streaming must not grow the client's memory without bound.
const MAX_CHUNKS: usize = 1 << 20;
const MAX_TEXT_BYTES: usize = 64 << 20;
/// The least a request with an output length may stream before it is cut off: the length the
/// runner sees is the one asked for, and a server may legitimately send more (an `--extra-body`
/// that overrides it, a server that ignores `max_completion_tokens`, reasoning budgeted apart).
const MIN_CHUNKS: usize = 1 << 16;
const MIN_TEXT_BYTES: usize = 16 << 20;

/// The most token chunks and text bytes read for `request` before it is cut off: four times
/// the output length asked for plus 256 chunks and 256 bytes per token, but at least
/// [`MIN_CHUNKS`] and [`MIN_TEXT_BYTES`]; without a length, [`MAX_CHUNKS`] and
/// [`MAX_TEXT_BYTES`].
fn output_caps(request: &Request) -> (usize, usize) {
    match request.max_output_tokens {
        Some(n) => {
            let n = n as usize;
            (
                n.saturating_mul(4)
                    .saturating_add(256)
                    .clamp(MIN_CHUNKS, MAX_CHUNKS),
                n.saturating_mul(256).clamp(MIN_TEXT_BYTES, MAX_TEXT_BYTES),
            )
        }
        None => (MAX_CHUNKS, MAX_TEXT_BYTES),
    }
}

/// The deadline that ends a wait first: `(phase, configured, time left)`.
type Limit = (TimeoutPhase, Duration, Duration);

fn earliest(a: Option<Limit>, b: Option<Limit>) -> Option<Limit> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.2 < x.2 { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// The first-token deadline, which runs from the request's start, as a [`Limit`].
fn first_token_limit(ctx: &Ctx, start: Instant) -> Option<Limit> {
    ctx.deadlines.first_token.map(|d| {
        (
            TimeoutPhase::FirstToken,
            d,
            d.saturating_sub(start.elapsed()),
        )
    })
}

async fn drive(ctx: &Ctx, request: &Request, start: Instant, p: &mut Progress) {
    let send = ctx.transport.send(request);
    // Headers must arrive within the response deadline, and within what is left of the
    // first-token deadline (a server that accepts and never answers trips that one too).
    let limit = earliest(
        ctx.deadlines
            .response
            .map(|d| (TimeoutPhase::Response, d, d)),
        first_token_limit(ctx, start),
    );
    let sent = match limit {
        Some((phase, configured, left)) => match tokio::time::timeout(left, send).await {
            Ok(r) => r,
            Err(_) => {
                p.error = Some(timeout_error(phase, configured));
                return;
            }
        },
        None => send.await,
    };
    let mut stream = match sent {
        Ok(s) => s,
        Err(e) => {
            p.error = Some(e);
            return;
        }
    };
    p.response = Some(Instant::now());
    let (max_chunks, max_bytes) = output_caps(request);
    // The chunks of one read share their receive time: the moment they are yielded is taken
    // once for them all (the first's), and their delivery lag is counted once (so the time
    // the client spends between the first and the last of them is not in the lag: the wait
    // for the read itself is).
    let mut read = ReadBatch::new(ctx.health.as_deref());
    let mut deadline = LazyDeadline::default();
    loop {
        // Before the first token the first-token deadline (from the request's start) applies:
        // servers send headers as soon as they accept a request, and a queued request may then
        // be silent for long, legitimately; after it, each gap between events has the idle one.
        let limit = if p.chunks.is_empty() {
            first_token_limit(ctx, start)
        } else {
            ctx.deadlines.idle.map(|d| (TimeoutPhase::Idle, d, d))
        };
        let item = match limit {
            Some((phase, configured, left)) => match deadline.next(&mut stream, left).await {
                Ok(item) => item,
                Err(Elapsed) => {
                    p.error = Some(timeout_error(phase, configured));
                    return;
                }
            },
            None => stream.next().await,
        };
        let Some(item) = item else { break };
        match item {
            Ok(ResponseEvent::Chunk(c)) => {
                if !c.has_tokens() {
                    continue;
                }
                // The transport's receive time, when it has one, bounded by the request's start
                // (or the previous chunk) and the moment the chunk (its read's first) was
                // yielded.
                let floor = p.chunks.last().copied().unwrap_or(start);
                let at = match c.received {
                    Some(t) => {
                        let now = read.yielded(t);
                        t.clamp(floor.min(now), now)
                    }
                    None => {
                        // A chunk with no receive time closes the read: the next stamped one
                        // takes a fresh moment, after this chunk's.
                        read.flush();
                        Instant::now()
                    }
                };
                p.chunks.push(at);
                if !c.text.is_empty() && p.first_content.is_none() {
                    p.first_content = Some(at);
                }
                if let Some(t) = c.tokens {
                    *p.chunk_tokens.get_or_insert(0) += t;
                }
                p.text.push_str(&c.text);
                p.reasoning.push_str(&c.reasoning);
                let bytes = p.text.len() + p.reasoning.len();
                if p.chunks.len() > max_chunks || bytes > max_bytes {
                    p.error = Some(Error::malformed(format!(
                        "the server kept streaming ({} token chunks, {} bytes{}); stopped reading",
                        p.chunks.len(),
                        bytes,
                        request
                            .max_output_tokens
                            .map(|n| format!(" for at most {n} tokens asked"))
                            .unwrap_or_default()
                    )));
                    return;
                }
            }
            Ok(ResponseEvent::Usage(u)) => {
                p.prompt_usage = u.prompt_tokens.or(p.prompt_usage);
                p.completion_usage = u.completion_tokens.or(p.completion_usage);
                p.reasoning_usage = u.reasoning_tokens.or(p.reasoning_usage);
            }
            Ok(ResponseEvent::Finish { reason }) => p.finish = reason.or(p.finish.take()),
            Ok(ResponseEvent::Pooled { items }) => p.pooled = Some(items),
            Ok(ResponseEvent::Connection(c)) => p.connection = Some(c),
            Ok(_) => {}
            Err(e) => {
                p.error = Some(e);
                return;
            }
        }
    }
}

/// What every request of a phase shares.
pub(crate) struct Ctx {
    pub transport: Arc<dyn Transport>,
    pub counter: Arc<dyn TokenCounter>,
    pub phase: Phase,
    /// The level's clock origin.
    pub origin: Instant,
    pub origin_unix_ns: u64,
    pub deadlines: Deadlines,
    pub cancel: CancelToken,
    pub require_finish_reason: bool,
    pub retry: RetryPolicy,
    pub trust_server_usage: bool,
    /// Requests in flight now (measured phase only), for a live view.
    pub in_flight: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Keep the generated text in the records.
    pub keep_outputs: bool,
    /// The client's health watch (measured phase only).
    pub health: Option<Arc<crate::health::HealthProbe>>,
}

impl Ctx {
    /// The context of one phase of a level run with `config`.
    pub(crate) fn new(
        transport: Arc<dyn Transport>,
        config: &crate::LevelConfig,
        phase: Phase,
        (origin, origin_unix_ns): (Instant, u64),
        cancel: crate::CancelToken,
    ) -> Ctx {
        Ctx {
            transport,
            counter: config.token_counter.clone(),
            phase,
            origin,
            origin_unix_ns,
            deadlines: config.deadlines,
            cancel,
            require_finish_reason: config.require_finish_reason,
            retry: config.retry,
            trust_server_usage: config.trust_server_usage,
            // Only measured requests are shown in flight.
            in_flight: (phase == Phase::Profiling)
                .then(|| config.in_flight.clone())
                .flatten(),
            keep_outputs: config.keep_outputs,
            health: None,
        }
    }

    /// The same context reporting to `health`.
    pub(crate) fn watched(mut self, health: Option<Arc<crate::health::HealthProbe>>) -> Ctx {
        self.health = health;
        self
    }
}

/// Whether a server's `completion_tokens` of `usage` can describe a response of `chunks`
/// token-bearing chunks whose text the client counts as `client` tokens. Servers batch a few
/// tokens per chunk (speculative decoding, stream intervals) and tokenizers differ by tens of
/// percent, so the bounds are wide: at most 16 tokens per chunk plus 16, within 4x of the
/// client's count once that is 16 or more, and at least 1 when text came back.
pub(crate) fn usage_is_plausible(usage: u32, chunks: usize, client: u32) -> bool {
    let chunks = u64::try_from(chunks).unwrap_or(u64::MAX);
    let (usage, client) = (u64::from(usage), u64::from(client));
    if usage == 0 {
        return client == 0;
    }
    if usage > chunks.saturating_mul(16).saturating_add(16) {
        return false;
    }
    client < 16 || (usage <= client.saturating_mul(4) && usage.saturating_mul(4) >= client)
}

/// Whether a failure before the first token is worth another attempt.
fn transient(e: &Error) -> bool {
    match e {
        Error::Connect { .. } | Error::Disconnected { .. } => true,
        Error::Status { status, .. } => matches!(status, 429 | 502 | 503 | 504),
        _ => false,
    }
}

/// One attempt: sends `request` under the deadlines and the cancel token.
async fn attempt(ctx: &Ctx, request: &Request, start: Instant) -> Progress {
    // Room for the answer asked for (a longer one grows it).
    let expected = request.max_output_tokens.unwrap_or(16).min(4096) as usize;
    let mut p = Progress {
        response: None,
        chunks: Vec::with_capacity(expected),
        first_content: None,
        // (About four bytes a token.)
        text: String::with_capacity(expected * 4),
        reasoning: String::new(),
        chunk_tokens: None,
        prompt_usage: None,
        connection: None,
        completion_usage: None,
        reasoning_usage: None,
        pooled: None,
        finish: None,
        error: None,
    };
    let outcome = {
        let work = async {
            match ctx.deadlines.request {
                Some(limit) => tokio::time::timeout(limit, drive(ctx, request, start, &mut p))
                    .await
                    .map_err(|_| timeout_error(TimeoutPhase::Request, limit)),
                None => {
                    drive(ctx, request, start, &mut p).await;
                    Ok(())
                }
            }
        };
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Err(Error::Cancelled),
            r = work => r,
        }
    };
    if let Err(e) = outcome {
        p.error = Some(e);
    }
    p
}

/// Counts one request in flight while it lives (dropped when its response has ended, or when
/// the request is cancelled).
struct InFlight<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(n: &'a std::sync::atomic::AtomicU64) -> InFlight<'a> {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How long to wait before the next attempt: the backoff (doubled per attempt), or the
/// server's Retry-After when it asks for longer (at most a minute).
fn retry_wait(ctx: &Ctx, p: &Progress, attempts: u32) -> Duration {
    // the backoff, or the server's Retry-After when it asks for longer (at most a minute)
    let now_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let asked = p
        .error
        .as_ref()
        .and_then(|e| e.retry_after(now_unix_s))
        .map(|d| d.min(MAX_RETRY_AFTER));
    ctx.retry
        .backoff
        .saturating_mul(1 << (attempts - 1).min(16))
        .max(asked.unwrap_or_default())
}

/// A failure for an answer that came but cannot count: no generated tokens, more pooled
/// items than inputs (or none), or no finish reason where one is required.
fn check_answer(p: &mut Progress, request: &Request, require_finish_reason: bool) {
    let pooled = p.pooled.is_some();
    if p.error.is_none() && p.chunks.is_empty() && !pooled {
        p.error = Some(Error::malformed("the response carried no generated tokens"));
    }
    // A rerank may answer its top documents only (`top_n`), never more than were sent.
    let items = p.pooled.unwrap_or(0);
    if p.error.is_none() && pooled && (items == 0 || items as usize > request.prompt.items()) {
        p.error = Some(Error::malformed(format!(
            "the server answered {items} items for {} inputs",
            request.prompt.items()
        )));
    }
    if p.error.is_none() && require_finish_reason && p.finish.is_none() && !pooled {
        p.error = Some(Error::Incomplete {
            message: "the response ended without a finish_reason (generation cut short)".into(),
        });
    }
}

/// Sends `request` (retrying as the policy allows), times it against the origin, and returns
/// its one record.
pub(crate) async fn run_one(ctx: &Ctx, request: &Request, worker: u32) -> RequestRecord {
    run_turn(ctx, request, worker).await.0
}

/// [`run_one`], also returning the answer text when `request` is a turn of a conversation (the
/// reply its next turn carries).
pub(crate) async fn run_turn(
    ctx: &Ctx,
    request: &Request,
    worker: u32,
) -> (RequestRecord, Option<String>) {
    let in_flight = ctx.in_flight.as_deref().map(InFlight::enter);
    let _watched = ctx.health.as_deref().map(crate::health::HealthProbe::enter);
    let (origin, origin_unix_ns, phase) = (ctx.origin, ctx.origin_unix_ns, ctx.phase);
    let counter = &ctx.counter;
    let start = Instant::now();
    let mut attempts = 0u32;
    let mut p = loop {
        attempts += 1;
        let p = attempt(ctx, request, start).await;
        let retry = attempts <= ctx.retry.max_retries
            && p.chunks.is_empty()
            && p.error.as_ref().is_some_and(transient);
        if !retry {
            break p;
        }
        let wait = retry_wait(ctx, &p, attempts);
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => break p,
            _ = tokio::time::sleep(wait) => {}
        }
    };
    let end = Instant::now();
    drop(in_flight);
    let ns = |t: Instant| t.saturating_duration_since(origin).as_nanos() as u64;

    let count = |t: &str| u32::try_from(counter.count(t)).unwrap_or(u32::MAX);
    let client_reasoning = (!p.reasoning.is_empty()).then(|| count(&p.reasoning));
    let client_count = count(&p.text).saturating_add(client_reasoning.unwrap_or(0));
    // A model that reasons without streaming its reasoning counts it in completion_tokens:
    // only the answer's tokens must fit the chunks that came.
    let hidden_reasoning = p
        .reasoning
        .is_empty()
        .then_some(p.reasoning_usage)
        .flatten();
    let rejected_usage = p.completion_usage.filter(|&n| {
        let streamed = n.saturating_sub(hidden_reasoning.unwrap_or(0));
        !ctx.trust_server_usage && !usage_is_plausible(streamed, p.chunks.len(), client_count)
    });
    let (output_tokens, source) =
        if let Some(n) = p.completion_usage.filter(|_| rejected_usage.is_none()) {
            (Some(n), Some(TokenSource::Usage))
        } else if let Some(n) = p.chunk_tokens {
            (Some(n), Some(TokenSource::Chunks))
        } else if counter.is_exact() {
            (Some(client_count), Some(TokenSource::Tokenizer))
        } else {
            (Some(client_count), Some(TokenSource::Estimate))
        };
    let pooled = p.pooled.is_some();
    check_answer(&mut p, request, ctx.require_finish_reason);
    let mut r = RequestRecord::new(request.id, phase);
    r.x_request_id = ctx.transport.request_id(request);
    r.image_count = (!request.images.is_empty()).then_some(request.images.len() as u32);
    if !request.audio.is_empty() {
        r.audio_count = Some(request.audio.len() as u32);
        r.audio_ms = Some(request.audio.iter().map(|a| u64::from(a.duration_ms)).sum());
    }
    if let Some(route) = ctx.transport.route(request) {
        r.model = Some(route.model);
        r.url = Some(route.url);
    }
    r.worker = worker;
    r.origin_unix_ns = origin_unix_ns;
    r.start_ns = ns(start);
    // Headers and the first chunk often come in one read; a first chunk stamped by its
    // receive time can then precede the moment `send` returned.
    r.response_ns = p
        .response
        .map(|r| p.chunks.first().map_or(r, |&c| r.min(c)))
        .map(ns);
    r.chunk_ns = p.chunks.iter().map(|&t| ns(t)).collect();
    r.first_content_ns = p.first_content.map(ns);
    r.end_ns = ns(end);
    r.input_tokens = request.input_tokens;
    r.server_input_tokens = p.prompt_usage;
    r.connection = p.connection;
    r.output_tokens = if pooled { None } else { output_tokens };
    r.output_tokens_source = if pooled { None } else { source };
    r.pooled_items = p.pooled;
    r.client_output_tokens = Some(client_count);
    r.output_bytes = (p.text.len() + p.reasoning.len()) as u64;
    r.reasoning_tokens = client_reasoning;
    r.usage_reasoning_tokens = p.reasoning_usage;
    r.requested_output_tokens = request
        .max_output_tokens
        .filter(|_| request.ignore_eos || request.min_output_tokens == request.max_output_tokens);
    r.finish_reason = p.finish;
    r.error = p.error.as_ref().map(ErrorRecord::from);
    r.attempts = attempts;
    r.rejected_usage_tokens = rejected_usage;
    if let Some(t) = &request.turn {
        r.conversation_id = Some(t.conversation_id.clone());
        r.turn_index = Some(t.turn_index);
    }
    let answer = if ctx.keep_outputs {
        r.reasoning_text = (!p.reasoning.is_empty()).then_some(p.reasoning);
        let answer = request.turn.as_ref().map(|_| p.text.clone());
        // (Kept with the record: without the room reserved for the answer's length.)
        p.text.shrink_to_fit();
        r.response_text = Some(p.text);
        answer
    } else {
        request.turn.as_ref().map(|_| p.text)
    };
    (r, answer)
}
