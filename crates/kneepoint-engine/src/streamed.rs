//! Levels longer than the records a level keeps in memory
//! ([`crate::LevelSettings::records_in_memory`]): a sink summarises every record as it
//! finishes, for the whole level and per route, in bounded memory; the level's summary comes
//! from it (and, when asked, from a second pass over the level's JSONL for exact
//! percentiles). The level's `input_config` says so, for `report` to re-render it the same way.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use kneepoint_core::{RecordSink, RequestRecord};
use kneepoint_metrics::export::{read_jsonl_each, records_path, RouteSummary};
use kneepoint_metrics::{GoodputSlo, LevelSummary, StreamingSummary};
use serde_json::{json, Value};

use crate::Error;

/// The running summaries of one level.
#[derive(Debug)]
pub(crate) struct Streamed {
    total: StreamingSummary,
    routes: BTreeMap<(String, String), StreamingSummary>,
    slo: GoodputSlo,
}

impl Streamed {
    /// Empty summaries judging goodput against `slo`.
    pub(crate) fn new(slo: GoodputSlo) -> Self {
        Streamed {
            total: StreamingSummary::new(&slo),
            routes: BTreeMap::new(),
            slo,
        }
    }
}

/// The sink feeding a [`Streamed`] (shared with the level, which reads it at the end).
pub(crate) struct StreamedSink(pub(crate) Arc<Mutex<Streamed>>);

impl RecordSink for StreamedSink {
    fn record(&mut self, r: &RequestRecord) -> Result<(), kneepoint_core::Error> {
        if let Ok(mut s) = self.0.lock() {
            s.total.push(r);
            if let Some(model) = &r.model {
                let key = (model.clone(), r.url.clone().unwrap_or_default());
                let slo = s.slo;
                s.routes
                    .entry(key)
                    .or_insert_with(|| StreamingSummary::new(&slo))
                    .push(r);
            }
        }
        Ok(())
    }
}

/// The note in a streamed level's `input_config.level.summary`.
pub(crate) fn note(records: usize, exact: bool) -> Value {
    json!({"streamed": true, "records": records, "exact_percentiles": exact})
}

impl Streamed {
    /// The level's summary; with `exact`, a second pass over the JSONL in `dir`.
    pub(crate) fn summary(
        &self,
        concurrency: u32,
        exact: bool,
        dir: &Path,
    ) -> Result<LevelSummary, Error> {
        if !exact || !self.total.is_approximate() {
            return Ok(self.total.summary(concurrency));
        }
        let mut pass = self.total.second_pass();
        read_jsonl_each(&records_path(dir), |r| pass.offer(&r))?;
        Ok(pass.summary(concurrency))
    }

    /// Each route's summary (percentiles within 0.1 %), as `route_summary.json` lists them.
    pub(crate) fn routes(&self, concurrency: u32) -> Vec<RouteSummary> {
        self.routes
            .iter()
            .map(|((model, url), s)| RouteSummary {
                model: model.clone(),
                url: url.clone(),
                summary: s.summary(concurrency),
            })
            .collect()
    }
}
