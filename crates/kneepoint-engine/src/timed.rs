//! Duration-bound closed-loop levels: requests are drawn from the workload while the level's
//! time lasts; `inputs.json` lists every request drawn.

use std::path::Path;
use std::sync::{Arc, Mutex};

use kneepoint_core::RecordSink;
use kneepoint_metrics::export::{write_inputs_json, InputEntry, JsonlSink};
use kneepoint_metrics::LevelSummary;
use kneepoint_runner::{run_level_for, CancelToken, RequestSource};
use serde_json::json;

use crate::{Bench, Error};

impl Bench {
    /// Runs one timed level into `dir` (the settings' duration; warm-up time only when
    /// `warmup`). Requests in flight after the grace period are recorded as cancelled.
    pub(crate) async fn run_timed(
        &mut self,
        dir: &Path,
        concurrency: u32,
        label: &str,
        warmup: bool,
        cancel: &CancelToken,
    ) -> Result<(LevelSummary, bool), Error> {
        let Some(mut time) = self.settings.duration else {
            return Err(Error::invalid("a timed level needs a duration"));
        };
        if !warmup {
            time.warmup = std::time::Duration::ZERO;
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        let inputs: Arc<Mutex<Vec<InputEntry>>> = Arc::default();
        let turns = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let source: RequestSource = {
            let (workload, transport, inputs, turns) = (
                self.workload.clone(),
                self.transport.clone(),
                inputs.clone(),
                turns.clone(),
            );
            Box::new(move || {
                let request = workload.lock().ok()?.requests(1).ok()?.pop()?;
                if request.turn.is_some() {
                    // A timed level sends requests one by one: a conversation's history
                    // cannot be kept. Stop at once; the level fails below.
                    turns.store(true, std::sync::atomic::Ordering::Relaxed);
                    return None;
                }
                if let Ok(mut v) = inputs.lock() {
                    v.push(InputEntry {
                        session_id: request.id.to_string(),
                        payloads: crate::level::input_payload(transport.as_ref(), &request)
                            .into_iter()
                            .collect(),
                    });
                }
                Some(request)
            })
        };
        let sink: Box<dyn RecordSink> =
            Box::new(JsonlSink::in_dir(dir, self.settings.compress_records)?);
        let mut config = self.level_config(concurrency, cancel);
        let scrape = self.begin(dir, label, 0, &mut config).await;
        let run = run_level_for(
            self.transport.clone(),
            &config,
            time,
            source,
            vec![sink],
            Some(self.record_observer()),
        )
        .await;
        let server = self.end(label, scrape, dir, run.as_ref().ok()).await;
        let run = run?;
        if turns.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::invalid(
                "multi-turn conversations run in count-bound levels: a timed level cannot keep their history",
            ));
        }
        // Inputs of the warm-up come first; keep the measured ones, as a count-bound level does.
        let drawn = inputs.lock().map(|v| v.clone()).unwrap_or_default();
        let skip = drawn.len().saturating_sub(run.records.len());
        write_inputs_json(&dir.join("inputs.json"), &drawn[skip..])?;
        let level = json!({
            "concurrency": concurrency,
            "duration_s": time.measure.as_secs_f64(),
            "grace_s": time.grace.as_secs_f64(),
            "warmup_duration_s": time.warmup.as_secs_f64(),
            "requests_sent": run.records.len(),
        });
        self.finish_level(dir, concurrency, level, &run, server)
    }
}
