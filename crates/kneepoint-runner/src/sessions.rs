//! Multi-turn conversations in a closed loop, with AIPerf's semantics: `concurrency` counts
//! conversations, not requests. Each slot carries one conversation at a time, turn after turn:
//! it waits the user's think time after a reply (keeping its slot), then sends the next turn's
//! messages after the conversation so far — every earlier turn and the server's actual replies
//! — so the prompt grows turn by turn and repeats the prefix a server can cache. A turn whose
//! prompt already holds its history (`Turn::history_in_prompt`, a trace whose lengths count
//! it) is sent as it is, after the same think time. A turn that
//! fails ends its conversation (its later turns are not sent: the user would not go on from a
//! failed reply); the others go on.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kneepoint_core::{Message, Prompt, Request, RequestRecord};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::request::{run_turn, Ctx};
use crate::{CancelToken, Error};

/// The conversations of `requests`: runs of consecutive turns sharing a conversation id; a
/// request that is no turn is a conversation of its own.
pub(crate) fn conversations(requests: &[Request]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let id = r.turn.as_ref().map(|t| &t.conversation_id);
        let continues = id.is_some()
            && out.last().is_some_and(|last| {
                requests[last.start]
                    .turn
                    .as_ref()
                    .map(|t| &t.conversation_id)
                    == id
            });
        match out.last_mut() {
            Some(last) if continues => last.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Runs the conversations of `requests` with `concurrency` slots. Returns how many requests
/// were sent and each as it was sent (with its history), in no particular order.
pub(crate) async fn session_loop(
    ctx: Ctx,
    (concurrency, ramp): (u32, Option<Duration>),
    requests: Vec<Request>,
    tx: mpsc::Sender<RequestRecord>,
    stop_sending: &CancelToken,
) -> Result<(usize, Vec<Request>), Error> {
    let ctx = Arc::new(ctx);
    let sessions = Arc::new(conversations(&requests));
    let requests = Arc::new(requests);
    let next = Arc::new(AtomicUsize::new(0));
    let workers = (concurrency as usize).min(sessions.len());
    let gate = crate::ramp::RampGate::start(ramp, workers as u32).map(Arc::new);
    let mut set: JoinSet<Vec<Request>> = JoinSet::new();
    for worker in 0..workers {
        let (ctx, requests, sessions) = (ctx.clone(), requests.clone(), sessions.clone());
        let (next, tx, stop, gate) = (next.clone(), tx.clone(), stop_sending.clone(), gate.clone());
        set.spawn(async move {
            let mut sent = Vec::new();
            if !crate::ramp::admit(gate.as_deref(), &ctx.cancel, &stop).await {
                return sent;
            }
            while let Some(range) = sessions.get(next.fetch_add(1, Ordering::Relaxed)) {
                let turns = &requests[range.clone()];
                if !converse(&ctx, turns, worker as u32, &tx, &stop, &mut sent).await {
                    break;
                }
            }
            sent
        });
    }
    drop(tx);
    let mut failure = None;
    let mut sent = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(v) => sent.extend(v),
            Err(e) => {
                failure.get_or_insert(Error::Worker {
                    message: e.to_string(),
                });
            }
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((sent.len(), sent)),
    }
}

/// One conversation, turn by turn. False when the slot must stop (cancelled, stopped, or the
/// record channel closed).
async fn converse(
    ctx: &Ctx,
    turns: &[Request],
    worker: u32,
    tx: &mpsc::Sender<RequestRecord>,
    stop: &CancelToken,
    sent: &mut Vec<Request>,
) -> bool {
    let mut history: Vec<Message> = Vec::new();
    let mut history_tokens = 0u32;
    for (k, turn) in turns.iter().enumerate() {
        let delay = turn.turn.as_ref().map_or(Duration::ZERO, |t| t.delay);
        if k > 0 && !delay.is_zero() {
            tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => return false,
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(delay) => {}
            }
        }
        if ctx.cancel.is_cancelled() || stop.is_cancelled() {
            return false;
        }
        let mut request = turn.clone();
        let in_prompt = turn.turn.as_ref().and_then(|t| t.history_in_prompt);
        if in_prompt.is_none() && !history.is_empty() {
            let mut messages = history.clone();
            messages.extend(turn.prompt.messages());
            request.prompt = Prompt::Messages(messages);
            request.input_tokens = turn.input_tokens.map(|n| n.saturating_add(history_tokens));
        }
        let (mut record, answer) = run_turn(ctx, &request, worker).await;
        if turn.turn.is_some() {
            record.history_tokens = Some(in_prompt.unwrap_or(history_tokens));
            record.think_time_ns = (k > 0).then_some(delay.as_nanos() as u64);
        }
        let ok = record.is_ok();
        sent.push(request);
        if tx.send(record).await.is_err() {
            return false;
        }
        if !ok {
            // the conversation cannot go on from a failed reply
            return true;
        }
        if in_prompt.is_some() {
            // the next turn's prompt holds its own history
            continue;
        }
        let answer = answer.unwrap_or_default();
        let answer_tokens = u32::try_from(ctx.counter.count(&answer)).unwrap_or(u32::MAX);
        history.extend(turn.prompt.messages());
        history.push(Message {
            role: "assistant".into(),
            content: answer,
        });
        history_tokens = history_tokens
            .saturating_add(turn.input_tokens.unwrap_or(0))
            .saturating_add(answer_tokens);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::Turn;

    fn turn(id: u64, conv: &str, k: u32) -> Request {
        let mut r = Request::text(id, format!("q{id}"));
        r.turn = Some(Turn {
            conversation_id: conv.into(),
            turn_index: k,
            delay: Duration::ZERO,
            history_in_prompt: None,
        });
        r
    }

    #[test]
    fn consecutive_turns_of_one_id_are_one_conversation() {
        let rs = vec![
            turn(0, "a", 0),
            turn(1, "a", 1),
            Request::text(2, "single"),
            Request::text(3, "single"),
            turn(4, "b", 0),
            turn(5, "a", 0),
        ];
        assert_eq!(conversations(&rs), vec![0..2, 2..3, 3..4, 4..5, 5..6]);
        assert!(conversations(&[]).is_empty());
    }
}
