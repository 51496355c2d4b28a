//! The engine model driven in real time on its own OS thread.
//!
//! A dedicated thread with `std::thread::sleep` keeps step timing precise to tens of
//! microseconds (Tokio's timer wheel rounds to milliseconds), and steps are scheduled on
//! absolute deadlines so that sleep overshoot never accumulates.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use crate::engine::{EngineModel, SeqSpec};
use crate::metrics::EngineMetrics;
use crate::truth::{ServerTiming, TruthLog, WallClock};
use crate::{Error, SimProfile};

/// A token delivered to the connection that asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenMsg {
    pub index: u32,
    pub finished: bool,
}

pub(crate) struct Submission {
    pub id: u64,
    pub client_request_id: Option<String>,
    pub spec: SeqSpec,
    pub arrival: Instant,
    pub tokens: UnboundedSender<TokenMsg>,
}

pub(crate) enum Command {
    Submit(Submission),
}

struct Live {
    client_request_id: Option<String>,
    spec: SeqSpec,
    arrival: Instant,
    first: Option<Instant>,
    last: Option<Instant>,
    tokens: UnboundedSender<TokenMsg>,
}

/// The longest one step (or one wait of the fixed-latency mode) sleeps, whatever the profile
/// makes of it: a day.
pub(crate) const MAX_WALL: Duration = Duration::from_secs(86_400);

/// `ms` milliseconds of wall time, never a panic: at most [`MAX_WALL`] (an infinite or huge
/// step as well), none for a negative or NaN one.
pub(crate) fn wall_ms(ms: f64) -> Duration {
    match Duration::try_from_secs_f64(ms / 1000.0) {
        Ok(d) => d.min(MAX_WALL),
        Err(_) if ms > 0.0 => MAX_WALL,
        Err(_) => Duration::ZERO,
    }
}

/// One engine thread as the server sees it: where to submit, and how many of its requests
/// are in flight (the server sends each request to the least loaded engine, as vLLM's
/// data-parallel front end does).
pub(crate) struct EngineHandle {
    pub(crate) commands: Mutex<Sender<Command>>,
    pub(crate) in_flight: Arc<AtomicUsize>,
}

/// What an engine thread shares with the server.
pub(crate) struct Shared {
    pub(crate) truth: Arc<Mutex<TruthLog>>,
    pub(crate) clock: WallClock,
    pub(crate) metrics: Arc<Mutex<EngineMetrics>>,
}

/// Starts engine `index`'s thread; dropping every sender stops it.
pub(crate) fn spawn_engine(
    profile: SimProfile,
    index: usize,
    shared: Shared,
) -> Result<EngineHandle, Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let counted = in_flight.clone();
    std::thread::Builder::new()
        .name(format!("kneepoint-sim-engine-{index}"))
        .spawn(move || run(profile, rx, index, shared, &counted))
        .map_err(|source| Error::Thread { source })?;
    Ok(EngineHandle {
        commands: Mutex::new(tx),
        in_flight,
    })
}

/// One request of engine's fewer in flight.
fn done(in_flight: &AtomicUsize) {
    let _ = in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}

/// Records engine `index`'s load as of `at`.
fn record_load(
    metrics: &Mutex<EngineMetrics>,
    index: usize,
    engine: &EngineModel,
    clock: &WallClock,
    at: Instant,
) {
    let (running, waiting) = engine.load();
    if let Ok(mut m) = metrics.lock() {
        m.load(
            index,
            clock.unix_ns(at),
            running,
            waiting,
            engine.kv_usage(),
        );
    }
}

