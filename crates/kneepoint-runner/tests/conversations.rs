//! Multi-turn conversations through the closed loop against a scripted transport that answers
//! each prompt with a reply naming how many messages it carried.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kneepoint_core::{
    async_trait, iter_stream, Chunk, Error, EventStream, Message, Prompt, Request, ResponseEvent,
    Transport, Turn,
};
use kneepoint_runner::{run_level, LevelConfig, OpenLoop};

/// Replies "reply to N" (N = messages received); fails the request whose user message says
/// "fail"; remembers every prompt and the peak of requests in flight.
#[derive(Default)]
struct Echo {
    prompts: Mutex<Vec<(u64, Vec<Message>)>>,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

#[async_trait]
impl Transport for Echo {
    async fn send(&self, request: &Request) -> Result<EventStream, Error> {
        let messages = request.prompt.messages();
        self.prompts
            .lock()
            .unwrap()
            .push((request.id, messages.clone()));
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if messages.last().is_some_and(|m| m.content.contains("fail")) {
            return Err(Error::status_code(500, "scripted failure"));
        }
        Ok(Box::pin(iter_stream(vec![
            Ok(ResponseEvent::Chunk(Chunk::reasoning("thinking "))),
            Ok(ResponseEvent::Chunk(Chunk::content(format!(
                "reply to {}",
                messages.len()
            )))),
        ])))
    }
}

/// Runs `requests` with two slots.
async fn two_slots(echo: Arc<Echo>, requests: Vec<Request>) -> kneepoint_runner::LevelRun {
    run_level(
        echo,
        &LevelConfig::new(2),
        requests,
        Vec::new(),
        Vec::new(),
        None,
    )
    .await
    .unwrap()
}

fn conversation(first_id: u64, conv: &str, turns: u32, delay_ms: u64) -> Vec<Request> {
    (0..turns)
        .map(|k| {
            let mut r = Request::text(first_id + u64::from(k), format!("{conv} question {k}"));
            r.prompt = Prompt::Messages(vec![Message::user(format!("{conv} question {k}"))]);
            r.input_tokens = Some(3);
            r.turn = Some(Turn {
                conversation_id: conv.into(),
                turn_index: k,
                delay: Duration::from_millis(if k == 0 { 0 } else { delay_ms }),
                history_in_prompt: None,
            });
            r
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_carries_the_conversation_so_far_and_its_replies() {
    let echo = Arc::new(Echo::default());
    let mut requests = Vec::new();
    for (i, c) in ["a", "b", "c", "d"].iter().enumerate() {
        requests.extend(conversation(i as u64 * 10, c, 3, 40));
    }
    let run = two_slots(echo.clone(), requests).await;
    assert_eq!(run.records.len(), 12);
    assert_eq!(run.unsent, 0);
    // concurrency counts conversations: two slots, never more than two requests in flight
    assert!(echo.peak.load(Ordering::SeqCst) <= 2);
    let prompts = echo.prompts.lock().unwrap().clone();
    for (id, messages) in &prompts {
        let k = (id % 10) as usize;
        // turn k: k earlier questions and k replies, then the new question
        assert_eq!(messages.len(), 2 * k + 1, "request {id}: {messages:?}");
        for j in 0..k {
            assert_eq!(messages[2 * j].role, "user");
            assert!(messages[2 * j].content.ends_with(&format!("question {j}")));
            assert_eq!(messages[2 * j + 1].role, "assistant");
            // the server's reply to turn j (answer only, no reasoning)
            assert_eq!(
                messages[2 * j + 1].content,
                format!("reply to {}", 2 * j + 1)
            );
        }
    }
    // the sent turns, as sent, for inputs.json
    assert_eq!(run.sent_turns.len(), 12);
    assert!(run.sent_turns.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(run.sent_turns[2].prompt.messages().len(), 5);
    assert!(
        run.sent_turns[2].input_tokens.unwrap() > 3,
        "history counted"
    );
    let mut by_conv: Vec<_> = run.records.iter().collect();
    by_conv.sort_by_key(|r| r.request_id);
    for w in by_conv.chunks(3) {
        let conv = w[0].conversation_id.clone().unwrap();
        assert!(w
            .iter()
            .all(|r| r.conversation_id.as_deref() == Some(conv.as_str())));
        assert_eq!(
            w.iter().map(|r| r.turn_index.unwrap()).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        // the history grows turn by turn, and the input tokens with it
        let h: Vec<u32> = w.iter().map(|r| r.history_tokens.unwrap()).collect();
        assert!(h[0] == 0 && h[0] < h[1] && h[1] < h[2], "{h:?}");
        assert!(w
            .iter()
            .all(|r| r.input_tokens == Some(3 + r.history_tokens.unwrap())));
        // the think time passes between a reply and the next turn (never less)
        for pair in w.windows(2) {
            assert!(pair[1].start_ns >= pair[0].end_ns + 40_000_000, "{pair:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_ends_its_conversation_only() {
    let echo = Arc::new(Echo::default());
    let mut requests = conversation(0, "ok", 3, 0);
    let mut broken = conversation(10, "broken", 3, 0);
    broken[1].prompt = Prompt::Messages(vec![Message::user("please fail")]);
    requests.extend(broken);
    let run = two_slots(echo.clone(), requests).await;
    // the broken conversation's third turn is never sent
    assert_eq!(run.records.len(), 5);
    assert_eq!(run.unsent, 1);
    let failed: Vec<_> = run.records.iter().filter(|r| !r.is_ok()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].turn_index, Some(1));
    assert!(run
        .records
        .iter()
        .filter(|r| r.conversation_id.as_deref() == Some("ok"))
        .all(|r| r.is_ok()));
}

#[tokio::test]
async fn conversations_are_refused_in_an_open_loop() {
    let mut config = LevelConfig::new(1);
    config.open_loop = Some(OpenLoop {
        offsets: vec![Duration::ZERO; 3],
        warmup_offsets: Vec::new(),
        max_in_flight: None,
    });
    let e = run_level(
        Arc::new(Echo::default()),
        &config,
        conversation(0, "a", 3, 0),
        Vec::new(),
        Vec::new(),
        None,
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("closed loop"), "{e}");
}