fn run(
    profile: SimProfile,
    rx: Receiver<Command>,
    index: usize,
    shared: Shared,
    in_flight: &AtomicUsize,
) {
    let Shared {
        truth,
        clock,
        metrics,
    } = shared;
    let scale = profile.time_scale;
    let mut engine = EngineModel::new(profile);
    let mut live: std::collections::HashMap<u64, Live> = std::collections::HashMap::new();
    let mut deadline = Instant::now();
    loop {
        // Take every command that has arrived; block only when idle.
        loop {
            let cmd = if engine.is_idle() {
                match rx.recv_timeout(Duration::from_secs(3600)) {
                    Ok(c) => {
                        deadline = Instant::now();
                        c
                    }
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match rx.try_recv() {
                    Ok(c) => c,
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return,
                }
            };
            match cmd {
                Command::Submit(s) => {
                    // Rejections are handled by the server before submitting.
                    let accepted = engine.submit(s.id, s.spec).is_ok();
                    if !accepted {
                        done(in_flight);
                    }
                    if accepted {
                        live.insert(
                            s.id,
                            Live {
                                client_request_id: s.client_request_id,
                                spec: s.spec,
                                arrival: s.arrival,
                                first: None,
                                last: None,
                                tokens: s.tokens,
                            },
                        );
                    }
                    record_load(&metrics, index, &engine, &clock, Instant::now());
                }
            }
        }
        let Some(step) = engine.step() else { continue };
        let step_start = Instant::now();
        let wall = wall_ms(step.duration_ms * scale);
        deadline = deadline.checked_add(wall).unwrap_or(step_start);
        let now = Instant::now();
        if deadline > now {
            std::thread::sleep(deadline - now);
        } else if now - deadline > Duration::from_millis(50) {
            // Far behind (machine overloaded): do not try to catch up in a burst.
            deadline = now;
        }
        let emitted_at = Instant::now();
        record_step(&metrics, &live, &step, step_start, emitted_at);
        record_load(&metrics, index, &engine, &clock, emitted_at);
        for e in step.emitted {
            let Some(seq) = live.get_mut(&e.id) else {
                continue;
            };
            seq.last = Some(emitted_at);
            if e.index == 0 {
                seq.first = Some(emitted_at);
            }
            // The truth of a finished request is logged before its last token goes out, so a
            // client that has read the whole response always finds it.
            if e.finished {
                let timing = timing_of(e.id, seq, emitted_at, &clock);
                if let Ok(mut t) = truth.lock() {
                    t.push(timing);
                }
            }
            let delivered = seq
                .tokens
                .send(TokenMsg {
                    index: e.index,
                    finished: e.finished,
                })
                .is_ok();
            if !delivered {
                engine.cancel(e.id);
                live.remove(&e.id);
                done(in_flight);
                continue;
            }
            if e.finished {
                live.remove(&e.id);
                done(in_flight);
            }
        }
    }
}

/// The engine metrics of one step: admissions' queue times, first tokens, gaps, finishes.
fn record_step(
    metrics: &Mutex<EngineMetrics>,
    live: &std::collections::HashMap<u64, Live>,
    step: &crate::engine::Step,
    step_start: Instant,
    emitted_at: Instant,
) {
    if let Ok(mut m) = metrics.lock() {
        for id in &step.admitted {
            if let Some(seq) = live.get(id) {
                m.admitted(secs(step_start.saturating_duration_since(seq.arrival)));
            }
        }
        for e in &step.emitted {
            if let Some(seq) = live.get(&e.id) {
                if e.index == 0 {
                    m.first_token(seq.spec.prompt_tokens, secs(emitted_at - seq.arrival));
                }
                m.token(seq.last.map(|l| secs(emitted_at - l)));
                if e.finished {
                    m.finished(secs(emitted_at - seq.arrival));
                }
            }
        }
    }
}

/// The server's own timing of a request that finished at `emitted_at`.
fn timing_of(id: u64, seq: &Live, emitted_at: Instant, clock: &WallClock) -> ServerTiming {
    let first = seq.first.unwrap_or(emitted_at);
    let n = seq.spec.output_tokens;
    ServerTiming {
        server_id: id,
        client_request_id: seq.client_request_id.clone(),
        prompt_tokens: seq.spec.prompt_tokens,
        output_tokens: n,
        ttft_ms: ms(first - seq.arrival),
        itl_ms: if n > 1 {
            Some(ms(emitted_at - first) / f64::from(n - 1))
        } else {
            None
        },
        latency_ms: ms(emitted_at - seq.arrival),
        arrival_unix_ns: clock.unix_ns(seq.arrival),
        first_token_unix_ns: clock.unix_ns(first),
        last_token_unix_ns: clock.unix_ns(emitted_at),
        token_unix_ns: Vec::new(),
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 57 item 19: a step's wall time is never a panic. A profile may make a step last
    /// 1e300 ms (a huge base cost, a drift's exp overflowing to infinity): it sleeps a day
    /// at most; a negative or NaN one not at all.
    #[test]
    fn huge_or_broken_steps_sleep_at_most_a_day_instead_of_panicking() {
        assert_eq!(wall_ms(1500.0), Duration::from_millis(1500));
        assert_eq!(wall_ms(1e300), MAX_WALL);
        assert_eq!(wall_ms(f64::INFINITY), MAX_WALL);
        assert_eq!(wall_ms(f64::NAN), Duration::ZERO);
        assert_eq!(wall_ms(-5.0), Duration::ZERO);
        assert_eq!(wall_ms(f64::NEG_INFINITY), Duration::ZERO);
        let mut p = SimProfile::fast();
        p.step_base_ms = 1e300;
        p.validate().unwrap();
        let mut engine = EngineModel::new(p.clone());
        engine
            .submit(
                1,
                SeqSpec {
                    prompt_tokens: 4,
                    output_tokens: 2,
                },
            )
            .unwrap();
        let step = engine.step().unwrap();
        let wall = wall_ms(step.duration_ms * p.time_scale);
        assert_eq!(wall, MAX_WALL);
        assert!(Instant::now().checked_add(wall).is_some());
    }
}
